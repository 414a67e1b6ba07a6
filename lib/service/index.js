'use strict';
// Service mode: `require('selfprof').start(options)` profiles continuously (wall time,
// labels, CPU time per sample) and ships a pprof profile to each exporter every period.
// A profiler must never take the service down: failures are logged once and contained.

const os = require('node:os');
const { performance } = require('node:perf_hooks');
const { Profiler, stopForExport } = require('../capture/profiler');
const { createExporter } = require('./exporters');
const { validate, fromEnv } = require('./options');
const { warnOnce } = require('../log');
const { requestCounter } = require('../integrations/requests');
const { native, unavailable } = require('../native');
const { version: profilerVersion } = require('../../package.json');
const { gitMetadata } = require('./git');
const symbolize = require('../symbolize');
const profilerFrames = require('../profiler-frames');
const { startHeapSampling, nativeReadUnavailable } = require('../capture/heap');
const { ThreadHub, wrapWorkers, threadName } = require('./threads');
const { wireTracers } = require('../integrations/auto');
const { warnBesideDdTraceProfiler } = require('../integrations/ddtrace');

const EXIT_FLUSH_MS = 2000;

class Session {
  #options;
  #exporters;
  #profiler = null;
  #heap = null;
  #hub = null;
  #seq = 0;
  #timer = null;
  #stopped = false;
  #withTrace = false;
  #requests = requestCounter();
  #tracers = null;

