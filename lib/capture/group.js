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
// restart costs V8 ~4 ms of re-logging code, a gap with no samples: a join that keeps
// the GCD does not restart; its member's trace starts at its construction.) A member's
// trace is built from the recordings it was handed.

const { post } = require('./inspector-post');
const { native } = require('../native');
const { warnOnce } = require('../log');
const { runtimeScripts } = require('../symbolize');

let inspector;
function loadInspector() {
  if (inspector === undefined) {
    try {
      inspector = require('node:inspector');
    } catch (err) {
      inspector = null;
      loadInspector.error = err;
    }
  }
  if (inspector === null) {
    throw new DOMException(
      `selfprof needs Node's inspector, which this Node cannot provide: ${loadInspector.error.message}`,
      'NotSupportedError',
    );
  }
  return inspector;
}


const gcd = (a, b) => (b === 0 ? a : gcd(b, a % b));

/** The longest sampling interval the inspector takes: `interval` is an int32 of µs. */
const MAX_INTERVAL_US = 2 ** 31 - 1;
/** setTimeout's longest delay (ms); longer ones fire after 1 ms. */
const MAX_TIMER_MS = 2 ** 31 - 1;

/**
 * A member: `{ intervalUs, maxSamples, onFull }`, given by the group: `recordings`
 * ([{ profile, stride }] in time order), `samples` (its samples in them, estimated from
 * the signal handler's count) and `since` (the signal count it was last counted from).
 */
class ProfilerGroup {
  #members = new Set();
  #session = null;
  #baseUs = 1000;
  #common = 0; // the sampler's interval (µs) while recording, 0 when not
  #timer = null;

  /**
   * Adds a member; V8 samples for it from now on. Transactional: if V8 cannot start for
   * it, it is not a member and the others sample on as before.
   */
  join(member) {
    member.recordings = [];
    member.samples = 0;
    member.since = native.signalCount();
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
    try {
      this.#collect();
    } catch (err) {
      this.#common = 0;
      warnOnce('group-collect', `selfprof: V8's recording could not be taken: ${err.message}`);
    }
    this.#members.delete(member);
    this.#resume();
  }

  /** Restarts V8 for the members left (or shuts it down when none is). */
  #resume() {
    if (this.#members.size === 0) {
      if (this.#session !== null) this.#shutdown();
      return;
    }
    try {
      this.#start();
    } catch (err) {
      // The members keep what they recorded; they take no more samples.
      this.#common = 0;
      clearTimeout(this.#timer);
      warnOnce('group-restart', `selfprof: V8's profiler could not restart; running profilers take no more samples: ${err.message}`);
    }
  }

  get size() {
    return this.#members.size;
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
    const common = [...this.#members].reduce((g, m) => gcd(g, m.intervalUs), 0);
    if (this.#session === null) {
      const session = new (loadInspector().Session)();
      session.connect();
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
    // V8 installs its SIGPROF handler as its sampler starts: chain ours in front.
    try {
      native.installSignalHandler();
    } catch (err) {
      warnOnce('signal', `selfprof: samples will carry no labels: ${err.message}`);
    }
    this.#common = common;
    this.#schedule();
  }

  /** Samples `m` has taken (estimated): its recordings' and the running one's. */
  #samplesOf(m, signals) {
    return m.samples + Math.floor((signals - m.since) / (m.intervalUs / this.#common));
  }

  /** Hands what V8 recorded since the last start to every member. */
  #collect() {
    if (this.#common === 0) return;
    const { profile } = post(this.#session, 'Profiler.stop');
    const json = JSON.stringify(profile);
    const scripts = runtimeScripts(profile); // whose source maps only Node may hold
    const signals = native.signalCount();
    for (const m of this.#members) {
      m.recordings.push({ profile: json, stride: m.intervalUs / this.#common, scripts });
      m.samples = this.#samplesOf(m, signals);
      m.since = signals;
    }
    this.#common = 0;
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
  }

  /**
   * Checks, when the first member could next reach its limit, whether it has; V8 keeps
   * sampling meanwhile, and the signal handler's count says how many samples it took.
   */
  #schedule() {
    clearTimeout(this.#timer);
    if (this.#common === 0) return; // not sampling: nothing fills
    let soonest = Infinity;
    const signals = native.signalCount();
    for (const m of this.#members) {
      const left = m.maxSamples - this.#samplesOf(m, signals);
      soonest = Math.min(soonest, (Math.max(0, left) * m.intervalUs) / 1000);
    }
    if (soonest === Infinity) return;
    // setTimeout turns more than its longest delay into 1 ms: check again then.
    this.#timer = setTimeout(() => this.#check(), Math.min(Math.max(1, soonest), MAX_TIMER_MS));
    this.#timer.unref();
  }

  /** Runs from a timer: nothing here may throw into the application. */
  #check() {
    try {
      const signals = native.signalCount();
      const full = [...this.#members].filter((m) => this.#samplesOf(m, signals) >= m.maxSamples);
      for (const m of full) this.leave(m);
      for (const m of full) m.onFull();
      if (this.#members.size > 0 && full.length === 0) this.#schedule();
    } catch (err) {
      warnOnce('group-check', `selfprof: the sample buffer check failed: ${err.message}`);
    }
  }
}

module.exports = { group: new ProfilerGroup() };
