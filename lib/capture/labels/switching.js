'use strict';
// How the handler learns the current label set where it does not read the frame: each
// thread publishes the id of its current set in its cell, which the handler reads.
// withLabels and setLabels write it directly, and while a profiler records, async_hooks
// write it around every async continuation: `before` publishes the store of the callback
// being entered, `after` the one it returns to (EMPTY at the top of the stack). So JS
// entered without a `before` (FinalizationRegistry callbacks, 'exit' listeners, native code
// calling into JS from the event loop) finds "no labels" in the cell, never the last
// request's. The handler leaves the id it recorded in the cell, and the next switch saves
// the labels of that (still current) store.
//
// Where the handler can read where Node is in its async id stack (Node < 24: the depth in
// `async_hook_fields`, the execution async id in `async_id_fields`, through
// process.binding), the hooks run at each callback's start only (`after`'s dispatch was
// two thirds of what labels cost a traced request on Node 20), and each publish goes to
// the entry of the depth running, stamped with the async id running (`byDepth`;
// SELFPROF_HOOKS_BY_DEPTH=0 keeps before and after). The handler takes the entry of the
// depth running now only while the async id it was stamped with runs: an outer callback
// finds its own entry again once an inner one ends, and JS run between callbacks, or in
// one entered with no hook run, has no labels, never another callback's.
//
// On Windows V8 samples without a signal (it suspends the thread; no handler runs), so
// while a recording of the thread is unbuilt (the cell's `logging`), each switch is logged
// natively with its time on V8's clock (src/capture/switches.rs), and its store saved: a
// build gives each sample the set switched to last before it, where that is certain.
//
// Also here: running code with a store current, on either path (`runWithStore`).

const { AsyncResource, createHook, executionAsyncId, executionAsyncResource } = require('node:async_hooks');
const { native } = require('../../native');
const { envSwitchOn } = require('../../log');
const { EMPTY, als, currentStore, storesInFrame, SLOT, JOIN, cell, shared, path } = require('./thread');
const { save } = require('./kept');

let published = EMPTY;
let previous = EMPTY;

// Where AsyncLocalStorage keeps its stores in the async context frame (Node >= 24), run()
// puts back a copy of the frame with its key in it, set to what it found (undefined at the
// top level): every async context made after carries the key, and each frame change copies
// it again (~30 ns more a run() per key on Node 24). An AsyncResource's scope puts the
// caller's frame object itself back when it ends, so entering a store inside one leaves
// nothing behind.
const SCOPE_OPTIONS = { requireManualDestroy: true };

/** Runs `fn(a, b, c, d)` in the scope of an AsyncResource of type `type` made here: it
 * holds the caller's frame, and puts that very object back as it ends (fixed arguments:
 * `runInFrame` passes four on every withLabels, with no array made for them). */
function inOwnScope(type, fn, a, b, c, d) {
  const scope = new AsyncResource(type, SCOPE_OPTIONS);
  try {
    return scope.runInAsyncScope(fn, null, a, b, c, d);
  } finally {
    // Its scope is over: a destroy hook (another tool's) hears of it now, not at a GC.
    scope.emitDestroy();
  }
}

/** Runs `fn()` in a scope of its own: the caller's frame comes back as it was (selfprof's
 * checks, run where the app's contexts are made, leave no key of theirs there). */
const aside = (fn) => inOwnScope('selfprof.aside', fn);

/** A signal recorded the published id since JS last looked: keep its labels. */
function notePublished() {
  const id = shared ? Atomics.exchange(cell, SLOT.sampled, 0) : native.takeSampledContext();
  if (id === 0) return;
  if (byDepth !== null && saveRecordedDepths(id)) return;
  if (id === published.id) save(published);
  else if (id === previous.id) save(previous); // recorded as we switched
  else if (shared) Atomics.compareExchange(cell, SLOT.sampled, 0, id); // another copy's: leave it
}

/** Makes `store` the thread's published set (nothing where the handler reads the frame). */
function publish(store) {
  if (path.frameRead) return;
  if (byDepth !== null) return publishAtDepth(store);
  if (store === published) return;
  if (cell[SLOT.sampled] !== 0 || !shared) notePublished();
  previous = published;
  published = store;
  cell[SLOT.context] = store.id;
  cell[SLOT.generation]++;
  if (!shared) native.setThreadContext(store.id);
  // Where samples are joined by time: logged (and its labels kept) while a recording of
  // this thread is unbuilt. (Without a view of the cell, the native side checks.)
  if (JOIN === 'time' && (!shared || cell[SLOT.logging] !== 0) && native.logSwitch(store.id)) save(store);
}

