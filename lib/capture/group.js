'use strict';
// The ProfilerGroup: one V8 CPU profiler per isolate (this module is loaded once per
// isolate), shared by every Profiler, as Blink's design does it.
//
// Every interval is a whole multiple of the base interval (1 ms by default), so the
// sampler can run at the GCD of the members' intervals, and each member takes every
// (interval / GCD)-th sample, counted from the recording's first sample. When a member
// leaves, or joins with an interval that changes the GCD, the group takes what V8 has
// recorded so far (an inspector session on this thread answers at once), hands that
// recording to every member that was in it, and restarts V8 at the new GCD. (Each
// restart costs V8 re-logging all code, ~4-20 ms of CPU and a gap with no samples: a join
// that keeps the GCD does not restart; its member's trace starts at its construction.) A
// member's trace is built from the recordings it was handed.
//
// A leave that keeps the GCD (every rotation of service mode) hands off instead of
// restarting: V8's inspector runs the front end's profile (Profiler.start/stop) and those
// of console.profile(title) in one CpuProfiler, which logs code once while any runs. So
// the group starts the other kind of profile, then stops the running one: no re-log, no
// gap (the two overlap by a few samples; the trace build drops the repeats).
//
// A long recording is handed off the same way every SEGMENT_SIGNALS signals, and each
// member told (`onSegment`): it joins what it was handed on the thread pool while it
// records (a Profiler's TraceJoin), so its stop has only the last segment left to join.
//
// How many samples V8 took on this thread is counted by the signal handler, in the thread's
// cell (other profiled threads' signals are not this isolate's samples); where V8 samples
// without a signal (Windows), by the sampler's intervals elapsed instead (`#ticks`): V8
// takes at most one sample per interval, so a member may be found full before it is,
// never after.

const { performance } = require('node:perf_hooks');
const { post } = require('./inspector-post');
const { native } = require('../native');
const { threadSignals } = require('./labels/thread');
const { warnOnce } = require('../log');
const { runtimeScripts } = require('../symbolize');

/** Whether a signal counts V8's samples here (not on Windows). */
const BY_SIGNAL = (native?.labelJoin?.() ?? 'signal') === 'signal';

let inspector;
/** Why node:inspector could not be loaded. */
let inspectorError;
function loadInspector() {
  if (inspector === undefined) {
    try {
      inspector = require('node:inspector');
    } catch (err) {
      inspector = null;
      inspectorError = err;
    }
  }
  if (inspector === null) {
    throw new DOMException(
      `selfprof needs Node's inspector, which this Node cannot provide: ${inspectorError.message}`,
      'NotSupportedError',
    );
  }
  return inspector;
}


/**
 * NODE_OPTIONS split into arguments as Node splits it: at spaces outside double quotes;
 * inside them a backslash takes the next character as it is.
 */
function nodeOptionsArgs(value) {
  const args = [];
  let quoted = false;
  let fresh = true;
  for (let i = 0; i < value.length; i++) {
    let c = value[i];
    if (c === '\\' && quoted) c = value[++i] ?? '';
    else if (c === ' ' && !quoted) {
      fresh = true;
      continue;
    } else if (c === '"') {
      quoted = !quoted;
      continue;
    }
    if (fresh) args.push(c);
    else args[args.length - 1] += c;
    fresh = false;
  }
  return args;
}

/**
 * Whether Node's `--cpu-prof` profiles this thread (its flags, then NODE_OPTIONS, which
 * the command line overrides). Its inspector session has the Profiler domain enabled, so
 * it hears every console profile: Node prints each notification it gets, a finished
 * profile's whole JSON included, to stderr. The group then makes no console profiles.
 */
function nodeCpuProfRuns(execArgv = process.execArgv, nodeOptions = process.env.NODE_OPTIONS ?? '') {
  let on = false;
  for (const arg of [...nodeOptionsArgs(nodeOptions), ...execArgv]) {
    if (arg === '--') break;
    if (arg === '--cpu-prof') on = true;
    else if (arg === '--no-cpu-prof') on = false;
  }
  return on;
}

const gcd = (a, b) => (b === 0 ? a : gcd(b, a % b));
/** The sampler's interval (µs) for `members`: the GCD of theirs (0 for none). */
const gcdOf = (members) => members.reduce((g, m) => gcd(g, m.intervalUs), 0);

