'use strict';
// dd-trace integration (opt-in, no dependency: dd-trace is never required here). dd-trace
// publishes each span it starts and finishes on diagnostics channels. A local root span (the
// first span of its trace in this process) of a request or message (span.kind server or
// consumer, or span.type web, as dd-trace tags it right after it starts) gives every sample
// of its request these labels:
//
//   span_id   the local root span's id, 16 hex digits (Datadog's pprof gets it in decimal)
//   trace_id  the trace id, 32 hex digits
//   endpoint  resource.name, else `<http.method> <http.route>` (dd-trace's endpoint name),
//             as the span ends: routing sets them after the request began, and the
//             request's samples, those before routing too, carry the final one (a request
//             still running when a trace is built carries what its tags say then); a
//             request that ran one named GraphQL operation has it instead (`query
//             GetUser`: the graphql plugin's execute span, tagged with it), and that route
//             as `http_route` (operations.js)
//
//   require('dd-trace').init();
//   require('selfprof').ddTraceIntegration();
//
// Where the handler reads the async context frame (Node >= 24), it reads dd-trace's own
// storage there (capture/labels/tracers.js): a sample's labels are worked out from the
// dd-trace context it was taken in, and nothing is entered per request. A local root notes
// itself on its trace as it starts, and that is all this does per request.
// Elsewhere (Node 20 and 22) the local root enters selfprof's own set as it starts
// (capture/labels/spans.js); whether it is a request is read with its labels. Nothing here
// listens to dd-trace's many tag updates a request: its span is read when needed.
//
// Web requests are counted by endpoint when their local root span finishes (Datadog's
// endpoint_counts), as dd-trace's own profiler counts them; where dd-trace traces, only its
// requests are (OpenTelemetry's server spans beside are the same requests again).

const dc = require('node:diagnostics_channel');
const labels = require('../capture/labels');
const { enterSpanLabels, watchSpanRequests, requestDerived, requestValues, derivedValue, endRequest, watchTracer, drainIfBatched } = labels;
const { native } = require('../native');
const { warnOnce } = require('../log');
const { countRequest, countingRequests } = require('./requests');
const { noteOperation, operationName, endpointLabels } = require('./operations');

const START = 'dd-trace:span:start';
const FINISH = 'dd-trace:span:finish';
/** On a span context's trace (`_trace`, one object shared by a local root's context and its
 * descendants'): that local root span (a span started with no parent or a remote one), or
 * null where two local roots share it. One property a request, where one on every span's
 * context cost each an allocation. */
const ROOT = Symbol('selfprof.localRoot');
/** On a local root's context: its request's record `{ span, derived, ended, final }`
 * (`derived` made when its labels are first needed). */
const RECORD = Symbol('selfprof.request');
/** dd-trace's storage's key in the frame (tracers.js). */
const FRAME_KEY = 1;

let active = null;

/** A tag's value as an endpoint's part: undefined when unset, empty or "undefined" (an instrumentation's undefined as text). */
function part(value) {
  if (value === undefined || value === null) return undefined;
  const text = String(value);
  return text === '' || text === 'undefined' ? undefined : text;
}

/** The tags of a span's context `ctx`. */
const tagsOf = (ctx) => ctx.getTags?.() ?? ctx._tags ?? {};

/** As dd-trace's endpointNameFromTags: resource.name, else `<http.method> <http.route>`; undefined while neither is known. */
function routeOf(span) {
  const tags = tagsOf(span.context());
  const resource = part(tags['resource.name']);
  if (resource) return resource;
  // Read as each web span ends: no array a request.
  const method = part(tags['http.method']);
  const route = part(tags['http.route']);
  return method && route ? `${method} ${route}` : method || route || undefined;
}

/** The name of the operation whose span's context is `ctx`, from its tags. */
const ddOperationName = (ctx) => {
  const tags = tagsOf(ctx);
  return operationName(tags['graphql.operation.type'], tags['graphql.operation.name']);
};

/** A local root span's endpoint labels: its route, or the one operation it ran. */
function endpointOf(span) {
  return endpointLabels(routeOf(span), span.context(), ddOperationName);
}

/** On an operation's span context: it is one (a span inside it is not another). */
const IS_OPERATION = Symbol('selfprof.operation');
/** The graphql plugin's spans that run an operation, by dd-trace's naming schemas (v0, v1):
 * the execute span, and mercurius' request span (whose execute span is the same operation). */
const OPERATION_SPANS = new Set(['graphql.execute', 'graphql.request', 'graphql.server.request']);

/** Notes on its local root's context (`root`: the local root span, null or undefined where
 * it is not certain) the operation a span starts, if it does (its type and name are tagged
 * just after it starts, and read when needed); `parent`: the span's parent's context. */
function noteIfOperation(root, ctx, fields, parent) {
  if (!OPERATION_SPANS.has(fields.operationName) || fields.integrationName !== 'graphql') return;
  ctx[IS_OPERATION] = true;
  if (root != null && parent?.[IS_OPERATION] !== true) noteOperation(root.context(), ctx);
}

