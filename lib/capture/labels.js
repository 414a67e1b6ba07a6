'use strict';
// Sample labels: `withLabels({ endpoint, span_id }, fn)` runs fn with those labels merged
// over the current ones; AsyncLocalStorage carries them through async continuations.
//
// The signal handler cannot call into V8 to ask for the current store, so each thread
// publishes the id of its current label set in a cell the handler reads: withLabels and
// setLabels write it directly, and while a profiler records, an async_hooks `before` hook
// writes it on every async continuation switch (promise reactions, timers, immediates,
// nextTicks, I/O callbacks).
//
// Label sets live in their AsyncLocalStorage stores; most are never sampled. The handler
// leaves the id it recorded in the cell, and the next switch saves the labels of that
// (still current) store, so only sampled label sets are kept: bounded by the samples of
// unbuilt recordings, and dropped once those are built.

const { AsyncLocalStorage, createHook } = require('node:async_hooks');
const { native } = require('../native');
const { warnOnce } = require('../log');

const MAX_KEYS = 64;
const MAX_KEY_LENGTH = 256;
const MAX_VALUE_LENGTH = 4096;
/** Saved label sets kept at most (past it, the oldest are dropped and counted). */
const MAX_SAVED = 1 << 16;

const EMPTY = Object.freeze({ id: 0, labels: Object.freeze({}) });
const als = new AsyncLocalStorage();

// --- saved label sets ----------------------------------------------------------------

// id -> { labels, tag } of sampled label sets; `tag` is the count of recordings started
// when the set was last sampled: a recording started after that cannot reference it.
const saved = new Map();
const savedOrder = []; // [id, tag] in save order (stale entries are skipped)
let savedDropped = 0;
let started = 0; // recordings ever started on this thread
const unbuiltStarts = []; // `started` value of each unbuilt recording, ascending

function save(store) {
  if (store.id === 0) return;
  const entry = saved.get(store.id);
  if (entry !== undefined && entry.tag === started) return;
  if (entry === undefined && saved.size >= MAX_SAVED) {
    while (savedOrder.length && !dropSaved(savedOrder.shift()));
    savedDropped++;
  }
  saved.set(store.id, { labels: store.labels, tag: started });
  savedOrder.push([store.id, started]);
}

/** Drops the saved set of an order entry unless it was sampled again since. */
function dropSaved([id, tag]) {
  if (saved.get(id)?.tag !== tag) return false;
  saved.delete(id);
  return true;
}

/** Drops saved label sets that only built recordings could reference. */
function pruneSaved() {
  const oldest = unbuiltStarts.length ? unbuiltStarts[0] : Infinity;
  let n = 0;
  while (n < savedOrder.length && savedOrder[n][1] < oldest) dropSaved(savedOrder[n++]);
  if (n) savedOrder.splice(0, n);
}

// --- the published context ---------------------------------------------------------

let currentStore = EMPTY;
let previousStore = EMPTY;
// [context id, switch count, id the handler last recorded (0 once JS took note)]: a view
// of the native cell, or a plain array where Node refuses external buffers.
let cell = new Uint32Array(3);
let shared = false;

/** A signal recorded a context since JS last looked: keep its labels. */
function noteSampled() {
  const id = Atomics.exchange(cell, 2, 0);
  if (id === currentStore.id) save(currentStore);
  else if (id === previousStore.id) save(previousStore); // recorded as we switched
}

function publish(store) {
  if (store === currentStore) return;
  if (cell[2] !== 0) noteSampled();
  previousStore = currentStore;
  currentStore = store;
  cell[0] = store.id;
  cell[1]++;
  if (!shared) native.setThreadContext(store.id);
}

function initCell() {
  if (!native) {
    shared = true; // no addon (see native.js): labels ride AsyncLocalStorage alone
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
    shared = true; // nothing to call either
    warnOnce('labels', `selfprof: samples will carry no labels on this thread: ${err.message}`);
  }
}
initCell();

function currentStoreOfContext() {
  return als.getStore() ?? EMPTY;
}

// --- continuation tracking -----------------------------------------------------------

// On every async continuation, publish the store of the callback being entered. There is
// no `after` hook: it would double the per-hop cost, and until the next continuation only
// native work or idle time follows (idle samples carry no labels; see trace.rs).
const hook = createHook({
  before() {
    publish(als.getStore() ?? EMPTY);
  },
});

let recordings = 0;
let labelsUsed = false;
let hookEnabled = false;

// The hook costs every async hop, so it runs only while a profiler records and labels
// have been used at all.
function updateHook() {
  const want = recordings > 0 && labelsUsed;
  if (want === hookEnabled) return;
  hookEnabled = want;
  if (want) {
    hook.enable();
    publish(currentStoreOfContext());
  } else {
    hook.disable();
  }
}

/** A recording starts on this thread. */
function recordingStarted() {
  unbuiltStarts.push(++started);
  recordings++;
  updateHook();
  return started;
}

/** A recording stopped sampling; its trace is still to be built. */
function recordingStopped() {
  recordings = Math.max(0, recordings - 1);
  updateHook();
}

/** The trace of the recording `startedAs` was built (or never will be). */
function recordingBuilt(startedAs) {
  const i = unbuiltStarts.indexOf(startedAs);
  if (i >= 0) unbuiltStarts.splice(i, 1);
  pruneSaved();
}

/**
 * The labels of every context a trace built now can reference (the saved ones and the
 * current ones), as `[[id, labels], ...]` JSON.
 */
function labelsForTrace() {
  if (cell[2] !== 0) noteSampled();
  const contexts = new Map();
  for (const [id, { labels }] of saved) contexts.set(id, labels);
  contexts.set(currentStore.id, currentStore.labels);
  contexts.set(previousStore.id, previousStore.labels);
  contexts.delete(0);
  return JSON.stringify([...contexts]);
}

/** Counts for tests and diagnostics. */
function labelStats() {
  return { saved: saved.size, unbuilt: unbuiltStarts.length, dropped: savedDropped };
}

// --- label sets ----------------------------------------------------------------------

let nextId = 1;

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
    const value = labels[key];
    if (value === undefined || value === null) delete out[key];
    else out[key] = labelValue(fn, key, value);
  }
  let count = 0;
  for (const key in out) if (++count > MAX_KEYS) {
    throw new RangeError(`${fn}: at most ${MAX_KEYS} labels per set, got ${Object.keys(out).length}`);
  }
  if (count === 0) return EMPTY;
  const id = nextId;
  nextId = nextId >= 0xfffffffe ? 1 : nextId + 1;
  return { id, labels: Object.freeze(out) };
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
