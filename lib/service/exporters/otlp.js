'use strict';
// OTLP profiles: `POST <endpoint>` (OTEL_EXPORTER_OTLP_PROFILES_ENDPOINT as-is, else
// OTEL_EXPORTER_OTLP_ENDPOINT + /v1development/profiles, else
// http://localhost:4318/v1development/profiles) with an `ExportProfilesServiceRequest`
// (opentelemetry-proto profiles/v1development, encoded in Rust: src/formats/otlp.rs) as
// `application/x-protobuf`, gzip'd when asked for. Headers from `headers` or
// OTEL_EXPORTER_OTLP_PROFILES_HEADERS / OTEL_EXPORTER_OTLP_HEADERS; the resource from the
// service's identity, OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES. Header values are
// secrets: they never reach a message.

const zlib = require('node:zlib');
const crypto = require('node:crypto');
const { promisify } = require('node:util');
const { httpUploader } = require('./uploader');
const { parseOtelList } = require('./env');
const { checkHeaderValue, validHeaderName, httpOwnHeader } = require('./checks');

const gzip = promisify(zlib.gzip);

/** Resource attributes: service.name first, then the environment's, then selfprof's defaults. */
function resourceOf(meta, env) {
  const fromEnv = parseOtelList(env.OTEL_RESOURCE_ATTRIBUTES, 'OTEL_RESOURCE_ATTRIBUTES');
  const attrs = new Map([['service.name', meta.service]]);
  for (const [k, v] of fromEnv) if (k !== 'service.name') attrs.set(k, v);
  const defaults = {
    ...(meta.env && { 'deployment.environment.name': meta.env }),
    ...(meta.version && { 'service.version': meta.version }),
    ...meta.tags,
    // OpenTelemetry's VCS attributes (semantic conventions, vcs.*).
    ...(meta.git?.repositoryUrl && { 'vcs.repository.url.full': meta.git.repositoryUrl }),
    ...(meta.git?.commitSha && { 'vcs.ref.head.revision': meta.git.commitSha }),
    'host.name': meta.host,
    'process.pid': String(process.pid),
    'process.runtime.name': 'nodejs',
    'process.runtime.version': process.versions.node,
    'telemetry.sdk.name': 'selfprof',
    'telemetry.sdk.language': 'nodejs',
    'telemetry.sdk.version': meta.profilerVersion,
  };
  for (const [k, v] of Object.entries(defaults)) if (!attrs.has(k)) attrs.set(k, String(v));
  return [...attrs];
}

/**
 * Headers: the exporter's own, else the environment's (the profiles variable wins whole).
 * Each is checked here, once: a name HTTP does not take or sets itself, or a value a header
 * cannot carry, is refused naming the option or variable (an environment entry by its
 * number: its key and value may be secrets).
 */
function headersOf(options, env) {
  if (options.headers !== undefined) {
    if (options.headers === null || typeof options.headers !== 'object' || Array.isArray(options.headers)) {
      throw new TypeError('start: the otlp exporter\'s headers must be an object of strings');
    }
    for (const [k, v] of Object.entries(options.headers)) {
      const where = `the otlp exporter's header ${JSON.stringify(k)}`;
      if (typeof v !== 'string') throw new TypeError(`start: ${where} must be a string`);
      if (!validHeaderName(k)) throw new TypeError(`start: ${where} does not have a valid HTTP header name`);
      if (httpOwnHeader(k)) throw new TypeError(`start: ${where} is one HTTP sets itself for each request`);
      checkHeaderValue(v, where);
    }
    return { ...options.headers };
  }
  const name = env.OTEL_EXPORTER_OTLP_PROFILES_HEADERS !== undefined ? 'OTEL_EXPORTER_OTLP_PROFILES_HEADERS' : 'OTEL_EXPORTER_OTLP_HEADERS';
  const check = (k, v, where) => {
    if (!validHeaderName(k)) throw new TypeError(`start: ${where}'s key is not a valid HTTP header name`);
    const own = httpOwnHeader(k);
    if (own) throw new TypeError(`start: ${where} sets ${own}, which HTTP sets itself for each request`);
    checkHeaderValue(v, where);
  };
  return Object.fromEntries(parseOtelList(env[name], name, { secret: true, check }));
}

function compressionOf(options, env) {
  const name = options.compression !== undefined ? 'compression' : env.OTEL_EXPORTER_OTLP_PROFILES_COMPRESSION !== undefined ? 'OTEL_EXPORTER_OTLP_PROFILES_COMPRESSION' : 'OTEL_EXPORTER_OTLP_COMPRESSION';
  const value = options.compression ?? env.OTEL_EXPORTER_OTLP_PROFILES_COMPRESSION ?? env.OTEL_EXPORTER_OTLP_COMPRESSION ?? 'none';
  if (value !== 'gzip' && value !== 'none') throw new TypeError(`start: ${name} must be "gzip" or "none", got ${JSON.stringify(value)}`);
  return value;
}

function otlp(options, meta, auth, env = process.env) {
  const headers = headersOf(options, env);
  const resource = resourceOf(meta, env);
  const compression = compressionOf(options, env);
  const secrets = [...auth.secrets, ...Object.values(headers).filter((v) => v.length >= 3)];
  const uploader = httpUploader(
    'otlp',
    (profile, sync) => {
      // Off the main thread, except at exit (which cannot wait).
      const body = compression !== 'gzip' ? profile.pprof : sync ? zlib.gzipSync(profile.pprof) : gzip(profile.pprof);
      const h = { 'content-type': 'application/x-protobuf', ...auth.headers, ...headers };
      if (compression === 'gzip') h['content-encoding'] = 'gzip';
      return [{ url: options.url, method: 'POST', headers: h, body }];
    },
    options,
    secrets,
  );
  uploader.dialect = () => ({
    name: 'otlp',
    resource,
    scopeName: 'selfprof',
    scopeVersion: meta.profilerVersion,
    // wall and cpu, then the heap's inuse_space and inuse_objects.
    profileIds: Array.from({ length: 4 }, () => crypto.randomBytes(16).toString('hex')),
  });
  // The heap profile is its own request (one dictionary per request), queued and retried
  // on its own after the CPU one.
  uploader.expand = (profile) => {
    const { heap, heapTrace, ...cpu } = profile;
    return heap?.length ? [cpu, { ...cpu, pprof: heap, heap: true }] : [cpu];
  };
  return uploader;
}

module.exports = { otlp, resourceOf, headersOf };
