'use strict';
// The JS Self-Profiling API's Profiler (https://wicg.github.io/js-self-profiling/)
// for Node.js: V8's sampler records, Rust turns the recording into the spec's trace.

const { performance } = require('node:perf_hooks');
const { native, unavailable } = require('../native');
const { timeOriginUs } = require('./clock');
const { group } = require('./group');
const labels = require('./labels');
const { traceObject } = require('./trace-object');
const { warnOnce } = require('../log');
const symbolize = require('../symbolize');
const profilerFrames = require('../profiler-frames');

const MAX_BUFFER_SIZE = 2 ** 32 - 1; // WebIDL unsigned long
/**
 * Internal (service mode): stop() that resolves to `{ pprof, trace, encoded, start, end }`:
 * the pprof Buffer, the json-gzip trace Buffer if asked for, one Buffer per backend dialect
 * asked for (`encoded[i]` for `dialects[i]`), and the recording's window in Unix ms (the
 * same one the pprof's time and duration give).
 */
const stopForExport = Symbol('selfprof.stopForExport');
/** Internal (`selfprof record`, process exit): stop() on the calling thread, to a Buffer. */
const stopSync = Symbol('selfprof.stopSync');
/** Internal (service mode at process exit): stopForExport on the calling thread, its result returned. */
const stopForExportSync = Symbol('selfprof.stopForExportSync');
const FORMATS = ['json', 'json-gzip', 'pprof'];

function describe(value) {
  if (typeof value === 'string') return JSON.stringify(value);
  if (typeof value === 'number' || typeof value === 'boolean' || value == null) return String(value);
  return `a value of type ${typeof value}`;
}

// WebIDL: a missing required member or a value that is not a finite number is a TypeError.
function requiredNumber(options, name) {
  const value = options[name];
  if (value === undefined) {
    throw new TypeError(`Profiler: options.${name} is required`);
  }
  if (typeof value !== 'number' || !Number.isFinite(value)) {
    throw new TypeError(`Profiler: options.${name} must be a finite number, got ${describe(value)}`);
  }
  return value;
}

function validateInitOptions(options) {
  if (options === null || typeof options !== 'object') {
    throw new TypeError('Profiler: options must be an object like { sampleInterval: 10, maxBufferSize: 10000 }');
  }
  const maxBufferSize = Math.trunc(requiredNumber(options, 'maxBufferSize'));
  const sampleInterval = requiredNumber(options, 'sampleInterval');
  if (sampleInterval < 0) {
    throw new RangeError(`Profiler: options.sampleInterval must not be negative, got ${sampleInterval}`);
  }
  if (maxBufferSize < 0 || maxBufferSize > MAX_BUFFER_SIZE) {
    throw new RangeError(`Profiler: options.maxBufferSize must be between 0 and ${MAX_BUFFER_SIZE}, got ${maxBufferSize}`);
  }
  return { sampleInterval, maxBufferSize };
}

function validateStopOptions(options) {
  if (options === undefined) return 'json';
  if (options === null || typeof options !== 'object') {
    throw new TypeError(`Profiler.stop: options must be an object like { format: 'pprof' }, got ${describe(options)}`);
  }
  for (const key of ['cpuTime', 'lines', 'sourceMaps', 'sourceText', 'profilerFrames']) {
    if (options[key] !== undefined && typeof options[key] !== 'boolean') {
      throw new TypeError(`Profiler.stop: options.${key} must be a boolean, got ${describe(options[key])}`);
    }
  }
  const format = options.format ?? 'json';
  if (!FORMATS.includes(format)) {
    throw new TypeError(`Profiler.stop: options.format must be 'json', 'json-gzip' or 'pprof', got ${describe(format)}`);
  }
  return format;
}

// A profiler dropped without stop() must not keep its place in the group. (Until it
// is full, the group holds only its member record, never the Profiler itself.)
const abandoned = new FinalizationRegistry((member) => {
  if (member.state === 'recording') {
    group.leave(member);
    labels.recordingStopped();
  }
  member.state = 'abandoned';
  member.recordings = [];
  member.join = null;
  labels.recordingBuilt(member.startedAs);
});

class Profiler extends EventTarget {
  #sampleInterval;
  #startedAt;
  #member;
  #stopped = false;
  #onsamplebufferfull = null;

