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
// On Windows V8 samples without a signal (it suspends the thread; no handler runs), so
// while a recording of the thread is unbuilt (the cell's `logging`), each switch is logged
// natively with its time on V8's clock (src/capture/switches.rs), and its store saved: a
// build gives each sample the set switched to last before it, where that is certain.
//
// Also here: running code with a store current, on either path (`runWithStore`).

const { AsyncResource, createHook, executionAsyncResource } = require('node:async_hooks');
const { native } = require('../../native');
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
  if (id === published.id) save(published);
  else if (id === previous.id) save(previous); // recorded as we switched
  else if (shared) Atomics.compareExchange(cell, SLOT.sampled, 0, id); // another copy's: leave it
}

/** Makes `store` the thread's published set (nothing where the handler reads the frame). */
function publish(store) {
  if (store === published || path.frameRead) return;
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

/** The published set and the one before it (saved before a trace is built). */
function publishedStores() {
  return [published, previous];
}

/** The handler reads the frame from now on: nothing is published. */
function unpublish() {
  published = previous = EMPTY;
  cell[SLOT.context] = 0;
  cell[SLOT.generation]++;
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
    withoutPromises?.disable();
    stopPromiseHooks?.();
    stopPromiseHooks = null;
    return;
  }
  if (promiseHooksSound) {
    const v8 = require('node:v8');
    withoutPromises.enable();
    const stops = [v8.promiseHooks.onBefore(enter), v8.promiseHooks.onAfter(leave)];
    stopPromiseHooks = () => stops.forEach((stop) => stop());
  } else {
    everyKind.enable();
  }
  publish(currentStore());
}

/** Whether the hooks run now. */
const hooksRunning = () => hooksOn;

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

module.exports = { publish, notePublished, publishedStores, unpublish, switchHooks, hooksRunning, aside, runInFrame, runWithStore, enterStore };
