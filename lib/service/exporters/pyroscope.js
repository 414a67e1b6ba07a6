'use strict';
// Pyroscope: `POST {url}/ingest?name=<app>{k=v,...}&from=&until=&spyName=nodespy&format=pprof`
// with the gzip'd pprof as the raw body (with `format=pprof` the server reads the body as
// the profile, not as a form: pkg/ingester/pyroscope/ingest_handler.go); bearer or basic
// auth, `X-Scope-OrgID` for a tenant.
//
// Naming follows the server (grafana/pyroscope) and the official Node client:
// - the profile is in the Pyroscope dialect (src/formats/dialect.rs): `samples/count`,
//   `wall/nanoseconds`, `cpu/nanoseconds`, so the profile types are
//   `wall:samples:count:wall:nanoseconds` etc., as @pyroscope/nodejs's;
// - the `name` key is parsed by api/model/labelset (no escaping exists there): the app name
//   may hold only [A-Za-z0-9_.\-/], label names only [A-Za-z0-9_.] (not `__name__`), and a
//   value ends at `,` or `}` and is trimmed, so a tag value with `,`, `}` or surrounding
//   spaces is rejected at start() with one error rather than sent broken;
// - series labels: at ingest every string sample label but `span_id`/`trace_id` becomes a
//   series label (pkg/model/pprofsplit), so the pprof carries only the labels named in
//   `seriesLabels` (default `endpoint`) and `span_id` (span profiles); others stay out.

const { httpUploader } = require('./uploader');
const { identity } = require('./meta');

const DEFAULT_SERIES_LABELS = ['endpoint'];
/** Server defaults (pkg/validation/limits.go). */
const MAX_LABEL_NAMES = 30;
const MAX_VALUE_BYTES = 2048;
const MAX_NAME_BYTES = 1024;
/** Labels the server adds to every series: __name__, service_name, __delta__, pyroscope_spy. */
const SERVER_LABELS = 4;

const NAME_RUNES = /^[A-Za-z0-9_.]+$/;
const APP_RUNES = /^[A-Za-z0-9_.\-/]+$/;

function checkLabelName(name, what) {
  if (typeof name !== 'string' || !NAME_RUNES.test(name) || /^[0-9]/.test(name) || name.startsWith('__') || Buffer.byteLength(name) > MAX_NAME_BYTES) {
    throw new TypeError(
      `start: pyroscope ${what} ${JSON.stringify(name)} is not a valid Pyroscope label name ([A-Za-z_][A-Za-z0-9_.]*, not starting with __)`,
    );
  }
}

function checkValue(key, value) {
  const bad = /[,}]/.test(value) ? 'contains "," or "}"' : value !== value.trim() ? 'has surrounding spaces' : value.isWellFormed && !value.isWellFormed() ? 'is not valid Unicode' : Buffer.byteLength(value) > MAX_VALUE_BYTES ? `is over ${MAX_VALUE_BYTES} bytes` : null;
  if (bad) {
    throw new TypeError(
      `start: pyroscope label ${JSON.stringify(key)}'s value ${bad}; Pyroscope's name{k=v} key cannot carry it (no escaping exists there)`,
    );
  }
}

/** `app{k=v,...}` for the `name` parameter, checked against the server's parser. */
function ingestName(appName, labels) {
  if (!APP_RUNES.test(appName)) {
    throw new TypeError(`start: pyroscope app name ${JSON.stringify(appName)} may hold only letters, digits and _ . - /`);
  }
  for (const [k, v] of Object.entries(labels)) {
    checkLabelName(k, 'tag');
    checkValue(k, v);
  }
  return `${appName}{${Object.entries(labels)
    .map(([k, v]) => `${k}=${v}`)
    .join(',')}}`;
}

/** A request's own ids: one series per request as series labels. */
const ID_LABELS = ['span_id', 'trace_id', 'otel_span_id', 'otel_trace_id'];

/** The series label names: a list of valid names, not a request's ids. */
function seriesLabelsOf(value) {
  const list = value ?? DEFAULT_SERIES_LABELS;
  if (!Array.isArray(list)) throw new TypeError('start: pyroscope.seriesLabels must be an array of label names');
  for (const name of list) {
    checkLabelName(name, 'series label');
    if (ID_LABELS.includes(name)) {
      throw new TypeError(`start: pyroscope.seriesLabels cannot hold ${name}: one series per request (span_id is sent anyway, for span profiles)`);
    }
  }
  return [...new Set(list)];
}

function pyroscope(options, meta, auth) {
  const appName = options.appName ?? meta.service;
  // Empty values are left out: the server drops a label without a value.
  const labels = Object.fromEntries(Object.entries({ service_name: meta.service, ...identity(meta) }).filter(([, v]) => v !== ''));
  const name = ingestName(appName, labels);
  const seriesLabels = seriesLabelsOf(options.seriesLabels ?? meta.pyroscope?.seriesLabels);
  const names = new Set([...Object.keys(labels), ...seriesLabels]);
  if (names.size + SERVER_LABELS - 1 > MAX_LABEL_NAMES) {
    throw new RangeError(
      `start: pyroscope series would have ${names.size + SERVER_LABELS - 1} label names (tags, series labels and Pyroscope's own); the server takes ${MAX_LABEL_NAMES}`,
    );
  }
  const dialect = { name: 'pyroscope', seriesLabels };
  const uploader = httpUploader(
    'pyroscope',
    (profile) => {
      const url = new URL('ingest', options.url.endsWith('/') ? options.url : `${options.url}/`);
      url.searchParams.set('name', name);
      url.searchParams.set('from', String(Math.floor(profile.start / 1000)));
      url.searchParams.set('until', String(Math.ceil(profile.end / 1000)));
      url.searchParams.set('spyName', 'nodespy');
      url.searchParams.set('format', 'pprof');
      const headers = { 'content-type': 'application/octet-stream', ...auth.headers };
      if (options.authToken) headers.authorization = `Bearer ${options.authToken}`;
      else if (options.basicAuthUser) {
        headers.authorization = `Basic ${Buffer.from(`${options.basicAuthUser}:${options.basicAuthPassword ?? ''}`).toString('base64')}`;
      }
      if (options.tenantId) headers['X-Scope-OrgID'] = options.tenantId;
      // The heap profile is a second ingest of the same series: the server tells the
      // profile types (inuse_objects, inuse_space) from the pprof's sample types. (A retry
      // after the heap upload failed does not send the wall profile twice.)
      const ingest = (body) => ({ url: url.toString(), method: 'POST', headers, body });
      return profile.heap ? [ingest(profile.pprof), ingest(profile.heap)] : [ingest(profile.pprof)];
    },
    options,
    auth.secrets,
  );
  uploader.dialect = () => dialect;
  return uploader;
}

module.exports = { pyroscope, ingestName, seriesLabelsOf, DEFAULT_SERIES_LABELS };
