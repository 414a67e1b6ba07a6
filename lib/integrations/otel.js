'use strict';
// OpenTelemetry integration (opt-in): a SpanProcessor that labels samples with the
// local root span's ids and route, so profiles link to traces.
//
//   const provider = new NodeTracerProvider({ spanProcessors: [openTelemetrySpanProcessor(), ...] });
//
// When a local root span starts (no parent, or a remote one: the request entering this
// service), its span_id, trace_id and endpoint become the labels of the async context
// that started it (setLabels), and so of everything the request does. Child spans keep
// their request's labels.

const { setLabels } = require('../capture/labels');
const { warnOnce } = require('../log');

function openTelemetrySpanProcessor() {
  let api;
  try {
    api = require('@opentelemetry/api');
  } catch {
    throw new Error('selfprof: openTelemetrySpanProcessor needs @opentelemetry/api installed');
  }
  return {
    onStart(span, parentContext) {
      try {
        const parent = api.trace.getSpanContext(parentContext);
        if (parent && !parent.isRemote) return;
        const { spanId, traceId } = span.spanContext();
        const attributes = span.attributes ?? {};
        const route = attributes['http.route'];
        const method = attributes['http.request.method'] ?? attributes['http.method'];
        const endpoint = route ? (method ? `${method} ${route}` : String(route)) : span.name;
        setLabels({ span_id: spanId, trace_id: traceId, endpoint });
      } catch (err) {
        warnOnce('otel', `selfprof: could not label a span: ${err.message}`);
      }
    },
    onEnding() {},
    onEnd() {},
    forceFlush: () => Promise.resolve(),
    shutdown: () => Promise.resolve(),
  };
}

module.exports = { openTelemetrySpanProcessor };
