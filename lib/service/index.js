'use strict';
// Service mode: `require('selfprof').start(options)` profiles continuously (wall time,
// labels, CPU time per sample) and ships a pprof profile to each exporter every period.
// A profiler must never take the service down: failures are logged once and contained.

const os = require('node:os');
const { Profiler, stopForExport } = require('../capture/profiler');
const { createExporter } = require('./exporters');
const { warnOnce } = require('../log');
const { native, unavailable } = require('../native');
const { version: profilerVersion } = require('../../package.json');

const DEFAULT_INTERVAL_MS = 1000 / 99; // 99 Hz, off the beat of 10 ms timers
const DEFAULT_PERIOD_MS = 60_000;
const EXIT_FLUSH_MS = 2000;

function fromEnv(env) {
  const options = {};
  if (env.SELFPROF_SERVICE) options.service = env.SELFPROF_SERVICE;
  if (env.SELFPROF_ENV) options.env = env.SELFPROF_ENV;
  if (env.SELFPROF_VERSION) options.version = env.SELFPROF_VERSION;
  if (env.SELFPROF_TAGS) {
    options.tags = Object.fromEntries(
      env.SELFPROF_TAGS.split(',')
        .filter(Boolean)
        .map((kv) => {
          const i = kv.indexOf(':');
          return i < 0 ? [kv.trim(), ''] : [kv.slice(0, i).trim(), kv.slice(i + 1).trim()];
        }),
    );
  }
  if (env.SELFPROF_PERIOD_MS) options.period = Number(env.SELFPROF_PERIOD_MS);
  if (env.SELFPROF_SAMPLE_INTERVAL_MS) options.sampleInterval = Number(env.SELFPROF_SAMPLE_INTERVAL_MS);
  const type = env.SELFPROF_EXPORTER ?? (env.SELFPROF_EXPORTER_URL ? 'datadog' : env.SELFPROF_DIR ? 'file' : undefined);
  if (type) {
    const exporter = { type };
    if (env.SELFPROF_EXPORTER_URL) exporter.url = env.SELFPROF_EXPORTER_URL;
    if (env.SELFPROF_DIR) exporter.dir = env.SELFPROF_DIR;
    if (env.SELFPROF_API_KEY) exporter.apiKey = env.SELFPROF_API_KEY;
    if (env.SELFPROF_AUTH_TOKEN) exporter.authToken = env.SELFPROF_AUTH_TOKEN;
    if (env.SELFPROF_TENANT_ID) exporter.tenantId = env.SELFPROF_TENANT_ID;
    options.exporters = [exporter];
  }
  return options;
}

function validate(options) {
  const o = { ...fromEnv(process.env), ...options };
  const str = (key, fallback) => {
    const v = o[key] ?? fallback;
    if (v !== undefined && (typeof v !== 'string' || v === '')) throw new TypeError(`start: ${key} must be a non-empty string`);
    return v;
  };
  const num = (key, fallback, min) => {
    const v = o[key] ?? fallback;
    if (typeof v !== 'number' || !Number.isFinite(v)) throw new TypeError(`start: ${key} must be a finite number of ms, got ${v}`);
    if (v < min) throw new RangeError(`start: ${key} must be at least ${min} ms, got ${v}`);
    return v;
  };
  const tags = o.tags ?? {};
  if (tags === null || typeof tags !== 'object' || Array.isArray(tags)) {
    throw new TypeError('start: tags must be an object like { team: "checkout" }');
  }
  for (const [k, v] of Object.entries(tags)) {
    if (typeof v !== 'string') throw new TypeError(`start: tag ${JSON.stringify(k)} must be a string`);
  }
  if (o.collectCpuTime !== undefined && typeof o.collectCpuTime !== 'boolean') {
    throw new TypeError('start: collectCpuTime must be a boolean');
  }
  const exporters = o.exporters ?? [];
  if (!Array.isArray(exporters)) throw new TypeError('start: exporters must be an array');
  return {
    service: str('service', 'node'),
    env: str('env'),
    version: str('version'),
    tags,
    sampleInterval: num('sampleInterval', DEFAULT_INTERVAL_MS, 0),
    period: num('period', DEFAULT_PERIOD_MS, 100),
    collectCpuTime: o.collectCpuTime ?? true,
    exporters,
  };
}

class Session {
  #options;
  #exporters;
  #profiler = null;
  #timer = null;
  #stopped = false;
  #withTrace = false;
  #exitHandlers = [];

  constructor(options) {
    this.#options = validate(options);
    const meta = {
      service: this.#options.service,
      env: this.#options.env,
      version: this.#options.version,
      tags: this.#options.tags,
      host: os.hostname(),
      profilerVersion,
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
    this.#begin();
    this.#timer = setInterval(() => this.#rotate(), this.#options.period);
    this.#timer.unref();
    this.#installExitHandlers();
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
    const finished = this.#profiler;
    if (last) this.#profiler = null;
    else this.#begin();
    if (!finished) return Promise.resolve();
    // start and end are the recording's own window, the pprof's time and duration: not
    // when this timer fired, which a busy event loop can put tens of ms away.
    return finished[stopForExport](this.#options.collectCpuTime, this.#withTrace)
      .then(({ pprof, trace, start, end }) => {
        for (const e of this.#exporters) e.push({ pprof, trace, start, end });
      })
      .catch((err) => warnOnce('service-export', `selfprof: a profile could not be encoded: ${err.message}`));
  }

  /** Ships the current period now and waits (up to `timeoutMs`) for the uploads. */
  async flush(timeoutMs = EXIT_FLUSH_MS) {
    await this.#rotate(this.#stopped);
    await Promise.all(this.#exporters.map((e) => e.flush(timeoutMs)));
  }

  /** Stops profiling; the last partial period is shipped. */
  async stop(timeoutMs = EXIT_FLUSH_MS) {
    if (this.#stopped) return;
    this.#stopped = true;
    clearInterval(this.#timer);
    for (const [event, handler] of this.#exitHandlers) process.removeListener(event, handler);
    await this.flush(timeoutMs);
  }

  #installExitHandlers() {
    const onBeforeExit = () => {
      this.stop().catch(() => {});
    };
    const onSignal = (signal) => {
      // Flush within a bounded time, then let the signal do what it would have done.
      const done = () => {
        if (process.listenerCount(signal) === 0) process.kill(process.pid, signal);
      };
      const timer = setTimeout(done, EXIT_FLUSH_MS + 500);
      this.stop().then(() => {
        clearTimeout(timer);
        done();
      }, done);
    };
    this.#exitHandlers = [
      ['beforeExit', onBeforeExit],
      ['SIGTERM', onSignal],
      ['SIGINT', onSignal],
    ];
    for (const [event, handler] of this.#exitHandlers) process.on(event, handler);
  }
}

/** Starts continuous profiling; returns the session (`stop()`, `flush()`). */
function start(options = {}) {
  if (options === null || typeof options !== 'object') throw new TypeError('start: options must be an object');
  return new Session(options);
}

module.exports = { start, fromEnv };
