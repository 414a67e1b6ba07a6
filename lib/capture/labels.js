'use strict';
// Sample labels: `withLabels({ endpoint, span_id }, fn)` runs fn with those labels merged
// over the current ones; AsyncLocalStorage carries them through async continuations.
//
// The signal handler cannot call into V8 to ask for the current store, so each thread
// publishes the id of its current label set in a cell the handler reads: withLabels and
// setLabels write it directly, and while a profiler records, async_hooks write it around
// every async continuation: `before` publishes the store of the callback being entered,
// `after` the one it returns to (EMPTY at the top of the stack). So JS entered without a
// `before` (FinalizationRegistry callbacks, 'exit' listeners, native code calling into JS
// from the event loop) finds "no labels" in the cell, never the last request's.
//
// Label sets live in their AsyncLocalStorage stores; most are never sampled. The handler
// leaves the id it recorded in the cell, and the next switch saves the labels of that
// (still current) store natively (src/capture/labels.rs), where trace builds look them up:
// only sampled label sets are kept, nothing is serialized at stop, and ids come from one
// process-wide counter, so copies of this module loaded side by side never share an id.

const { AsyncLocalStorage, createHook } = require('node:async_hooks');
const { native } = require('../native');
const { warnOnce } = require('../log');

const MAX_KEYS = 64;
const MAX_KEY_LENGTH = 256;
const MAX_VALUE_LENGTH = 4096;
/** Ids reserved from the process-wide counter at a time. */
const ID_BLOCK = 1024;

const EMPTY = Object.freeze({ id: 0, labels: Object.freeze({}), flat: null, savedFor: -1 });
const als = new AsyncLocalStorage();

// --- the published context ---------------------------------------------------------

let currentStore = EMPTY;
let previousStore = EMPTY;
// [context id, switch count, id the handler last recorded (0 once JS took note),
// recordings started on this thread]: a view of the native cell, or a plain array where
// Node refuses external buffers (then the native calls below stand in for it).
let cell = new Uint32Array(4);
let shared = false;
let localRecordings = 0;

/** Recordings started on this thread (by any copy of this module): a save is current
 * for every recording started before it. */
const recordingsStarted = () => (shared ? cell[3] : localRecordings);

/** Keeps a sampled store's labels for the traces that may reference it. */
function save(store) {
  if (store.id === 0) return;
  const stamp = recordingsStarted();
  if (store.savedFor === stamp) return;
  store.flat ??= Object.entries(store.labels).flat();
  try {
    native.saveLabels(store.id, store.flat);
    store.savedFor = stamp;
  } catch (err) {
    warnOnce('labels-save', `selfprof: a label set could not be kept: ${err.message}`);
  }
}

/** A signal recorded a context since JS last looked: keep its labels. */
function noteSampled() {
  const id = shared ? Atomics.exchange(cell, 2, 0) : native.takeSampledContext();
  if (id === 0) return;
  if (id === currentStore.id) save(currentStore);
  else if (id === previousStore.id) save(previousStore); // recorded as we switched
  else if (shared) Atomics.compareExchange(cell, 2, 0, id); // another copy's: leave it
}

function publish(store) {
  if (store === currentStore) return;
  if (cell[2] !== 0 || !shared) noteSampled();
  previousStore = currentStore;
  currentStore = store;
  cell[0] = store.id;
  cell[1]++;
  if (!shared) native.setThreadContext(store.id);
}

let available = true;
function initCell() {
  if (!native) {
    // No addon (see native.js): labels ride AsyncLocalStorage alone; nothing is kept.
    available = false;
    shared = true;
    return;
  }
  try {
    const view = native.registerThread();
    view[0] = 0x5e1f;
    shared = native.readThreadContext() === 0x5e1f;
    view[0] = 0;
    if (shared) cell = view;
    else warnOnce('labels-copy', 'selfprof: external buffers are not allowed here; labels cost a native call per switch');
  } catch (err) {
    available = false;
    shared = true; // nothing to call either
    warnOnce('labels', `selfprof: samples will carry no labels on this thread: ${err.message}`);
  }
}
initCell();

function currentStoreOfContext() {
  return als.getStore() ?? EMPTY;
}

// --- continuation tracking -----------------------------------------------------------

