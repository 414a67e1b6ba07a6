'use strict';
// `selfprof record`: preloaded into the recorded Node process (NODE_OPTIONS=--require), and
// so into each of its worker_threads too. Profiles the thread from start to exit and
// writes, on the way out, to SELFPROF_RECORD_DIR as selfprof-<pid>-<threadId>.*: the
// trace (json-gzip), on the main thread the pprof of the same recording, with
// SELFPROF_RECORD_HEAP the sampling heap profile (flattened JSON), and a meta.json saying
// which process and thread it was (the recorder merges threads and names processes).
// Exit of any kind is covered: the end of the program, process.exit(), an uncaught
// exception (the 'exit' event, with a synchronous build), and SIGINT/SIGTERM/SIGHUP
// (written, then the signal is raised again unless the app handles it). Workers still
// running when the main thread exits are asked to write theirs first (up to 2 s). Exit
// without JS (SIGKILL, a crash, `worker.terminate()`) runs none of that: for it, a second
// profiler records beside the first and is replaced every CHECKPOINT_MS, each part it
// recorded written as selfprof-<pid>-<threadId>.part-<n>.trace.json.gz; the recorder uses
// them only for a thread that wrote no trace. Samples carry the labels of the tracer the
// program runs (OpenTelemetry, dd-trace), wired as service mode wires it
// (lib/integrations/auto.js; SELFPROF_SPAN_LABELS=0 leaves it out). Never fails the app: a
// problem is one warning, and a thread that cannot write (a full disk) leaves an empty file
// naming the error's code (selfprof-<pid>-<threadId>.failed-ENOSPC), which the recorder
// reports.

const wt = require('node:worker_threads');

const CHANNEL = 'selfprof:record:v1';
/** Threads recorded at once, as in service mode (the native cell table holds 64). */
const MAX_RECORDED_THREADS = 32;
const WORKER_FLUSH_MS = 2000;
/** How often a checkpoint of each thread's recording is written (SELFPROF_RECORD_CHECKPOINT_MS). */
const CHECKPOINT_MS = 5000;

