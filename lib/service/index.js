'use strict';
// Service mode: `require('selfprof').start(options)` profiles continuously (wall time,
// labels, CPU time per sample) and ships a pprof profile to each exporter every period.
// A profiler must never take the service down: failures are logged once and contained.

const os = require('node:os');
const { performance } = require('node:perf_hooks');
const { Profiler, stopForExport, stopForExportSync } = require('../capture/profiler');
const { createExporter } = require('./exporters');
const { validate, fromEnv } = require('./options');
const { warnOnce, warnNow } = require('../log');
const { exitGuard, EXIT_BUDGET_MS } = require('./exit');
const { windowOf } = require('./exporters/uploader');
const { requestCounter } = require('../integrations/requests');
const { native, unavailable } = require('../native');
const { version: profilerVersion } = require('../../package.json');
const { gitMetadata } = require('./git');
const symbolize = require('../symbolize');
const profilerFrames = require('../profiler-frames');
const { startHeapSampling, nativeReadUnavailable } = require('../capture/heap');
const { tryLabelsForTrace } = require('../capture/labels');
const { ThreadHub, wrapWorkers, threadName } = require('./threads');
const { wireTracers } = require('../integrations/auto');
const { setOperationEndpoints } = require('../integrations/operations');
const { warnBesideDdTraceProfiler } = require('../integrations/ddtrace');

