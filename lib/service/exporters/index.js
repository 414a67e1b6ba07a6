'use strict';
// Exporters: where service mode ships each period's profile, one module per backend
// (datadog.js, pyroscope.js, otlp.js, file.js) over the shared upload machinery
// (uploader.js). This module validates an exporter's options and creates it. An exporter
// may have `dialect()`: what it wants encoded from the trace (src/formats/dialect.rs);
// without it, it gets the plain pprof.

const { MAX_TIMER_MS, redact } = require('./uploader');
const { datadog } = require('./datadog');
const { pyroscope } = require('./pyroscope');
const { file } = require('./file');
const { otlp } = require('./otlp');
const { datadogAgentUrl, otlpProfilesUrl } = require('./env');

const TYPES = { datadog, pyroscope, otlp, file };

/** Where an exporter without a url sends: the backend's conventional variables. */
const DEFAULT_URL = {
  datadog: (env) => datadogAgentUrl(env),
  otlp: (env) => otlpProfilesUrl(env),
};

/** Numeric options: [min, max, whole number?]. Beyond them a timer would overflow. */
const NUMBERS = {
  timeoutMs: [1, MAX_TIMER_MS, false],
  backoffMs: [0, MAX_TIMER_MS, false],
  retries: [0, 100, true],
  queueSize: [1, 1000, true],
};

/**
 * The URL's user-info taken out: `fetch` refuses URLs that carry credentials, and they
 * must never reach a log. They become a Basic `authorization` header instead, unless the
 * exporter has its own credentials.
 */
function splitCredentials(options) {
  const u = new URL(options.url);
  const secrets = [options.apiKey, options.authToken, options.basicAuthPassword].filter(Boolean);
  if (!u.username && !u.password) return { url: u.toString(), auth: { headers: {}, secrets } };
  const user = decodeURIComponent(u.username);
  const password = decodeURIComponent(u.password);
  secrets.push(password, u.password);
  u.username = '';
  u.password = '';
  const headers = options.authToken || options.basicAuthUser || options.apiKey ? {} : {
    authorization: `Basic ${Buffer.from(`${user}:${password}`).toString('base64')}`,
  };
  return { url: u.toString(), auth: { headers, secrets: secrets.filter(Boolean) } };
}

/** Validates exporter options and creates its uploader. */
function createExporter(options, meta, env = process.env) {
  if (options === null || typeof options !== 'object') {
    throw new TypeError(`start: each exporter must be an object like { type: 'datadog', url: 'http://localhost:8126' }`);
  }
  const make = TYPES[options.type];
  if (!make) {
    throw new TypeError(`start: exporter type must be one of ${Object.keys(TYPES).join(', ')}, got ${JSON.stringify(options.type)}`);
  }
  for (const [key, [min, max, whole]] of Object.entries(NUMBERS)) {
    const v = options[key];
    if (v === undefined) continue;
    if (typeof v !== 'number' || !Number.isFinite(v)) {
      throw new TypeError(`start: exporter ${key} must be a finite number, got ${typeof v === 'number' ? v : typeof v}`);
    }
    if (v < min || v > max || (whole && !Number.isInteger(v))) {
      throw new RangeError(`start: exporter ${key} must be ${whole ? 'a whole number' : 'a number'} from ${min} to ${max}, got ${v}`);
    }
  }
  for (const key of ['apiKey', 'authToken', 'basicAuthUser', 'basicAuthPassword', 'tenantId', 'appName']) {
    if (options[key] !== undefined && (typeof options[key] !== 'string' || options[key] === '')) {
      throw new TypeError(`start: exporter ${key} must be a non-empty string`);
    }
  }
  if (options.type === 'file') {
    if (typeof options.dir !== 'string' || options.dir === '') throw new TypeError('start: the file exporter needs a dir');
    if (options.trace !== undefined && typeof options.trace !== 'boolean') throw new TypeError('start: the file exporter\'s trace must be a boolean');
    return make(options, meta);
  }
  if (options.url === undefined) {
    if (!DEFAULT_URL[options.type]) throw new TypeError(`start: the ${options.type} exporter needs a url`);
    options = { ...options, url: DEFAULT_URL[options.type](env) };
  }
  try {
    const u = new URL(options.url);
    if (u.protocol !== 'http:' && u.protocol !== 'https:') throw new Error();
  } catch {
    throw new TypeError(`start: the ${options.type} exporter needs an http(s) url, got ${JSON.stringify(redact(String(options.url)))}`);
  }
  const { url, auth } = splitCredentials(options);
  return make({ ...options, url }, meta, auth, env);
}

module.exports = { createExporter };
