'use strict';
// Pyroscope: `POST {url}/ingest?name=<app>{labels}&from=&until=&format=pprof`, multipart
// field `profile`; bearer or basic auth, `X-Scope-OrgID` for a tenant.

const { Uploader, send } = require('./uploader');
const { identity } = require('./meta');

function pyroscope(options, meta, auth) {
  return new Uploader(
    'pyroscope',
    async (profile, timeoutMs, signal) => {
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
      const headers = { ...auth.headers };
      if (options.authToken) headers.authorization = `Bearer ${options.authToken}`;
      else if (options.basicAuthUser) {
        headers.authorization = `Basic ${Buffer.from(`${options.basicAuthUser}:${options.basicAuthPassword ?? ''}`).toString('base64')}`;
      }
      if (options.tenantId) headers['X-Scope-OrgID'] = options.tenantId;
      await send(url.toString(), { method: 'POST', body: form, headers }, timeoutMs, signal);
    },
    options,
    auth.secrets,
  );
}

module.exports = { pyroscope };
