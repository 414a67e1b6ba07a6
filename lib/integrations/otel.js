'use strict';
// OpenTelemetry integration: a SpanProcessor that labels samples with the local root
// span's ids and route, so profiles link to traces.
//
//   const provider = new NodeTracerProvider({ spanProcessors: [openTelemetrySpanProcessor(), ...] });
//
// When a local root span of a request or message starts (kind SERVER or CONSUMER, with no
// parent or a remote one: the request entering this service), its span_id, trace_id and
// endpoint become the labels of the async context that started it, and so of everything
// the request does. Child spans keep their request's labels.
//
// The endpoint is read from the span as it changes: the HTTP instrumentation starts the
// span as `GET`, the framework's instrumentation routes the request later (it puts the
// route in the request's RPC metadata), and the span gets `http.route` and its final name
// only as it ends. The request's samples, those taken before routing included, carry the
// endpoint the span ends with (or, for a request still running when a trace is built,
// the route known then). When the span ends, the request is counted by that endpoint
// (Datadog's endpoint_counts).

const { setSpanLabels, watchSpanRequests, derivedLabels, updateDerived, closeDerived } = require('../capture/labels');
const { warnOnce } = require('../log');
const { countRequest } = require('./requests');

// Context keys as @opentelemetry/api's createContextKey makes them (Symbol.for of their
// names, the same from every copy of the API): the active span, and @opentelemetry/core's
// RPC metadata of a request, where framework instrumentations put the route.
const SPAN_KEY = Symbol.for('OpenTelemetry Context Key SPAN');
const RPC_METADATA = Symbol.for('OpenTelemetry SDK Context Key RPC_METADATA');
/** SpanKind.SERVER and SpanKind.CONSUMER: the spans of a request or message entering. */
const SERVER = 1;
const CONSUMER = 4;
/** Marks selfprof's processors (so that wiring one into a provider never adds two). */
const PROCESSOR = Symbol.for('selfprof.openTelemetrySpanProcessor');

/** A string attribute's value, else undefined. */
function text(value) {
  return typeof value === 'string' && value !== '' ? value : undefined;
}

/**
 * `<method> <route>` from `http.route` (else the route the framework put in the request's
 * RPC metadata, else the route of the request's handler span), with the method by the
 * current or the old semantic conventions; else the span's name.
 */
function endpointOf(span, rpc, handlerRoute) {
  const attributes = span.attributes ?? {};
  const route = text(attributes['http.route']) ?? text(rpc?.route) ?? handlerRoute;
  const method = text(attributes['http.request.method']) ?? text(attributes['http.method']);
  if (route) return method ? `${method} ${route}` : route;
  return text(span.name);
}

/**
 * The route of a framework's span for the handler it routed to (`request handler -
 * /users/:id` of the Express and router instrumentations, Koa's router layer, ...): its
 * `http.route`, unless the span marks itself as a middleware's, whose route is where it is
 * mounted. Some instrumentations (the router package's, under Express 5 and NestJS 12)
 * put the route only there, not on the request's span.
 */
function handlerRouteOf(span) {
  const attributes = span.attributes ?? {};
  const route = text(attributes['http.route']);
  if (!route) return undefined;
  for (const key in attributes) {
    if (key.endsWith('.type') && attributes[key] === 'middleware') return undefined;
  }
  return route;
}

/** The span context of the span in `context`, as `@opentelemetry/api`'s getSpanContext. */
function spanContextOf(context) {
  return context?.getValue?.(SPAN_KEY)?.spanContext?.();
}

/**
 * Labels samples with the local root spans of OpenTelemetry's traces; see the top of this
 * file. Reads spans through their interfaces only: no dependency on `@opentelemetry/api`.
 */
function openTelemetrySpanProcessor() {
  watchSpanRequests();
  /** Local root span -> `{ rpc, derived }`: its RPC metadata once seen, its labels. */
  const roots = new WeakMap();
  return {
    [PROCESSOR]: true,
    onStart(span, parentContext) {
      try {
        const parent = spanContextOf(parentContext);
        if (parent && !parent.isRemote) {
          // A child span of a request (a middleware's, a route handler's): the RPC
          // metadata in its context is where routing writes the route. The request's
          // labels take what it says now.
          const rpc = parentContext.getValue(RPC_METADATA);
          const root = rpc?.span ? roots.get(rpc.span) : undefined;
          if (root) {
            root.rpc = rpc;
            root.handlerRoute = handlerRouteOf(span) ?? root.handlerRoute;
            updateDerived(root.derived);
          }
          return;
        }
        // Only a request (or message) entering the service labels what follows: a local
        // root of another kind (a DNS lookup or connection made at start-up, a client call
        // outside any request) would label everything after it in its async context.
        if (span.kind !== SERVER && span.kind !== CONSUMER) return;
        const root = { rpc: undefined, handlerRoute: undefined, derived: null, server: span.kind === SERVER };
        root.derived = derivedLabels(['endpoint'], () => ({ endpoint: endpointOf(span, root.rpc, root.handlerRoute) }));
        roots.set(span, root);
        const { spanId, traceId } = span.spanContext();
        setSpanLabels({ span_id: spanId, trace_id: traceId }, root.derived);
      } catch (err) {
        warnOnce('otel', `selfprof: could not label a span: ${err.message}`);
      }
    },
    onEnding() {},
    onEnd(span) {
      const root = roots.get(span);
      if (!root) return;
      // The span waits in an exporter's batch for seconds: its entry goes now, so that what
      // labeled it dies with its request instead of being copied by every scavenge.
      roots.delete(span);
      try {
        closeDerived(root.derived);
        // Requests are what a server span stands for (Datadog counts web requests).
        if (root.server) countRequest(root.derived.values.endpoint);
      } catch (err) {
        warnOnce('otel', `selfprof: could not label a span: ${err.message}`);
      }
    },
    forceFlush: () => Promise.resolve(),
    shutdown: () => Promise.resolve(),
  };
}

module.exports = { openTelemetrySpanProcessor, endpointOf, PROCESSOR };
