'use strict';
// Sample labels: `withLabels({ endpoint, span_id }, fn)` runs fn with those labels merged
// over the current ones; AsyncLocalStorage carries them through async continuations, and
// the signal handler finds the current set when a sample is taken: read from the async
// context frame (frame.js, Node >= 24), or published by hooks (switching.js). A tracer's
// requests are labeled from the tracer's own contexts where the handler reads them
// (tracers.js), else with selfprof's sets (spans.js). Only sampled sets are kept (kept.js).
// The parts:
//   thread.js     selfprof's AsyncLocalStorage, the native cell, ids
//   sets.js       label sets: checked and merged, worked out later, derived from a span
//   kept.js       the sampled sets' labels kept natively
//   switching.js  the published set and the hooks; running with a set current
//   frame.js      the frame reader: its check, its queue's drain, the tracers' keys
//   tracers.js    a tracer's contexts as labels
//   spans.js      a tracer's requests labeled with selfprof's sets
//   activity.js   when hooks run and the frame is checked; recordings

const { currentStore, storesInFrame, path, JOIN } = require('./thread');
const { storeWith, derivedLabels, derivedValue, requestValues, requestDerived, markDerived, closeDerived } = require('./sets');
const { labelStats } = require('./kept');
const { runWithStore, enterStore, hooksRunning, hooksByDepth } = require('./switching');
const { drainIfBatched } = require('./frame');
const { tracerRequests, currentPair, labelsIn, tracers, TRACER_KEYS } = require('./tracers');
const { useLabels, watchTracer, recordingStarted, recordingStopped, recordingBuilt, labelsForTrace, tryLabelsForTrace } = require('./activity');
const { enterSpanLabels, leaveSpanLabels, endRequest, watchSpanRequests } = require('./spans');
const { native } = require('../../native');

/** A set for `labels` over the labels in effect; where a tracer's contexts are read, it is
 * merged over its request's labels and notes that request (tracers.js: its labels win over
 * the request's there, and the next request's win over them). */
function newSet(fn, labels) {
  const requests = tracerRequests();
  const current = currentStore();
  const store = /** @type {any} */ (storeWith(fn, labels, requests === undefined ? current : currentPair(current)));
  if (requests !== undefined && store.id !== 0) store.requests = requests;
  drainIfBatched();
  return store;
}

/** The labels in effect (a frozen object). */
function getLabels() {
  return labelsIn(currentStore());
}

/**
 * Runs `fn(...args)` with `labels` merged over the current labels; they follow every
 * async continuation `fn` starts. Returns what `fn` returns.
 */
function withLabels(labels, fn, ...args) {
  if (typeof fn !== 'function') {
    throw new TypeError(`withLabels: fn must be a function, got ${fn === null ? 'null' : typeof fn}`);
  }
  const store = newSet('withLabels', labels);
  useLabels();
  return runWithStore(store, fn, undefined, args);
}

/** Merges `labels` over the current ones for the rest of the current async context. */
function setLabels(labels) {
  const store = newSet('setLabels', labels);
  useLabels();
  enterStore(store);
}

/** How samples get their labels on this thread (`trace.metadata.labelPath`). */
function labelPath() {
  if (JOIN !== 'signal') return 'switch-log';
  return path.frameRead ? 'context-frame' : 'async-hooks';
}

/** Where tracer `t`'s contexts come from: 'frame' where the handler reads them, else why not. */
function tracerState(t) {
  if (t.read) return 'frame';
  if (t.failed) return t.failed;
  return t.checking ? 'checking' : 'not read: labels are not read from the frame here';
}

/** This thread's label path, why it is not the frame (once checked), and whether hooks
 * run now: for service mode's log line, tests and diagnostics. */
function labelState() {
  return {
    path: labelPath(),
    reason: path.frameReason ?? undefined,
    hooks: hooksRunning(),
    hooksByDepth: hooksByDepth(),
    idsNotQueued: native?.frameQueueFull?.() ?? 0,
    pairsWithoutId: native?.frameFreshOut?.() ?? 0,
    // By tracer: 'frame' where the handler reads its contexts, else why not yet or not.
    tracers: Object.fromEntries(TRACER_KEYS.filter((k) => tracers[k] !== null).map((k) => [tracers[k].name, tracerState(tracers[k])])),
  };
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
  watchTracer,
  drainIfBatched,
  derivedLabels,
  derivedValue,
  requestValues,
  requestDerived,
  endRequest,
  markDerived,
  closeDerived,
  storesInFrame,
};