/** A server or consumer span (dd-trace's span.kind), or a web one. */
function isRequest(span) {
  const tags = span.context().getTags?.() ?? {};
  const kind = tags['span.kind'];
  return kind === 'server' || kind === 'consumer' || tags['span.type'] === 'web';
}

function hexIds(span) {
  const ctx = span.context();
  return { span_id: ctx.toSpanId(true), trace_id: ctx.toTraceId(true) };
}

/** The endpoint labels of a request's root span now. */
const rootEndpoint = (root) => endpointOf(root.span);

/** A request's labels, worked out when a sample (or getLabels) needs them. */
function labelsOfRoot(root) {
  return { labels: hexIds(root.span), derived: requestDerived(root, rootEndpoint) };
}

/** The same for a local root that may not be a request (a store entered as it started):
 * null unless its tags now say it is one. */
function labelsOfRequest(root) {
  return isRequest(root.span) ? labelsOfRoot(root) : null;
}

// --- dd-trace's contexts read from the frame -------------------------------------------

/** The local root span of `span`, if one was noted as it started (and is certain). */
const rootOf = (span) => span.context()._trace?.[ROOT] ?? undefined;

/** The local root span of dd-trace's store `store` (`{ span, ... }`), if it knows one. */
function rootOfStore(store) {
  const span = store?.span;
  return typeof span?.context === 'function' ? rootOf(span) : undefined;
}

/** The request labels of a sample taken in dd-trace's context `store`, or null. */
function labelsOfStore(store) {
  const root = rootOfStore(store);
  if (root === undefined) return null;
  const ctx = root.context();
  let record = ctx[RECORD];
  if (record === undefined || record === null) {
    if (!isRequest(root)) return null;
    // Its first sample may be drained after the span ended: its labels are final then.
    const ended = ctx._isFinished === true;
    record = { span: root, derived: null, ended, final: ended ? requestValues(endpointOf(root)) : undefined };
    ctx[RECORD] = record;
  }
  return labelsOfRequest(record);
}

/**
 * dd-trace's AsyncLocalStorage, found where it is used: the key of the current frame's
 * entry whose store holds a probe span that dd-trace's scope activated. Null where it
 * cannot be found (no frame reader here, a scope that enters no storage).
 */
function findStorage() {
  const scope = global._ddtrace?.scope?.();
  if (typeof scope?.activate !== 'function' || typeof native?.frameCurrent !== 'function') return null;
  const probe = Object.freeze({ selfprofProbe: true });
  let found = null;
  scope.activate(probe, () => {
    const [frame] = native.frameCurrent();
    // Node's AsyncContextFrame: a Map of Node's own realm's (not `instanceof Map` here).
    if (typeof frame?.entries !== 'function') return;
    for (const [key, store] of frame.entries()) if (store?.span === probe) found = key;
  });
  return typeof found?.getStore === 'function' && typeof found?.run === 'function' ? found : null;
}

/**
 * Labels samples with dd-trace's local root spans. Returns `{ disable() }`. Throws if
 * dd-trace cannot be found. (Service mode does this itself: `subscribeDdTrace`.)
 */
function ddTraceIntegration() {
  if (!global._ddtrace) {
    try {
      require.resolve('dd-trace', { paths: [process.cwd(), __dirname] });
    } catch {
      throw new Error('selfprof: ddTraceIntegration needs dd-trace installed');
    }
  }
  return subscribeDdTrace();
}

