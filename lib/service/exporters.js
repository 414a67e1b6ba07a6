'use strict';
// Exporters: where service mode ships each period's profile. Uploads run off the hot
// path through a bounded queue, time out, retry with backoff on network errors, 5xx and
// 429, drop the oldest profile when the queue is full, log once per kind of failure, and
// never throw into the application. Credentials are never logged.

const fs = require('node:fs');
const path = require('node:path');
const { warnOnce } = require('../log');

const DEFAULTS = { timeoutMs: 10_000, retries: 3, backoffMs: 500, queueSize: 4 };

class RetryableError extends Error {}

/** A URL with any user-info removed, for messages. */
function redact(url) {
  try {
    const u = new URL(url);
    u.username = '';
    u.password = '';
    u.search = '';
    return u.toString();
  } catch {
    return '(invalid URL)';
  }
}

/** Sends one request; throws RetryableError on network errors, timeouts, 5xx and 429. */
async function send(url, init, timeoutMs) {
  let res;
  try {
    res = await fetch(url, { ...init, signal: AbortSignal.timeout(timeoutMs) });
  } catch (err) {
    const kind = err.name === 'TimeoutError' ? 'timed out' : `failed (${err.cause?.code ?? err.message})`;
    throw new RetryableError(`upload to ${redact(url)} ${kind}`);
  }
  await res.arrayBuffer().catch(() => {}); // drain the body so the socket is reused
  if (res.status === 429 || res.status >= 500) {
    throw new RetryableError(`upload to ${redact(url)} answered ${res.status}`);
  }
  if (res.status >= 400) throw new Error(`upload to ${redact(url)} was refused: ${res.status}`);
}

/** Runs `exportOne(profile)` for queued profiles, one at a time, with retries. */
class Uploader {
  #queue = [];
  #running = null;
  #options;
  #name;
  #exportOne;
  dropped = 0;
  failed = 0;
  sent = 0;

  constructor(name, exportOne, options = {}) {
    this.#name = name;
    this.#exportOne = exportOne;
    this.#options = { ...DEFAULTS, ...options };
  }

