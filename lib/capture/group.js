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

const { native } = require('../native');
const { warnOnce } = require('../log');

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

// A session connected on this thread dispatches each command synchronously.
function post(session, method, params) {
  let failure;
  let result;
  session.post(method, params, (err, res) => {
    failure = err;
    result = res;
  });
  if (failure) throw failure;
  return result;
}

const gcd = (a, b) => (b === 0 ? a : gcd(b, a % b));

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

  /** Adds a member; V8 samples for it from now on. */
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
    this.#start();
  }

  /** Removes a member; its `recordings` are complete. */
  leave(member) {
    if (!this.#members.has(member)) return;
    this.#collect();
    this.#members.delete(member);
    if (this.#members.size > 0) this.#start();
    else this.#shutdown();
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

  /** The interval (µs) used for a requested one (ms): the next multiple of the base. */
  intervalFor(requestedMs) {
    return Math.max(1, Math.ceil((requestedMs * 1000) / this.#baseUs - 1e-9)) * this.#baseUs;
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
    const signals = native.signalCount();
    for (const m of this.#members) {
      m.recordings.push({ profile: json, stride: m.intervalUs / this.#common });
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
    let soonest = Infinity;
    const signals = native.signalCount();
    for (const m of this.#members) {
      const left = m.maxSamples - this.#samplesOf(m, signals);
      soonest = Math.min(soonest, (Math.max(0, left) * m.intervalUs) / 1000);
    }
    if (soonest === Infinity) return;
    // setTimeout takes at most 2^31 - 1 ms (and turns more into 1 ms): check again then.
    this.#timer = setTimeout(() => this.#check(), Math.min(Math.max(1, soonest), 2 ** 31 - 1));
    this.#timer.unref();
  }

  #check() {
    const signals = native.signalCount();
    const full = [...this.#members].filter((m) => this.#samplesOf(m, signals) >= m.maxSamples);
    for (const m of full) this.leave(m);
    for (const m of full) m.onFull();
    if (this.#members.size > 0 && full.length === 0) this.#schedule();
  }
}

module.exports = { group: new ProfilerGroup() };