const EXIT_FLUSH_MS = EXIT_BUDGET_MS;
/** A session's request counts where no exporter takes them: none. */
const NO_COUNTS = Object.assign(() => undefined, { close() {} });

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
  /** Requests per endpoint, counted only for Datadog's uploads (its endpoint_counts): with
   * no Datadog exporter, the integrations work out no endpoint as a request ends. */
  #requests = NO_COUNTS;
  #tracers = null;
  /** When the current period began (Date.now()). */
  #periodStart = Date.now();
  /** The windows of the periods being built on the thread pool (for the exit's warning). */
  #building = new Set();

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
    if (this.#exporters.some((e) => e.type === 'datadog')) this.#requests = requestCounter();
    // A file exporter asked for the spec trace too: encode both from one recording.
    this.#withTrace = this.#options.exporters.some((e) => e.type === 'file' && e.trace === true);
    if (!native) {
      // Never break the app: one warning, and a session whose stop() and flush() resolve.
      warnOnce('unavailable', unavailable('profiling').message);
      this.#stopped = true;
      this.#requests.close();
      return;
    }
    if (this.#options.spanLabels) {
      try {
        setOperationEndpoints(this.#options.operationEndpoints);
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
    this.#periodStart = Date.now();
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
    const window = { start: this.#periodStart, end: Date.now() };
    if (last) this.#profiler = null;
    else this.#begin();
    if (!finished) return Promise.resolve();
    // start and end are the recording's own window, the pprof's time and duration: not
    // when this timer fired, which a busy event loop can put tens of ms away.
    const dialects = this.#dialects();
    const endpointCounts = this.#requests();
    const snapshot = last || this.#stopped ? 'on_shutdown' : 'periodic';
    // The heap in use now, taken at the same moment as the CPU recording ends.
    const heapChunk = this.#takeHeap();
    if (last) this.#releaseHeap();
    // Every worker's recording of the period, merged into this one (when there are any).
    const collected = this.#hub
      ? this.#hub.collect(++this.#seq, { last, waitMs: Math.min(1000, this.#options.period / 4) }).catch(() => ({ threads: [], heaps: [] }))
      : Promise.resolve({ threads: [], heaps: [] });
    const self = this.#self();
    this.#building.add(window);
    return finished[stopForExport](this.#options.collectCpuTime, this.#withTrace, {
      ...this.#buildOptions(dialects.list),
      threads: () => collected.then((c) => this.#threadsOption(self, c.threads)),
    })
      .then(async (out) => {
        const { heaps } = await collected;
        const heap = await this.#encodeHeap(this.#heapChunks(heapChunk, heaps, self), heapChunk, out, dialects.list);
        const profiles = this.#profilesFor(out, heap, dialects, endpointCounts, snapshot);
        this.#exporters.forEach((e, i) => e.push(profiles[i]));
      })
      .catch((err) => warnOnce('service-export', `selfprof: a profile could not be encoded: ${err.message}`))
      .finally(() => this.#building.delete(window));
  }

  /**
   * The process's 'exit' event (exit.js), which runs nothing after it: the session ends
   * here, its last period built on this thread; returns, for each exporter, what it is to
   * deliver now (`[{ exporter, profiles }]`: what it has not delivered, and the last). A
   * period still being built on the thread pool cannot be waited for: one warning says so.
   */
  atExit(deadline) {
    clearInterval(this.#timer);
    this.#tracers?.stop();
    const last = this.#periodSync(deadline, true, 'at exit');
    this.#profiler = null;
    this.#requests.close();
    this.#releaseHeap();
    this.#hub?.close();
    this.#hub = null;
    this.#stopped = true;
    this.#warnBuilding('when the process exited');
    return this.#exporters.map((e, i) => ({ exporter: e, profiles: e.takeAtExit(last?.[i]) }));
  }

  /** One warning, at once, naming the periods still being built on the thread pool (lost). */
  #warnBuilding(when) {
    if (this.#building.size === 0) return;
    const windows = [...this.#building].map(windowOf);
    warnNow(
      `selfprof: the profile${windows.length > 1 ? 's' : ''} of ${windows.join(', ')} ${windows.length > 1 ? 'were' : 'was'} still being encoded ${when}, and ${windows.length > 1 ? 'are' : 'is'} lost`,
      'SELFPROF_SERVICE_EXIT',
    );
  }

  /**
   * A signal's stop() ran out of time and the signal ends the process now (exit.js): what
   * the stop had not delivered, and the periods still being built, are said at once.
   */
  abandonNow(signal) {
    this.#warnBuilding(`when ${signal} ended the process`);
    this.#building.clear();
    for (const e of this.#exporters) e.abandonNow();
  }

  /**
   * A signal the app handles came (exit.js): its handler may end the process without
   * another turn of the event loop (signal-exit raises the signal again), so the period so
   * far is built here and returned with what is waiting, as atExit's are, for delivery
   * now; the session goes on, its next period begun.
   */
  atSignal(deadline, signal) {
    if (this.#stopped) return [];
    const now = this.#periodSync(deadline, false, `at ${signal}`);
    return this.#exporters.map((e, i) => ({ exporter: e, profiles: [...e.takeWaiting(), ...(now ? e.expand(now[i]) : [])] }));
  }

  /**
   * #rotate on this thread, for the exit (`last`) or a signal: each exporter's profile of
   * the period, or null (none recorded, or it failed: one warning, `when` it did).
   */
  #periodSync(deadline, last, when) {
    if (!this.#profiler) return null;
    try {
      return this.#buildSync(deadline, last);
    } catch (err) {
      warnNow(`selfprof: the ${last ? 'last ' : ''}profile could not be encoded ${when}: ${err.message}`, 'SELFPROF_SERVICE_EXIT');
      return null;
    }
  }

  #buildSync(deadline, last) {
    this.#tracers?.rotate();
    const finished = this.#profiler;
    if (last) this.#profiler = null;
    else this.#begin();
    const dialects = this.#dialects();
    const endpointCounts = this.#requests();
    const heapChunk = this.#takeHeap();
    // The workers build theirs on their own threads meanwhile (a quarter of the budget).
    const collected = this.#hub ? this.#hub.collectSync(++this.#seq, { last, waitMs: Math.max(0, (deadline - performance.now()) / 4) }) : { threads: [], heaps: [] };
    const self = this.#self();
    const out = finished[stopForExportSync](this.#options.collectCpuTime, this.#withTrace, {
      ...this.#buildOptions(dialects.list),
      threads: this.#threadsOption(self, collected.threads),
    });
    const heap = this.#encodeHeapSync(this.#heapChunks(heapChunk, collected.heaps, self), heapChunk, out, dialects.list);
    return this.#profilesFor(out, heap, dialects, endpointCounts, 'on_shutdown');
  }

  /**
   * The dialects the exporters want (`list`, each encoded once from the one trace, same
   * ones shared) and which is whose (`keys[i]`: exporter i's, or undefined: the plain pprof).
   */
  #dialects() {
    const keys = this.#exporters.map((e) => e.dialect?.()).map((d) => (d ? JSON.stringify(d) : undefined));
    const unique = [...new Set(keys.filter(Boolean))];
    return { keys, unique, list: unique.map((k) => JSON.parse(k)) };
  }

  #buildOptions(dialects) {
    return { lines: this.#options.lines, sourceMaps: this.#options.sourceMaps, profilerFrames: this.#options.profilerFrames, dialects };
  }

  #self() {
    return { name: threadName(), id: '0', osId: String(native.threadId()) };
  }

  /** The build's options for the workers' recordings to merge (none: {}). */
  #threadsOption(self, threads) {
    return threads.length ? { threadName: self.name, threadId: self.id, osThreadId: self.osId, threads } : {};
  }

  /** This thread's heap chunk and the workers', as the heap build takes them. */
  #heapChunks(heapChunk, heaps, self) {
    const own = heapChunk && { profile: heapChunk.profile, ...(heapChunk.urls && { urls: heapChunk.urls }), atMs: heapChunk.atMs };
    return own ? [{ ...own, ...(heaps.length && self) }, ...heaps] : heaps;
  }

  /** Each exporter's profile of a period: its dialect's encodings. */
  #profilesFor({ pprof, trace, encoded, start, end }, heap, dialects, endpointCounts, snapshot) {
    return this.#exporters.map((e, i) => {
      const key = dialects.keys[i];
      const own = key ? encoded[dialects.unique.indexOf(key)] : pprof;
      const ownHeap = heap && (key ? heap.encoded[dialects.unique.indexOf(key)] : heap.pprof);
      return { pprof: own, trace, start, end, snapshot, endpointCounts, ...(ownHeap?.length && { heap: ownHeap, heapTrace: heap.trace }) };
    });
  }

  /** This thread's heap snapshot (through V8's C++ API where it can), or null (heap off, or it failed: one warning). */
  #takeHeap() {
    if (!this.#heap) return null;
    // What the CPU recording sampled keeps its labels first: reading the heap allocates,
    // and a collection then would let go of the stores the handler queued since JS last
    // looked (their samples would carry none).
    tryLabelsForTrace();
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

  /** The heap build's inputs and options, or null without heap chunks. */
  #heapBuild(chunks, heapChunk, { start, end }, dialects) {
    if (!chunks.length) return null;
    // Scripts whose maps Node holds in memory: this thread's maps serve the workers'
    // too when they ran the same code (a worker's own in-memory maps stay in it).
    const scripts = [heapChunk?.scripts ?? [], ...chunks.map((h) => (Array.isArray(h.scripts) ? h.scripts : []))].flat();
    return [
      chunks.map(({ profile, urls, atMs, name, id, osId, offsetMs }) => ({ profile, urls, atMs, name, id, osId, offsetMs })),
      {
        startUnixMs: start,
        durationMs: end - start,
        intervalBytes: heapChunk?.interval ?? this.#options.heapSamplingInterval,
        trace: this.#withTrace,
        dialects: JSON.stringify(dialects),
        ...symbolize.buildOptions(this.#options.sourceMaps, symbolize.runtimeScriptsOf(scripts)),
        ...profilerFrames.buildOptions(this.#options.profilerFrames, process.env),
      },
    ];
  }

  /** The build's `[pprof, trace?, ...one per dialect]` as `{ pprof, trace?, encoded }`. */
  #heapOut(out) {
    const [pprof, trace] = this.#withTrace ? out : [out[0], undefined];
    return { pprof, trace, encoded: out.slice(this.#withTrace ? 2 : 1) };
  }

  /** `{ pprof, trace?, encoded }` of the heap snapshot(s), or null: a failure is one warning. */
  async #encodeHeap(chunks, heapChunk, recording, dialects) {
    const args = this.#heapBuild(chunks, heapChunk, recording, dialects);
    if (!args) return null;
    try {
      return this.#heapOut(await native.buildHeapProfile(...args));
    } catch (err) {
      warnOnce('service-heap-encode', `selfprof: a heap profile could not be encoded: ${err.message}`);
      return null;
    }
  }

  /** #encodeHeap on this thread, for the exit. */
  #encodeHeapSync(chunks, heapChunk, recording, dialects) {
    const args = this.#heapBuild(chunks, heapChunk, recording, dialects);
    if (!args) return null;
    try {
      return this.#heapOut(native.buildHeapProfileSync(...args));
    } catch (err) {
      warnNow(`selfprof: the last heap profile could not be encoded at exit: ${err.message}`, 'SELFPROF_SERVICE_HEAP_ENCODE');
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
    this.#tracers?.stop();
    const deadline = performance.now() + timeoutMs;
    await this.#rotate(true);
    this.#requests.close();
    this.#releaseHeap();
    this.#hub?.close();
    this.#hub = null;
    await Promise.all(this.#exporters.map((e) => e.close(Math.max(0, deadline - performance.now()))));
    // Until here a process.exit() delivers what this stop had not.
    exitGuard.remove(this);
  }
}

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
