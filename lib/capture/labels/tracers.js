'use strict';
// A tracer's contexts as labels, read where the tracer keeps them. A tracer that runs on an
// AsyncLocalStorage (dd-trace's storage, OpenTelemetry's context manager) has already
// entered its context for the request into the async context frame; where the handler
// reads the frame (Node >= 24), it reads the tracer's entry too (src/capture/signal.rs:
// `KEYS`), so nothing more happens per request than the tracer does anyway. A sample in a
// tracer's context is the pair (selfprof's set, the tracer's contexts), which the handler
// gives an id of its own; when JS drains it (frame.js), the pair's labels are worked out
// from the tracer's context (`pairStore`): the request's labels, and selfprof's set's
// over or under them. Only what a sample needs is worked out, and only for the contexts a
// sample took.
//
// With both tracers in one request (dd-trace for traces, OpenTelemetry brought by a
// library), its samples carry both tracers' ids, each backend taking those of the tracer it
// joins: dd-trace's as `span_id`/`trace_id` (with its endpoint), OpenTelemetry's under keys
// of their own, `otel_span_id`/`otel_trace_id` (`combineRequests`; src/formats/dialect.rs
// picks them per backend). The same on every path: here, a pair's contexts; spans.js, a
// set entered inside the other tracer's request.
//
// Each tracer registers (`registerTracer`) with:
//   als           its AsyncLocalStorage (the key in the frame);
//   requestOf(s)  what stands for the request of its store `s` (one object per request), or
//                 undefined outside a request it knows: cheap, called per withLabels;
//   resolve(s)    the request's `{ labels, derived }` (sets.js), or null.

const { EMPTY } = require('./thread');
const { lazyStore, labelsOf, updateDerived } = require('./sets');
const { updateRequestWatch } = require('../../integrations/http-requests');

/** The frame's tracer keys (src/capture/signal.rs `KEYS`, key 0 is selfprof's). */
const TRACER_KEYS = [1, 2];
/** By key: `{ name, als, requestOf, resolve, read }` (`read`: the handler reads its key). */
const tracers = [null, null, null];

/** Registers tracer `name` under key `key` (1: dd-trace, 2: OpenTelemetry; on both,
 * `combineRequests`). Returns its entry. */
function registerTracer(key, name, { als, requestOf, resolve }) {
  const entry = { name, als, requestOf, resolve, read: false };
  tracers[key] = entry;
  // Its contexts are not read until proved: its requests' events are bound till then.
  updateRequestWatch();
  return entry;
}

/** The tracers whose keys the handler reads. */
function readTracers() {
  return TRACER_KEYS.filter((k) => tracers[k]?.read);
}

/** Whether the handler reads the contexts of every tracer registered (at least one): asked
 * at every request (integrations/http-requests.js), so no closure and no destructuring (an
 * iterator a call, 86-170 B a request). */
function allTracersRead() {
  const a = tracers[1];
  const b = tracers[2];
  return (a !== null || b !== null) && (a === null || a.read) && (b === null || b.read);
}

/** Whether the handler reads any tracer's contexts on this thread. */
const anyTracerRead = () => tracers[1]?.read === true || tracers[2]?.read === true;

/** The requests of the tracers' current contexts, by key (what a withLabels set made now is
 * set inside), or undefined where no tracer's contexts are read. */
function tracerRequests() {
  if (!anyTracerRead()) return undefined;
  const requests = [undefined, undefined, undefined];
  for (const k of TRACER_KEYS) {
    const t = tracers[k];
    if (t?.read) requests[k] = t.requestOf(t.als.getStore());
  }
  return requests;
}

/** OpenTelemetry's ids' keys where dd-trace's ids are `span_id`/`trace_id`. */
const SECOND_IDS = { span_id: 'otel_span_id', trace_id: 'otel_trace_id' };