/** The published sets (saved before a trace is built). */
function publishedStores() {
  if (byDepth === null) return [published, previous];
  return [...byDepth.stores.slice(0, byDepth.deepest + 1).filter((s) => s !== undefined), previous];
}

/** The handler reads the frame from now on: nothing is published. */
function unpublish() {
  published = previous = EMPTY;
  cell[SLOT.context] = 0;
  cell[SLOT.generation]++;
  clearDepths();
}

// --- publishing by depth ---------------------------------------------------------------

/**
 * Node's async id stack where the handler reads it too (`{ hookFields, depthAt, idFields,
 * execAt, stores, deepest }`: `stores[d]`, the store this copy published at depth d), or
 * null: on Node >= 24 (whose hooks path takes promises apart, and whose labels ride the
 * frame), where no signal samples (Windows), without a view of the cell, or where Node
 * does not offer the fields (`async_hook_fields`, `async_id_fields`, through
 * process.binding). Then the hooks publish before and after each callback.
 */
function asyncPositionHere() {
  if (withoutPromises !== null || JOIN !== 'signal' || !shared || SLOT.depths === undefined || typeof native?.threadAsyncPosition !== 'function') return null;
  // SELFPROF_HOOKS_BY_DEPTH=0 keeps before and after (a request costs more that way,
  // sparse samples or dense: docs/performance.md).
  if (!envSwitchOn('SELFPROF_HOOKS_BY_DEPTH')) return null;
  const quiet = process.noDeprecation;
  try {
    // Read, never changed; its one deprecation warning (DEP0111) is not the app's concern.
    process.noDeprecation = true;
    // @ts-expect-error -- process.binding is deprecated, and Node's types leave it out
    const wrap = process.binding('async_wrap');
    const hookFields = wrap?.async_hook_fields;
    const idFields = wrap?.async_id_fields;
    const depthAt = wrap?.constants?.kStackLength;
    const execAt = wrap?.constants?.kExecutionAsyncId;
    if (!(hookFields instanceof Uint32Array) || !(idFields instanceof Float64Array) || !Number.isInteger(depthAt) || !Number.isInteger(execAt)) return null;
    // They must say what Node says: the async id running, and a depth one more inside a callback.
    const outside = hookFields[depthAt];
    let inside = -1;
    new AsyncResource('selfprof.check').runInAsyncScope(() => {
      if (idFields[execAt] === executionAsyncId()) inside = hookFields[depthAt];
    });
    if (idFields[execAt] !== executionAsyncId() || inside !== outside + 1) return null;
    if (!native.threadAsyncPosition(hookFields, depthAt, idFields, execAt)) return null;
    return { hookFields, depthAt, idFields, execAt, stores: [], deepest: -1 };
  } catch {
    // Not offered here: the hooks run before and after each callback.
    return null;
  } finally {
    process.noDeprecation = quiet;
  }
}

/** Publishes `store` in the entry of the depth running, stamped with the async id running
 * (only while the hooks run: no recording samples this thread otherwise, and an entry
 * keeps its store alive). */
function publishAtDepth(store) {
  if (!hooksOn) return;
  const { hookFields, depthAt, idFields, execAt, stores } = byDepth;
  const depth = hookFields[depthAt];
  // The callbacks deeper than this one have ended: their entries go, and their stores.
  if (depth < byDepth.deepest) clearDepths(depth + 1);
  if (depth >= SLOT.depthCount) return; // deeper callbacks carry no labels
  const at = SLOT.depths + depth * SLOT.depthWords;
  const exec = idFields[execAt] >>> 0;
  const there = cell[at + 1];
  if (cell[at] === exec) {
    if (there === store.id) return;
    // Another copy of this module published its own set for this callback (each copy's
    // hooks run): where this copy has none, that set stays.
    if (store === EMPTY && there !== 0 && stores[depth]?.id !== there) return;
  }
  if (cell[SLOT.sampled] !== 0) notePublished();
  previous = stores[depth] ?? EMPTY;
  stores[depth] = store;
  if (depth > byDepth.deepest) byDepth.deepest = depth;
  published = store;
  // A signal between these writes sees no set, never another callback's.
  cell[at + 1] = 0;
  cell[at] = exec;
  cell[at + 2] = 0;
  cell[at + 1] = store.id;
  cell[SLOT.context] = store.id;
}

