'use strict';
// The service-mode agent in a worker_thread (`require('selfprof/worker')`, or loaded by the
// wrapped `Worker` / a preload): once the main thread's session says how (a `config` on
// the BroadcastChannel), it records this thread's CPU (and heap), and hands each
// recording to the main thread when asked (`collect`), and its last one when the worker
// ends (its 'exit' event: a worker ended by `terminate()` runs no JS, so what it recorded
// since the last collection is lost). Never fails the worker: a problem is one warning.

const wt = require('node:worker_threads');

const AGENT = Symbol.for('selfprof.workerAgent');

/** The session's `profilerFrames` (undefined: SELFPROF_PROFILER_FRAMES decides). */
const frames = (config) => (typeof config?.profilerFrames === 'boolean' ? config.profilerFrames : undefined);

function agent() {
  const { performance } = require('node:perf_hooks');
  const { native } = require('../native');
  const { CHANNEL, CONFIG_ENV, MAX_PROFILED_THREADS, threadName } = require('./threads');
  const { tryLabelsForTrace } = require('../capture/labels');
  if (!native) return;
  const channel = new wt.BroadcastChannel(CHANNEL);
  channel.unref?.();
  const name = threadName();
  const post = (m) => {
    try {
      channel.postMessage(m);
    } catch {
      // The main thread is gone.
    }
  };
  const { warnOnce } = require('../log');
  // Loaded once a session asks: loading them claims this thread's label cell.
  let Profiler;
  let stopSync;
  let startHeapSampling;
  let config = null;
  let profiler = null;
  let heap = null;
  let ended = false;
  const identity = () => ({ threadId: wt.threadId, name, osId: String(native.threadId()), timeOrigin: performance.timeOrigin });

  const begin = () => {
    try {
      profiler = new Profiler({ sampleInterval: config.sampleInterval, maxBufferSize: 2 ** 32 - 1 });
    } catch (err) {
      profiler = null;
      warnOnce('worker-start', `selfprof: worker ${wt.threadId} could not be profiled: ${err.message}`);
    }
  };
  const takeHeap = () => {
    if (!heap) return null;
    // The CPU recording's labels first (see the service's #takeHeap).
    tryLabelsForTrace();
    try {
      return heap.snapshot();
    } catch {
      return null;
    }
  };

  const collect = async (seq, last) => {
    collected = true;
    const finished = profiler;
    const heapChunk = takeHeap();
    if (last) {
      profiler = null;
      heap?.release();
      heap = null;
    } else begin();
    let trace = null;
    try {
      // selfprof's own frames as the session shows them (`start({ profilerFrames })`).
      trace = finished ? await finished.stop({ format: 'json-gzip', profilerFrames: frames(config) }) : null;
    } catch (err) {
      warnOnce('worker-collect', `selfprof: worker ${wt.threadId}'s recording could not be built: ${err.message}`);
    }
    post({ type: 'recording', seq, final: last, ...identity(), trace, heap: heapChunk });
  };

  const configure = (m) => {
      // Checked before anything claims this thread's label cell.
      if (!native.claimProfiledWorker(MAX_PROFILED_THREADS - 1)) {
        ended = true;
        post({ type: 'over-cap', threadId: wt.threadId });
        channel.close();
        return;
      }
      ({ Profiler, stopSync } = require('../capture/profiler'));
      ({ startHeapSampling } = require('../capture/heap'));
      config = m;
      begin();
      if (m.heap) {
        try {
          heap = startHeapSampling(m.heapSamplingInterval);
        } catch (err) {
          warnOnce('worker-heap', `selfprof: worker ${wt.threadId}'s heap could not be profiled: ${err.message}`);
        }
      }
      post({ type: 'started', ...identity() });
  };
  channel.onmessage = (e) => {
    const m = e.data;
    if (ended || m === null || typeof m !== 'object') return;
    if (m.type === 'config' && config === null) {
      configure(m);
    } else if (m.type === 'config') {
      // Already recording (from the environment's config): the session learns of it.
      post({ type: 'started', ...identity() });
    } else if (m.type === 'collect' && config !== null) {
      collect(m.seq, m.last === true);
      if (m.last) ended = true;
    } else if (m.type === 'stop') {
      stopAll();
    }
  };
  function stopAll() {
    ended = true;
    try {
      profiler?.stop().catch(() => {});
    } catch {
      // already stopped
    }
    profiler = null;
    heap?.release();
    heap = null;
    channel.close();
  }
  // The worker ends: its last recording, built here (an 'exit' handler cannot wait).
  process.on('exit', () => {
    if (ended || config === null) return;
    ended = true;
    let trace;
    try {
      trace = profiler ? profiler[stopSync]('json-gzip', undefined, { profilerFrames: frames(config) })[0] : null;
    } catch {
      trace = null;
    }
    post({ type: 'recording', seq: -1, final: true, ...identity(), trace, heap: takeHeap() });
  });
  // A session that started this worker put its config in the environment: record from
  // the first line. Otherwise (a preload, SHARE_ENV), from the session's answer to hello.
  let fromEnv;
  try {
    fromEnv = process.env[CONFIG_ENV] ? JSON.parse(process.env[CONFIG_ENV]) : null;
  } catch {
    fromEnv = null;
  }
  if (fromEnv && typeof fromEnv === 'object') {
    configure({ type: 'config', ...fromEnv });
    // Nobody collects (the session stopped before this worker started): stop recording.
    const orphan = setTimeout(() => {
      if (!collected && !ended) stopAll();
    }, ORPHAN_MS);
    orphan.unref();
  }
  post({ type: 'hello', threadId: wt.threadId });
}

const ORPHAN_MS = 5 * 60_000;
let collected = false;


if (!wt.isMainThread && !globalThis[AGENT]) {
  globalThis[AGENT] = true;
  try {
    agent();
  } catch (err) {
    process.emitWarning(`selfprof: worker ${wt.threadId} not profiled: ${err.message}`, { code: 'SELFPROF_WORKER' });
  }
}