  constructor(options) {
    if (!native) throw unavailable('the Profiler');
    super();
    const { sampleInterval, maxBufferSize } = validateInitOptions(options);
    const intervalUs = group.intervalFor(sampleInterval);
    this.#sampleInterval = intervalUs / 1000;
    this.#startedAt = performance.now();
    const self = new WeakRef(this);
    const member = {
      intervalUs,
      maxSamples: maxBufferSize,
      state: 'recording', // 'full' | 'stopped' | 'abandoned'
      onFull: () => {
        // Not `?.#`: TypeScript's checker cannot parse a private name in an optional chain.
        const profiler = self.deref();
        if (profiler !== undefined) profiler.#bufferFull();
      },
      startedAs: labels.recordingStarted(),
      tid: native.threadId(),
      cpuStartNs: native.threadCpuNs(),
      // A long recording's segments, joined while it records (see joinSegments).
      onSegment: () => scheduleJoin(member),
      join: null,
      joinScheduled: false,
      joinFailed: false,
      joinedScripts: new Set(), // the joined segments' scripts, for their source maps
      // Samples and time the joined segments cover (none yet: the recording's start).
      joinedSamples: 0,
      joinedUntilMs: this.#startedAt,
    };
    // What every build of this recording is for: a TraceJoin's, and the stop's (#take).
    member.window = {
      originUs: timeOriginUs(),
      fromMs: this.#startedAt,
      maxSamples: maxBufferSize,
      labels: true,
      tid: member.tid,
      cpuStartNs: member.cpuStartNs,
      // The build lets go of this recording's label sets on the thread pool once joined.
      recording: member.startedAs || undefined,
    };
    try {
      group.join(member);
    } catch (err) {
      labels.recordingStopped();
      labels.recordingBuilt(member.startedAs);
      throw err;
    }
    this.#member = member;
    abandoned.register(this, member, this);
  }

  /** The sample interval in use, in ms: the requested one rounded up to a supported one. */
  get sampleInterval() {
    return this.#sampleInterval;
  }

  get stopped() {
    return this.#stopped;
  }

  get onsamplebufferfull() {
    return this.#onsamplebufferfull;
  }

  set onsamplebufferfull(handler) {
    if (this.#onsamplebufferfull) this.removeEventListener('samplebufferfull', this.#onsamplebufferfull);
    this.#onsamplebufferfull = typeof handler === 'function' ? handler : null;
    if (this.#onsamplebufferfull) this.addEventListener('samplebufferfull', this.#onsamplebufferfull);
  }

  // The sample buffer is full: the session moves to stopped (stop() still resolves to
  // the trace, once) and `samplebufferfull` fires.
  #bufferFull() {
    if (this.#member.state !== 'recording') return;
    this.#member.state = 'full';
    this.#member.fullAt = performance.now();
    this.#stopped = true;
    labels.recordingStopped();
    this.dispatchEvent(new Event('samplebufferfull'));
  }

  /**
   * Stops profiling and resolves to the trace: a ProfilerTrace object, or a Buffer with
   * `{ format: 'json-gzip' }` (its JSON, gzip'd) or `{ format: 'pprof' }` (gzip'd pprof).
   */
  stop(options) {
    let format;
    try {
      format = validateStopOptions(options);
    } catch (err) {
      return Promise.reject(err);
    }
    // A trace (json, json-gzip) carries its hot lines' text, for reports made from it.
    const sourceText = format !== 'pprof' && options?.sourceText !== false;
    return this.#finish(format, undefined, {
      cpuTime: options?.cpuTime,
      lines: options?.lines,
      sourceMaps: options?.sourceMaps,
      sourceText,
      profilerFrames: options?.profilerFrames,
    });
  }

