'use strict';
// Datadog: the agent's profiling intake, `POST {url}/profiling/v1/input`, multipart with
// `event.json` and the profile as `wall.pprof`.

const { Uploader, send } = require('./uploader');
const { identity } = require('./meta');

function datadog(options, meta, auth) {
  const url = new URL('/profiling/v1/input', options.url).toString();
  return new Uploader(
    'datadog',
    async (profile, timeoutMs, signal) => {
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
      const headers = { 'DD-EVP-ORIGIN': 'selfprof', 'DD-EVP-ORIGIN-VERSION': meta.profilerVersion, ...auth.headers };
      if (options.apiKey) headers['DD-API-KEY'] = options.apiKey;
      await send(url, { method: 'POST', body: form, headers }, timeoutMs, signal);
    },
    options,
    auth.secrets,
  );
}

module.exports = { datadog };
