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
// the route known then). A request that runs one named GraphQL operation (a child span
// `graphql.execute`, instrumentation-graphql's, or one with `graphql.operation.type` as it
// starts) has it as its endpoint instead (`query GetUser`), that route as `http_route`
// (operations.js). When the span ends, the request is counted by that endpoint where a
// Datadog exporter takes the counts (its endpoint_counts), unless dd-trace traces here
// too and counts it.
//
// Where the registered context manager is OpenTelemetry's AsyncLocalStorageContextManager
// and the handler reads the async context frame (Node >= 24), it reads the manager's own
// entry there (capture/labels/tracers.js): a sample's labels are worked out from the
// context it was taken in, and the processor enters nothing per request. An HTTP
// request's span is not even noted as it starts: the request's RPC metadata, in every
// context of the request, holds it, and its record is made when a sample or a child span
// needs one (`requestRecord`); most requests never do. Elsewhere (Node 20 and 22, another
// manager) the local root enters selfprof's own set as it starts (capture/labels/spans.js).

const { AsyncLocalStorage } = require('node:async_hooks');
const labels = require('../capture/labels');
const { enterSpanLabels, watchSpanRequests, requestDerived, endRequest, markDerived, watchTracer, drainIfBatched } = labels;
const { warnOnce } = require('../log');
const { countRequest, countingRequests } = require('./requests');
const { ddTraceCountsRequests } = require('./ddtrace');
const { noteOperation, operationName, endpointLabels } = require('./operations');

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
/** Where @opentelemetry/api keeps its globals (the registered context manager among them). */
const API_GLOBAL = Symbol.for('opentelemetry.js.api.1');

