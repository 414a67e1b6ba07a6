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
// Each tracer registers (`registerTracer`) with:
//   als           its AsyncLocalStorage (the key in the frame);
//   requestOf(s)  what stands for the request of its store `s` (one object per request), or
//                 undefined outside a request it knows: cheap, called per withLabels;
//   resolve(s)    the request's `{ labels, derived }` (sets.js), or null.

const { EMPTY } = require('./thread');
const { lazyStore, labelsOf, updateDerived } = require('./sets');

/** The frame's tracer keys (src/capture/signal.rs `KEYS`, key 0 is selfprof's). */
const TRACER_KEYS = [1, 2];
/** By key: `{ name, als, requestOf, resolve, read }` (`read`: the handler reads its key). */
const tracers = [null, null, null];

/** Registers tracer `name` under key `key` (1: dd-trace, 2: OpenTelemetry; on both, the
 * first key's labels win). Returns its entry. */
function registerTracer(key, name, { als, requestOf, resolve }) {
  const entry = { name, als, requestOf, resolve, read: false };
  tracers[key] = entry;
  return entry;
}

/** The tracers whose keys the handler reads. */
function readTracers() {
  return TRACER_KEYS.filter((k) => tracers[k]?.read);
}

/** Whether the handler reads the contexts of every tracer registered (at least one): asked
 * at every request (integrations/http-requests.js), so no closure. */
function allTracersRead() {
  const [, a, b] = tracers;
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

/**
 * The labels of selfprof's set `base` (EMPTY if none) in the tracers' contexts `stores`
 * (by key, undefined where none): each tracer's request labels, the first key's over the
 * second's, and `base`'s own labels over them where `base` was set inside that same request
 * (`base.requests`), under them where the request began inside `base`.
 */
function resolvePair(base, stores) {
  let found = null;
  for (const k of [...TRACER_KEYS].reverse()) {
    const t = tracers[k];
    const store = stores[k];
    if (t === null || store === undefined) continue;
    const got = t.resolve(store);
    if (got === null) continue;
    const under = base !== EMPTY && base.requests !== undefined && base.requests[k] === t.requestOf(store);
    if (found === null) {
      found = { labels: { ...got.labels }, derived: got.derived, under };
      continue;
    }
    // A second tracer's request: its labels over the first's (one derived: the last's).
    Object.assign(found.labels, got.labels);
    found.derived = got.derived;
    found.under = found.under && under;
  }
  return found;
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

module.exports = { TRACER_KEYS, tracers, registerTracer, readTracers, anyTracerRead, allTracersRead, tracerRequests, pairStore, pairRequest, currentPair, labelsIn };