  /**
   * @param {boolean} cpuTime
   * @param {boolean} withTrace
   * @param {{ lines?: boolean, dialects?: object[], threads?: () => (object | Promise<object>), sourceMaps?: boolean, profilerFrames?: boolean }} [options]
   */
  [stopForExport](cpuTime, withTrace, { lines = false, dialects = [], threads, sourceMaps, profilerFrames: frames } = {}) {
    let taken;
    try {
      // The trace a file exporter writes carries its hot lines' text, as stop()'s does.
      taken = this.#take('pprof', withTrace ? 'json-gzip' : undefined, { cpuTime, lines, sourceMaps, sourceText: withTrace, profilerFrames: frames });
      // The same trace encoded once more per backend dialect (see src/formats/dialect.rs).
      if (dialects.length) taken.build.dialects = JSON.stringify(dialects);
    } catch (err) {
      return Promise.reject(err);
    }
    const { fromMs, untilMs } = taken.build;
    // Other threads' recordings to merge in (service mode), once they have arrived: a
    // function resolving to `{ threadName, threadId, osThreadId, threads }` build options.
    const ready = threads ? Promise.resolve().then(threads).then((t) => Object.assign(taken.build, t), () => {}) : Promise.resolve();
    return ready.then(() => this.#build(taken, 'pprof')).then((out) => exported(out, withTrace, fromMs, untilMs));
  }

  /**
   * stopForExport for the process's 'exit' event, which cannot wait: built on this thread,
   * its result returned; `threads`: the other threads' build options, as an object.
   * @param {boolean} cpuTime
   * @param {boolean} withTrace
   * @param {{ lines?: boolean, dialects?: object[], threads?: object, sourceMaps?: boolean, profilerFrames?: boolean }} [options]
   */
  [stopForExportSync](cpuTime, withTrace, { lines = false, dialects = [], threads, sourceMaps, profilerFrames: frames } = {}) {
    const taken = this.#take('pprof', withTrace ? 'json-gzip' : undefined, { cpuTime, lines, sourceMaps, sourceText: withTrace, profilerFrames: frames }, false);
    if (dialects.length) taken.build.dialects = JSON.stringify(dialects);
    if (threads) Object.assign(taken.build, threads);
    try {
      return exported(native.buildTraceSync(...forBuild(taken), taken.join), withTrace, taken.build.fromMs, taken.build.untilMs);
    } finally {
      labels.recordingBuilt(taken.member.startedAs);
      warnSourceMaps();
    }
  }

  /**
   * For 'exit' handlers, which cannot wait: Buffers of the trace as `format` (and
   * `alsoFormat`); `sourceText`: with its hot lines' text (`selfprof record`'s);
   * `profilerFrames` as stop()'s.
   * @param {string} format
   * @param {string} [alsoFormat]
   * @param {{ sourceText?: boolean, profilerFrames?: boolean }} [options]
   */
  [stopSync](format, alsoFormat, { sourceText = false, profilerFrames: frames } = {}) {
    const taken = this.#take(format, alsoFormat, { sourceText, profilerFrames: frames }, false);
    try {
      return native.buildTraceSync(...forBuild(taken), taken.join);
    } finally {
      labels.recordingBuilt(taken.member.startedAs);
      warnSourceMaps();
    }
  }

  #finish(format, alsoFormat, pprofOptions) {
    let taken;
    try {
      taken = this.#take(format, alsoFormat, pprofOptions);
    } catch (err) {
      return Promise.reject(err);
    }
    return this.#build(taken, format);
  }

