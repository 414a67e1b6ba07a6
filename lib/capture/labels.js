'use strict';
// Sample labels: `withLabels({ endpoint, span_id }, fn)` runs fn with those labels merged
// over the current ones; AsyncLocalStorage carries them through async continuations.
// (Over 600 lines in one file on purpose: the cell, the hooks, the sampled-id queue and the
// stores share the state whose order of writes the signal handler relies on.)
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
//
// On Windows V8 samples without a signal (it suspends the thread; no handler runs), so
// while a recording of the thread is unbuilt (the cell's `logging`), each switch is logged
// natively with its time on V8's clock (src/capture/switches.rs), and its store saved: a
// build gives each sample the set switched to last before it, where that is certain.
//
// On Node >= 24 (and 22 with --experimental-async-context-frame) there is no hook at all
// once it has proved itself: AsyncLocalStorage keeps its stores in V8's
// continuation-preserved data, and the handler reads the current store's id there when
// the signal lands (src/capture/signal.rs: `frame_context`). It pushes the ids it records
// to a queue in the cell with where each store is, which JS drains once 64 are queued (at
// the next new label set), every second and before a trace is built, getting the stores
// back from the native side to save their labels in one native call.

const { AsyncLocalStorage, AsyncResource, createHook, executionAsyncResource } = require('node:async_hooks');
const { native } = require('../native');
const { warnOnce, envSwitchOn } = require('../log');
const { watchRequests, claimRequest } = require('../integrations/http-requests');

const MAX_KEYS = 64;
const MAX_KEY_LENGTH = 256;
const MAX_VALUE_LENGTH = 4096;
/** Ids reserved from the process-wide counter at a time. */
const ID_BLOCK = 1024;

const EMPTY = Object.freeze({ id: 0, labels: Object.freeze({}), flat: null, savedFor: -1 });
// `any`: it reads AsyncLocalStorage's internal `kResourceStore` (Node < 24), which Node's types leave out.
const als = /** @type {any} */ (new AsyncLocalStorage());

// --- the published context ---------------------------------------------------------

let currentStore = EMPTY;
let previousStore = EMPTY;
// The thread's native cell (src/capture/signal.rs `slot`): a view of it, or a plain array
// where Node refuses external buffers (then the native calls below stand in for it).
const SLOT = native?.cellSlots?.() ?? { context: 0, generation: 1, sampled: 2, recordings: 3 };
/** How samples get their labels: 'signal', 'time' (switches logged with their time:
 * Windows), or 'none' (Windows, where V8's sample clock cannot be read here). */
const JOIN = native?.labelJoin?.() ?? 'signal';
let cell = new Uint32Array(8);
let shared = false;
let localRecordings = 0;

/** Recordings started on this thread (by any copy of this module): a save is current
 * for every recording started before it. */
const recordingsStarted = () => (shared ? cell[SLOT.recordings] : localRecordings);

/** Keeps a sampled store's labels for the traces that may reference it. */
function save(store) {
  saveEach([store]);
}

/** `[key, value, key, value, ...]` of a frozen label set. */
function flatOf(labels) {
  const flat = [];
  for (const key in labels) flat.push(key, labels[key]);
  return flat;
}

/** Keeps the labels of sampled `stores` (one native call for all of them). */
function saveEach(stores) {
  const stamp = recordingsStarted();
  const taken = [];
  const ids = [];
  const lengths = [];
  const flat = [];
  for (let store of stores) {
    // A context's store that shares its request's id is saved as the first of them.
    if (store.first !== undefined) store = store.first;
    // Marked now: a store queued twice in one drain goes once.
    if (store.id === 0 || store.savedFor === stamp) continue;
    labelsOf(store);
    store.flat ??= flatOf(store.labels);
    taken.push([store, store.savedFor]);
    store.savedFor = stamp;
    ids.push(store.id);
    lengths.push(store.flat.length);
    for (let i = 0; i < store.flat.length; i++) flat.push(store.flat[i]);
  }
  if (ids.length === 0) return;
  try {
    native.saveLabelSets(ids, lengths, flat);
  } catch (err) {
    for (const [store, before] of taken) store.savedFor = before;
    warnOnce('labels-save', `selfprof: a label set could not be kept: ${err.message}`);
    return;
  }
  for (const [store] of taken) {
    const derived = store.derived;
    if (derived?.open && !derived.saved.includes(store)) {
      derived.saved.push(store);
      openDerived.add(derived);
      if (openDerived.size > MAX_OPEN_DERIVED) closeDerived(openDerived.values().next().value, false);
    }
  }
}