/** The longest sampling interval the inspector takes: `interval` is an int32 of µs. */
const MAX_INTERVAL_US = 2 ** 31 - 1;
/**
 * Signals between segment hand-offs (~0.4-0.9 s at 0.1 ms, ~4 s at 1 ms, ~41 s at 99 Hz).
 * The stop of a recording stops V8 on, and joins, only what came after the last
 * hand-off, so this bounds the stop's own V8 stop; each hand-off blocks the event loop
 * for V8's stop of one segment (~2 ms for 4,096 samples of a labeled service). Longer
 * segments make fewer, longer blocks (16,384: ~4-5 ms each, and ~3 ms of a 10k stop).
 */
const SEGMENT_SIGNALS = 4096;
/** How long the session outlives the last member (ms). */
const SHUTDOWN_DELAY_MS = 20;
/** setTimeout's longest delay (ms); longer ones fire after 1 ms. */
const MAX_TIMER_MS = 2 ** 31 - 1;

/**
 * One V8 recording, shared by the members it was handed to. Its JSON (what the Rust build
 * reads) and the scripts whose source maps only Node holds are worked out when a build
 * first needs them, not in the turn of the event loop that stopped V8: that turn is
 * V8's stop alone.
 */
class Recording {
  #profile;
  #taken = null;

  constructor(profile) {
    this.#profile = profile;
  }

  /**
   * `{ json, samples, timeDeltas, scripts }`: the profile's JSON but its samples and time
   * deltas, which go as typed arrays (they are nearly all of a long recording's JSON:
   * writing them as text and parsing it back took ~8 ms at ~127k samples, copying
   * them ~1 ms). The profile object is let go once these are known.
   */
  take() {
    if (this.#taken === null) {
      const { samples = [], timeDeltas = [], ...rest } = this.#profile;
      this.#taken = {
        json: JSON.stringify(rest),
        samples: Uint32Array.from(samples),
        timeDeltas: Float64Array.from(timeDeltas),
        scripts: runtimeScripts(this.#profile),
      };
      this.#profile = null;
    }
    return this.#taken;
  }
}

/**
 * A member: `{ intervalUs, maxSamples, onFull, onSegment }`, given by the group: `recordings`
 * ([{ recording: Recording, stride }] in time order), `samples` (its samples in them, estimated from
 * the signal handler's count) and `since` (the signal count it was last counted from).
 */
class ProfilerGroup {
  #members = new Set();
  #session = null;
  #baseUs = 1000;
  #common = 0; // the sampler's interval (µs) while recording, 0 when not
  #timer = null;
  /** The session's shutdown once the last member left (see #resume), or null. */
  #shutdownTimer = null;
  /** The console profile recording (its title), or null while the front end's is. */
  #console = null;
  /** Console profiles of ours that V8 has started (title -> true) or finished (-> profile). */
  #consoleProfiles = new Map();
  #titles = 0;
  /** The signal count at the last start or hand-off. */
  #segmentSince = 0;
  /** Without signals: the sampler's intervals elapsed (fractional), as of `#tickAt` (ms). */
  #tickCount = 0;
  #tickAt = 0;
  /** False once a hand-off could not start the other profile: no more segments. */
  #segmenting = true;
  /** Segment hand-offs so far. */
  #segments = 0;
  /** The main thread's CPU time (ns) the hand-offs took, and their joins' turns: in all, and the most of one. */
  #segmentCosts = { handOff: [0, 0], join: [0, 0] };
  /** Our console profiles someone else's console.profileEnd() ended (Node < 24), in order. */
  #ended = [];
  // console.profile reaches every session of this isolate: a prefix no other copy of this
  // module (or DevTools user) picks keeps the titles ours.
  #prefix = `selfprof-${Math.random().toString(36).slice(2, 10)}-`;

  /**
   * Adds a member; V8 samples for it from now on. Transactional: if V8 cannot start for
   * it, it is not a member and the others sample on as before.
   */
  join(member) {
    member.recordings = [];
    member.samples = 0;
    member.since = this.#ticks();
    if (this.#common !== 0 && gcd(this.#common, member.intervalUs) === this.#common) {
      this.#members.add(member);
      this.#schedule();
      return;
    }
    this.#collect();
    this.#members.add(member);
    try {
      this.#start();
    } catch (err) {
      this.#members.delete(member);
      this.#resume();
      throw new DOMException(`The profiler could not start: ${err.message}`, 'NotSupportedError');
    }
  }

