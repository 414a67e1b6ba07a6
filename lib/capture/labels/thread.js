'use strict';
// This thread's label context as the signal handler sees it: selfprof's AsyncLocalStorage,
// whose stores are label sets (`{ id, labels, ... }`, `id` first: the handler reads it as
// the object's first in-object property), the native cell the handler reads and writes
// (src/capture/signal.rs `slot`), which path the labels take, and label-set ids.

const { AsyncLocalStorage } = require('node:async_hooks');
const { native } = require('../../native');
const { warnOnce } = require('../../log');

/** No labels: the store outside any labeled context. */
const EMPTY = Object.freeze({ id: 0, labels: Object.freeze({}), flat: null, savedFor: -1 });
// `any`: it reads AsyncLocalStorage's internal `kResourceStore` (Node < 24), which Node's types leave out.
const als = /** @type {any} */ (new AsyncLocalStorage());

/** The label set in effect in the current async context. */
function currentStore() {
  return als.getStore() ?? EMPTY;
}

/** Whether AsyncLocalStorage keeps its stores in V8's continuation-preserved data (the
 * async context frame: Node >= 24, 22 with --experimental-async-context-frame), not on
 * async_hooks' resources. */
function storesInFrame() {
  return typeof als.kResourceStore !== 'symbol';
}

// The thread's native cell: a view of it, or a plain array where Node refuses external
// buffers (then native calls stand in for it).
const SLOT = native?.cellSlots?.() ?? { context: 0, generation: 1, sampled: 2, recordings: 3 };
/** How samples get their labels: 'signal', 'time' (switches logged with their time:
 * Windows), or 'none' (Windows, where V8's sample clock cannot be read here). */
const JOIN = native?.labelJoin?.() ?? 'signal';

/** `cell`, whether it is the native cell itself (`shared`), and whether labels are kept at
 * all (`available`: the addon loaded and this thread has a cell). */
function initCell() {
  if (!native) {
    // No addon (see native.js): labels ride AsyncLocalStorage alone; nothing is kept.
    return { cell: new Uint32Array(8), shared: true, available: false };
  }
  try {
    const view = native.registerThread();
    view[SLOT.context] = 0x5e1f;
    const shared = native.readThreadContext() === 0x5e1f;
    view[SLOT.context] = 0;
    if (!shared) warnOnce('labels-copy', 'selfprof: external buffers are not allowed here; labels cost a native call per switch');
    return { cell: shared ? view : new Uint32Array(8), shared, available: true };
  } catch (err) {
    warnOnce('labels', `selfprof: samples will carry no labels on this thread: ${err.message}`);
    // Nothing to call either.
    return { cell: new Uint32Array(8), shared: true, available: false };
  }
}
const { cell, shared, available } = initCell();

/** Which way the handler finds the current set: `frameRead` once the frame reader proved
 * itself on this thread (else hooks publish it), and why not, once known (`frameReason`:
 * undefined until checked, null when it reads). */
const path = { frameRead: false, frameReason: /** @type {string | null | undefined} */ (undefined) };

let signalsSeen = 0;
let signalsRaw = 0;
/** Signals the handler took on this thread so far: its cell's count (32 bits, widened
 * here), or, without a cell of its own to read, every profiled thread's (more, never
 * fewer). */
function threadSignals() {
  if (!available || !shared || SLOT.signals === undefined) return native.signalCount();
  const raw = cell[SLOT.signals];
  signalsSeen += (raw - signalsRaw) >>> 0;
  signalsRaw = raw;
  return signalsSeen;
}

let localRecordings = 0;
/** Recordings started on this thread (by any copy of this module): a save is current for
 * every recording started before it. */
const recordingsStarted = () => (shared ? cell[SLOT.recordings] : localRecordings);
/** A recording started on this thread (the native side counts it in the shared cell). */
function countRecordingStart() {
  localRecordings++;
}

/** Ids reserved from the process-wide counter at a time. */
const ID_BLOCK = 1024;
let nextId = 0;
let lastId = -1;

/** The next label-set id: from a block reserved from the process-wide counter, so copies
 * of this module loaded side by side never share an id. */
function newId() {
  if (nextId > lastId) {
    nextId = available ? native.reserveLabelIds(ID_BLOCK) : lastId + 1 > 0 ? lastId + 1 : 1;
    lastId = nextId + ID_BLOCK - 1;
  }
  return nextId++;
}

module.exports = { EMPTY, als, currentStore, storesInFrame, SLOT, JOIN, cell, shared, available, path, threadSignals, recordingsStarted, countRecordingStart, newId, ID_BLOCK };