/** The store this copy published for the callback running (AsyncLocalStorage's store
 * there: every change of it in a callback is published), or undefined where it published
 * none there (or the hooks do not run, or do not publish by depth). */
function publishedRunning() {
  if (byDepth === null || !hooksOn) return undefined;
  const { hookFields, depthAt, idFields, execAt, stores } = byDepth;
  const depth = hookFields[depthAt];
  if (depth > byDepth.deepest || depth >= SLOT.depthCount) return undefined;
  const store = stores[depth];
  const at = SLOT.depths + depth * SLOT.depthWords;
  return store !== undefined && cell[at] === idFields[execAt] >>> 0 && cell[at + 1] === store.id ? store : undefined;
}

/** The store current in the callback running: published by depth, without a lookup of the
 * resource running (a native call in the callbacks Node made), else looked up. */
const storeRunning = () => publishedRunning() ?? currentStore();

/** The handler recorded id `id` (and marked the entries it took): saves the stores of the
 * marked entries; whether `id` was among them or the one last replaced. */
function saveRecordedDepths(id) {
  const { stores } = byDepth;
  let found = false;
  for (let d = 0; d <= byDepth.deepest; d++) {
    const at = SLOT.depths + d * SLOT.depthWords;
    const store = stores[d];
    // Another copy's set is left marked, for that copy to save.
    if (cell[at + 2] === 0 || store === undefined || store.id !== cell[at + 1]) continue;
    cell[at + 2] = 0;
    save(store);
    found ||= store.id === id;
  }
  if (!found && id === previous.id) {
    save(previous); // recorded as it was replaced
    found = true;
  }
  return found;
}

/** Empties the entries from depth `from` on (all: the hooks stop, or the frame is read
 * from now on), saving the sets the handler recorded there first. */
function clearDepths(from = 0) {
  if (byDepth === null || byDepth.deepest < from) return;
  if (cell[SLOT.sampled] !== 0) notePublished();
  for (let d = from; d <= byDepth.deepest; d++) cell[SLOT.depths + d * SLOT.depthWords + 1] = 0;
  byDepth.stores.length = from;
  byDepth.deepest = from - 1;
}

// --- continuation tracking -----------------------------------------------------------

// The stores to return to, one per continuation being run (callback scopes nest: an HTTP
// parser's callbacks run inside a socket read's). Bounded: a lost `after` cannot grow it.
const outer = [];
function enter() {
  if (outer.length >= 4096) outer.length = 0;
  outer.push(published);
  publish(storeEntered());
}

/** Where AsyncLocalStorage keeps its stores in the frame, an AsyncResource's frame (its
 * own key): `runInAsyncScope` runs the before hooks while the caller's frame is still the
 * current one, and only then enters its own (Node 24-26), so the store a hook reads
 * there is the caller's, not the scope's. */
const RESOURCE_FRAME = storesInFrame() ? Object.getOwnPropertySymbols(new AsyncResource('selfprof.probe')).find((s) => s.description === 'context_frame') : undefined;

/** The store of the callback about to run, in a before hook. */
function storeEntered() {
  if (RESOURCE_FRAME !== undefined) {
    const resource = executionAsyncResource();
    if (resource !== null && typeof resource === 'object' && RESOURCE_FRAME in resource) return resource[RESOURCE_FRAME]?.get(als) ?? EMPTY;
  }
  return als.getStore() ?? EMPTY;
}
function leave() {
  publish(outer.pop() ?? EMPTY);
}