  /** Removes a member; its `recordings` are complete. Never throws: a stop must succeed. */
  leave(member) {
    if (!this.#members.has(member)) return;
    const others = [...this.#members].filter((m) => m !== member);
    const keep = others.length > 0 && gcdOf(others) === this.#common;
    let handedOff = false;
    try {
      handedOff = this.#collect(keep);
    } catch (err) {
      this.#ticks();
      this.#common = 0;
      warnOnce('group-collect', `selfprof: V8's recording could not be taken: ${err.message}`);
    }
    this.#members.delete(member);
    if (handedOff) this.#schedule();
    else this.#resume();
  }

  /**
   * Restarts V8 for the members left, or when none is, lets the session go a little later
   * (V8 stopped sampling already): after the stop that emptied the group has started its
   * build (in the next turn of the event loop; a 1 ms timer could fire before that turn,
   * a stop of a few ms having passed it). A member that joins before then keeps the session.
   */
  #resume() {
    if (this.#members.size === 0) {
      if (this.#session !== null && this.#shutdownTimer === null) {
        this.#shutdownTimer = setTimeout(() => {
          this.#shutdownTimer = null;
          if (this.#members.size === 0 && this.#session !== null) this.#shutdown();
        }, SHUTDOWN_DELAY_MS);
        this.#shutdownTimer.unref();
      }
      return;
    }
    try {
      this.#start();
    } catch (err) {
      // The members keep what they recorded; they take no more samples.
      this.#ticks();
      this.#common = 0;
      clearTimeout(this.#timer);
      warnOnce('group-restart', `selfprof: V8's profiler could not restart; running profilers take no more samples: ${err.message}`);
    }
  }

  get size() {
    return this.#members.size;
  }

  /** Whether the group holds an inspector session (from the first member until a little after the last). */
  get connected() {
    return this.#session !== null;
  }

  /**
   * Whether a leave that keeps the interval, and a long recording's segments, can hand off
   * without a gap: not beside Node's `--cpu-prof` (see nodeCpuProfRuns), where they stop and
   * restart V8 instead, and a long recording is joined whole at its stop.
   */
  handOffs = !nodeCpuProfRuns();

  /** Segment hand-offs so far. */
  get segments() {
    return this.#segments;
  }

  /**
   * What the segments took of the main thread, in ms (for benchmarks and diagnostics): the
   * hand-offs (V8's stop of each segment) and the members' joins of them (the next turn's
   * handing of each to the thread pool), in all and the longest one.
   */
  get segmentCosts() {
    const { handOff, join } = this.#segmentCosts;
    return { segments: this.#segments, handOffMs: handOff[0] / 1e6, maxHandOffMs: handOff[1] / 1e6, joinMs: join[0] / 1e6, maxJoinMs: join[1] / 1e6 };
  }

  /** Counts `ns` of the main thread's CPU time spent on a segment: kind 'handOff' or 'join'. */
  noteSegmentCost(kind, ns) {
    const c = this.#segmentCosts[kind];
    c[0] += ns;
    c[1] = Math.max(c[1], ns);
  }

  /**
   * V8's samples so far, as the signal handler counts them, or, without signals (Windows),
   * the sampler's intervals elapsed: what tests wait on to get samples whatever the load.
   */
  ticks() {
    return this.#ticks();
  }

  /** Samples member `m` has taken so far (estimated from the signal handler's count). */
  samplesTaken(m) {
    return this.#members.has(m) && this.#common !== 0 ? this.#samplesOf(m, this.#ticks()) : m.samples;
  }

  /** The sampler's interval in ms (0 when not sampling). */
  get interval() {
    return this.#common / 1000;
  }

  /** The base interval (ms): every profiler's interval is a multiple of it. */
  get baseInterval() {
    return this.#baseUs / 1000;
  }

  set baseInterval(ms) {
    if (typeof ms !== 'number' || !Number.isFinite(ms)) {
      throw new TypeError(`setBaseInterval: the base interval must be a finite number of ms, got ${ms}`);
    }
    const us = Math.round(ms * 1000);
    if (us < 10 || us > 1_000_000 || Math.abs(us - ms * 1000) > 1e-6) {
      throw new RangeError(`setBaseInterval: the base interval must be a whole number of µs from 0.01 to 1000 ms, got ${ms}`);
    }
    if (this.#members.size > 0) {
      throw new DOMException('The base interval cannot change while profilers run', 'InvalidStateError');
    }
    this.#baseUs = us;
  }

  /**
   * The interval (µs) used for a requested one (ms): the next multiple of the base, at
   * most the largest multiple V8's inspector accepts (a 32-bit count of µs). The spec lets
   * an implementation pick the nearest interval it supports.
   */
  intervalFor(requestedMs) {
    const most = Math.floor(MAX_INTERVAL_US / this.#baseUs);
    const multiple = Math.ceil((requestedMs * 1000) / this.#baseUs - 1e-9);
    return Math.min(most, Math.max(1, multiple)) * this.#baseUs;
  }

  #start() {
    const common = gcdOf([...this.#members]);
    clearTimeout(this.#shutdownTimer);
    this.#shutdownTimer = null;
    if (this.#session === null) {
      const session = new (loadInspector().Session)();
      session.connect();
      // Only our own titles are tracked (V8 tells every session with the profiler enabled).
      session.on('Profiler.consoleProfileStarted', ({ params }) => {
        if (params?.title === `${this.#prefix}${this.#titles}`) this.#consoleProfiles.set(params.title, true);
      });
      session.on('Profiler.consoleProfileFinished', ({ params }) => {
        if (this.#consoleProfiles.get(params?.title) !== true) return;
        if (params.title !== this.#console) {
          this.#consoleProfiles.set(params.title, params.profile); // our own profileEnd
          return;
        }
        // The app's console.profileEnd() without a title ends the newest console profile,
        // ours (Node < 24): V8 stopped sampling. Keep its recording and start the front
        // end's profile at once (this runs inside that call, before V8 is back to JS).
        this.#consoleProfiles.delete(params.title);
        if (params.profile) this.#ended.push(params.profile);
        this.#console = null;
        try {
          post(session, 'Profiler.start');
        } catch (err) {
          warnOnce('group-restart', `selfprof: V8's profiler could not restart; running profilers take no more samples: ${err.message}`);
        }
      });
      try {
        post(session, 'Profiler.enable');
      } catch (err) {
        session.disconnect();
        throw err;
      }
      this.#session = session;
    }
    post(this.#session, 'Profiler.setSamplingInterval', { interval: common });
    post(this.#session, 'Profiler.start');
    this.#console = null;
    // V8 installs its SIGPROF handler as its sampler starts: chain ours in front.
    try {
      native.installSignalHandler();
    } catch (err) {
      warnOnce('signal', `selfprof: samples will carry no labels: ${err.message}`);
    }
    this.#ticks();
    this.#common = common;
    this.#segmentSince = this.#ticks();
    this.#schedule();
  }

  /**
   * V8's samples so far, as the signal handler counts them, or, without signals, the
   * sampler's intervals elapsed (counted at the interval in force: call before it changes).
   */
  #ticks() {
    if (BY_SIGNAL) return threadSignals();
    const now = performance.now();
    if (this.#common !== 0) this.#tickCount += ((now - this.#tickAt) * 1000) / this.#common;
    this.#tickAt = now;
    return Math.floor(this.#tickCount);
  }

  /** Samples `m` has taken (estimated): its recordings' and the running one's. */
  #samplesOf(m, signals) {
    return m.samples + Math.floor((signals - m.since) / (m.intervalUs / this.#common));
  }

  /**
   * Hands what V8 recorded since the last start to every member. With `keep`, V8 samples on
   * at the same interval, handing off to the other kind of profile where it can; returns
   * whether it did (else V8 is stopped).
   */
  #collect(keep = false, next = keep ? this.#startOther() : undefined) {
    if (this.#common === 0) return false;
    const profiles = this.#ended.splice(0);
    let failure = null;
    try {
      profiles.push(this.#stopRunning());
    } catch (err) {
      failure = err; // the recordings V8 did return are still handed over
    }
    if (next !== undefined) this.#console = next;
    const signals = this.#ticks();
    for (const profile of profiles) {
      const recording = new Recording(profile);
      for (const m of this.#members) m.recordings.push({ recording, stride: m.intervalUs / this.#common });
    }
    for (const m of this.#members) {
      m.samples = this.#samplesOf(m, signals);
      m.since = signals;
    }
    this.#segmentSince = signals;
    if (failure !== null) {
      if (next === undefined) throw failure;
      // The next profile runs: only this recording is lost.
      warnOnce('group-collect', `selfprof: V8's recording could not be taken: ${failure.message}`);
    }
    if (next === undefined) {
      this.#ticks();
      this.#common = 0;
    }
    return next !== undefined;
  }

  /**
   * Starts the kind of profile not running (V8 keeps sampling without a re-log): returns
   * the new console profile's title, or null for the front end's; undefined if it could not.
   */
  #startOther() {
    try {
      if (this.#console !== null) {
        post(this.#session, 'Profiler.start');
        return null;
      }
      if (this.handOffs === false) return undefined;
      const title = `${this.#prefix}${++this.#titles}`;
      loadInspector().console.profile(title);
      // V8 says it started (synchronously, on this session); if not, the caller restarts.
      if (this.#consoleProfiles.get(title) === true) return title;
      this.#consoleProfiles.delete(title);
    } catch {
      // The caller stops and restarts instead.
    }
    return undefined;
  }

  /** Stops the profile running (V8 stops sampling if no other runs); returns its profile. */
  #stopRunning() {
    if (this.#console === null) return post(this.#session, 'Profiler.stop').profile;
    const title = this.#console;
    this.#console = null; // so the listener takes the profile as ours to keep, not stolen
    loadInspector().console.profileEnd(title);
    const profile = this.#consoleProfiles.get(title);
    this.#consoleProfiles.delete(title);
    if (typeof profile !== 'object' || profile === null) throw new Error(`V8 returned no profile for console profile ${title}`);
    return profile;
  }

  /** Whether V8 is sampling and can hand off. */
  #segmented() {
    return this.#segmenting && this.#common !== 0;
  }

  /**
   * Hands V8's recording so far to every member without a gap, and lets each start on its
   * segment. If the other profile cannot start, segments stop (a
   * stop and restart would leave a gap): the recording goes whole to the stop.
   */
  #segment() {
    const cpu0 = native.threadCpuNs();
    const next = this.#startOther();
    if (next === undefined) {
      this.#segmenting = false;
      return;
    }
    this.#collect(true, next);
    this.#segments++;
    for (const m of this.#members) m.onSegment();
    this.noteSegmentCost('handOff', native.threadCpuNs() - cpu0);
  }

  #shutdown() {
    clearTimeout(this.#timer);
    this.#timer = null;
    try {
      post(this.#session, 'Profiler.disable');
    } catch {
      // Disconnecting disables it too.
    }
    this.#session.disconnect();
    this.#session = null;
    this.#console = null;
    this.#consoleProfiles.clear();
    this.#ended = [];
  }

  /**
   * Checks, when the first member could next reach its limit, whether it has; V8 keeps
   * sampling meanwhile, and the signal handler's count says how many samples it took.
   */
  #schedule() {
    clearTimeout(this.#timer);
    if (this.#common === 0) return; // not sampling: nothing fills
    let soonest = Infinity;
    const signals = this.#ticks();
    for (const m of this.#members) {
      const left = m.maxSamples - this.#samplesOf(m, signals);
      soonest = Math.min(soonest, (Math.max(0, left) * m.intervalUs) / 1000);
    }
    if (this.#segmented()) {
      const left = SEGMENT_SIGNALS - (signals - this.#segmentSince);
      soonest = Math.min(soonest, (Math.max(0, left) * this.#common) / 1000);
    }
    if (soonest === Infinity) return;
    // setTimeout turns more than its longest delay into 1 ms: check again then.
    this.#timer = setTimeout(() => this.#check(), Math.min(Math.max(1, soonest), MAX_TIMER_MS));
    this.#timer.unref();
  }

  /** Runs from a timer: nothing here may throw into the application. */
  #check() {
    try {
      const signals = this.#ticks();
      const full = [...this.#members].filter((m) => this.#samplesOf(m, signals) >= m.maxSamples);
      for (const m of full) this.leave(m);
      for (const m of full) m.onFull();
      if (this.#members.size > 0 && full.length === 0) {
        if (this.#segmented() && signals - this.#segmentSince >= SEGMENT_SIGNALS) this.#segment();
        this.#schedule();
      }
    } catch (err) {
      warnOnce('group-check', `selfprof: the sample buffer check failed: ${err.message}`);
    }
  }
}

module.exports = { group: new ProfilerGroup(), SEGMENT_SIGNALS, nodeCpuProfRuns, nodeOptionsArgs };
