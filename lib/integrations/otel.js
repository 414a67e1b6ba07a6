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
//
// Where the registered context manager is OpenTelemetry's AsyncLocalStorageContextManager,
// its contexts ride selfprof's store instead of its own (below: adoptManager), and the
// request's labels are worked out from a context only when a sample took it.

const { AsyncLocalStorage } = require('node:async_hooks');
const labels = require('../capture/labels');
const { enterSpanLabels, watchSpanRequests, requestDerived, endRequest, markDerived } = labels;
const { warnOnce, envSwitchOn } = require('../log');
const { countRequest } = require('./requests');
const { bindRequestsWhile } = require('./http-requests');

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

/** Local root span -> `{ span, rpc, handlerRoute, derived, server, ended, endpoint }` (`derived`
 * made when the request's labels are first needed). */
const roots = new WeakMap();

/** The endpoint of a request's local root span now (`root` its entry). */
const rootEndpoint = (root) => endpointOf(root.span, root.rpc, root.handlerRoute);
/** A span of a request without RPC metadata (a message's) -> its local root span. */
const rootOf = new WeakMap();

// --- the context manager's contexts on selfprof's AsyncLocalStorage ------------------
//
// OpenTelemetry's AsyncLocalStorageContextManager enters each context with its own
// AsyncLocalStorage, and selfprof entered the request's labels with another: two entries
// in the async context frame per request, each a copy of the frame's Map. Adopted, the
// manager's contexts ride selfprof's AsyncLocalStorage instead (labels.js: contextStore):
// one entry per context, and a request's labels are worked out from the context only if
// a sample takes it. Only where stores live in the frame (Node >= 24): on async_hooks
// (Node 20, 22) an entry costs no copy, and the processor enters the labels itself, as it
// does with any other manager, one another copy adopted, or SELFPROF_OTEL_CONTEXTS=0. Checked
// on the manager before it is kept.

/** The manager looked at last, and whether its contexts ride selfprof's. */
let manager = null;
let adopted = false;
/** Managers adopted, with their own methods to put back if they are disabled. */
const adoptedManagers = new WeakMap();
/** Marks a manager some copy of selfprof adopted (jest's registry loads one per file). */
const ADOPTED = Symbol.for('selfprof.adoptedContextManager');

function adoptManager(current) {
  manager = current;
  adopted = adoptedManagers.has(current);
  if (adopted || !envSwitchOn('SELFPROF_OTEL_CONTEXTS') || !labels.storesInFrame()) return;
  const store = current?._asyncLocalStorage;
  if (!(store instanceof AsyncLocalStorage) || typeof current.with !== 'function' || typeof current.active !== 'function') return;
  // Another copy's contexts ride its own stores: this one's processor enters its labels.
  if (current[ADOPTED] === true) return;
  const own = { with: current.with, active: current.active, attach: current.attach, disable: current.disable };
  const has = (name) => Object.hasOwn(current, name);
  const shadowed = { with: has('with'), active: has('active'), attach: has('attach'), disable: has('disable') };
  const restore = () => {
    adoptedManagers.delete(current);
    delete current[ADOPTED];
    for (const name of Object.keys(own)) {
      if (shadowed[name]) current[name] = own[name];
      else delete current[name];
    }
    if (manager === current) adopted = false;
  };
  current.active = function active() {
    const ctx = labels.currentContext();
    return ctx !== undefined ? ctx : own.active.call(this);
  };
  current.with = function withContext(ctx, fn, thisArg, ...args) {
    if (ctx === null || typeof ctx !== 'object') return own.with.call(this, ctx, fn, thisArg, ...args);
    return labels.runInContext(ctx, fn, thisArg ?? undefined, args);
  };
  if (typeof own.attach === 'function') {
    current.attach = function attach(ctx) {
      if (ctx === null || typeof ctx !== 'object') return own.attach.call(this, ctx);
      const leave = labels.enterContext(ctx);
      let disposed = false;
      return {
        dispose() {
          if (disposed) return;
          disposed = true;
          leave();
        },
        [Symbol.dispose]() {
          this.dispose();
        },
      };
    };
  }
  current.disable = function disable() {
    restore();
    return own.disable.call(this);
  };
  // Proved before it is kept: a context entered is the one active inside, and not after.
  const probe = Object.freeze({ getValue: () => undefined });
  let inside;
  try {
    current.with(probe, () => {
      inside = current.active();
    });
  } catch {
    inside = undefined;
  }
  if (inside !== probe || current.active() === probe) {
    restore();
    return;
  }
  adoptedManagers.set(current, restore);
  Object.defineProperty(current, ADOPTED, { value: true, configurable: true });
  adopted = true;
}

