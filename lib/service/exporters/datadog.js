'use strict';
// Datadog: the agent's profiling intake, `POST {url}/profiling/v1/input`, or agentless the
// site's own, `POST https://intake.profile.<site>/api/v2/profile` with `DD-API-KEY` (where
// the agent forwards to: env.js `datadogIntake`), multipart with
// `event.json` and the profile as `wall.pprof`, shaped as dd-trace's agent exporter shapes
// them (packages/dd-trace/src/profiling/exporters/{agent,event_serializer}.js): the tags
// Datadog files a profile under (service, env, version, runtime-id, profile_seq, ...), the
// `info` block, `process_tags`, and `endpoint_counts` when a tracing integration counted
// the requests. The pprof is in Datadog's dialect (src/formats/dialect.rs): `span id`,
// `local root span id`, `trace endpoint`, thread labels and `end_timestamp_ns`.

const os = require('node:os');
const path = require('node:path');
const crypto = require('node:crypto');
const { isMainThread, threadId } = require('node:worker_threads');
const { performance } = require('node:perf_hooks');
const { native } = require('../../native');
const { httpUploader } = require('./uploader');
const { ddTraceRuntimeId } = require('../../integrations/ddtrace');

/** One id per process, as dd-trace's `runtime-id` (dd-trace's own when it is loaded). */
const runtimeId = crypto.randomUUID();

/** dd-trace's process tag value sanitizer (process-tags/index.js). */
function sanitizeProcessTag(value) {
  return String(value)
    .toLowerCase()
    .replace(/[^a-zA-Z0-9/_.-]+/g, '_');
}

/** `process_tags` as dd-trace builds them: the entry point, working directory and package name. */
function processTags() {
  const entry = require.main?.filename ?? process.argv[1] ?? '';
  let pkgName;
  try {
    pkgName = require(path.join(process.cwd(), 'package.json')).name;
  } catch {
    pkgName = undefined;
  }
  const tags = [
    ['entrypoint.basedir', entry ? path.basename(path.dirname(entry)) : undefined],
    ['entrypoint.name', path.basename(entry, path.extname(entry)) || undefined],
    ['entrypoint.type', 'script'],
    ['entrypoint.workdir', path.basename(process.cwd()) || undefined],
    ['package.json.name', pkgName || undefined],
    ['svc.user', true],
  ];
  return tags
    .filter(([, v]) => v !== undefined)
    .map(([k, v]) => `${k}:${sanitizeProcessTag(v)}`)
    .join(',');
}

/**
 * A multipart/form-data body of `parts` (`{ name, filename, type, data }`), as FormData
 * serializes one, made synchronously (the exit's delivery cannot wait for a Response).
 */
function multipart(parts) {
  const boundary = `----selfprof${crypto.randomBytes(16).toString('hex')}`;
  const chunks = [];
  for (const { name, filename, type, data } of parts) {
    chunks.push(Buffer.from(`--${boundary}\r\nContent-Disposition: form-data; name="${name}"; filename="${filename}"\r\nContent-Type: ${type}\r\n\r\n`), Buffer.from(data), Buffer.from('\r\n'));
  }
  chunks.push(Buffer.from(`--${boundary}--\r\n`));
  return { body: Buffer.concat(chunks), contentType: `multipart/form-data; boundary=${boundary}` };
}

/** A tag value as Datadog accepts it in `k:v,k:v`: no commas. */
function tagValue(v) {
  return String(v).replace(/,/g, '_');
}

function datadog(options, meta, auth) {
  // The agent's endpoint, or (agentless: `intake`) the site's intake URL as it is.
  const url = options.intake ? options.url : new URL('/profiling/v1/input', options.url).toString();
  const threadName = isMainThread ? 'Main Event Loop' : `Worker #${threadId} Event Loop`;
  const dialect = {
    name: 'datadog',
    threadName,
    threadId: String(threadId),
    osThreadId: String(native?.threadId() ?? process.pid),
  };
  const process_tags = processTags();
  const startTime = new Date(performance.timeOrigin + (performance.nodeTiming?.nodeStart ?? 0)).toISOString();
  let seq = 0;
  const uploader = httpUploader(
    'datadog',
    (profile) => {
      const tags = Object.entries({
        language: 'javascript',
        runtime: 'nodejs',
        runtime_arch: process.arch,
        runtime_os: process.platform,
        runtime_version: process.version,
        process_id: process.pid,
        profiler_version: meta.profilerVersion,
        format: 'pprof',
        ...meta.tags,
        // Datadog's source code integration: frames link to this repository at this commit.
        ...(meta.git?.repositoryUrl && { 'git.repository_url': meta.git.repositoryUrl }),
        ...(meta.git?.commitSha && { 'git.commit.sha': meta.git.commitSha }),
        service: meta.service,
        ...(meta.env && { env: meta.env }),
        ...(meta.version && { version: meta.version }),
        host: meta.host,
        'runtime-id': ddTraceRuntimeId() ?? runtimeId,
        snapshot: profile.snapshot ?? 'periodic',
        profile_seq: profile.seq,
      })
        .map(([k, v]) => `${k}:${tagValue(v)}`)
        .join(',');
      const event = {
        // dd-trace's names: each profiler's type, `.pprof` (the heap profiler's is `space`).
        attachments: profile.heap ? ['wall.pprof', 'space.pprof'] : ['wall.pprof'],
        start: new Date(profile.start).toISOString(),
        end: new Date(profile.end).toISOString(),
        family: 'node',
        version: '4',
        tags_profiler: tags,
        ...(profile.endpointCounts && { endpoint_counts: profile.endpointCounts }),
        info: {
          application: { env: meta.env, service: meta.service, start_time: startTime, version: meta.version },
          platform: { hostname: meta.host, kernel_name: os.type(), kernel_release: os.release(), kernel_version: os.version() },
          profiler: {
            activation: 'manual',
            ssi: { mechanism: 'none' },
            version: meta.profilerVersion,
            name: 'selfprof',
          },
          runtime: {
            available_processors: os.availableParallelism?.() ?? os.cpus().length,
            engine: 'nodejs',
            // As dd-trace reports it: UV_THREADPOOL_SIZE as libuv's atoi reads it, if set.
            ...(process.env.UV_THREADPOOL_SIZE !== undefined && { libuv_threadpool_size: Number.parseInt(process.env.UV_THREADPOOL_SIZE, 10) || 0 }),
            version: process.version.slice(1),
          },
        },
        process_tags,
      };
      const { body, contentType } = multipart([
        { name: 'event', filename: 'event.json', type: 'application/json', data: JSON.stringify(event) },
        { name: 'wall.pprof', filename: 'wall.pprof', type: 'application/octet-stream', data: profile.pprof },
        ...(profile.heap ? [{ name: 'space.pprof', filename: 'space.pprof', type: 'application/octet-stream', data: profile.heap }] : []),
      ]);
      const headers = { 'DD-EVP-ORIGIN': 'selfprof', 'DD-EVP-ORIGIN-VERSION': meta.profilerVersion, ...auth.headers, 'content-type': contentType };
      if (options.apiKey) headers['DD-API-KEY'] = options.apiKey;
      return [{ url, method: 'POST', headers, body }];
    },
    options,
    auth.secrets,
  );
  // profile_seq counts this exporter's profiles from 0, one per period (sent or not).
  uploader.expand = (profile) => [{ ...profile, seq: seq++ }];
  uploader.dialect = () => dialect;
  return uploader;
}

module.exports = { datadog, runtimeId, sanitizeProcessTag, multipart };
