'use strict';
// OpenTelemetry integration (opt-in): a SpanProcessor that labels samples with the
// local root span's ids and route, so profiles link to traces.
//
//   const provider = new NodeTracerProvider({ spanProcessors: [openTelemetrySpanProcessor(), ...] });
//
// When a local root span starts (no parent, or a remote one: the request entering this
// service), its span_id, trace_id and endpoint become the labels of the async context
// that started it (setLabels), and so of everything the request does. Child spans keep
// their request's labels. When it ends, the request is counted by its endpoint (Datadog's
// endpoint_counts).

const { setLabels } = require('../capture/labels');
const { warnOnce } = require('../log');
const { countRequest } = require('./requests');

/** `<method> <http.route>`, else the route, else the span's name. */
function endpointOf(span) {
  const attributes = span.attributes ?? {};
  const route = attributes['http.route'];
  const method = attributes['http.request.method'] ?? attributes['http.method'];
  return route ? (method ? `${method} ${route}` : String(route)) : span.name;
}

function openTelemetrySpanProcessor() {
  let api;
  try {
    api = require('@opentelemetry/api');
  } catch {
    throw new Error('selfprof: openTelemetrySpanProcessor needs @opentelemetry/api installed');
  }
  const roots = new WeakSet();
  return {
    onStart(span, parentContext) {
      try {
        const parent = api.trace.getSpanContext(parentContext);
        if (parent && !parent.isRemote) return;
        roots.add(span);
        const { spanId, traceId } = span.spanContext();
        setLabels({ span_id: spanId, trace_id: traceId, endpoint: endpointOf(span) });
      } catch (err) {
        warnOnce('otel', `selfprof: could not label a span: ${err.message}`);
      }
    },
    onEnding() {},
    onEnd(span) {
      if (roots.has(span)) countRequest(endpointOf(span));
    },
    forceFlush: () => Promise.resolve(),
    shutdown: () => Promise.resolve(),
  };
}

module.exports = { openTelemetrySpanProcessor, endpointOf };