/** The context's request labels (`labels.js`: resolveContext): its local root span's ids
 * and its endpoint as the span goes, or null outside a request this processor saw. */
function labelsOfContext(ctx) {
  const span = typeof ctx?.getValue === 'function' ? ctx.getValue(SPAN_KEY) : undefined;
  if (span === undefined || span === null) return null;
  const rpc = ctx.getValue(RPC_METADATA);
  const rootSpan = rpc?.span !== undefined && roots.has(rpc.span) ? rpc.span : roots.has(span) ? span : rootOf.get(span);
  const root = rootSpan === undefined ? undefined : roots.get(rootSpan);
  return root === undefined ? null : labelsOfRoot(root);
}
/** A request's labels, worked out when first needed (`labelsOfContext`, `enterSpanLabels`). */
function labelsOfRoot(root) {
  const { spanId, traceId } = root.span.spanContext();
  return { labels: { span_id: spanId, trace_id: traceId }, derived: requestDerived(root, rootEndpoint) };
}
/** A context's request: its RPC metadata, one object for all of the request's contexts. */
function requestOfContext(ctx) {
  return typeof ctx.getValue === 'function' ? (ctx.getValue(RPC_METADATA) ?? undefined) : undefined;
}
labels.setContextResolver(labelsOfContext, requestOfContext);
bindRequestsWhile(() => !adopted);

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
        if (current !== manager) adoptManager(current);
        const parentSpan = parentContext?.getValue?.(SPAN_KEY);
        const parent = parentSpan?.spanContext?.();
        if (parent && !parent.isRemote) {
          // A child span of a request (a middleware's, a route handler's): the RPC
          // metadata in its context is where routing writes the route. The request's
          // labels take what it says now.
          const rpc = parentContext.getValue(RPC_METADATA);
          let rootSpan = rpc?.span;
          if (rootSpan === undefined && adopted) {
            // No RPC metadata (a message's spans): the root is found through the parents.
            rootSpan = roots.has(parentSpan) ? parentSpan : rootOf.get(parentSpan);
            if (rootSpan !== undefined) rootOf.set(span, rootSpan);
          }
          const root = rootSpan === undefined ? undefined : roots.get(rootSpan);
          if (root && !root.ended) {
            if (rpc) root.rpc = rpc;
            root.handlerRoute = handlerRouteOf(span) ?? root.handlerRoute;
            markDerived(root.derived);
          }
          return;
        }
        // Only a request (or message) entering the service labels what follows: a local
        // root of another kind (a DNS lookup or connection made at start-up, a client call
        // outside any request) would label everything after it in its async context.
        if (span.kind !== SERVER && span.kind !== CONSUMER) return;
        const root = { span, rpc: undefined, handlerRoute: undefined, derived: null, server: span.kind === SERVER, ended: false, endpoint: undefined };
        roots.set(span, root);
        // Adopted, the contexts that carry the span give its labels when sampled.
        if (adopted) return;
        enterSpanLabels(root, labelsOfRoot);
      } catch (err) {
        warnOnce('otel', `selfprof: could not label a span: ${err.message}`);
      }
    },
    onEnding() {},
    onEnd(span) {
      const root = roots.get(span);
      if (!root || root.ended) return;
      try {
        endRequest(root, rootEndpoint);
        root.rpc = undefined;
        // The span waits in an exporter's batch for seconds: what labeled it goes now,
        // instead of being copied by every scavenge. (Its contexts, where they ride
        // selfprof's stores, may still be sampled and drained: they find the endpoint.)
        if (!adopted) roots.delete(span);
        // Requests are what a server span stands for (Datadog counts web requests).
        if (root.server) countRequest(root.endpoint);
      } catch (err) {
        warnOnce('otel', `selfprof: could not label a span: ${err.message}`);
      }
    },
    forceFlush: () => Promise.resolve(),
    shutdown: () => Promise.resolve(),
  };
}

module.exports = { openTelemetrySpanProcessor, endpointOf, PROCESSOR };
