'use strict';
// Service mode: `require('selfprof').start(options)` profiles continuously (wall time,
// labels, CPU time per sample) and ships a pprof profile to each exporter every period.
// A profiler must never take the service down: failures are logged once and contained.

const os = require('node:os');
const { performance } = require('node:perf_hooks');
const { Profiler, stopForExport } = require('../capture/profiler');
const { createExporter, ENV_NAMES } = require('./exporters');
const { MAX_TIMER_MS } = require('./exporters/uploader');
const { warnOnce } = require('../log');
const { parseDdTags } = require('./exporters/env');
const { requestCounter } = require('../integrations/requests');
const { native, unavailable } = require('../native');
const { version: profilerVersion } = require('../../package.json');
const { gitMetadata } = require('./git');
const symbolize = require('../symbolize');
const { startHeapSampling, checkHeapInterval, DEFAULT_HEAP_INTERVAL } = require('../capture/heap');
const { ThreadHub, wrapWorkers, threadName } = require('./threads');
const { wireTracers } = require('../integrations/auto');

const DEFAULT_INTERVAL_MS = 1000 / 99; // 99 Hz, off the beat of 10 ms timers
const DEFAULT_PERIOD_MS = 60_000;
const EXIT_FLUSH_MS = 2000;

/** A numeric environment variable; not a number is an error naming the variable. */
function envNumber(env, name) {
  const text = env[name].trim();
  const n = Number(text);
  if (text === '' || !Number.isFinite(n)) throw new TypeError(`start: ${name} must be a number of ms, got ${JSON.stringify(env[name])}`);
  return n;
}

/** Seconds from DD_PROFILING_UPLOAD_PERIOD, as ms. */
function envSeconds(env, name) {
  const text = env[name].trim();
  const n = Number(text);
  if (text === '' || !Number.isFinite(n)) throw new TypeError(`start: ${name} must be a number of seconds, got ${JSON.stringify(env[name])}`);
  return n * 1000;
}

/**
 * Options from the environment: selfprof's own variables first, then the conventional
 * ones of the backends (dd-trace's DD_*, OpenTelemetry's OTEL_*) for what they name.
 */
function fromEnv(env) {
  const options = {};
  const ddTags = parseDdTags(env.DD_TAGS);
  const service = env.SELFPROF_SERVICE || env.DD_SERVICE || env.DD_SERVICE_NAME || env.OTEL_SERVICE_NAME || ddTags.service;
  if (service) options.service = service;
  const envName = env.SELFPROF_ENV || env.DD_ENV || ddTags.env;
  if (envName) options.env = envName;
  const version = env.SELFPROF_VERSION || env.DD_VERSION || ddTags.version;
  if (version) options.version = version;
  const tags = { ...ddTags };
  for (const k of ['service', 'env', 'version']) delete tags[k];
  if (env.SELFPROF_TAGS) {
    Object.assign(
      tags,
      Object.fromEntries(
        env.SELFPROF_TAGS.split(',')
          .filter(Boolean)
          .map((kv) => {
            const i = kv.indexOf(':');
            return i < 0 ? [kv.trim(), ''] : [kv.slice(0, i).trim(), kv.slice(i + 1).trim()];
          }),
      ),
    );
  }
  if (Object.keys(tags).length) options.tags = tags;
  if (env.SELFPROF_PERIOD_MS) options.period = envNumber(env, 'SELFPROF_PERIOD_MS');
  else if (env.DD_PROFILING_UPLOAD_PERIOD) options.period = envSeconds(env, 'DD_PROFILING_UPLOAD_PERIOD');
  if (env.SELFPROF_SAMPLE_INTERVAL_MS) options.sampleInterval = envNumber(env, 'SELFPROF_SAMPLE_INTERVAL_MS');
  const type = env.SELFPROF_EXPORTER ?? (env.SELFPROF_EXPORTER_URL ? 'datadog' : env.SELFPROF_DIR ? 'file' : undefined);
  if (type) {
    const exporter = { type };
    const names = {};
    for (const [key, name] of [['url', 'SELFPROF_EXPORTER_URL'], ['dir', 'SELFPROF_DIR'], ['apiKey', 'SELFPROF_API_KEY'], ['authToken', 'SELFPROF_AUTH_TOKEN'], ['tenantId', 'SELFPROF_TENANT_ID']]) {
      if (env[name]) [exporter[key], names[key]] = [env[name], name];
    }
    // createExporter's errors name the variable, not the option.
    Object.defineProperty(exporter, ENV_NAMES, { value: names });
    options.exporters = [exporter];
  }
  if (env.SELFPROF_HEAP !== undefined && env.SELFPROF_HEAP.trim() !== '') {
    const v = env.SELFPROF_HEAP.trim().toLowerCase();
    if (['0', 'false', 'no', 'off'].includes(v)) options.heap = false;
    else if (['1', 'true', 'yes', 'on'].includes(v)) options.heap = true;
    else throw new TypeError(`start: SELFPROF_HEAP must be 1 or 0 (true or false), got ${JSON.stringify(env.SELFPROF_HEAP)}`);
  }
  if (env.SELFPROF_WORKERS !== undefined && env.SELFPROF_WORKERS.trim() !== '') {
    const v = env.SELFPROF_WORKERS.trim().toLowerCase();
    if (['0', 'false', 'no', 'off'].includes(v)) options.workers = false;
    else if (['1', 'true', 'yes', 'on'].includes(v)) options.workers = true;
    else throw new TypeError(`start: SELFPROF_WORKERS must be 1 or 0 (true or false), got ${JSON.stringify(env.SELFPROF_WORKERS)}`);
  }
  if (env.SELFPROF_SPAN_LABELS !== undefined && env.SELFPROF_SPAN_LABELS.trim() !== '') {
    const v = env.SELFPROF_SPAN_LABELS.trim().toLowerCase();
    if (['0', 'false', 'no', 'off'].includes(v)) options.spanLabels = false;
    else if (['1', 'true', 'yes', 'on'].includes(v)) options.spanLabels = true;
    else throw new TypeError(`start: SELFPROF_SPAN_LABELS must be 1 or 0 (true or false), got ${JSON.stringify(env.SELFPROF_SPAN_LABELS)}`);
  }
  if (env.SELFPROF_HEAP_SAMPLING_INTERVAL) {
    const text = env.SELFPROF_HEAP_SAMPLING_INTERVAL.trim();
    const n = Number(text);
    if (text === '' || !Number.isFinite(n)) {
      throw new TypeError(`start: SELFPROF_HEAP_SAMPLING_INTERVAL must be a number of bytes, got ${JSON.stringify(env.SELFPROF_HEAP_SAMPLING_INTERVAL)}`);
    }
    options.heapSamplingInterval = n;
  }
  if (env.SELFPROF_PYROSCOPE_SERIES_LABELS !== undefined) {
    options.pyroscope = { seriesLabels: env.SELFPROF_PYROSCOPE_SERIES_LABELS.split(',').map((s) => s.trim()).filter(Boolean) };
  }
  return options;
}