function record(env) {
  const fs = require('node:fs');
  const path = require('node:path');
  const { performance } = require('node:perf_hooks');
  const { native } = require('../native');
  const dir = env.SELFPROF_RECORD_DIR;
  const base = path.join(dir, `selfprof-${process.pid}-${wt.threadId}`);
  if (!wt.isMainThread && native && !native.claimProfiledWorker(MAX_RECORDED_THREADS - 1)) {
    // Past the cap: not recorded; the recorder says how many.
    fs.writeFileSync(`${base}.skipped`, '');
    return;
  }
  const { Profiler, stopSync } = require('../capture/profiler');
  const { threadName } = require('../service/threads');
  const profiler = new Profiler({
    sampleInterval: Number(env.SELFPROF_RECORD_INTERVAL_MS || 1),
    maxBufferSize: Number(env.SELFPROF_RECORD_MAX_SAMPLES || 10_000_000),
  });
  // Labels from the app's tracer: its spans' ids and routes, as service mode gives them
  // (on the main thread, where service mode wires them too).
  const { envSwitchOn } = require('../log');
  if (wt.isMainThread && envSwitchOn('SELFPROF_SPAN_LABELS')) {
    try {
      require('../integrations/auto').wireTracers();
    } catch (err) {
      process.emitWarning(`selfprof record: samples will not carry span labels: ${err.message}`, { code: 'SELFPROF_RECORD' });
    }
  }
  let heap = null;
  if (env.SELFPROF_RECORD_HEAP) {
    const { startHeapSampling } = require('../capture/heap');
    try {
      heap = startHeapSampling(Number(env.SELFPROF_RECORD_HEAP));
    } catch (err) {
      process.emitWarning(`selfprof record: no heap profile: ${err.message}`, { code: 'SELFPROF_RECORD' });
    }
  }
  const meta = () => ({
    pid: process.pid,
    ppid: process.ppid,
    threadId: wt.threadId,
    name: threadName(),
    osThreadId: native.threadId(),
    timeOrigin: performance.timeOrigin,
    argv: process.argv,
    execArgv: process.execArgv,
  });
  // Which process and thread, for the checkpoints of one that never gets to write its trace.
  fs.writeFileSync(`${base}.meta.json`, JSON.stringify(meta()));
  const channel = new wt.BroadcastChannel(CHANNEL);
  channel.unref?.();
  let written = false;
  const checkpoints = startCheckpoints(env, base, profiler, () => written);
  const write = () => {
    if (written) return;
    written = true;
    try {
      const formats = wt.isMainThread ? ['json-gzip', 'pprof'] : ['json-gzip'];
      // The trace carries its hot lines' text (the report's), unless record --no-sources.
      const [trace, pprof] = profiler[stopSync](formats[0], formats[1], { sourceText: env.SELFPROF_RECORD_SOURCES !== '0' });
      let heapChunk = null;
      try {
        heapChunk = heap?.take() ?? null;
      } catch (err) {
        process.emitWarning(`selfprof record: the heap profile could not be taken: ${err.message}`, { code: 'SELFPROF_RECORD' });
      }
      if (pprof) fs.writeFileSync(`${base}.pb.gz`, pprof);
      if (heapChunk) {
        // The maps Node holds for scripts compiled in memory (tsx) exist only here: the CLI
        // maps the heap profile's frames with them (unless SELFPROF_SOURCE_MAPS=0).
        const symbolize = require('../symbolize');
        const { scripts, ...chunk } = heapChunk;
        const scriptMaps = symbolize.enabled(undefined) ? symbolize.runtimeMaps(scripts) : [];
        fs.writeFileSync(`${base}.heap.json`, JSON.stringify({ ...chunk, scriptMaps }));
      }
      fs.writeFileSync(`${base}.meta.json`, JSON.stringify(meta()));
      // The trace last: the recorder takes it as the sign that all are complete.
      fs.writeFileSync(`${base}.trace.json.gz.tmp`, trace);
      fs.renameSync(`${base}.trace.json.gz.tmp`, `${base}.trace.json.gz`);
    } catch (err) {
      // At exit: a warning emitted on a later tick would never be seen.
      warnNow(`selfprof record: the profile could not be written: ${err.code ?? err.message}`, 'SELFPROF_RECORD');
      markFailed(base, err);
    }
    checkpoints.end();
    if (!wt.isMainThread) {
      try {
        channel.postMessage({ type: 'written', threadId: wt.threadId });
      } catch {
        // the main thread is gone
      }
    }
  };
  process.on('exit', write);
  if (!wt.isMainThread) {
    // The main thread is exiting: a worker's own 'exit' will not run once it is terminated.
    channel.onmessage = (e) => e.data?.type === 'flush' && write();
    channel.postMessage({ type: 'started', threadId: wt.threadId });
    return;
  }
  // The main thread: which workers are recording, so that it can wait for them at exit.
  const live = new Set();
  channel.onmessage = (e) => {
    if (e.data?.type === 'started') live.add(e.data.threadId);
    else if (e.data?.type === 'written') live.delete(e.data.threadId);
  };
  const flushWorkers = () => {
    if (live.size === 0) return;
    try {
      channel.postMessage({ type: 'flush' });
    } catch {
      return;
    }
    // The workers write on their own threads; this one waits for their files (messages
    // cannot arrive while it waits), at most WORKER_FLUSH_MS.
    const deadline = Date.now() + WORKER_FLUSH_MS;
    const nap = new Int32Array(new SharedArrayBuffer(4));
    const pending = () => [...live].filter((id) => !fs.existsSync(path.join(dir, `selfprof-${process.pid}-${id}.trace.json.gz`)));
    while (pending().length && Date.now() < deadline) Atomics.wait(nap, 0, 0, 10);
  };
  process.on('exit', flushWorkers);
  for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP']) {
    const onSignal = () => {
      write();
      flushWorkers();
      process.removeListener(signal, onSignal);
      if (process.listenerCount(signal) === 0) process.kill(process.pid, signal);
    };
    process.on(signal, onSignal);
  }
}

