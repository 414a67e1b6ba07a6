'use strict';
// When labels cost anything: the hooks (switching.js) cost every async hop, so they run
// only while a profiler records on this thread and labels have been used at all, and not
// once the handler reads the frame (frame.js), whose check starts at the first such moment;
// the frame's queue is drained every second while it is read.

const { native } = require('../../native');
const { warnOnce, envSwitchOn } = require('../../log');
const { EMPTY, JOIN, available, path, countRecordingStart } = require('./thread');
const { save } = require('./kept');
const { switchHooks, hooksRunning, unpublish, publishedStores, aside } = require('./switching');
const { checkFrame, readTracerKeys, drainQueue, noteSampled } = require('./frame');
const { registerTracer } = require('./tracers');
const { updateOpenDerived } = require('./sets');

let recordings = 0;
let labelsUsed = false;
let drainTimer = null;

/** Labels are in use (the first set entered, or a tracer's contexts watched): the hooks
 * may be needed from now on. */
function useLabels() {
  if (labelsUsed) return;
  labelsUsed = true;
  updateHook();
}

function updateHook() {
  const active = recordings > 0 && labelsUsed;
  if (active && JOIN === 'none') {
    warnOnce(
      'labels-clock',
      'selfprof: samples carry no labels on this machine: V8 stamps them with a millisecond clock here (Windows without an invariant TSC)',
    );
  }
  // In a scope of its own: the check's run()s leave no key in the caller's frame, which may
  // be the app's top level (switching.js `aside`).
  if (active && path.frameReason === undefined && available) aside(() => checkFrame(updateHook));
  if (path.frameRead) {
    if (active && drainTimer === null) {
      drainTimer = setInterval(drainQueue, 1000);
      drainTimer.unref();
    } else if (!active && drainTimer !== null) {
      clearInterval(drainTimer);
      drainTimer = null;
    }
  }
  const want = active && !path.frameRead;
  if (want === hooksRunning()) return;
  switchHooks(want);
  // Hooks off: the published context goes, so the handler reads the frame alone.
  if (!want && path.frameRead) unpublish();
}

/**
 * Labels samples with tracer `name`'s contexts (tracers.js: `registerTracer`'s `tracer`)
 * under frame key `key`. Returns `read()`: whether the handler reads them on this thread
 * now (else the integration labels its requests with selfprof's own sets).
 */
function watchTracer(key, name, tracer) {
  // SELFPROF_TRACER_CONTEXTS=0: the integrations label with selfprof's own sets.
  if (!envSwitchOn('SELFPROF_TRACER_CONTEXTS')) return () => false;
  const entry = registerTracer(key, name, tracer);
  useLabels();
  readTracerKeys();
  return () => entry.read;
}

/** A recording starts on this thread; returns its token for `recordingBuilt`. */
function recordingStarted() {
  recordings++;
  updateHook();
  countRecordingStart();
  if (!available) return 0;
  const token = native.labelsRecordingStarted();
  // The set in effect now was logged as the recording's first switch: keep its labels.
  if (JOIN === 'time') save(publishedStores()[0]);
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
  for (const store of publishedStores()) if (store !== EMPTY) save(store);
  updateOpenDerived();
}

/** `labelsForTrace`, where a failure is left for a later call to report. */
function tryLabelsForTrace() {
  try {
    labelsForTrace();
  } catch {
    // The build's own call reports it.
  }
}

module.exports = { useLabels, watchTracer, recordingStarted, recordingStopped, recordingBuilt, labelsForTrace, tryLabelsForTrace };