/** Listens to dd-trace's span channels (once), whether dd-trace is loaded yet or not. */
function subscribeDdTrace() {
  if (active) return active;
  watchSpanRequests();
  // Whether the handler reads dd-trace's contexts from the frame; looked for once labels
  // are read from the frame and dd-trace has started a span.
  let framed = () => false;
  let looked = false;
  const lookForStorage = () => {
    if (looked || labels.labelPath() !== 'context-frame') return;
    looked = true;
    try {
      const als = findStorage();
      if (als !== null) framed = watchTracer(FRAME_KEY, 'dd-trace', { als, requestOf: rootOfStore, resolve: labelsOfStore });
    } catch (err) {
      warnOnce('ddtrace', `selfprof: could not find dd-trace's storage: ${err.message}`);
    }
  };
  const onStart = ({ span, fields }) => {
    try {
      // A span whose parent is a span of this process is not a local root.
      const parent = typeof fields?.parent?.context === 'function' ? fields.parent.context() : fields?.parent;
      const ctx = span.context();
      if (parent && parent._isRemote === false) {
        // Inside a request: a GraphQL operation's span is noted on its local root.
        if (OPERATION_SPANS.has(fields.operationName)) noteIfOperation(ctx._trace?.[ROOT], ctx, fields, parent);
        return;
      }
      // Two local roots in one trace object (one remote context made the parent of both):
      // neither is certain from the frame, so the trace's samples carry no request's labels.
      const trace = ctx._trace;
      if (trace !== undefined) trace[ROOT] = trace[ROOT] === undefined ? span : null;
      lookForStorage();
      if (framed()) {
        drainIfBatched();
        return;
      }
      // Selfprof's own set, entered now: whether the span is a request (dd-trace tags it
      // right after it starts) is read with its labels, when a sample took it. A local
      // root of another kind (a DNS lookup or connection at start-up) then labels nothing.
      const record = { span, derived: null, ended: false, final: undefined };
      ctx[RECORD] = record;
      enterSpanLabels(record, labelsOfRequest, FRAME_KEY, true);
    } catch (err) {
      warnOnce('ddtrace', `selfprof: could not label a dd-trace span: ${err.message}`);
    }
  };
  const onFinish = (span) => {
    try {
      const ctx = span.context();
      const record = ctx[RECORD];
      // A local root no sample has needed yet needs nothing more unless requests are
      // counted (a Datadog exporter's session): its labels are read from the finished span
      // if a sample drained later needs them (labelsOfStore).
      if (record === undefined && (ctx._trace?.[ROOT] !== span || !countingRequests())) return;
      // The request's samples carry the endpoint it ends with, those drained later too
      // (false: not counted and its labels unread, they are read from the finished span if
      // a sample drained later needs them).
      const endpoint = record !== undefined ? endRequest(record, rootEndpoint, countingRequests()) : derivedValue(endpointOf(span).endpoint);
      if (endpoint === false) return;
      const tags = ctx.getTags?.() ?? {};
      if (tags['span.type'] === 'web') countRequest(endpoint ?? '');
    } catch {
      // A span we cannot read is not counted.
    }
  };
  dc.subscribe(START, onStart);
  dc.subscribe(FINISH, onFinish);
  active = {
    disable() {
      dc.unsubscribe(START, onStart);
      dc.unsubscribe(FINISH, onFinish);
      active = null;
    },
  };
  return active;
}

/**
 * Whether dd-trace counts the requests (Datadog's endpoint_counts): it traces (loaded and
 * initialized) and its spans are listened to. Another tracer's server spans are then the
 * same requests again (both tracers trace them): they are not counted twice.
 */
function ddTraceCountsRequests() {
  return active !== null && global._ddtrace?._tracingInitialized === true;
}

/**
 * dd-trace's runtime-id when dd-trace is loaded (Datadog joins a profile to spans of the
 * same runtime-id), else undefined. Reads the tracer's config, guarded: no API exposes it.
 */
function ddTraceRuntimeId() {
  try {
    const id = global._ddtrace?._tracer?._config?.tags?.['runtime-id'];
    return typeof id === 'string' && id !== '' ? id : undefined;
  } catch {
    return undefined;
  }
}

/**
 * Warns once if dd-trace's own profiler runs in this process too: both would sample it and
 * both upload to Datadog. Known from DD_PROFILING_ENABLED (on, as dd-trace reads it: true
 * or 1), or from dd-trace, once loaded and initialized, saying its profiler started.
 * Service mode calls this at start and at each rotation (dd-trace may load later).
 */
function warnBesideDdTraceProfiler(env = process.env) {
  if (warnedProfiler) return;
  const warn = (why) => {
    if (warnedProfiler) return;
    warnedProfiler = true;
    warnOnce(
      'ddtrace-profiler',
      `selfprof: dd-trace's own profiler runs in this process too (${why}): both sample it and both upload profiles to Datadog, at twice the cost; turn one off (DD_PROFILING_ENABLED=false, or no selfprof session)`,
    );
  };
  const setting = env.DD_PROFILING_ENABLED?.trim();
  if (setting && ['true', '1'].includes(setting.toLowerCase())) return warn(`DD_PROFILING_ENABLED=${setting}`);
  const tracer = global._ddtrace;
  if (typeof tracer?.profilerStarted !== 'function') return;
  try {
    Promise.resolve(tracer.profilerStarted()).then(
      (started) => started === true && warn('dd-trace says its profiler started'),
      () => {},
    );
  } catch {
    // Not initialized yet (dd-trace throws before init()): looked at again at the next rotation.
  }
}
let warnedProfiler = false;

let noopStorage;
/**
 * Runs `fn` where dd-trace does not trace (its own exporters' `{ noop: true }` store), so
 * selfprof's uploads do not show up as the app's outgoing requests. Without dd-trace, or
 * if its internals moved, just runs `fn`.
 */
function untraced(fn) {
  if (!global._ddtrace) return fn();
  if (noopStorage === undefined) {
    try {
      const core = require(require.resolve('dd-trace/packages/datadog-core', { paths: [process.cwd(), __dirname] }));
      noopStorage = core.storage('legacy');
      if (typeof noopStorage?.run !== 'function') noopStorage = null;
    } catch {
      noopStorage = null;
    }
  }
  return noopStorage ? noopStorage.run({ noop: true }, fn) : fn();
}

module.exports = { ddTraceIntegration, subscribeDdTrace, ddTraceCountsRequests, ddTraceRuntimeId, untraced, warnBesideDdTraceProfiler };
