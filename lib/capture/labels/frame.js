'use strict';
// Reading the label set from the async context frame (Node >= 24, and 22 with
// --experimental-async-context-frame): no hook at all once the reader has proved itself.
// AsyncLocalStorage keeps its stores in V8's continuation-preserved data, and the handler
// reads the current store's id there when the signal lands (src/capture/signal.rs:
// `frame_read`), and the contexts of the tracers whose keys it was given (tracers.js). It
// pushes what it records to a queue in the cell with where each store is, which JS drains
// once 64 are queued (at the next new label set or request), every second and before a
// trace is built, getting the stores back from the native side to save their labels in one
// native call.

const { AsyncLocalStorage } = require('node:async_hooks');
const { native } = require('../../native');
const { warnOnce, envSwitchOn } = require('../../log');
const { EMPTY, als, SLOT, JOIN, cell, shared, available, path, newId, ID_BLOCK, recordingsStarted } = require('./thread');
const { saveEach, saveAliases } = require('./kept');
const { notePublished, aside, runInFrame } = require('./switching');
const { TRACER_KEYS, tracers, pairStore, pairRequest } = require('./tracers');

/** Ids queued before a new label set drains them: one drain per batch, not per sample. */
const DRAIN_AT = 64;
/** How many ids the handler has queued and JS not drained. */
const queued = () => (cell[SLOT.queueHead] - cell[SLOT.queueTail]) >>> 0;
/** Elements per drained id: the id, then its store under each key. */
const STRIDE = native?.frameDrainStride?.() ?? 2;

/** A signal recorded a context since JS last looked: keep its labels. */
function noteSampled() {
  if (path.frameRead) return drainQueue();
  notePublished();
}

/** Drains the queue where it holds a batch: the callers make new sets or requests. */
function drainIfBatched() {
  if (path.frameRead && queued() >= DRAIN_AT) drainQueue();
}

/** The probes a check runs: their drained entries are the check's, never saved. */
const probes = new Set();

/**
 * Saves the labels of what the handler recorded since JS last looked: the native side
 * hands back the stores themselves (`[id, store, tracer store, ...]`), so no set is kept
 * after its request for an id to be looked up later. An entry whose store was there but
 * could not be kept (null) is not saved: its samples carry no labels rather than partial
 * ones. Returns the drained entries.
 */
function drainQueue() {
  if (queued() === 0) return [];
  const drained = native.frameDrain();
  refillIds();
  const stores = [];
  // Pairs of one request (and one selfprof set) have the same labels: the first is saved,
  // the others alias it (kept.js), in this drain and across drains while no recording
  // started (`lastPair`).
  const aliases = [];
  const firsts = new Map();
  for (let i = 0; i < drained.length; i += STRIDE) {
    const id = drained[i];
    const store = drained[i + 1];
    let inContext = false;
    let lost = store === null;
    for (let k = 2; k < STRIDE; k++) {
      inContext ||= drained[i + k] !== undefined;
      lost ||= drained[i + k] === null || probes.has(drained[i + k]);
    }
    if (lost || probes.has(store)) continue;
    if (!inContext) {
      // Only this module's stores are in its AsyncLocalStorage; ids are never reused.
      if (store !== undefined && store.id === id) stores.push(store);
      continue;
    }
    // selfprof's set must be this module's, as read (its own id is not the pair's).
    if (store !== undefined && (typeof store.id !== 'number' || store.labels === undefined)) continue;
    const contexts = [undefined, undefined, undefined];
    for (const k of TRACER_KEYS) contexts[k] = drained[i + 1 + k];
    const base = store ?? EMPTY;
    const pair = pairStore(id, base, contexts);
    const of = pairRequest(contexts);
    if (of === null) {
      stores.push(pair);
      continue;
    }
    let byRequest = firsts.get(base);
    if (byRequest === undefined) firsts.set(base, (byRequest = new Map()));
    const request = of.request ?? NO_REQUEST;
    const first = byRequest.get(request) ?? (base === EMPTY && of.request !== undefined ? lastPair.get(of.request) : undefined);
    if (first !== undefined && first.stamp === recordingsStarted()) {
      aliases.push([pair, first.store]);
      continue;
    }
    const entry = { store: pair, stamp: recordingsStarted() };
    byRequest.set(request, entry);
    if (base === EMPTY && of.request !== undefined) lastPair.set(of.request, entry);
    stores.push(pair);
  }
  saveEach(stores);
  saveAliases(aliases);
  return drained;
}

/** The key of pairs outside any request (`pairRequest`). */
const NO_REQUEST = {};
/** A request's first pair saved with no selfprof set, and the recordings started then:
 * its later pairs alias it while no recording has started since. */
const lastPair = new WeakMap();

/** Ids the handler may give pairs (src/capture/signal.rs `FRESH_NEXT`): a block reserved
 * whenever fewer than half of one are left. */
