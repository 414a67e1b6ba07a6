'use strict';
// Requests per endpoint, for Datadog's `endpoint_counts`: the tracing integrations
// (openTelemetrySpanProcessor, ddTraceIntegration) count each local root span (a request
// entering the service) when it ends, by its final endpoint. Totals only grow; each
// service session reports the difference since its previous upload, so several sessions
// in one process each see every request once.

const totals = new Map();
let counted = false;

/** One request of `endpoint` ended. */
function countRequest(endpoint) {
  if (typeof endpoint !== 'string' || endpoint === '') return;
  counted = true;
  totals.set(endpoint, (totals.get(endpoint) ?? 0) + 1);
}

/**
 * A reader of the counts since its previous call: `{ endpoint: n }`, or undefined while
 * no integration has counted anything (then selfprof cannot know the requests).
 */
function requestCounter() {
  const seen = new Map();
  return () => {
    if (!counted) return undefined;
    const out = {};
    for (const [endpoint, total] of totals) {
      const n = total - (seen.get(endpoint) ?? 0);
      if (n > 0) out[endpoint] = n;
      seen.set(endpoint, total);
    }
    return out;
  };
}

module.exports = { countRequest, requestCounter };