/**
 * Records this thread a second time, beside `profiler`, in parts: every
 * SELFPROF_RECORD_CHECKPOINT_MS (0: never) a new profiler takes over (the group hands V8's
 * recording from one to the other without a gap) and the part the old one recorded is
 * built off the main thread and written, unless the thread has written its whole trace
 * by then (`done()`). Not beside `node --cpu-prof`, where a hand-off would stop and
 * restart V8, a gap in the whole recording too. Returns `{ end() }`, which stops it.
 */
function startCheckpoints(env, base, profiler, done) {
  const fs = require('node:fs');
  const { Profiler } = require('../capture/profiler');
  const { group } = require('../capture/group');
  const ms = env.SELFPROF_RECORD_CHECKPOINT_MS === undefined ? CHECKPOINT_MS : Number(env.SELFPROF_RECORD_CHECKPOINT_MS);
  if (!(ms > 0) || !group.handOffs) return { end() {} };
  let warned = false;
  const warn = (what, err) => {
    if (!warned) process.emitWarning(`selfprof record: ${what}: ${err.message}`, { code: 'SELFPROF_RECORD' });
    warned = true;
  };
  const start = () => new Profiler({ sampleInterval: profiler.sampleInterval, maxBufferSize: 2 ** 32 - 1 });
  let current;
  try {
    current = start();
  } catch (err) {
    warn('no checkpoints', err);
    return { end() {} };
  }
  let parts = 0;
  const timer = setInterval(() => {
    const finished = current;
    try {
      current = start(); // before the stop: the stop then hands off to it
    } catch (err) {
      // No more checkpoints; the last one written stands.
      clearInterval(timer);
      current = null;
      finished.stop().catch(() => {});
      warn('no more checkpoints', err);
      return;
    }
    const file = `${base}.part-${String(++parts).padStart(6, '0')}.trace.json.gz`;
    finished
      .stop({ format: 'json-gzip' })
      .then(async (gz) => {
        if (done()) return;
        await fs.promises.writeFile(`${file}.tmp`, gz);
        await fs.promises.rename(`${file}.tmp`, file);
      })
      .catch((err) => warn('a checkpoint could not be written', err));
  }, ms);
  timer.unref();
  return {
    end() {
      clearInterval(timer);
      // At exit its build never runs: this only lets go of the sampler. (The recorder
      // leaves the parts of a thread that wrote its trace unused.)
      current?.stop().catch(() => {});
      current = null;
    },
  };
}

/**
 * Leaves, best effort, an empty file saying this thread could not write and why (an empty
 * file takes no data block: it can still be made on a full disk).
 */
function markFailed(base, err) {
  const code = /^[A-Z0-9_]+$/.test(err?.code ?? '') ? err.code : 'ERROR';
  try {
    require('node:fs').closeSync(require('node:fs').openSync(`${base}.failed-${code}`, 'w'));
  } catch {
    // nothing more can be said
  }
}

function warnNow(message, code) {
  require('../log').warnNow(message, code);
}

if (process.env.SELFPROF_RECORD_DIR) {
  try {
    record(process.env);
  } catch (err) {
    process.emitWarning(`selfprof record: not recording: ${err.message}`, { code: 'SELFPROF_RECORD' });
    markFailed(require('node:path').join(process.env.SELFPROF_RECORD_DIR, `selfprof-${process.pid}-${wt.threadId}`), err);
  }
}

module.exports = { MAX_RECORDED_THREADS, CHECKPOINT_MS };