  /**
   * Builds what #take took, off the main thread, from the next turn of the event loop
   * (the recordings' JSON is made there: the stop's own turn is V8's stop alone), once the
   * label sets #take began looking up are found. Built or failed, its labels are let go.
   */
  #build(taken, format) {
    return nextTurn()
      .then(() => {
        const args = forBuild(taken);
        return taken.prefetched === undefined ? args : taken.prefetched.then(() => args);
      })
      .then(([chunks, build]) =>
        // The trace object is made from parts, in slices (trace-object.js): no one long block.
        format === 'json'
          ? native.buildTraceParts(chunks, build, taken.join).then(traceObject)
          : native.buildTrace(chunks, build, taken.join),
      )
      .finally(() => {
        labels.recordingBuilt(taken.member.startedAs);
        warnSourceMaps();
      });
  }

  /** Moves the profiler to stopped and returns what building its trace needs. */
  /**
   * `pprof`: `{ cpuTime, lines }` for a pprof format, `sourceMaps` (default: on unless
   * SELFPROF_SOURCE_MAPS=0), `sourceText` (the trace's hot lines' text, from the files of
   * the scripts this process loaded and from maps' sourcesContent), `profilerFrames`
   * (default: hidden unless SELFPROF_PROFILER_FRAMES=1).
   */
  #take(format, alsoFormat, pprof, prefetch = true) {
    const member = this.#member;
    if (member.state !== 'recording' && member.state !== 'full') {
      throw new DOMException('The profiler has already been stopped', 'InvalidStateError');
    }
    const untilMs = member.state === 'full' ? member.fullAt : performance.now();
    // The label sets of the brackets so far are looked up on the thread pool while V8
    // stops on this thread (~8 ms of a ~128k-sample build); the build waits for them. A
    // failed lookup only means the build looks them up itself. Not for a short recording:
    // the lookup would save it little, and competes with V8's stop for a core (~0.1 ms
    // more of the stop's block at ~12k samples on 2 cores).
    // (Of a recording joined in segments, only the samples since the last one.)
    const unjoined = group.samplesTaken(member) - member.joinedSamples;
    const long = prefetch && member.startedAs && unjoined >= PREFETCH_MIN_SAMPLES;
    // The sets the handler queued are saved first (they wait in batches), so the lookup
    // finds them; a failure here is the one below's to report.
    if (long) labels.tryLabelsForTrace();
    const prefetched = long ? prefetchLabels(member.startedAs, member.joinedUntilMs) : undefined;
    if (member.state === 'recording') {
      group.leave(member);
      labels.recordingStopped();
    }
    member.state = 'stopped';
    this.#stopped = true;
    abandoned.unregister(this);
    try {
      labels.labelsForTrace();
    } catch (err) {
      labels.recordingBuilt(member.startedAs); // a stop that fails lets go of what it held
      member.recordings = [];
      member.join = null;
      throw err;
    }
    const build = {
      ...member.window,
      untilMs,
      format,
      alsoFormat,
      timeOriginUnixMs: performance.timeOrigin,
      periodNs: this.#sampleInterval * 1e6,
      cpuTime: pprof.cpuTime ?? true,
      lines: pprof.lines ?? false,
      sourceText: pprof.sourceText ? 'scripts' : undefined,
      labelPath: labels.labelPath(),
      ...profilerFrames.buildOptions(pprof.profilerFrames, process.env),
    };
    const recordings = member.recordings;
    member.recordings = [];
    const join = member.join ?? undefined;
    member.join = null;
    return { recordings, build, member, sourceMaps: pprof.sourceMaps, prefetched, join, joinedScripts: member.joinedScripts };
  }
}

const nextTurn = () => new Promise((resolve) => setImmediate(resolve));

/**
 * One warning (per process) when a build met a source map over a bound: its frames stay
 * as V8 gave them, and `trace.sourceMaps.scripts` says why for each such map.
 */
function warnSourceMaps() {
  let warnings;
  try {
    warnings = native.sourceMapWarnings();
  } catch {
    return;
  }
  if (warnings.length) {
    const more = warnings.length > 1 ? ` (and ${warnings.length - 1} more)` : '';
    warnOnce('source-map', `selfprof: ${warnings[0]}${more}; its frames stay as V8 gave them (trace.sourceMaps.scripts says why)`);
  }
}

/** Recordings this long (in samples) or longer have their label sets looked up while V8 stops. */
const PREFETCH_MIN_SAMPLES = 16384;

/** `native.labelsPrefetch`, its failure ignored (the build then looks every set up itself). */
function prefetchLabels(token, fromMs) {
  try {
    return native.labelsPrefetch(token, timeOriginUs(), fromMs).catch(() => {});
  } catch {
    return undefined;
  }
}

/** The native build's arguments for what #take took: the recordings' JSON and the options. */
function forBuild({ recordings, build, sourceMaps, joinedScripts = new Set() }) {
  const taken = recordings.map(({ recording, stride }) => ({ ...recording.take(), stride }));
  // Source maps are applied in the build; Node's maps for scripts compiled in memory go with it.
  Object.assign(build, symbolize.buildOptions(sourceMaps, [...joinedScripts, ...taken.flatMap((t) => t.scripts)]));
  return [chunksOf(taken), build];
}