// The stores to return to, one per continuation being run (callback scopes nest: an HTTP
// parser's callbacks run inside a socket read's). Bounded: a lost `after` cannot grow it.
const outer = [];
function enter() {
  if (outer.length >= 4096) outer.length = 0;
  outer.push(currentStore);
  publish(als.getStore() ?? EMPTY);
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

/** Whether async_hooks can leave promises out (Node >= 24: it checks the option's type). */
function supportsTrackPromises() {
  try {
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
  als.run(probe, () =>
    Promise.resolve().then(() => {
      stop();
      if (seen === probe && als.getStore() === probe) {
        promiseHooksSound = true;
        if (hookEnabled) {
          switchHooks(false);
          outer.length = 0;
          switchHooks(true);
        }
      }
    }),
  );
}

function switchHooks(on) {
  if (!on) {
    everyKind.disable();
    withoutPromises?.disable();
    stopPromiseHooks?.();
    stopPromiseHooks = null;
  } else if (promiseHooksSound) {
    const v8 = require('node:v8');
    withoutPromises.enable();
    const stops = [v8.promiseHooks.onBefore(enter), v8.promiseHooks.onAfter(leave)];
    stopPromiseHooks = () => stops.forEach((stop) => stop());
  } else {
    everyKind.enable();
  }
}

let recordings = 0;
let labelsUsed = false;
let hookEnabled = false;
checkPromiseHooks();

// The hooks cost every async hop, so they run only while a profiler records and labels
// have been used at all.
function updateHook() {
  const want = recordings > 0 && labelsUsed;
  if (want === hookEnabled) return;
  hookEnabled = want;
  outer.length = 0;
  switchHooks(want);
  if (want) publish(currentStoreOfContext());
}

/** A recording starts on this thread; returns its token for `recordingBuilt`. */
function recordingStarted() {
  recordings++;
  updateHook();
  localRecordings++;
  if (!available) return 0;
  return native.labelsRecordingStarted();
}

/** A recording stopped sampling; its trace is still to be built. */
function recordingStopped() {
  recordings = Math.max(0, recordings - 1);
  updateHook();
}

/** The trace of the recording `token` was built (or never will be). */
function recordingBuilt(token) {
  if (available && token) native.labelsRecordingBuilt(token);
}

/** Before a trace is built: saves what a signal recorded since JS last looked. */
function labelsForTrace() {
  if (!available) return;
  noteSampled();
  save(currentStore);
  save(previousStore);
}

/** Counts for tests and diagnostics (process-wide). */
function labelStats() {
  return available ? native.labelStats() : { saved: 0, bytes: 0, dropped: 0, unbuilt: 0, prefetched: 0, prefetchHits: 0, records: 0 };
}

// --- label sets ----------------------------------------------------------------------

let nextId = 0;
let lastId = -1;

/** The next label-set id: from a block reserved from the process-wide counter. */
function newId() {
  if (nextId > lastId) {
    nextId = available ? native.reserveLabelIds(ID_BLOCK) : (lastId + 1 > 0 ? lastId + 1 : 1);
    lastId = nextId + ID_BLOCK - 1;
  }
  return nextId++;
}

function labelValue(fn, key, value) {
  switch (typeof value) {
    case 'string':
      break;
    case 'number':
    case 'bigint':
    case 'boolean':
      value = String(value);
      break;
    default:
      throw new TypeError(`${fn}: label ${JSON.stringify(key)} must be a string, number, bigint or boolean, got ${typeof value}`);
  }
  if (value.length > MAX_VALUE_LENGTH) {
    throw new RangeError(`${fn}: label ${JSON.stringify(key)} is ${value.length} characters; at most ${MAX_VALUE_LENGTH}`);
  }
  return value;
}

/** A store for `labels` merged over the current ones (null/undefined values remove a key). */
function storeWith(fn, labels) {
  if (labels === null || typeof labels !== 'object' || Array.isArray(labels)) {
    throw new TypeError(`${fn}: labels must be an object like { endpoint: 'GET /users/:id' }`);
  }
  const base = currentStoreOfContext().labels;
  const out = base === EMPTY.labels ? {} : { ...base };
  for (const key in labels) {
    if (!Object.hasOwn(labels, key)) continue;
    if (key.length === 0 || key.length > MAX_KEY_LENGTH) {
      throw new RangeError(`${fn}: label keys must be 1 to ${MAX_KEY_LENGTH} characters, got ${key.length}`);
    }
    // Assigning it would set the object's prototype instead of a label.
    if (key === '__proto__') throw new TypeError(`${fn}: "__proto__" cannot be a label key`);
    const value = labels[key];
    if (value === undefined || value === null) delete out[key];
    else out[key] = labelValue(fn, key, value);
  }
  let count = 0;
  for (const key in out) if (++count > MAX_KEYS) {
    throw new RangeError(`${fn}: at most ${MAX_KEYS} labels per set, got ${Object.keys(out).length}`);
  }
  if (count === 0) return EMPTY;
  return { id: newId(), labels: Object.freeze(out), flat: null, savedFor: -1 };
}

/** The labels in effect (a frozen object). */
function getLabels() {
  return currentStoreOfContext().labels;
}

/**
 * Runs `fn(...args)` with `labels` merged over the current labels; they follow every
 * async continuation `fn` starts. Returns what `fn` returns.
 */
function withLabels(labels, fn, ...args) {
  if (typeof fn !== 'function') {
    throw new TypeError(`withLabels: fn must be a function, got ${fn === null ? 'null' : typeof fn}`);
  }
  const store = storeWith('withLabels', labels);
  if (!labelsUsed) {
    labelsUsed = true;
    updateHook();
  }
  publish(store);
  try {
    return als.run(store, fn, ...args);
  } finally {
    publish(currentStoreOfContext());
  }
}

/** Merges `labels` over the current ones for the rest of the current async context. */
function setLabels(labels) {
  const store = storeWith('setLabels', labels);
  if (!labelsUsed) {
    labelsUsed = true;
    updateHook();
  }
  als.enterWith(store);
  publish(store);
}

module.exports = {
  withLabels,
  setLabels,
  getLabels,
  recordingStarted,
  recordingStopped,
  recordingBuilt,
  labelsForTrace,
  labelStats,
};