  constructor(options) {
    this.#options = validate(options);
    const meta = {
      service: this.#options.service,
      env: this.#options.env,
      version: this.#options.version,
      tags: this.#options.tags,
      host: os.hostname(),
      profilerVersion,
      pyroscope: this.#options.pyroscope,
      git: gitMetadata(process.env, this.#options.tags ?? {}),
    };
    this.#exporters = this.#options.exporters.map((e) => createExporter(e, meta));
    announce(this.#options, this.#exporters);
    // A file exporter asked for the spec trace too: encode both from one recording.
    this.#withTrace = this.#options.exporters.some((e) => e.type === 'file' && e.trace === true);
    if (!native) {
      // Never break the app: one warning, and a session whose stop() and flush() resolve.
      warnOnce('unavailable', unavailable('profiling').message);
      this.#stopped = true;
      return;
    }
    if (this.#options.spanLabels) {
      try {
        this.#tracers = wireTracers();
      } catch (err) {
        warnOnce('service-tracers', `selfprof: samples will not carry span labels: ${err.message}`);
      }
    }
    warnBesideDdTraceProfiler();
    this.#begin();
    if (this.#options.heap) {
      try {
        this.#heap = startHeapSampling(this.#options.heapSamplingInterval);
      } catch (err) {
        warnOnce('service-heap', `selfprof: heap profiling could not start (CPU profiling goes on): ${err.message}`);
      }
    }
    if (this.#options.workers && require('node:worker_threads').isMainThread) {
      try {
        const config = {
          sampleInterval: this.#options.sampleInterval,
          heap: this.#options.heap,
          heapSamplingInterval: this.#options.heapSamplingInterval,
          profilerFrames: this.#options.profilerFrames,
        };
        wrapWorkers(config);
        this.#hub = new ThreadHub(config);
      } catch (err) {
        warnOnce('service-workers', `selfprof: workers will not be profiled: ${err.message}`);
      }
    }
    this.#timer = setInterval(() => this.#rotate(), this.#options.period);
    this.#timer.unref();
    exitGuard.add(this);
  }

  get exporters() {
    return this.#exporters;
  }

  #begin() {
    try {
      this.#profiler = new Profiler({ sampleInterval: this.#options.sampleInterval, maxBufferSize: 2 ** 32 - 1 });
    } catch (err) {
      this.#profiler = null;
      warnOnce('service-start', `selfprof: profiling could not start: ${err.message}`);
    }
  }

  /** Ends the current period: starts the next profiler, then ships the finished one. */
  #rotate(last = false) {
    this.#tracers?.rotate();
    warnBesideDdTraceProfiler();
    const finished = this.#profiler;
    if (last) this.#profiler = null;
    else this.#begin();
    if (!finished) return Promise.resolve();
    // start and end are the recording's own window, the pprof's time and duration: not
    // when this timer fired, which a busy event loop can put tens of ms away.
    // Each exporter's dialect is encoded once from the one trace (same ones shared).
    const wanted = this.#exporters.map((e) => e.dialect?.());
    const keys = wanted.map((d) => (d ? JSON.stringify(d) : undefined));
    const unique = [...new Set(keys.filter(Boolean))];
    const endpointCounts = this.#requests();
    const snapshot = last || this.#stopped ? 'on_shutdown' : 'periodic';
    const dialects = unique.map((k) => JSON.parse(k));
    // The heap in use now, taken at the same moment as the CPU recording ends.
    const heapChunk = this.#takeHeap();
    if (last) this.#releaseHeap();
    // Every worker's recording of the period, merged into this one (when there are any).
    const collected = this.#hub
      ? this.#hub.collect(++this.#seq, { last, waitMs: Math.min(1000, this.#options.period / 4) }).catch(() => ({ threads: [], heaps: [] }))
      : Promise.resolve({ threads: [], heaps: [] });
    const self = { name: threadName(), id: '0', osId: String(native.threadId()) };
    return finished[stopForExport](this.#options.collectCpuTime, this.#withTrace, {
      lines: this.#options.lines,
      sourceMaps: this.#options.sourceMaps,
      profilerFrames: this.#options.profilerFrames,
      dialects,
      threads: () =>
        collected.then((c) => (c.threads.length ? { threadName: self.name, threadId: self.id, osThreadId: self.osId, threads: c.threads } : {})),
    })
      .then(async ({ pprof, trace, encoded, start, end }) => {
        const { heaps } = await collected;
        const own = heapChunk && { profile: heapChunk.profile, ...(heapChunk.urls && { urls: heapChunk.urls }), atMs: heapChunk.atMs };
        const chunks = own ? [{ ...own, ...(heaps.length && self) }, ...heaps] : heaps;
        // Scripts whose maps Node holds in memory: this thread's maps serve the workers'
        // too when they ran the same code (a worker's own in-memory maps stay in it).
        const scripts = [heapChunk?.scripts ?? [], ...heaps.map((h) => (Array.isArray(h.scripts) ? h.scripts : []))].flat();
        const heap = chunks.length
          ? await this.#encodeHeap(chunks, heapChunk?.interval ?? this.#options.heapSamplingInterval, start, end, dialects, scripts)
          : null;
        this.#exporters.forEach((e, i) => {
          const own = keys[i] ? encoded[unique.indexOf(keys[i])] : pprof;
          const ownHeap = heap && (keys[i] ? heap.encoded[unique.indexOf(keys[i])] : heap.pprof);
          e.push({
            pprof: own,
            trace,
            start,
            end,
            snapshot,
            endpointCounts,
            ...(ownHeap?.length && { heap: ownHeap, heapTrace: heap.trace }),
          });
        });
      })
      .catch((err) => warnOnce('service-export', `selfprof: a profile could not be encoded: ${err.message}`));
  }

  /** This thread's heap snapshot (through V8's C++ API where it can), or null (heap off, or it failed: one warning). */
  #takeHeap() {
    if (!this.#heap) return null;
    try {
      return this.#heap.snapshot();
    } catch (err) {
      warnOnce('service-heap-take', `selfprof: the heap profile could not be taken: ${err.message}`);
      return null;
    }
  }

  #releaseHeap() {
    this.#heap?.release();
    this.#heap = null;
  }

  /** `{ pprof, trace?, encoded }` of the heap snapshot(s), or null: a failure is one warning. */
  async #encodeHeap(chunks, interval, start, end, dialects, scripts) {
    try {
      const out = await native.buildHeapProfile(
        chunks.map(({ profile, urls, atMs, name, id, osId, offsetMs }) => ({ profile, urls, atMs, name, id, osId, offsetMs })),
        {
          startUnixMs: start,
          durationMs: end - start,
          intervalBytes: interval,
          trace: this.#withTrace,
          dialects: JSON.stringify(dialects),
          ...symbolize.buildOptions(this.#options.sourceMaps, symbolize.runtimeScriptsOf(scripts)),
          ...profilerFrames.buildOptions(this.#options.profilerFrames, process.env),
        },
      );
      const [pprof, trace] = this.#withTrace ? out : [out[0], undefined];
      return { pprof, trace, encoded: out.slice(this.#withTrace ? 2 : 1) };
    } catch (err) {
      warnOnce('service-heap-encode', `selfprof: a heap profile could not be encoded: ${err.message}`);
      return null;
    }
  }

  /** Ships the current period now and waits (up to `timeoutMs`) for the uploads. */
  async flush(timeoutMs = EXIT_FLUSH_MS) {
    const deadline = performance.now() + timeoutMs;
    await this.#rotate(this.#stopped);
    await Promise.all(this.#exporters.map((e) => e.flush(Math.max(0, deadline - performance.now()))));
  }

  /**
   * Stops profiling and ships the last partial period: waits up to `timeoutMs` for the
   * uploads, then abandons any still in flight (a receiver that never answers must not hold
   * the process open).
   */
  async stop(timeoutMs = EXIT_FLUSH_MS) {
    if (this.#stopped) return;
    this.#stopped = true;
    clearInterval(this.#timer);
    exitGuard.remove(this);
    this.#tracers?.stop();
    const deadline = performance.now() + timeoutMs;
    await this.#rotate(true);
    this.#releaseHeap();
    this.#hub?.close();
    this.#hub = null;
    await Promise.all(this.#exporters.map((e) => e.close(Math.max(0, deadline - performance.now()))));
  }
}

/**
 * One set of exit handlers for every session in the process: on `beforeExit`, SIGTERM and
 * SIGINT each session ships its last profile (within EXIT_FLUSH_MS), and only when all have
 * is the signal raised again (if the app has no handler of its own). Per-session handlers
 * would let the first session to finish end the process under the others' uploads.
 */
const exitGuard = {
  sessions: new Set(),
  handlers: null,

  add(session) {
    this.sessions.add(session);
    if (this.handlers) return;
    const stopAll = () => Promise.allSettled([...this.sessions].map((s) => s.stop()));
    const onSignal = (signal) => {
      this.uninstall();
      let raised = false;
      const raise = () => {
        if (raised) return;
        raised = true;
        if (process.listenerCount(signal) === 0) process.kill(process.pid, signal);
      };
      setTimeout(raise, EXIT_FLUSH_MS + 500);
      // After the warnings stop() emitted (process.emitWarning writes on a later tick).
      stopAll().then(() => setImmediate(raise));
    };
    this.handlers = [
      ['beforeExit', () => stopAll()],
      ['SIGTERM', onSignal],
      ['SIGINT', onSignal],
    ];
    for (const [event, handler] of this.handlers) process.on(event, handler);
  },

  remove(session) {
    this.sessions.delete(session);
    if (this.sessions.size === 0) this.uninstall();
  },

  uninstall() {
    for (const [event, handler] of this.handlers ?? []) process.removeListener(event, handler);
    this.handlers = null;
  },
};

/**
 * One line at start saying what the session does: its service, how often it samples and
 * ships, and where to (or a warning that nothing receives its profiles). Another session
 * already running is said too: both profile and upload.
 */
function announce(options, exporters) {
  if (!native) return;
  const hz = Math.round(1000 / options.sampleInterval);
  const where = exporters.map((e) => `${e.type} ${e.destination}`).join(', ');
  // Where heap profiles cannot be read through V8's C++ API, each costs the event loop more: said here.
  const slowHeap = options.heap ? nativeReadUnavailable() : null;
  const heap = options.heap ? `, heap too${slowHeap ? ` (read through the inspector: ${slowHeap})` : ''}` : '';
  const what = `selfprof: profiling ${JSON.stringify(options.service)}${options.env ? ` (${options.env})` : ''} at ${hz} Hz${heap}`;
  // A name selfprof found itself says where from (serviceFrom: a package.json, or null).
  const named =
    options.serviceFrom === undefined
      ? ''
      : `; the service name is ${options.serviceFrom ? `the name in ${options.serviceFrom}` : 'the default (no package.json names the app)'}: SELFPROF_SERVICE or DD_SERVICE sets another`;
  if (exporters.length) {
    if ((process.env.SELFPROF_STARTUP_LOG ?? '').trim() !== '0') process.stderr.write(`${what}; a profile every ${options.period / 1000} s to ${where}${named}\n`);
  } else {
    warnOnce(
      'service-no-exporter',
      `${what}, but no exporter is configured: its profiles go nowhere. Set SELFPROF_EXPORTER (datadog, pyroscope, otlp or file, with SELFPROF_EXPORTER_URL or SELFPROF_DIR), or start({ exporters: [...] })`,
    );
  }
  if (exitGuard.sessions.size > 0) {
    warnOnce('service-twice', 'selfprof: start() was called while another session runs (-r selfprof/start, or an earlier start()): both profile and upload; stop() one, or give one start() every exporter');
  }
}

/** Starts continuous profiling; returns the session (`stop()`, `flush()`). */
function start(options = {}) {
  if (options === null || typeof options !== 'object') throw new TypeError('start: options must be an object');
  return new Session(options);
}

module.exports = { start, fromEnv };