/** stopForExport's result from a build's outputs (`[pprof, trace?, ...one per dialect]`). */
function exported(out, withTrace, fromMs, untilMs) {
  const all = Array.isArray(out) ? out : [out];
  const [pprof, trace] = withTrace ? all : [all[0], undefined];
  const encoded = all.slice(withTrace ? 2 : 1);
  return { pprof, trace, encoded, start: performance.timeOrigin + fromMs, end: performance.timeOrigin + untilMs };
}

const chunksOf = (taken) => taken.map(({ json, samples, timeDeltas, stride }) => ({ profile: json, samples, timeDeltas, stride }));

/**
 * The group handed member `m` a segment of its recording: it is joined on the thread pool
 * from the next turn of the event loop (the hand-off's turn is V8's stop alone), so that
 * the stop has only the last segment to join. Until then the segment waits in
 * `m.recordings`, where a stop in between takes it as it would without segments.
 */
function scheduleJoin(m) {
  if (m.joinScheduled || m.joinFailed) return;
  m.joinScheduled = true;
  setImmediate(() => {
    m.joinScheduled = false;
    joinSegments(m);
  }).unref();
}

function joinSegments(m) {
  if (m.state !== 'recording' || m.recordings.length === 0) return;
  const cpu0 = native.threadCpuNs();
  const recordings = m.recordings;
  try {
    // The sets the segment's signals sampled are saved before its samples look them up.
    labels.labelsForTrace();
    m.join ??= new native.TraceJoin(m.window);
    const taken = recordings.map(({ recording, stride }) => ({ ...recording.take(), stride }));
    m.join.add(chunksOf(taken)).catch(() => {}); // a failure fails the build, which says why
    m.recordings = [];
    for (const t of taken) for (const url of t.scripts) m.joinedScripts.add(url);
    m.joinedSamples = m.samples; // as of the last hand-off: what these recordings hold
    m.joinedUntilMs = performance.now();
    group.noteSegmentCost('join', native.threadCpuNs() - cpu0);
  } catch (err) {
    // These segments (and all later ones) stay for the stop, which builds on from those
    // joined before: none is lost.
    m.joinFailed = true;
    warnOnce('join', `selfprof: a long recording's segments could not be joined as it records; its stop joins them: ${err.message}`);
  }
}

Object.defineProperty(Profiler.prototype, Symbol.toStringTag, { value: 'Profiler', configurable: true });

/**
 * Converts a V8 CPU profile (inspector `Profiler.stop`'s `profile`, or a
 * `.cpuprofile` file's contents) into a ProfilerTrace. Timestamps count from
 * the profile's start, as another process's time origin is unknown.
 */
async function fromCpuProfile(profile, options) {
  if (!native) throw unavailable('fromCpuProfile');
  const format = validateStopOptions(options);
  if (profile === null || typeof profile !== 'object' || typeof profile.startTime !== 'number') {
    throw new TypeError('fromCpuProfile: profile must be a V8 CPU profile object with nodes, startTime, samples and timeDeltas');
  }
  let json;
  try {
    json = JSON.stringify(profile);
  } catch (err) {
    // A cycle, a BigInt, or more than a JS string holds: the caller's object, named as such.
    throw new TypeError(`fromCpuProfile: the profile cannot be serialized: ${err.message}`, { cause: err });
  }
  const chunks = [{ profile: json }];
  // A profile from anywhere: its scripts are only names, so its text comes from maps alone.
  const sourceText = format !== 'pprof' && options?.sourceText !== false ? 'maps' : undefined;
  const build = {
    originUs: profile.startTime,
    format,
    sourceText,
    ...symbolize.buildOptions(options?.sourceMaps, symbolize.runtimeScripts(profile)),
    ...profilerFrames.buildOptions(options?.profilerFrames, process.env),
  };
  try {
    return format === 'json' ? await traceObject(await native.buildTraceParts(chunks, build)) : await native.buildTrace(chunks, build);
  } finally {
    warnSourceMaps();
  }
}

/**
 * Sets the base interval (ms, default 1): every profiler's sampleInterval is rounded up
 * to a multiple of it. Only while no profiler runs.
 */
function setBaseInterval(ms) {
  group.baseInterval = ms;
}

module.exports = { Profiler, fromCpuProfile, setBaseInterval, stopForExport, stopForExportSync, stopSync };