/**
 * The request labels of a sample in the requests of the tracers by key (`found[k]`: tracer
 * k's `{ labels, derived }`, or null/undefined): the first key's (dd-trace's) labels and
 * derived endpoint, with the second's (OpenTelemetry's) ids under their own keys
 * (`otel_span_id`, `otel_trace_id`); one tracer's alone as it gives them. Null if none.
 */
function combineRequests(found) {
  const [first, second] = [found[1] ?? null, found[2] ?? null];
  if (first === null || second === null) return first ?? second;
  const labels = { ...first.labels };
  for (const key in second.labels) if (Object.hasOwn(SECOND_IDS, key)) labels[SECOND_IDS[key]] = second.labels[key];
  return { labels, derived: first.derived };
}

/** The requests a span store holds (spans.js `enterSpanLabels`: `spanKey` set), as
 * `[{ key, record, resolve }]`: its one tracer's span, or both tracers'. */
function spansOf(store) {
  return store.spans ?? [{ key: store.spanKey, record: store.of, resolve: store.resolve }];
}

/**
 * The labels of selfprof's set `base` (EMPTY if none) in the tracers' contexts `stores`
 * (by key, undefined where none): the tracers' request labels (`combineRequests`), and
 * `base`'s own labels over them where `base` was set inside that same request
 * (`base.requests`), under them where the request began inside `base`. A tracer whose
 * contexts are not read here labeled its request with selfprof's set (spans.js): where
 * `base` is that set, its request is that tracer's in the pair.
 */
function resolvePair(base, stores) {
  const found = [null, null, null];
  let any = false;
  let under = base !== EMPTY && base.requests !== undefined;
  for (const k of TRACER_KEYS) {
    const t = tracers[k];
    const store = stores[k];
    if (t === null || store === undefined) continue;
    found[k] = t.resolve(store);
    if (found[k] === null) continue;
    any = true;
    under &&= base.requests[k] === t.requestOf(store);
  }
  if (!any) return null;
  if (base.spanKey !== undefined) for (const span of spansOf(base)) if (stores[span.key] === undefined) found[span.key] ??= span.resolve(span.record);
  return { ...combineRequests(found), under };
}

/** What makes a pair's labels what they are, for pairs of one tracer's contexts: the
 * tracer's key and the request of its store (undefined outside a request it knows), or
 * null where two tracers' stores are there (such pairs are worked out each on its own). */
function pairRequest(stores) {
  let found = null;
  for (const k of TRACER_KEYS) {
    if (stores[k] === undefined) continue;
    if (found !== null) return null;
    found = { key: k, request: tracers[k]?.requestOf(stores[k]) };
  }
  return found;
}

/** The store standing for a drained pair: `base` (selfprof's set, or EMPTY) in the tracers'
 * contexts `stores`, with the handler's id for the pair. */
function pairStore(id, base, stores) {
  return lazyStore(base, stores, (s) => resolvePair(base, s), id);
}

/** selfprof's set `base` in the tracers' current contexts: a pair store (worked out when
 * its labels are asked for), or `base` itself outside any tracer's context. */
function currentPair(base) {
  if (!anyTracerRead()) return base;
  const stores = [undefined, undefined, undefined];
  let any = false;
  for (const k of readTracers()) {
    stores[k] = tracers[k].als.getStore() ?? undefined;
    any ||= stores[k] !== undefined;
  }
  return any ? pairStore(0, base, stores) : base;
}

/** The labels in effect now: selfprof's current set in the tracers' current contexts. */
function labelsIn(base) {
  const store = currentPair(base);
  if (store === base) return labelsOf(base);
  labelsOf(store);
  // With what the span says now.
  if (store.derived?.open) updateDerived(store.derived);
  return labelsOf(store);
}

module.exports = { TRACER_KEYS, SECOND_IDS, tracers, registerTracer, combineRequests, spansOf, readTracers, anyTracerRead, allTracersRead, tracerRequests, pairStore, pairRequest, currentPair, labelsIn };
