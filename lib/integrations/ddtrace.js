'use strict';
// dd-trace integration (opt-in, no dependency: dd-trace is never required here). dd-trace
// publishes each span it starts on the `dd-trace:span:start` diagnostics channel; like the
// OpenTelemetry processor, when the span is a local root (the first span of its trace in
// this process) of a request or message (span.kind server or consumer, as dd-trace tags it
// right after it starts), its ids and endpoint become the labels of the async context that
// started it, so every sample of the request carries them:
//
//   span_id   the local root span's id, 16 hex digits (Datadog's pprof gets it in decimal)
//   trace_id  the trace id, 32 hex digits
//   endpoint  resource.name, else `<http.method> <http.route>` (dd-trace's endpoint name),
//             as the span ends: routing sets them after the request began, and the
//             request's samples, those before routing too, carry the final one (a request
//             still running when a trace is built carries what its tags say then)
//
//   require('dd-trace').init();
//   require('selfprof').ddTraceIntegration();
//
// Web requests are counted by endpoint when their local root span finishes (Datadog's
// endpoint_counts), as dd-trace's own profiler counts them.

const dc = require('node:diagnostics_channel');
const { enterSpanLabels, watchSpanRequests, requestDerived, endRequest, markDerived } = require('../capture/labels');
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

/** As dd-trace's endpointNameFromTags: resource.name, else `<http.method> <http.route>`; undefined while neither is known. */
function endpointOf(span) {
  const ctx = span.context();
  const tags = ctx.getTags?.() ?? ctx._tags ?? {};
  if (tags['resource.name']) return String(tags['resource.name']);
  const endpoint = [tags['http.method'], tags['http.route']].filter(Boolean).join(' ');
  return endpoint || undefined;
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

/** The endpoint of a request's root span now. */
const rootEndpoint = (root) => endpointOf(root.span);

/** A request's labels, worked out when a sample (or getLabels) needs them: `enterSpanLabels`. */
function labelsOfRoot(root) {
  return { labels: hexIds(root.span), derived: requestDerived(root, rootEndpoint) };
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
  /** Local root span -> `{ span, derived, ended, endpoint }` of its request (`derived`
   * made when its labels are first needed), or null until its tags say it is a request. */
  const roots = new WeakMap();
  // A local root labels what follows only once its tags say it is a request or message
  // entering the service (dd-trace sets them right after the span starts, in the same
  // turn): a DNS lookup or connection at start-up would label everything after it.
  const label = (span) => {
    if (roots.get(span) !== null || !isRequest(span)) return;
    const root = { span, derived: null, ended: false, endpoint: undefined };
    roots.set(span, root);
    enterSpanLabels(root, labelsOfRoot);
  };
  const onStart = ({ span }) => {
    try {
      if (!isLocalRoot(span)) return;
      roots.set(span, null);
      label(span);
    } catch (err) {
      warnOnce('ddtrace', `selfprof: could not label a dd-trace span: ${err.message}`);
    }
  };
  // Routing sets the route after the request began: the request's labels follow.
  const onTags = (span) => {
    try {
      label(span);
      markDerived(roots.get(span)?.derived);
    } catch (err) {
      warnOnce('ddtrace', `selfprof: could not label a dd-trace span: ${err.message}`);
    }
  };
  const onFinish = (span) => {
    try {
      const root = roots.get(span);
      if (root === undefined) return;
      // An entry whose span dies young, still in the map, costs the collector several
      // times what deleting it does (docs/performance.md, "WeakMap entries").
      roots.delete(span);
      if (root === null) return;
      // The request's samples carry the endpoint it ends with, those drained later too.
      const endpoint = endRequest(root, rootEndpoint);
      const tags = span.context().getTags?.() ?? {};
      if (tags['span.type'] === 'web') countRequest(endpoint ?? '');
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

module.exports = { ddTraceIntegration, subscribeDdTrace, ddTraceRuntimeId, untraced };
