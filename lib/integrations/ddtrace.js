'use strict';
// dd-trace integration (opt-in, no dependency: dd-trace is never required here). dd-trace
// publishes each span it starts on the `dd-trace:span:start` diagnostics channel; like the
// OpenTelemetry processor, when the span is a local root (the first span of its trace in
// this process: a request entering the service) its ids and endpoint become the labels of
// the async context that started it, so every sample of the request carries them:
//
//   span_id   the local root span's id, 16 hex digits (Datadog's pprof gets it in decimal)
//   trace_id  the trace id, 32 hex digits
//   endpoint  resource.name, else `<http.method> <http.route>` (dd-trace's endpoint name),
//             set as soon as the span's tags tell it and updated as routing refines it
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

/** As dd-trace's endpointNameFromTags: resource.name, else `<http.method> <http.route>`; undefined while neither is known. */
function endpointOf(span) {
  const ctx = span.context();
  const tags = ctx.getTags?.() ?? ctx._tags ?? {};
  if (tags['resource.name']) return String(tags['resource.name']);
  const endpoint = [tags['http.method'], tags['http.route']].filter(Boolean).join(' ');
  return endpoint || undefined;
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
  if (!global._ddtrace) {
    try {
      require.resolve('dd-trace', { paths: [process.cwd(), __dirname] });
    } catch {
      throw new Error('selfprof: ddTraceIntegration needs dd-trace installed');
    }
  }
  if (active) return active;
  const onStart = ({ span }) => {
    try {
      if (!isLocalRoot(span)) return;
      const endpoint = endpointOf(span);
      setLabels({ ...hexIds(span), ...(endpoint && { endpoint }) });
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
      if (endpoint && labels.endpoint !== endpoint) setLabels({ endpoint });
    } catch (err) {
      warnOnce('ddtrace', `selfprof: could not label a dd-trace span: ${err.message}`);
    }
  };
  const onFinish = (span) => {
    try {
      const tags = span.context().getTags?.() ?? {};
      if (tags['span.type'] === 'web' && isLocalRoot(span)) countRequest(endpointOf(span) ?? '');
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

module.exports = { ddTraceIntegration, ddTraceRuntimeId, untraced };