  /** Queues a profile; drops the oldest waiting one past the queue size. */
  push(profile) {
    if (this.#queue.length >= this.#options.queueSize) {
      this.#queue.shift();
      this.dropped++;
      warnOnce(`${this.#name}-dropped`, `selfprof: ${this.#name} exporter fell behind; dropping the oldest profiles`);
    }
    this.#queue.push(profile);
    if (!this.#running) this.#running = this.#drain().finally(() => (this.#running = null));
  }

  /** Resolves when the queue is empty (or `timeoutMs` passed). */
  async flush(timeoutMs = 5000) {
    let timer;
    const deadline = new Promise((resolve) => (timer = setTimeout(resolve, timeoutMs)));
    await Promise.race([this.#running ?? Promise.resolve(), deadline]);
    clearTimeout(timer);
  }

  async #drain() {
    while (this.#queue.length > 0) {
      const profile = this.#queue.shift();
      const { retries, backoffMs, timeoutMs } = this.#options;
      for (let attempt = 0; ; attempt++) {
        try {
          await this.#exportOne(profile, timeoutMs);
          this.sent++;
          break;
        } catch (err) {
          if (err instanceof RetryableError && attempt < retries) {
            const delay = backoffMs * 2 ** attempt * (0.75 + Math.random() / 2);
            await new Promise((r) => setTimeout(r, delay).unref());
            continue;
          }
          this.failed++;
          warnOnce(`${this.#name}-${err.constructor.name}`, `selfprof: ${this.#name} export failed: ${err.message}`);
          break;
        }
      }
    }
  }
}

/** The service's env, version and user tags, as one object (absent ones left out). */
function identity(meta) {
  return { ...(meta.env && { env: meta.env }), ...(meta.version && { version: meta.version }), ...meta.tags };
}

function datadog(options, meta) {
  const url = new URL('/profiling/v1/input', options.url).toString();
  return new Uploader(
    'datadog',
    async (profile, timeoutMs) => {
      const tags = Object.entries({
        service: meta.service,
        runtime: 'nodejs',
        language: 'javascript',
        profiler_version: meta.profilerVersion,
        host: meta.host,
        ...identity(meta),
      })
        .map(([k, v]) => `${k}:${v}`)
        .join(',');
      const event = {
        attachments: ['wall.pprof'],
        start: new Date(profile.start).toISOString(),
        end: new Date(profile.end).toISOString(),
        family: 'node',
        version: '4',
        tags_profiler: tags,
      };
      const form = new FormData();
      form.append('event', new Blob([JSON.stringify(event)], { type: 'application/json' }), 'event.json');
      form.append('wall.pprof', new Blob([profile.pprof], { type: 'application/octet-stream' }), 'wall.pprof');
      const headers = { 'DD-EVP-ORIGIN': 'selfprof', 'DD-EVP-ORIGIN-VERSION': meta.profilerVersion };
      if (options.apiKey) headers['DD-API-KEY'] = options.apiKey;
      await send(url, { method: 'POST', body: form, headers }, timeoutMs);
    },
    options,
  );
}

function pyroscope(options, meta) {
  return new Uploader(
    'pyroscope',
    async (profile, timeoutMs) => {
      const labels = { service_name: meta.service, ...identity(meta) };
      const name = `${options.appName ?? meta.service}{${Object.entries(labels)
        .map(([k, v]) => `${k}=${v}`)
        .join(',')}}`;
      const url = new URL('/ingest', options.url);
      url.searchParams.set('name', name);
      url.searchParams.set('from', String(Math.floor(profile.start / 1000)));
      url.searchParams.set('until', String(Math.ceil(profile.end / 1000)));
      url.searchParams.set('spyName', 'selfprof');
      url.searchParams.set('format', 'pprof');
      const form = new FormData();
      form.append('profile', new Blob([profile.pprof], { type: 'application/octet-stream' }), 'profile.pprof');
      const headers = {};
      if (options.authToken) headers.authorization = `Bearer ${options.authToken}`;
      else if (options.basicAuthUser) {
        headers.authorization = `Basic ${Buffer.from(`${options.basicAuthUser}:${options.basicAuthPassword ?? ''}`).toString('base64')}`;
      }
      if (options.tenantId) headers['X-Scope-OrgID'] = options.tenantId;
      await send(url.toString(), { method: 'POST', body: form, headers }, timeoutMs);
    },
    options,
  );
}

function file(options, meta) {
  return new Uploader(
    'file',
    async (profile) => {
      await fs.promises.mkdir(options.dir, { recursive: true });
      const stamp = new Date(profile.start).toISOString().replace(/[:.]/g, '-');
      const base = path.join(options.dir, `${meta.service}-${stamp}`);
      await fs.promises.writeFile(`${base}.pb.gz`, profile.pprof);
      if (options.trace && profile.trace) await fs.promises.writeFile(`${base}.trace.json.gz`, profile.trace);
    },
    { ...options, retries: 0 },
  );
}

const TYPES = { datadog, pyroscope, file };

/** Validates exporter options and creates its uploader. */
function createExporter(options, meta) {
  if (options === null || typeof options !== 'object') {
    throw new TypeError(`start: each exporter must be an object like { type: 'datadog', url: 'http://localhost:8126' }`);
  }
  const make = TYPES[options.type];
  if (!make) {
    throw new TypeError(`start: exporter type must be one of ${Object.keys(TYPES).join(', ')}, got ${JSON.stringify(options.type)}`);
  }
  if (options.type === 'file') {
    if (typeof options.dir !== 'string' || options.dir === '') throw new TypeError('start: the file exporter needs a dir');
    if (options.trace !== undefined && typeof options.trace !== 'boolean') throw new TypeError('start: the file exporter\'s trace must be a boolean');
  } else {
    try {
      const u = new URL(options.url);
      if (u.protocol !== 'http:' && u.protocol !== 'https:') throw new Error();
    } catch {
      throw new TypeError(`start: the ${options.type} exporter needs an http(s) url, got ${JSON.stringify(redact(String(options.url)))}`);
    }
  }
  for (const key of ['timeoutMs', 'retries', 'backoffMs', 'queueSize']) {
    if (options[key] !== undefined && !(Number.isFinite(options[key]) && options[key] >= 0)) {
      throw new RangeError(`start: exporter ${key} must be a non-negative number`);
    }
  }
  return make(options, meta);
}

module.exports = { createExporter };
