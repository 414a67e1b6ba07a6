'use strict';
// Every thread in service mode. Each isolate samples with its own profiler (V8's CPU
// profiler and heap sampler are per isolate), so each worker_thread runs an agent
// (`worker.js`) that records its thread and hands each period's recording to the main
// thread over a BroadcastChannel; the main thread's session merges them into its own
// period's profile (in Rust, `src/formats/threads.rs`), every sample labeled with its
// thread (`thread name`, `thread id`, `os thread id`).
//
// How the agent gets into a worker: a preload (`node -r selfprof/start`, or NODE_OPTIONS)
// runs in every worker by itself; `start()` also wraps `worker_threads.Worker` so that
// workers created after it get the agent (`--require` in their execArgv). Workers created
// before `start()`, or from a `Worker` class taken before it, are not profiled unless the
// worker script requires `selfprof/worker` itself.

const path = require('node:path');
const wt = require('node:worker_threads');
const { performance } = require('node:perf_hooks');
const { warnOnce } = require('../log');

const CHANNEL = 'selfprof:threads:v1';
/** Threads profiled at once, the main thread included (the native cell table holds 64,
 * shared by every copy of selfprof in the process). Past it a worker is not profiled. */
const MAX_PROFILED_THREADS = 32;
const AGENT = path.join(__dirname, 'worker.js');
const WRAPPED = Symbol.for('selfprof.workerWrapped');

/** dd-trace's thread names. */
function threadName(id = wt.threadId) {
  return id === 0 ? 'Main Event Loop' : `Worker #${id} Event Loop`;
}

/** What the wrapped Worker tells its agents (the running session's), in their env. */
let workerConfig = null;
const CONFIG_ENV = 'SELFPROF_WORKER_CONFIG';

/**
 * Makes workers created from now on load the agent, with `config` in their environment so
 * that they record from their first line (a busy worker reads no message for a while).
 * Idempotent; the latest config wins.
 */
function wrapWorkers(config) {
  workerConfig = config;
  const Original = wt.Worker;
  if (Original[WRAPPED]) return;
  class Worker extends Original {
    constructor(filename, options) {
      const o = options ?? {};
      const execArgv = o.execArgv ?? process.execArgv;
      const withConfig = (env) => (workerConfig ? { ...env, [CONFIG_ENV]: JSON.stringify(workerConfig) } : env);
      // SHARE_ENV: the agent waits for the session's config message instead.
      const env = o.env === wt.SHARE_ENV ? o.env : withConfig(o.env ?? process.env);
      super(filename, { ...o, execArgv: [...execArgv, '--require', AGENT], env });
    }
  }
  Object.defineProperty(Worker, 'name', { value: 'Worker' });
  Worker[WRAPPED] = true;
  wt.Worker = Worker;
  try {
    require('node:module').syncBuiltinESMExports();
  } catch {
    // ESM importers keep the original: documented.
  }
}

/**
 * The main thread's end: tells workers how to record, asks them for their recordings at
 * each rotation and waits (up to `waitMs`) for the live ones.
 */
class ThreadHub {
  #channel;
  #config;
  #live = new Map(); // threadId -> name
  #pending = [];
  #wake = null;

  constructor(config) {
    this.#config = config;
    this.#channel = new wt.BroadcastChannel(CHANNEL);
    this.#channel.unref?.();
    this.#channel.onmessage = (e) => this.#receive(e.data);
    this.#post({ type: 'config', ...config });
  }

  #post(message) {
    try {
      this.#channel.postMessage(message);
    } catch (err) {
      warnOnce('threads-post', `selfprof: workers could not be reached: ${err.message}`);
    }
  }

  #receive(m) {
    if (m === null || typeof m !== 'object') return;
    if (m.type === 'hello') {
      this.#post({ type: 'config', ...this.#config });
    } else if (m.type === 'started') {
      this.#live.set(m.threadId, m.name);
    } else if (m.type === 'over-cap') {
      warnOnce(
        'threads-cap',
        `selfprof: more than ${MAX_PROFILED_THREADS} threads at once; worker ${m.threadId} and any others past the cap are not profiled`,
      );
    } else if (m.type === 'recording') {
      this.#pending.push(m);
      if (m.final) this.#live.delete(m.threadId);
      this.#wake?.();
    }
  }

  get workers() {
    return this.#live.size;
  }

  /**
   * Asks every worker for its recording and resolves, once each live worker answered (or
   * after `waitMs`), to `{ threads, heaps }`: the recordings to merge (late ones of
   * earlier periods included), as `ThreadInput`s and heap chunks.
   */
  async collect(seq, { last = false, waitMs = 1000 } = {}) {
    this.#post({ type: 'collect', seq, last });
    const deadline = performance.now() + waitMs;
    while (!this.#answered(seq) && performance.now() < deadline) {
      await new Promise(/** @param {(value?: void) => void} resolve */ (resolve) => {
        const timer = setTimeout(resolve, Math.max(1, deadline - performance.now()));
        this.#wake = () => {
          clearTimeout(timer);
          resolve();
        };
      });
      this.#wake = null;
    }
    return this.#taken();
  }

  /**
   * collect() for the process's 'exit' event, which cannot wait: the same question, the
   * answers read off the channel while this thread sleeps (the workers build theirs on
   * their own threads), up to `waitMs`.
   */
  collectSync(seq, { last = false, waitMs = 1000 } = {}) {
    this.#post({ type: 'collect', seq, last });
    const deadline = performance.now() + waitMs;
    const nap = new Int32Array(new SharedArrayBuffer(4));
    for (;;) {
      for (let m = wt.receiveMessageOnPort(this.#channel); m; m = wt.receiveMessageOnPort(this.#channel)) this.#receive(m.message);
      const left = deadline - performance.now();
      if (this.#answered(seq) || left <= 0) break;
      Atomics.wait(nap, 0, 0, Math.min(10, left));
    }
    return this.#taken();
  }

  /** Whether every live worker sent its recording of collection `seq` (or its last). */
  #answered(seq) {
    return [...this.#live.keys()].every((id) => this.#pending.some((r) => r.threadId === id && (r.seq >= seq || r.final)));
  }

  /** The recordings received, as `{ threads, heaps }` to merge; they are taken. */
  #taken() {
    const taken = this.#pending;
    this.#pending = [];
    const origin = performance.timeOrigin;
    const identity = (r) => ({ name: r.name, id: String(r.threadId), osId: r.osId, offsetMs: r.timeOrigin - origin });
    // A heap read through V8's API: its bytes, and the URLs of the scripts they index.
    const urls = (u) => (Array.isArray(u) && u.every((x) => typeof x === 'string') ? { urls: u } : {});
    return {
      threads: taken.filter((r) => r.trace).map((r) => ({ trace: Buffer.from(r.trace), ...identity(r) })),
      heaps: taken.filter((r) => r.heap).map((r) => ({ profile: r.heap.profile, ...urls(r.heap.urls), atMs: r.heap.atMs, scripts: r.heap.scripts, ...identity(r) })),
    };
  }

  close() {
    this.#post({ type: 'stop' });
    this.#channel.close();
  }
}

module.exports = { CHANNEL, CONFIG_ENV, MAX_PROFILED_THREADS, threadName, wrapWorkers, ThreadHub };