/** A signal recorded a context since JS last looked: keep its labels. */
function noteSampled() {
  if (frameRead) return drainQueue();
  notePublished();
}

/** The same where the handler reads the published id (hooks). */
function notePublished() {
  const id = shared ? Atomics.exchange(cell, SLOT.sampled, 0) : native.takeSampledContext();
  if (id === 0) return;
  if (id === currentStore.id) save(currentStore);
  else if (id === previousStore.id) save(previousStore); // recorded as we switched
  else if (shared) Atomics.compareExchange(cell, SLOT.sampled, 0, id); // another copy's: leave it
}

function publish(store) {
  if (store === currentStore || frameRead) return;
  if (cell[SLOT.sampled] !== 0 || !shared) noteSampled();
  previousStore = currentStore;
  currentStore = store;
  cell[SLOT.context] = store.id;
  cell[SLOT.generation]++;
  if (!shared) native.setThreadContext(store.id);
  // Where samples are joined by time: logged (and its labels kept) while a recording of
  // this thread is unbuilt. (Without a view of the cell, the native side checks.)
  if (JOIN === 'time' && (!shared || cell[SLOT.logging] !== 0) && native.logSwitch(store.id)) save(store);
}

// --- reading the context frame (Node >= 24) ------------------------------------------

/** The handler reads this thread's frame (no hooks). */
let frameRead = false;
/** Why it does not, once known: undefined until checked. */
let frameReason;
let drainTimer = null;

/** Ids queued before a new label set drains them: one drain per batch, not per sample. */
const DRAIN_AT = 64;
/** How many ids the handler has queued and JS not drained. */
const queued = () => (cell[SLOT.queueHead] - cell[SLOT.queueTail]) >>> 0;

/** Saves the labels of the stores the handler recorded since JS last looked: the native
 * side hands back the stores themselves (`[id, store, ...]`), so no set is kept after its
 * request for an id to be looked up later. */
function drainQueue() {
  if (queued() === 0) return;
  const drained = native.frameDrain();
  const stores = [];
  for (let i = 0; i < drained.length; i += 2) {
    const store = drained[i + 1];
    // Only this module's stores are in its AsyncLocalStorage; ids are never reused.
    if (store !== undefined && store.id === drained[i]) stores.push(store);
  }
  saveEach(stores);
}

/**
 * Sets up the handler to read this thread's frame and proves it on this Node before it is
 * trusted: stores entered as withLabels enters them and by run(), nested, beside other
 * AsyncLocalStorages, across an await and a timer, must read back as themselves, and no
 * store as none. Hooks label samples until then, and for good if anything differs.
 * `SELFPROF_CONTEXT_FRAME=0` keeps hooks.
 */
