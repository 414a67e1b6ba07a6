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
const { datadogAgentUrl, datadogIntake, otlpProfilesUrl } = require('./env');
const { checkHeaderValue, decodeUserInfo } = require('./checks');
const { checkKeys } = require('../keys');

const TYPES = { datadog, pyroscope, otlp, file };

/** Each exporter type's options (beside the tuning every one takes: `NUMBERS`). */
const KEYS = {
  datadog: ['url', 'apiKey', 'site'],
  pyroscope: ['url', 'appName', 'authToken', 'basicAuthUser', 'basicAuthPassword', 'tenantId', 'seriesLabels'],
  otlp: ['url', 'headers', 'compression'],
  file: ['dir', 'trace'],
};

/** Where an exporter without a url sends: the backend's conventional variables. */
const DEFAULT_URL = {
  datadog: (env) => datadogAgentUrl(env),
  otlp: (env) => otlpProfilesUrl(env),
};

/**
 * On an exporter made from the environment: which variable each option came from, so an
 * error names the variable the user set (`{ apiKey: 'SELFPROF_API_KEY', ... }`).
 */
const ENV_NAMES = Symbol('selfprof.exporterEnvNames');

/** Options sent as they are in a header (Basic auth's user and password are base64'd). */
const HEADER_OPTIONS = ['apiKey', 'authToken', 'tenantId'];

/** Numeric options: [min, max, whole number?]. Beyond them a timer would overflow. */
/** @type {Record<string, [min: number, max: number, whole: boolean]>} */
const NUMBERS = {
  timeoutMs: [1, MAX_TIMER_MS, false],
  backoffMs: [0, MAX_TIMER_MS, false],
  retries: [0, 100, true],
  queueSize: [1, 1000, true],
};

/**
 * The URL's user-info taken out: credentials must never reach a log, which a URL does.
 * They become a Basic `authorization` header instead, unless the exporter has its own
 * credentials. `urlName`: the option or variable the url came from, for an error.
 */
function splitCredentials(options, urlName) {
  const u = new URL(options.url);
  const secrets = [options.apiKey, options.authToken, options.basicAuthPassword].filter(Boolean);
  if (!u.username && !u.password) return { url: u.toString(), auth: { headers: {}, secrets } };
  const { user, password } = decodeUserInfo(u, urlName);
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
  checkKeys(options, ['type', ...KEYS[options.type], ...Object.keys(NUMBERS)], `start: the ${options.type} exporter`);
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
  const envNames = options[ENV_NAMES] ?? {};
  const nameOf = (key) => envNames[key] ?? `exporter ${key}`;
  for (const key of ['apiKey', 'authToken', 'basicAuthUser', 'basicAuthPassword', 'tenantId', 'appName', 'site']) {
    if (options[key] !== undefined && (typeof options[key] !== 'string' || options[key] === '')) {
      throw new TypeError(`start: ${nameOf(key)} must be a non-empty string`);
    }
  }
  // Refused here, not at every upload: what a header cannot carry.
  for (const key of HEADER_OPTIONS) if (options[key] !== undefined) checkHeaderValue(options[key], nameOf(key));
  if (options.basicAuthUser?.includes(':')) {
    throw new TypeError('start: exporter basicAuthUser cannot contain ":" (Basic authentication splits the user from the password at the first one)');
  }
  if (options.type === 'file') {
    if (typeof options.dir !== 'string' || options.dir === '') throw new TypeError('start: the file exporter needs a dir');
    if (options.trace !== undefined && typeof options.trace !== 'boolean') throw new TypeError('start: the file exporter\'s trace must be a boolean');
    return described(make(options, meta), 'file', options.dir);
  }
  let agentless = null;
  if (options.type === 'datadog' && options.url === undefined) {
    // With an API key: straight to the site's intake (agentless); without, the agent.
    agentless = datadogIntake(env, options, envNames);
    if (agentless) options = { ...options, url: agentless.url, apiKey: agentless.apiKey };
  } else if (options.site !== undefined) {
    throw new TypeError('start: the datadog exporter\'s site goes with an apiKey and no url (agentless uploads)');
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
  const { url, auth } = splitCredentials(options, nameOf('url'));
  if (agentless) return described(make({ ...options, url, intake: true }, meta, auth, env), options.type, `${url} (agentless, the key from ${agentless.from})`);
  return described(make({ ...options, url }, meta, auth, env), options.type, redact(url));
}

/** The exporter, saying what it is and where it sends (no credential: for the start line). */
function described(exporter, type, destination) {
  exporter.type = type;
  exporter.destination = destination;
  return exporter;
}

module.exports = { createExporter, ENV_NAMES, KEYS, NUMBERS };