/** A string attribute's value, else undefined (also for "undefined": an instrumentation's undefined as text). */
function text(value) {
  return typeof value === 'string' && value !== '' && value !== 'undefined' ? value : undefined;
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

/** On a local root span: its request's record `{ span, rpc, handlerRoute, derived, server,
 * ended, final }` (`derived` made when the request's labels are first needed). A symbol
 * property, not a WeakMap entry: a span dies young, and an entry that outlives its key in
 * a WeakMap costs the collector several times more (docs/performance.md). */
const RECORD = Symbol('selfprof.request');
/** On a span of a request without RPC metadata (a message's): its local root's record. */
const ROOT_OF = Symbol('selfprof.localRoot');

/** A request's record for its local root span `span` (see RECORD). */
const newRecord = (span) => ({ span, rpc: undefined, handlerRoute: undefined, derived: null, server: span.kind === SERVER, ended: false, final: undefined });

/** Where the HTTP instrumentation's spans come from: its server spans are always a request's
 * local root (their parent is what the request's headers carry, or none), and the
 * request's RPC metadata holds them. */
const HTTP_SCOPE = '@opentelemetry/instrumentation-http';
const isHttpServerSpan = (span) => span.kind === SERVER && (span.instrumentationScope ?? span.instrumentationLibrary)?.name === HTTP_SCOPE;

/**
 * The record of an HTTP request's span, made the first time it is needed (a sample of the
 * request drained, a child span with something to add) where contexts are read from the
 * frame: most requests never need one, and their spans are never touched. Undefined for a
 * span that is not an HTTP server span of the SDK (a non-recording one is no request the
 * processor saw).
 */
function requestRecord(span) {
  let record = span[RECORD];
  if (record !== undefined || !isHttpServerSpan(span) || typeof span.ended !== 'boolean') return record;
  record = newRecord(span);
  // Ended already: the labels it ended with are read from the ended span when needed.
  record.ended = span.ended;
  span[RECORD] = record;
  return record;
}

/** A span that runs a GraphQL operation, as it starts (instrumentation-graphql sets the
 * operation's attributes just after). */
const isOperation = (span) => span.name === 'graphql.execute' || span.attributes?.['graphql.operation.type'] !== undefined;

/** The name of the operation of span `span`, from its attributes. */
const otelOperationName = (span) => operationName(span.attributes?.['graphql.operation.type'], span.attributes?.['graphql.operation.name']);

/** The endpoint labels of a request's local root span now (`root` its record): its route,
 * or the one operation it ran. */
const rootEndpoint = (root) => endpointLabels(endpointOf(root.span, root.rpc, root.handlerRoute), root, otelOperationName);

// --- the context manager's contexts read from the frame ---------------------------------

/** OpenTelemetry's contexts' key in the frame (tracers.js). */
const FRAME_KEY = 2;
/** The manager looked at last, and whether the handler reads its contexts. */
let manager = null;
let framed = () => false;

/** Reads the contexts of `current` (the registered context manager) from the frame, where
 * it keeps them in an AsyncLocalStorage (OpenTelemetry's AsyncLocalStorageContextManager). */
function watchManager(current) {
  manager = current;
  framed = () => false;
  const als = current?._asyncLocalStorage;
  if (!(als instanceof AsyncLocalStorage) || !labels.storesInFrame()) return;
  framed = watchTracer(FRAME_KEY, 'OpenTelemetry', { als, requestOf: requestOfContext, resolve: labelsOfContext });
}

/** The record of the request a context belongs to: its RPC metadata's span's (an HTTP
 * request's), else its span's own or its span's local root's (a message's). */
function requestOfContext(ctx) {
  if (typeof ctx?.getValue !== 'function') return undefined;
  const rpc = ctx.getValue(RPC_METADATA);
  const record = rpc?.span === undefined ? undefined : requestRecord(rpc.span);
  if (record !== undefined) {
    // Where routing writes the route, for the request's labels.
    if (record.rpc === undefined) record.rpc = rpc;
    return record;
  }
  const span = ctx.getValue(SPAN_KEY);
  if (span === undefined || span === null) return undefined;
  return span[RECORD] ?? span[ROOT_OF] ?? requestRecord(span);
}

/** The context's request labels (tracers.js `resolve`): its local root span's ids and its
 * endpoint as the span goes, or null outside a request this processor saw. */
function labelsOfContext(ctx) {
  const root = requestOfContext(ctx);
  return root === undefined ? null : labelsOfRoot(root);
}
/** A request's labels, worked out when first needed. */
function labelsOfRoot(root) {
  const { spanId, traceId } = root.span.spanContext();
  return { labels: { span_id: spanId, trace_id: traceId }, derived: requestDerived(root, rootEndpoint) };
}

/**
 * A child span of a request starts: what it adds to the request's labels (`rootSpan` the
 * request's span; `rpc` its RPC metadata, where routing writes the route, undefined for a
 * message's spans). Most add nothing: the labels are read from the request's span and
 * metadata when a sample needs them. A GraphQL operation names the endpoint
 * (operations.js); a handler's span gives the route where routing put none in the metadata
 * (the router package's instrumentation), so its attributes are read only then.
 */
function childOfRequest(rootSpan, rpc, span) {
  let root = rootSpan[RECORD];
  if (root?.ended) return;
  const operation = isOperation(span);
  const handlerRoute = text(rpc?.route) === undefined ? handlerRouteOf(span) : undefined;
  if (root === undefined) {
    if (!operation && handlerRoute === undefined) return;
    root = requestRecord(rootSpan);
    if (root === undefined || root.ended) return;
  }
  if (rpc !== undefined) root.rpc = rpc;
  if (operation) noteOperation(root, span);
  if (handlerRoute !== undefined) root.handlerRoute = handlerRoute;
  markDerived(root.derived);
}

/**
 * Labels samples with the local root spans of OpenTelemetry's traces; see the top of this
 * file. Reads spans through their interfaces only: no dependency on `@opentelemetry/api`.
 */
function openTelemetrySpanProcessor() {
  watchSpanRequests();
  return {
    [PROCESSOR]: true,
    onStart(span, parentContext) {
      try {
        const current = globalThis[API_GLOBAL]?.context;
        if (current !== manager) watchManager(current);
        const parentSpan = parentContext?.getValue?.(SPAN_KEY);
        const parent = parentSpan?.spanContext?.();
        if (parent && !parent.isRemote) {
          // A child span of a request (a middleware's, a route handler's): the RPC
          // metadata in its context is where routing writes the route.
          const rpc = parentContext.getValue(RPC_METADATA);
          if (rpc?.span !== undefined) return childOfRequest(rpc.span, rpc, span);
          // No RPC metadata (a message's spans, gRPC's): the root is found through the
          // parents, and noted on the span for its own children.
          const root = parentSpan[RECORD] ?? parentSpan[ROOT_OF] ?? requestRecord(parentSpan);
          if (root === undefined) return;
          span[ROOT_OF] = root;
          return childOfRequest(root.span, undefined, span);
        }
        // Only a request (or message) entering the service labels what follows: a local
        // root of another kind (a DNS lookup or connection made at start-up, a client call
        // outside any request) would label everything after it in its async context.
        if (span.kind !== SERVER && span.kind !== CONSUMER) return;
        if (framed()) {
          // Read from the frame, the contexts that carry the span give its labels when
          // sampled. An HTTP request's record is made when first needed (requestRecord).
          if (!isHttpServerSpan(span)) span[RECORD] = newRecord(span);
          drainIfBatched();
          return;
        }
        const root = newRecord(span);
        span[RECORD] = root;
        enterSpanLabels(root, labelsOfRoot, FRAME_KEY);
      } catch (err) {
        warnOnce('otel', `selfprof: could not label a span: ${err.message}`);
      }
    },
    onEnding() {},
    onEnd(span) {
      try {
        const root = span[RECORD];
        if (root === undefined) {
          // An HTTP request whose record was never needed: counted, where requests are, by
          // the endpoint its ended span gives.
          if (isHttpServerSpan(span) && countingRequests() && !ddTraceCountsRequests()) countRequest(endpointOf(span));
          return;
        }
        if (root.ended) return;
        // Requests are what a server span stands for (Datadog counts web requests); where
        // dd-trace traces too, it counts them (the same requests: ddtrace.js).
        const counted = root.server && countingRequests() && !ddTraceCountsRequests();
        const endpoint = endRequest(root, rootEndpoint, counted);
        // Ended with its labels unread: they are read from the ended span (and what
        // routed it) if a sample drained later needs them.
        if (endpoint === false) return;
        // The span waits in an exporter's batch for seconds: what routed it goes now.
        // (Its contexts may still be sampled and drained: they find the endpoint.)
        root.rpc = undefined;
        if (counted) countRequest(endpoint);
      } catch (err) {
        warnOnce('otel', `selfprof: could not label a span: ${err.message}`);
      }
    },
    forceFlush: () => Promise.resolve(),
    shutdown: () => Promise.resolve(),
  };
}

module.exports = { openTelemetrySpanProcessor, endpointOf, PROCESSOR };
