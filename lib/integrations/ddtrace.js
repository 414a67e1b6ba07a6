'use strict';
// dd-trace integration (opt-in, no dependency: dd-trace is never required here). dd-trace
// publishes each span it starts on the `dd-trace:span:start` diagnostics channel; like the
// OpenTelemetry processor, when the span is a local root (the first span of its trace in
// this process: a request entering the service) its ids and endpoint become the labels of
// the async context that started it, so every sample of the request carries them:
//
//   span_id   the local root span's id, 16 hex digits (Datadog's pprof gets it in decimal)
//   trace_id  the trace id, 32 hex digits
//   endpoint  resource.name, else `<http.method> <http.route>`, else the operation name;
//             updated when routing sets the route later in the request
//
//   require('dd-trace').init();
//   require('selfprof').ddTraceIntegration();
//
// Web requests are counted by endpoint when their local root span finishes (Datadog's
// endpoint_counts), as dd-trace's own profiler counts them.

const dc = require('node:diagnostics_channel');
const { setLabels, getLabels } = require('../capture/labels');
const { warnOnce } = require('../log');
const { countRequest } = require('./requests');

const START = 'dd-trace:span:start';
const TAGS = 'dd-trace:span:tags:update';
const FINISH = 'dd-trace:span:finish';

let active = null;

function isLocalRoot(span) {
  const started = span.context()._trace?.started;
  return Array.isArray(started) ? started[0] === span : false;
}

function endpointOf(span) {
  const ctx = span.context();
  const tags = ctx.getTags?.() ?? ctx._tags ?? {};
  const resource = tags['resource.name'];
  const method = tags['http.method'];
  const route = tags['http.route'];
  if (resource && resource !== method) return String(resource);
  if (route) return method ? `${method} ${route}` : String(route);
  return String(resource ?? ctx._name ?? span._name ?? 'unknown');
}

function hexIds(span) {
  const ctx = span.context();
  return { span_id: ctx.toSpanId(true), trace_id: ctx.toTraceId(true) };
}

/**
 * Labels samples with dd-trace's local root spans. Returns `{ disable() }`. Throws if
 * dd-trace cannot be found.
 */
function ddTraceIntegration() {
  try {
    require.resolve('dd-trace');
  } catch {
    throw new Error('selfprof: ddTraceIntegration needs dd-trace installed');
  }
  if (active) return active;
  const onStart = ({ span }) => {
    try {
      if (!isLocalRoot(span)) return;
      setLabels({ ...hexIds(span), endpoint: endpointOf(span) });
    } catch (err) {
      warnOnce('ddtrace', `selfprof: could not label a dd-trace span: ${err.message}`);
    }
  };
  // Routing sets the route after the request began: relabel the rest of it, from the
  // request's own context only.
  const onTags = (span) => {
    try {
      if (!isLocalRoot(span)) return;
      const { span_id: spanId } = hexIds(span);
      const labels = getLabels();
      if (labels.span_id !== spanId) return;
      const endpoint = endpointOf(span);
      if (labels.endpoint !== endpoint) setLabels({ endpoint });
    } catch (err) {
      warnOnce('ddtrace', `selfprof: could not label a dd-trace span: ${err.message}`);
    }
  };
  const onFinish = (span) => {
    try {
      const tags = span.context().getTags?.() ?? {};
      if (tags['span.type'] === 'web' && isLocalRoot(span)) countRequest(endpointOf(span));
    } catch {
      // A span we cannot read is not counted.
    }
  };
  dc.subscribe(START, onStart);
  dc.subscribe(TAGS, onTags);
  dc.subscribe(FINISH, onFinish);
  active = {
    disable() {
      dc.unsubscribe(START, onStart);
      dc.unsubscribe(TAGS, onTags);
      dc.unsubscribe(FINISH, onFinish);
      active = null;
    },
  };
  return active;
}

module.exports = { ddTraceIntegration };