function checkFrame() {
  if (frameReason !== undefined) return;
  frameReason = 'checking';
  const fail = (why) => {
    frameReason = why;
    // Only a reader this copy set up is turned off: another copy's (jest's registry, a hot
    // reload) keeps reading its own frame.
    if (set) native.frameEnable(false);
    frameRead = false;
  };
  let set = false;
  if (JOIN !== 'signal') return fail('V8 samples without a signal here: no handler reads the frame');
  if (!envSwitchOn('SELFPROF_CONTEXT_FRAME')) return fail(`SELFPROF_CONTEXT_FRAME=${process.env.SELFPROF_CONTEXT_FRAME.trim()}`);
  if (typeof als.kResourceStore === 'symbol') return fail('AsyncLocalStorage runs on async_hooks here (Node < 24)');
  if (!shared || typeof native.frameSetUp !== 'function') return fail('the native cell is not shared');
  try {
    native.frameSetUp(process.versions.v8, als, new Map());
    set = true;
  } catch (err) {
    return fail(err.message);
  }
  // Probes hold no labels: a sample of this check's own code is saved with none.
  const probe = () => ({ id: newId(), labels: EMPTY.labels, flat: null, savedFor: -1 });
  const [a, b, c] = [probe(), probe(), probe()];
  const others = [new AsyncLocalStorage(), new AsyncLocalStorage()];
  const reads = [];
  const expect = (what, want) => reads.push([what, native.frameRead(), want]);
  // The handler's own read and queue, drained: the store itself must come back.
  const drained = (what, want) => {
    native.frameSample();
    const got = native.frameDrain();
    reads.push([`${what} (drained)`, got[1] === want ? want.id : got[0] ?? 0, want.id]);
  };
  als.run(EMPTY, () => {
    expect('no store', 0);
    // Entered as withLabels enters it, then by run() inside.
    runInFrame(a, () => {
      expect('entered', a.id);
      drained('entered', a);
      others[0].run({}, () => als.run(b, () => others[1].run(1, () => expect('nested beside others', b.id))));
      expect('back out', a.id);
    }, undefined, []);
    expect('left', 0);
  });
  const failed = () => reads.find(([, got, want]) => got !== want);
  if (failed()) return fail(`read ${failed()[1]} for ${failed()[0]}, not ${failed()[2]}`);
  als.run(c, async () => {
    await null;
    expect('after await', c.id);
    setTimeout(() => {
      expect('in a timer', c.id);
      drained('in a timer', c);
      if (failed()) return fail(`read ${failed()[1]} for ${failed()[0]}, not ${failed()[2]}`);
      frameReason = null;
      // The handler reads the frame from here; what it recorded from the published id
      // until now (this callback's own probe) is saved first, or its sample would be lost.
      native.frameEnable(true);
      notePublished();
      frameRead = true;
      updateHook();
    }, 0).unref();
  });
}

/** How samples get their labels on this thread (`trace.metadata.labelPath`). */
function labelPath() {
  if (JOIN !== 'signal') return 'switch-log';
  return frameRead ? 'context-frame' : 'async-hooks';
}

/** This thread's label path, why it is not the frame (once checked), and whether hooks
 * run now: for service mode's log line, tests and diagnostics. */