function validate(options) {
  // Options win over the environment; one left undefined is not given (the variable stays).
  const o = fromEnv(process.env);
  for (const [key, value] of Object.entries(options ?? {})) if (value !== undefined) o[key] = value;
  const str = (key, fallback) => {
    const v = o[key] ?? fallback;
    if (v !== undefined && (typeof v !== 'string' || v === '')) throw new TypeError(`start: ${key} must be a non-empty string`);
    return v;
  };
  const num = (key, fallback, min, max) => {
    const v = o[key] ?? fallback;
    if (typeof v !== 'number' || !Number.isFinite(v)) throw new TypeError(`start: ${key} must be a finite number of ms, got ${v}`);
    if (v < min || v > max) throw new RangeError(`start: ${key} must be from ${min} to ${max} ms, got ${v}`);
    return v;
  };
  const tags = o.tags ?? {};
  if (tags === null || typeof tags !== 'object' || Array.isArray(tags)) {
    throw new TypeError('start: tags must be an object like { team: "checkout" }');
  }
  for (const [k, v] of Object.entries(tags)) {
    if (typeof v !== 'string') throw new TypeError(`start: tag ${JSON.stringify(k)} must be a string`);
  }
  for (const key of ['collectCpuTime', 'lines', 'heap', 'workers', 'sourceMaps', 'spanLabels']) {
    if (o[key] !== undefined && typeof o[key] !== 'boolean') throw new TypeError(`start: ${key} must be a boolean`);
  }
  const exporters = o.exporters ?? [];
  if (!Array.isArray(exporters)) throw new TypeError('start: exporters must be an array');
  const pyroscope = o.pyroscope ?? {};
  if (pyroscope === null || typeof pyroscope !== 'object' || Array.isArray(pyroscope)) {
    throw new TypeError('start: pyroscope must be an object like { seriesLabels: [\'endpoint\'] }');
  }
  return {
    service: str('service', 'node'),
    env: str('env'),
    version: str('version'),
    tags,
    // The Profiler clamps an interval it cannot sample at to the nearest it can.
    sampleInterval: num('sampleInterval', DEFAULT_INTERVAL_MS, 0, Number.MAX_VALUE),
    // The rotation is a timer: longer than setTimeout can wait, it would fire every 1 ms.
    period: num('period', DEFAULT_PERIOD_MS, 100, MAX_TIMER_MS),
    collectCpuTime: o.collectCpuTime ?? true,
    heap: o.heap ?? true,
    workers: o.workers ?? true,
    spanLabels: o.spanLabels ?? true,
    heapSamplingInterval: checkHeapIntervalOption(o.heapSamplingInterval ?? DEFAULT_HEAP_INTERVAL),
    lines: o.lines ?? false,
    // undefined: on, unless SELFPROF_SOURCE_MAPS=0 (read at each build).
    sourceMaps: o.sourceMaps,
    exporters,
    pyroscope,
  };
}

function checkHeapIntervalOption(v) {
  try {
    return checkHeapInterval(v);
  } catch (err) {
    err.message = `start: ${err.message}`;
    throw err;
  }
}

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
      dialects,
      threads: () =>
        collected.then((c) => (c.threads.length ? { threadName: self.name, threadId: self.id, osThreadId: self.osId, threads: c.threads } : {})),
    })
      .then(async ({ pprof, trace, encoded, start, end }) => {
        const { heaps } = await collected;
        const chunks = heapChunk ? [{ profile: heapChunk.profile, atMs: heapChunk.atMs, ...(heaps.length && self) }, ...heaps] : heaps;
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

  /** This thread's heap snapshot, or null (heap off, or it failed: one warning). */
  #takeHeap() {
    if (!this.#heap) return null;
    try {
      return this.#heap.take();
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
        chunks.map(({ profile, atMs, name, id, osId, offsetMs }) => ({ profile, atMs, name, id, osId, offsetMs })),
        {
          startUnixMs: start,
          durationMs: end - start,
          intervalBytes: interval,
          trace: this.#withTrace,
          dialects: JSON.stringify(dialects),
          ...symbolize.buildOptions(this.#options.sourceMaps, symbolize.runtimeScriptsOf(scripts)),
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

/** Starts continuous profiling; returns the session (`stop()`, `flush()`). */
function start(options = {}) {
  if (options === null || typeof options !== 'object') throw new TypeError('start: options must be an object');
  return new Session(options);
}

module.exports = { start, fromEnv };
