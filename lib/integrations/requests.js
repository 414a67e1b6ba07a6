'use strict';
// Requests per endpoint, for Datadog's `endpoint_counts`: the tracing integrations
// (openTelemetrySpanProcessor, ddTraceIntegration) count each local root span (a request
// entering the service) when it ends, by its final endpoint, into the counts of every
// reader (a service session's: one upload's worth, taken at each rotation). Bounded
// whatever the endpoints' cardinality: a reader holds at most MAX_ENDPOINTS endpoints
// between two reads (past that, requests count under OTHER_ENDPOINTS), each cut as a
// label value is (4096 characters); with no reader, nothing is kept.

/** Distinct endpoints a reader counts between two reads (one upload's endpoint_counts). */
const MAX_ENDPOINTS = 1000;
/** Where a reader counts the requests of endpoints past MAX_ENDPOINTS. */
const OTHER_ENDPOINTS = '(other endpoints)';
/** As a label value is cut (lib/capture/labels.js), so counts and samples name one endpoint alike. */
const MAX_ENDPOINT_LENGTH = 4096;

/** Each live reader's counts since its previous read (an array: walked at every request). */
let readers = [];
let counted = false;

/** One request of `endpoint` ended. */
function countRequest(endpoint) {
  if (typeof endpoint !== 'string' || endpoint === '' || endpoint === 'undefined') return;
  counted = true;
  if (readers.length === 0) return;
  const key = endpoint.length > MAX_ENDPOINT_LENGTH ? endpoint.slice(0, MAX_ENDPOINT_LENGTH) : endpoint;
  // Once a request: a lookup and a store a reader.
  for (let i = 0; i < readers.length; i++) {
    const counts = readers[i];
    const n = counts.get(key);
    if (n !== undefined) counts.set(key, n + 1);
    else if (counts.size < MAX_ENDPOINTS) counts.set(key, 1);
    else counts.set(OTHER_ENDPOINTS, (counts.get(OTHER_ENDPOINTS) ?? 0) + 1);
  }
}

/** Whether a reader counts requests now (a Datadog exporter's session): without one, an
 * integration need not work out a request's endpoint as it ends. */
const countingRequests = () => readers.length > 0;

/**
 * A reader of the counts since its previous call (or its creation): `{ endpoint: n }`, at
 * most MAX_ENDPOINTS + 1 keys, or undefined while no integration has counted anything
 * (then selfprof cannot know the requests). `close()` stops its counting.
 * @returns {(() => Record<string, number> | undefined) & { close(): void }}
 */
function requestCounter() {
  let counts = new Map();
  let open = true;
  readers = [...readers, counts];
  const read = () => {
    if (!counted) return undefined;
    const out = Object.fromEntries(counts);
    const old = counts;
    counts = new Map();
    readers = readers.filter((c) => c !== old);
    if (open) readers = [...readers, counts];
    return out;
  };
  const close = () => {
    open = false;
    readers = readers.filter((c) => c !== counts);
  };
  return Object.assign(read, { close });
}

module.exports = { countRequest, countingRequests, requestCounter, MAX_ENDPOINTS, OTHER_ENDPOINTS };