function labelState() {
  return { path: labelPath(), reason: frameReason ?? undefined, hooks: hookEnabled, idsNotQueued: native?.frameQueueFull?.() ?? 0 };
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
    view[SLOT.context] = 0x5e1f;
    shared = native.readThreadContext() === 0x5e1f;
    view[SLOT.context] = 0;
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

/** Labels are in use (the first set entered): the hooks may be needed from now on. */
function useLabels() {
  if (labelsUsed) return;
  labelsUsed = true;
  updateHook();
}

// The hooks cost every async hop, so they run only while a profiler records and labels
// have been used at all, and not once the handler reads the frame.
function updateHook() {
  const active = recordings > 0 && labelsUsed;
  if (active && JOIN === 'none') {
    warnOnce(
      'labels-clock',
      'selfprof: samples carry no labels on this machine: V8 stamps them with a millisecond clock here (Windows without an invariant TSC)',
    );
  }
  if (active && frameReason === undefined && available) checkFrame();
  const want = active && !frameRead;
  if (frameRead) {
    if (active && drainTimer === null) {
      drainTimer = setInterval(drainQueue, 1000);
      drainTimer.unref();
    } else if (!active && drainTimer !== null) {
      clearInterval(drainTimer);
      drainTimer = null;
    }
  }
  if (want === hookEnabled) return;
  hookEnabled = want;
  outer.length = 0;
  switchHooks(want);
  if (want) publish(currentStoreOfContext());
  else if (frameRead) {
    // Hooks off: the published context goes, so the handler reads the frame alone.
    currentStore = previousStore = EMPTY;
    cell[SLOT.context] = 0;
    cell[SLOT.generation]++;
  }
}

/** A recording starts on this thread; returns its token for `recordingBuilt`. */
function recordingStarted() {
  recordings++;
  updateHook();
  localRecordings++;
  if (!available) return 0;
  const token = native.labelsRecordingStarted();
  // The set in effect now was logged as the recording's first switch: keep its labels.
  if (JOIN === 'time') save(currentStore);
  return token;
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

/** Before a trace is built: saves what a signal recorded since JS last looked, and brings
 * the sampled labels of spans still in flight up to what is known now. */
function labelsForTrace() {
  if (!available) return;
  noteSampled();
  save(currentStore);
  save(previousStore);
  for (const derived of openDerived) updateDerived(derived);
}

/** `labelsForTrace`, where a failure is left for a later call to report. */
function tryLabelsForTrace() {
  try {
    labelsForTrace();
  } catch {
    // The build's own call reports it.
  }
}

/** Counts for tests and diagnostics (process-wide). */
function labelStats() {
  return available ? native.labelStats() : { saved: 0, bytes: 0, dropped: 0, unbuilt: 0, prefetched: 0, prefetchHits: 0, records: 0 };
}

// --- labels derived from a span ------------------------------------------------------
//
// A tracing integration labels a request from its root span when the span starts, but
// some of those labels are known only later: the route is set once the framework has
// routed the request (OpenTelemetry renames the span at its end; dd-trace sets the
// resource then). Samples are joined to label sets when a trace is built, so a set can
// still be completed after its samples were taken: the integration gives a `Derived`
// that reads the span as it is now, marks it as the span changes (`markDerived`), and
// updates it when next needed (a set saved, the labels asked for, a trace built) and when
// it ends. The sets already saved for samples are then amended natively (traces not yet
// built take the new labels), and the sets saved later carry the new values. Only stores made
// in the request's own context (its store, and stores merged over it) take a span's
// values, so no sample gets another request's.

/** Spans in flight whose labels were sampled: brought up to date when a trace is built. */
const openDerived = new Set();
/** Past this many, the oldest is left with what it had (a span that never ends). */
const MAX_OPEN_DERIVED = 16384;

/** A label value a span gives: a non-empty string, or nothing ("undefined" is nothing). */
function derivedValue(value) {
  if (typeof value !== 'string' || value === '' || value === 'undefined') return undefined;
  return value.length > MAX_VALUE_LENGTH ? value.slice(0, MAX_VALUE_LENGTH) : value;
}

/** Labels of a span, read with `current()` now and whenever `updateDerived` is called. */
function derivedLabels(keys, current) {
  const derived = { keys, current, values: null, version: 0, saved: [], open: true, stale: false };
  derived.values = readDerived(derived) ?? {};
  return derived;
}

function readDerived(derived) {
  let read;
  try {
    read = derived.current();
  } catch (err) {
    warnOnce('labels-derived', `selfprof: could not read a span's labels: ${err.message}`);
    return null;
  }
  const values = {};
  for (const key of derived.keys) {
    const value = derivedValue(read?.[key]);
    if (value !== undefined) values[key] = value;
  }
  return values;
}

/** The span changed: its stores' labels follow, those already sampled amended natively. */
function updateDerived(derived) {
  if (!derived?.open) return;
  derived.stale = false;
  const values = readDerived(derived);
  if (values === null || derived.keys.every((k) => values[k] === derived.values[k])) return;
  derived.values = values;
  derived.version++;
  for (const store of derived.saved) {
    const before = store.labels;
    labelsOf(store);
    if (store.labels === before) continue;
    store.flat = flatOf(store.labels);
    try {
      native.amendLabels(store.id, store.flat);
    } catch (err) {
      warnOnce('labels-save', `selfprof: a label set could not be kept: ${err.message}`);
    }
  }
}

/**
 * The span may have changed: it is read again when its labels are next needed (a sampled
 * set saved, the labels asked for, a trace built, the span's end), not at each of the
 * many changes a tracer makes to a request's span.
 */
function markDerived(derived) {
  if (derived?.open) derived.stale = true;
}

/** The span ended: its final state is what its samples carry. */
function closeDerived(derived, update = true) {
  if (!derived?.open) return;
  if (update) updateDerived(derived);
  derived.open = false;
  derived.saved = [];
  openDerived.delete(derived);
}

/**
 * The derived labels of an integration's request record (`{ derived, ended, endpoint }`),
 * made the first time its labels are needed: `endpointOf(root)` reads the endpoint from
 * the span while the request runs; once it ended, the endpoint it ended with.
 */
function requestDerived(root, endpointOf) {
  if (root.derived === null) {
    root.derived = derivedLabels(['endpoint'], () => ({ endpoint: root.ended ? root.endpoint : endpointOf(root) }));
    if (root.ended) closeDerived(root.derived, false);
  }
  return root.derived;
}

/** The request's span ended: its samples carry the endpoint it ended with (returned), its
 * store leaves the connection it was entered on (`leaveSpanLabels`). */
function endRequest(root, endpointOf) {
  leaveSpanLabels(root);
  closeDerived(root.derived);
  root.endpoint = root.derived !== null ? root.derived.values.endpoint : derivedValue(endpointOf(root));
  root.ended = true;
  return root.endpoint;
}

/** `store`'s labels, with the current values of the span it derives from. */
function labelsOf(store) {
  if (store.labels === null) resolveContextStore(store);
  const derived = store.derived;
  if (derived === undefined) return store.labels;
  if (derived.stale) updateDerived(derived);
  if (store.derivedVersion === derived.version) return store.labels;
  const out = { ...store.labels };
  for (const key of store.derivedKeys) {
    const value = derived.values[key];
    if (value === undefined) delete out[key];
    else out[key] = value;
  }
  store.labels = Object.freeze(out);
  store.flat = null;
  store.derivedVersion = derived.version;
  return store.labels;
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

/** A store for `labels` merged over the current ones (null/undefined values remove a key).
 * Labels the current store derives from a span, and that `labels` leave alone, stay
 * derived from it. */
function storeWith(fn, labels) {
  if (labels === null || typeof labels !== 'object' || Array.isArray(labels)) {
    throw new TypeError(`${fn}: labels must be an object like { endpoint: 'GET /users/:id' }`);
  }
  const current = currentStoreOfContext();
  const base = labelsOf(current);
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
  const from = current.derived;
  const keys = from === undefined ? undefined : current.derivedKeys.filter((k) => !Object.hasOwn(labels, k));
  let count = 0;
  // eslint-disable-next-line no-unused-vars -- counts the keys without building Object.keys' array
  for (const key in out) if (++count > MAX_KEYS) {
    throw new RangeError(`${fn}: at most ${MAX_KEYS} labels per set, got ${Object.keys(out).length}`);
  }
  if (count === 0 && current.ctx === undefined) return EMPTY;
  // `id` first: the signal handler reads it as the object's first in-object property.
  const store = { id: newId(), labels: Object.freeze(out), flat: null, savedFor: -1 };
  // A tracer's context in effect stays in effect inside (see contextStore).
  if (current.ctx !== undefined) store.ctx = current.ctx;
  if (frameRead && queued() >= DRAIN_AT) drainQueue();
  if (from !== undefined && keys.length > 0) {
    store.derived = from;
    store.derivedKeys = keys;
    store.derivedVersion = from.version;
  }
  return store;
}

// --- a tracer's contexts as stores ---------------------------------------------------
//
// Where a tracer's context manager runs on an AsyncLocalStorage, an integration can have
// its contexts ride selfprof's instead (integrations/otel.js): each context entered is a
// store `{ id, ctx }` over the current one, and one frame entry serves the tracer and the
// labels. What labels the context stands for is worked out (`resolveContext`) only for the
// stores a sample took, when they are saved, or when the labels are asked for.

/** `ctx` -> `{ labels, derived }` of the request it belongs to, or null: the integration's. */
let resolveContext = null;
/** `ctx` -> what stands for its request (the same object for every context of it), or
 * undefined: the integration's. */
let requestOfContext = null;

/** Sets how a tracer's context gives its labels, and its request (see `contextStore`). */
function setContextResolver(resolve, requestOf) {
  resolveContext = resolve;
  requestOfContext = requestOf;
}

/** A store for a tracer's context `ctx` entered over the current store (its labels found
 * later, `resolveContextStore`). */
function contextStore(ctx) {
  const current = currentStoreOfContext();
  if (current.ctx === ctx) return current;
  useLabels();
  // Its labels are its base's with the request's over them: the base is the store of the
  // nearest withLabels/setLabels around it, never another context's.
  const base = current.ctxOnly === true ? current.base : current;
  const request = requestOfContext === null ? undefined : requestOfContext(ctx);
  // Another context of the same request over the same base (a tracer enters one for every
  // bound callback) has the same labels: it takes the first one's id, saved once.
  const first = request !== undefined && current.ctxOnly === true && current.request === request ? (current.first ?? current) : undefined;
  return { id: first === undefined ? newId() : first.id, labels: null, flat: null, savedFor: -1, ctx, base, ctxOnly: true, request, first };
}

/** `store` derives its labels from the span `from` derives from, if any. */
function deriveAs(store, from) {
  if (from.derived === undefined) return;
  store.derived = from.derived;
  store.derivedKeys = from.derivedKeys;
  store.derivedVersion = from.derivedVersion;
}

function resolveContextStore(store) {
  if (store.first !== undefined) {
    store.labels = labelsOf(store.first);
    deriveAs(store, store.first);
    return;
  }
  const base = labelsOf(store.base);
  let found = null;
  try {
    if (store.resolve !== undefined) found = store.resolve(store.span);
    else if (resolveContext !== null) found = resolveContext(store.ctx);
  } catch (err) {
    warnOnce('labels-derived', `selfprof: could not read a span's labels: ${err.message}`);
  }
  if (found === null) {
    store.labels = base;
    deriveAs(store, store.base);
    return;
  }
  const { labels, derived } = found;
  const out = base === EMPTY.labels ? {} : { ...base };
  for (const key of derived.keys) delete out[key];
  for (const key in labels) {
    const value = derivedValue(labels[key]);
    if (value === undefined) delete out[key];
    else out[key] = value;
  }
  Object.assign(out, derived.values);
  store.labels = Object.freeze(out);
  store.derived = derived;
  store.derivedKeys = derived.keys;
  store.derivedVersion = derived.version;
}

/** Whether AsyncLocalStorage keeps its stores in V8's continuation-preserved data (the
 * async context frame: Node >= 24, 22 with --experimental-async-context-frame), where each
 * store entered copies the frame's Map: where a tracer's contexts riding selfprof's store
 * saves a copy per request. */
function storesInFrame() {
  return typeof als.kResourceStore !== 'symbol';
}

/** The tracer's context of the current store, if one rides selfprof's (see `contextStore`). */
function currentContext() {
  return currentStoreOfContext().ctx;
}

/** Runs `fn` (with `thisArg` and `args`) in tracer context `ctx`. */
function runInContext(ctx, fn, thisArg, args) {
  const store = contextStore(ctx);
  if (!frameRead) return runWithStore(store, fn, thisArg, args);
  // As the manager's own with(): one run() per context (many a request, from bound
  // callbacks), where an AsyncResource scope each would cost more than the copy it saves.
  return als.run(store, thisArg == null ? fn : fn.bind(thisArg), ...args);
}

/** Enters tracer context `ctx` for the rest of the current async context; returns what
 * puts the store before it back. */
function enterContext(ctx) {
  const before = currentStoreOfContext();
  const store = contextStore(ctx);
  als.enterWith(store);
  publish(store);
  return () => {
    als.enterWith(before);
    publish(before);
  };
}

/** The labels in effect (a frozen object). */
function getLabels() {
  return labelsOf(currentStoreOfContext());
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
  useLabels();
  return runWithStore(store, fn, undefined, args);
}

// Where the handler reads the frame, AsyncLocalStorage keeps its stores in a Map per async
// context frame, and run() copies the current one twice: once with the store, once more to
// put the prior store back. An AsyncResource's scope puts the caller's frame object itself
// back when it ends, so entering the store inside one copies the frame once. (Not with
// selfprof's hooks: their before/after would publish around the resource's scope.)
const SCOPE_OPTIONS = { requireManualDestroy: true };
function enterAndCall(store, fn, thisArg, args) {
  als.enterWith(store);
  return args.length === 0 ? fn.call(thisArg) : fn.apply(thisArg, args);
}
/** Runs `fn` with `store` current, where the handler reads the frame. */
function runInFrame(store, fn, thisArg, args) {
  // Created here, it holds the caller's frame, so entering its scope changes nothing.
  const scope = new AsyncResource('selfprof.labels', SCOPE_OPTIONS);
  try {
    return scope.runInAsyncScope(enterAndCall, null, store, fn, thisArg, args);
  } finally {
    // Its scope is over: a destroy hook (another tool's) hears of it now, not at a GC.
    scope.emitDestroy();
  }
}

/** Merges `labels` over the current ones for the rest of the current async context. */
function setLabels(labels) {
  enterLabels('setLabels', labels);
}

/**
 * The tracing integrations' `setLabels`: labels the rest of the current async context with
 * a request's span, and the HTTP request being handled, if any, runs its events with them
 * too. The labels are worked out only when needed (a sample took the store, the labels
 * are asked for, labels are merged over them): `resolve(span)` gives them then, as
 * `{ labels, derived }` (`derivedLabels`) or null. Most requests are never sampled, and
 * their span is then never read. `span` is the integration's record of the span;
 * `leaveSpanLabels(span)` as the span ends.
 */
function enterSpanLabels(span, resolve) {
  watchSpanRequests();
  useLabels();
  const current = currentStoreOfContext();
  // Its labels are its base's with the span's over them. Another span's store in effect
  // here (a consumer's loop starts each message where the last one's labels are) gives
  // way to its own base: the span's labels replace that span's, and a chain of them would
  // keep every earlier request alive.
  const base = current.resolve !== undefined ? current.base : current;
  const store = { id: newId(), labels: null, flat: null, savedFor: -1, base, span, resolve };
  // A tracer's context in effect stays in effect inside (see contextStore).
  if (current.ctx !== undefined) store.ctx = current.ctx;
  if (frameRead && queued() >= DRAIN_AT) drainQueue();
  if (typeof als.kResourceStore === 'symbol') {
    // AsyncLocalStorage on async_hooks (Node < 24) keeps the store on the resource being
    // run, which for a request is its connection's: note it, to take it back at the span's
    // end, or the next request on the connection starts with this one's.
    const resource = executionAsyncResource();
    span.entered = { resource, store, outer: resource[als.kResourceStore] };
  }
  als.enterWith(store);
  // Claimed now, where the frame holds the store: on the frame path the request's events
  // run in this frame (http-requests.js).
  claimRequest(store, frameRead);
  publish(store);
}

/** The span `enterSpanLabels` labeled with ended. */
function leaveSpanLabels(span) {
  const entered = span.entered;
  if (entered === undefined) return;
  span.entered = undefined;
  if (entered.resource[als.kResourceStore] === entered.store) {
    entered.resource[als.kResourceStore] = entered.outer;
    publish(currentStoreOfContext());
  }
}

/** Starts watching HTTP requests for `enterSpanLabels`: an integration calls it as it is set
 * up, so that its first request's events are bound too (http-requests.js). */
function watchSpanRequests() {
  watchRequests(runWithStore);
}

/** Runs `fn` with `store` current: withLabels, and the integrations' request events. */
function runWithStore(store, fn, thisArg, args) {
  if (frameRead) return runInFrame(store, fn, thisArg, args);
  publish(store);
  try {
    return thisArg === undefined ? als.run(store, fn, ...args) : als.run(store, () => fn.apply(thisArg, args));
  } finally {
    publish(currentStoreOfContext());
  }
}

function enterLabels(fn, labels) {
  const store = storeWith(fn, labels);
  useLabels();
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
  tryLabelsForTrace,
  labelStats,
  labelPath,
  labelState,
  enterSpanLabels,
  leaveSpanLabels,
  watchSpanRequests,
  derivedLabels,
  derivedValue,
  requestDerived,
  endRequest,
  markDerived,
  closeDerived,
  setContextResolver,
  storesInFrame,
  currentContext,
  runInContext,
  enterContext,
};
