'use strict';
// Service mode's options: `start(options)` and the environment, in one place. Options given
// to start() win over SELFPROF_* variables, which win over the backends' own DD_* and
// OTEL_* ones; a variable is read only for what start() was not given, so a malformed one
// that an option overrides is no error. An unknown key is refused with the nearest known
// one, for start() and each exporter alike.

const { ENV_NAMES } = require('./exporters');
const { MAX_TIMER_MS } = require('./exporters/uploader');
const { parseDdTags } = require('./exporters/env');
const { checkKeys } = require('./keys');
const { switchValue } = require('../log');
const { checkHeapInterval, DEFAULT_HEAP_INTERVAL } = require('../capture/heap');
const { inferService } = require('./service-name');
const { seriesLabelsOf } = require('./exporters/pyroscope');

const DEFAULT_INTERVAL_MS = 1000 / 99; // 99 Hz, off the beat of 10 ms timers
const DEFAULT_PERIOD_MS = 60_000;

/** A numeric environment variable; not a number is an error naming the variable. */
function envNumber(env, name) {
  const text = env[name].trim();
  const n = Number(text);
  if (text === '' || !Number.isFinite(n)) throw new TypeError(`start: ${name} must be a number of ms, got ${JSON.stringify(env[name])}`);
  return n;
}

/** A 1/0 (true/false, yes/no, on/off) variable, or undefined when unset or empty. */
function envBoolean(env, name) {
  const on = switchValue(env[name]);
  if (on !== null) return on;
  throw new TypeError(`start: ${name} must be 1 or 0 (true or false), got ${JSON.stringify(env[name])}`);
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
function fromEnv(env, given = {}) {
  const options = {};
  // What start() was given is not read from the environment (options win).
  const wanted = (key) => !Object.hasOwn(given, key) || given[key] === undefined;
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
  if (!wanted('period')) {
    // start({ period }) wins.
  } else if (env.SELFPROF_PERIOD_MS) options.period = envNumber(env, 'SELFPROF_PERIOD_MS');
  else if (env.DD_PROFILING_UPLOAD_PERIOD) options.period = envSeconds(env, 'DD_PROFILING_UPLOAD_PERIOD');
  if (env.SELFPROF_SAMPLE_INTERVAL_MS && wanted('sampleInterval')) options.sampleInterval = envNumber(env, 'SELFPROF_SAMPLE_INTERVAL_MS');
  const type = env.SELFPROF_EXPORTER ?? (env.SELFPROF_EXPORTER_URL ? 'datadog' : env.SELFPROF_DIR ? 'file' : undefined);
  if (type && wanted('exporters')) {
    const exporter = { type };
    const names = {};
    for (const [key, name] of [['url', 'SELFPROF_EXPORTER_URL'], ['dir', 'SELFPROF_DIR'], ['apiKey', 'SELFPROF_API_KEY'], ['authToken', 'SELFPROF_AUTH_TOKEN'], ['tenantId', 'SELFPROF_TENANT_ID']]) {
      if (env[name]) [exporter[key], names[key]] = [env[name], name];
    }
    // createExporter's errors name the variable, not the option.
    Object.defineProperty(exporter, ENV_NAMES, { value: names });
    options.exporters = [exporter];
  }
  for (const [key, name] of [['heap', 'SELFPROF_HEAP'], ['workers', 'SELFPROF_WORKERS'], ['spanLabels', 'SELFPROF_SPAN_LABELS'], ['operationEndpoints', 'SELFPROF_OPERATION_ENDPOINTS']]) {
    const v = wanted(key) ? envBoolean(env, name) : undefined;
    if (v !== undefined) options[key] = v;
  }
  if (env.SELFPROF_HEAP_SAMPLING_INTERVAL && wanted('heapSamplingInterval')) {
    const text = env.SELFPROF_HEAP_SAMPLING_INTERVAL.trim();
    const n = Number(text);
    if (text === '' || !Number.isFinite(n)) {
      throw new TypeError(`start: SELFPROF_HEAP_SAMPLING_INTERVAL must be a number of bytes, got ${JSON.stringify(env.SELFPROF_HEAP_SAMPLING_INTERVAL)}`);
    }
    options.heapSamplingInterval = n;
  }
  if (env.SELFPROF_PYROSCOPE_SERIES_LABELS !== undefined && wanted('pyroscope')) {
    options.pyroscope = { seriesLabels: env.SELFPROF_PYROSCOPE_SERIES_LABELS.split(',').map((s) => s.trim()).filter(Boolean) };
  }
  return options;
}

/** start()'s options. */
const START_KEYS = [
  'service',
  'env',
  'version',
  'tags',
  'sampleInterval',
  'period',
  'collectCpuTime',
  'lines',
  'heap',
  'heapSamplingInterval',
  'workers',
  'sourceMaps',
  'spanLabels',
  'operationEndpoints',
  'profilerFrames',
  'exporters',
  'pyroscope',
];

/** start({ pyroscope })'s options. */
const PYROSCOPE_KEYS = ['seriesLabels'];

/** start()'s options with the environment's under them, checked, with their defaults. */
function validate(options) {
  checkKeys(options, START_KEYS, 'start');
  /** @type {Record<string, any>} */
  const o = { ...fromEnv(process.env, options), ...dropUndefined(options) };
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
  for (const key of ['collectCpuTime', 'lines', 'heap', 'workers', 'sourceMaps', 'spanLabels', 'operationEndpoints', 'profilerFrames']) {
    if (o[key] !== undefined && typeof o[key] !== 'boolean') throw new TypeError(`start: ${key} must be a boolean`);
  }
  const exporters = o.exporters ?? [];
  if (!Array.isArray(exporters)) throw new TypeError('start: exporters must be an array');
  const pyroscope = o.pyroscope ?? {};
  if (pyroscope === null || typeof pyroscope !== 'object' || Array.isArray(pyroscope)) {
    throw new TypeError('start: pyroscope must be an object like { seriesLabels: [\'endpoint\'] }');
  }
  // No name given: the app's package.json's, as dd-trace infers it (`serviceFrom` says which).
  const service = str('service');
  const inferred = service === undefined ? inferService() : undefined;
  // Checked as the top level is, whether or not a Pyroscope exporter reads it.
  checkKeys(pyroscope, PYROSCOPE_KEYS, 'start: pyroscope');
  if (pyroscope.seriesLabels !== undefined) seriesLabelsOf(pyroscope.seriesLabels);
  return {
    service: service ?? inferred.name,
    serviceFrom: inferred && (inferred.from ?? null),
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
    operationEndpoints: o.operationEndpoints ?? true,
    heapSamplingInterval: checkHeapIntervalOption(o.heapSamplingInterval ?? DEFAULT_HEAP_INTERVAL),
    lines: o.lines ?? false,
    // undefined: on, unless SELFPROF_SOURCE_MAPS=0 (read at each build).
    sourceMaps: o.sourceMaps,
    // undefined: hidden, unless SELFPROF_PROFILER_FRAMES=1 (read at each build).
    profilerFrames: o.profilerFrames,
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

/** `options` without the keys whose value is undefined (they mean "not given"). */
function dropUndefined(options) {
  return Object.fromEntries(Object.entries(options).filter(([, v]) => v !== undefined));
}

module.exports = { validate, fromEnv, START_KEYS, DEFAULT_INTERVAL_MS, DEFAULT_PERIOD_MS };