// Two ways to run enter/leave around every continuation:
// - async_hooks for every kind (Node 20 and 22, and wherever the next way is not sound);
// - on Node >= 24, async_hooks without promises (`trackPromises: false`) and V8's promise
//   hooks for promise continuations: about 3% less CPU per request on a hop-heavy service
//   (callgrind), since V8 calls them without async_hooks' dispatch. It is sound only where
//   AsyncLocalStorage rides V8's continuation-preserved data, so that the store a promise
//   hook reads is already the continuation's: checked once (`checkPromiseHooks`), until
//   then and otherwise the first way.
const everyKind = createHook({ before: enter, after: leave });
const withoutPromises = supportsTrackPromises() ? createHook({ before: enter, after: leave, trackPromises: false }) : null;
/** Where publishes go by depth: at each callback's start only. */
const beforeOnly = createHook({ before: enterAtDepth });
function enterAtDepth() {
  publishAtDepth(storeEntered());
}
const byDepth = asyncPositionHere();
let promiseHooksSound = false;
let stopPromiseHooks = null;
/** Whether the hooks run now. */
let hooksOn = false;

/** Whether async_hooks can leave promises out (Node >= 24: it checks the option's type). */
function supportsTrackPromises() {
  try {
    // @ts-expect-error -- a wrong type on purpose: Node >= 24 checks it and throws
    createHook({ trackPromises: 'check' });
    return false; // an older Node ignores the option
  } catch (err) {
    return err.code === 'ERR_INVALID_ARG_TYPE';
  }
}

/** Once: does a promise hook see the store of the continuation about to run? */
function checkPromiseHooks() {
  const v8 = require('node:v8');
  if (!withoutPromises || !v8.promiseHooks) return;
  const probe = { id: 0, labels: EMPTY.labels };
  let seen;
  const stop = v8.promiseHooks.onBefore(() => {
    if (seen === undefined) seen = als.getStore() ?? null;
  });
  // Its own scope: the promise made here keeps the probe, the caller's frame does not.
  aside(() =>
    als.run(probe, () =>
      Promise.resolve().then(() => {
        stop();
        if (seen === probe && als.getStore() === probe) {
          promiseHooksSound = true;
          if (hooksOn) {
            switchHooks(false);
            switchHooks(true);
          }
        }
      }),
    ),
  );
}
checkPromiseHooks();

/** Turns the hooks on or off (and publishes the current set as they start). */
function switchHooks(on) {
  outer.length = 0;
  hooksOn = on;
  if (!on) {
    everyKind.disable();
    beforeOnly.disable();
    withoutPromises?.disable();
    stopPromiseHooks?.();
    stopPromiseHooks = null;
    // Published sets would go stale with no hook to replace them: none is left.
    clearDepths();
    return;
  }
  if (promiseHooksSound) {
    const v8 = require('node:v8');
    withoutPromises.enable();
    const stops = [v8.promiseHooks.onBefore(enter), v8.promiseHooks.onAfter(leave)];
    stopPromiseHooks = () => stops.forEach((stop) => stop());
  } else {
    (byDepth === null ? everyKind : beforeOnly).enable();
  }
  publish(currentStore());
}

/** Whether the hooks run now. */
const hooksRunning = () => hooksOn;
/** Whether they publish by depth, at each callback's start only (else before and after). */
const hooksByDepth = () => byDepth !== null;

// --- running with a store ------------------------------------------------------------

// Where the handler reads the frame, AsyncLocalStorage keeps its stores in a Map per async
// context frame, and run() copies the current one twice: once with the store, once more to
// put the prior store back. Entered inside an AsyncResource's scope (see `aside`), the
// store costs one copy. (Not with selfprof's hooks: their before/after would publish
// around the resource's scope.)
function enterAndCall(store, fn, thisArg, args) {
  als.enterWith(store);
  return args.length === 0 ? fn.call(thisArg) : fn.apply(thisArg, args);
}
/** Runs `fn` with `store` current, where the handler reads the frame. */
function runInFrame(store, fn, thisArg, args) {
  return inOwnScope('selfprof.labels', enterAndCall, store, fn, thisArg, args);
}

/** Runs `fn` with `store` current: withLabels, and the integrations' request events. */
function runWithStore(store, fn, thisArg, args) {
  if (path.frameRead) return runInFrame(store, fn, thisArg, args);
  publish(store);
  try {
    return thisArg === undefined ? als.run(store, fn, ...args) : als.run(store, () => fn.apply(thisArg, args));
  } finally {
    publish(currentStore());
  }
}

/** Makes `store` current for the rest of the current async context. */
function enterStore(store) {
  als.enterWith(store);
  publish(store);
}

module.exports = { storeRunning, publish, notePublished, publishedStores, unpublish, switchHooks, hooksRunning, hooksByDepth, aside, runInFrame, runWithStore, enterStore };
