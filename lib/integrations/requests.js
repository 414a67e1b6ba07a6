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

/** Each live reader's counts since its previous read. */
const readers = new Set();
let counted = false;

/** One request of `endpoint` ended. */
function countRequest(endpoint) {
  if (typeof endpoint !== 'string' || endpoint === '' || endpoint === 'undefined') return;
  counted = true;
  if (readers.size === 0) return;
  const key = endpoint.length > MAX_ENDPOINT_LENGTH ? endpoint.slice(0, MAX_ENDPOINT_LENGTH) : endpoint;
  for (const counts of readers) {
    const k = counts.has(key) || counts.size < MAX_ENDPOINTS ? key : OTHER_ENDPOINTS;
    counts.set(k, (counts.get(k) ?? 0) + 1);
  }
}

/**
 * A reader of the counts since its previous call (or its creation): `{ endpoint: n }`, at
 * most MAX_ENDPOINTS + 1 keys, or undefined while no integration has counted anything
 * (then selfprof cannot know the requests). `close()` stops its counting.
 * @returns {(() => Record<string, number> | undefined) & { close(): void }}
 */
function requestCounter() {
  let counts = new Map();
  let open = true;
  readers.add(counts);
  const read = () => {
    if (!counted) return undefined;
    const out = Object.fromEntries(counts);
    readers.delete(counts);
    counts = new Map();
    if (open) readers.add(counts);
    return out;
  };
  const close = () => {
    open = false;
    readers.delete(counts);
  };
  return Object.assign(read, { close });
}

module.exports = { countRequest, requestCounter, MAX_ENDPOINTS, OTHER_ENDPOINTS };