function refillIds() {
  if (!anyKeyRead || cell[SLOT.freshEnd] - cell[SLOT.freshNext] >= ID_BLOCK / 2) return;
  const first = native.reserveLabelIds(ID_BLOCK);
  // A signal between these writes sees no ids, never a range that is not this thread's.
  cell[SLOT.freshEnd] = 0;
  cell[SLOT.freshNext] = first;
  cell[SLOT.freshEnd] = first + ID_BLOCK;
}

/**
 * Sets up the handler to read this thread's frame and proves it on this Node before it is
 * trusted: stores entered as withLabels enters them and by run(), nested, beside other
 * AsyncLocalStorages, across an await and a timer, must read back as themselves, and no
 * store as none. Hooks label samples until then, and for good if anything differs.
 * `SELFPROF_CONTEXT_FRAME=0` keeps hooks. `ready()` runs once it reads.
 */
function checkFrame(ready) {
  if (path.frameReason !== undefined) return;
  path.frameReason = 'checking';
  let set = false;
  const fail = (why) => {
    path.frameReason = why;
    // Only a reader this copy set up is turned off: another copy's (jest's registry, a hot
    // reload) keeps reading its own frame.
    if (set) native.frameEnable(false);
    path.frameRead = false;
  };
  if (!available) return fail('labels are not kept on this thread');
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
    runInFrame(
      a,
      () => {
        expect('entered', a.id);
        drained('entered', a);
        others[0].run({}, () => als.run(b, () => others[1].run(1, () => expect('nested beside others', b.id))));
        expect('back out', a.id);
      },
      undefined,
      [],
    );
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
      path.frameReason = null;
      // The handler reads the frame from here; what it recorded from the published id
      // until now (this callback's own probe) is saved first, or its sample would be lost.
      native.frameEnable(true);
      notePublished();
      path.frameRead = true;
      readTracerKeys();
      ready();
    }, 0).unref();
  });
}

// --- tracers' keys -------------------------------------------------------------------

/** Whether the handler reads any tracer's key on this thread (then it needs ids). */
let anyKeyRead = false;

/**
 * Gives the handler the key of each registered tracer it does not read yet, and proves
 * each on this Node before it is trusted: a context the tracer's AsyncLocalStorage enters
 * (by run(), beside selfprof's set, across an await) must come back from the handler's
 * read as itself, and none where it entered none. Until then, and for good if anything
 * differs, the tracer's integration labels its requests with selfprof's own sets.
 */
function readTracerKeys() {
  if (!path.frameRead) return;
  for (const k of TRACER_KEYS) {
    const t = tracers[k];
    if (t === null || t.read || t.checking || t.failed) continue;
    t.checking = true;
    // In a scope of its own: its run()s leave no key in the caller's frame (switching.js).
    aside(() => proveTracerKey(k, t)).then(
      (why) => {
        t.checking = false;
        if (why === null) return;
        t.failed = why;
        native.frameSetTracer(k, null);
        warnOnce(`labels-tracer-${t.name}`, `selfprof: ${t.name}'s contexts are not read from the async context frame here (${why}); its requests are labeled with selfprof's own sets`);
      },
      () => {},
    );
  }
}

/** Proves tracer `t`'s key `k` (see `readTracerKeys`): null once it reads, else why not. */
async function proveTracerKey(k, t) {
  try {
    native.frameSetTracer(k, t.als);
  } catch (err) {
    return err.message;
  }
  anyKeyRead = true;
  refillIds();
  const probe = Object.freeze({ selfprofProbe: k });
  probes.add(probe);
  try {
    // One read as the handler reads, drained with what signals queued meanwhile (saved as
    // usual; the probe's entries are not).
    const read = () => {
      drainQueue();
      native.frameSample();
      return drainQueue();
    };
    const sample = () => {
      const got = read();
      for (let i = 0; i < got.length; i += STRIDE) if (got[i + 1 + k] === probe) return true;
      return false;
    };
    const none = () => {
      const got = read();
      for (let i = 0; i < got.length; i += STRIDE) if (got[i + 1 + k] !== undefined) return false;
      return true;
    };
    const set = { id: newId(), labels: EMPTY.labels, flat: null, savedFor: -1 };
    probes.add(set);
    const inside = t.als.run(probe, () => sample());
    const beside = runInFrame(set, () => t.als.run(probe, () => sample()), undefined, []);
    const afterAwait = await t.als.run(probe, async () => {
      await null;
      return sample();
    });
    const outside = t.als.run(undefined, () => none());
    probes.delete(set);
    if (!inside) return 'its context read back as another';
    if (!beside) return "its context read back as another beside selfprof's set";
    if (!afterAwait) return 'its context read back as another after an await';
    if (!outside) return 'a context read where it entered none';
  } finally {
    probes.delete(probe);
  }
  t.read = true;
  return null;
}

module.exports = { DRAIN_AT, queued, noteSampled, drainIfBatched, drainQueue, checkFrame, readTracerKeys };
