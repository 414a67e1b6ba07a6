'use strict';
// The backends' conventional variables, parsed as their own clients parse them.
const { test } = require('node:test');
const assert = require('node:assert/strict');
const zlib = require('node:zlib');
const { fromEnv } = require('../lib/service');
const { parseDdTags, datadogAgentUrl, parseOtelList, otlpProfilesUrl } = require('../lib/service/exporters/env');
const { start, withLabels } = require('..');
const { spin, untilSignals, decodePprof, WorkLog, assertRequestLabels, receiver } = require('./helpers');
const { missing, otlpPython, OTLP_TOOL, decodeOtlp, otlpWork } = require('./tools');

function gzipWork(ms) {
  return spin(ms);
}

test('DD_*: agent URL precedence, DD_TAGS as dd-trace parses it, SELFPROF_* first', () => {
  assert.equal(datadogAgentUrl({}), 'http://127.0.0.1:8126/');
  assert.equal(datadogAgentUrl({ DD_AGENT_HOST: 'agent', DD_TRACE_AGENT_PORT: '9126' }), 'http://agent:9126/');
  assert.equal(datadogAgentUrl({ DD_AGENT_HOST: '::1' }), 'http://[::1]:8126/');
  assert.equal(datadogAgentUrl({ DD_TRACE_AGENT_URL: 'http://u:8000', DD_AGENT_HOST: 'agent', DD_TRACE_AGENT_PORT: '1' }), 'http://u:8000/');
  assert.equal(datadogAgentUrl({ DD_TRACE_AGENT_HOSTNAME: 'alias' }), 'http://alias:8126/');
  assert.throws(() => datadogAgentUrl({ DD_TRACE_AGENT_PORT: '70000' }), /DD_TRACE_AGENT_PORT must be a port number/);
  assert.deepEqual(parseDdTags('team:payments, region:eu ,bare,:x'), { team: 'payments', region: 'eu', bare: '' });
  assert.deepEqual(parseDdTags('team:payments region:eu'), { team: 'payments', region: 'eu' }, 'spaces separate when there is no comma');
  assert.deepEqual(parseDdTags('url:http://x:1'), { url: 'http://x:1' }, 'the first colon splits');

  const o = fromEnv({ DD_SERVICE: 'dd', DD_ENV: 'prod', DD_VERSION: '2', DD_TAGS: 'team:a,env:ignored', DD_PROFILING_UPLOAD_PERIOD: '30' });
  assert.deepEqual(o, { service: 'dd', env: 'prod', version: '2', tags: { team: 'a' }, period: 30_000 });
  assert.equal(fromEnv({ SELFPROF_SERVICE: 'own', DD_SERVICE: 'dd' }).service, 'own');
  assert.equal(fromEnv({ DD_SERVICE_NAME: 'alias' }).service, 'alias');
  assert.equal(fromEnv({ OTEL_SERVICE_NAME: 'otel' }).service, 'otel');
  assert.equal(fromEnv({ DD_TAGS: 'service:from-tags' }).service, 'from-tags');
  assert.equal(fromEnv({ SELFPROF_PERIOD_MS: '500', DD_PROFILING_UPLOAD_PERIOD: '30' }).period, 500);
  assert.deepEqual(fromEnv({ SELFPROF_TAGS: 'team:b', DD_TAGS: 'team:a,zone:z' }).tags, { team: 'b', zone: 'z' });
  assert.deepEqual(fromEnv({ SELFPROF_PYROSCOPE_SERIES_LABELS: 'endpoint, tenant' }).pyroscope, { seriesLabels: ['endpoint', 'tenant'] });
  assert.deepEqual(fromEnv({ SELFPROF_EXPORTER: 'datadog' }).exporters, [{ type: 'datadog' }]);
});

test('OTEL_*: lists percent-decoded, endpoints, secrets kept out of errors', () => {
  assert.deepEqual(parseOtelList(' a=1 , b=x%3Dy ,, c = two words ', 'V'), [['a', '1'], ['b', 'x=y'], ['c', 'two words']]);
  assert.throws(() => parseOtelList('k=SECRET1,SECRET2', 'OTEL_EXPORTER_OTLP_HEADERS', { secret: true }), (e) => /entry 2 must be key=value$/.test(e.message) && !/SECRET/.test(e.message));
  assert.equal(otlpProfilesUrl({}), 'http://localhost:4318/v1development/profiles');
  assert.equal(otlpProfilesUrl({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318' }), 'http://c:4318/v1development/profiles');
  assert.equal(otlpProfilesUrl({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318/base/' }), 'http://c:4318/base/v1development/profiles');
  assert.equal(otlpProfilesUrl({ OTEL_EXPORTER_OTLP_PROFILES_ENDPOINT: 'http://p:1/custom', OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318' }), 'http://p:1/custom', 'as-is');
});

test('OTLP compression gzip: content-encoding set, the body gunzips to the recorded profile', async (t) => {
  const python = otlpPython();
  if (!python && missing(t, OTLP_TOOL)) return;
  const rx = await receiver();
  const bodies = rx.requests;
  // Warmed first: V8 also samples each deoptimization, without a signal, and fresh code
  // deoptimizes often; one near the label switch carries no labels (docs/labels.md). On a
  // loaded machine they were 3 of a cold run's 25 samples.
  gzipWork(30);
  const session = start({ period: 200, exporters: [{ type: 'otlp', url: `${rx.url}/v1development/profiles`, compression: 'gzip' }] });
  const log = new WorkLog();
  // 45 signals for the 20 samples judged: on a loaded machine 30 gave V8 19.
  withLabels({ endpoint: 'GET /z' }, () => untilSignals(45, () => log.run({ endpoint: 'GET /z' }, gzipWork, 5)));
  await session.stop();
  await rx.close();
  assert.ok(bodies.length >= 1);
  for (const b of bodies) assert.equal(b.headers['content-encoding'], 'gzip');
  // Gunzipped, each is an OTLP request (read by opentelemetry-proto) holding what was
  // recorded: the work's samples, each with its labels.
  const requests = decodeOtlp(python, bodies.map((b) => zlib.gunzipSync(b.body)));
  t.diagnostic(assertRequestLabels(otlpWork(requests, ['gzipWork'], performance.timeOrigin), log.calls, { what: 'gzipWork', exact: true }));
});

test('options given to start() win over SELFPROF_*, each one; an option left undefined leaves the variable in effect', async (t) => {
  const rx = await receiver();
  t.after(rx.close);
  const env = {
    SELFPROF_SERVICE: 'env-service',
    SELFPROF_ENV: 'env-env',
    SELFPROF_VERSION: '9.9.9',
    SELFPROF_TAGS: 'team:env-team',
    SELFPROF_PERIOD_MS: '60000',
    SELFPROF_SAMPLE_INTERVAL_MS: '50',
    SELFPROF_EXPORTER: 'datadog',
    SELFPROF_EXPORTER_URL: 'http://127.0.0.1:1',
    SELFPROF_HEAP: '1',
    SELFPROF_PYROSCOPE_SERIES_LABELS: 'tenant',
  };
  const saved = Object.fromEntries(Object.keys(env).map((k) => [k, process.env[k]]));
  Object.assign(process.env, env);
  let session;
  try {
    session = start({
      service: 'opt-service',
      env: 'opt-env',
      version: undefined, // not given: SELFPROF_VERSION stays
      tags: { team: 'opt-team' },
      period: 200,
      sampleInterval: 3,
      exporters: [{ type: 'pyroscope', url: rx.url }],
      heap: false,
      pyroscope: { seriesLabels: ['endpoint'] },
    });
  } finally {
    for (const [k, v] of Object.entries(saved)) if (v === undefined) delete process.env[k];
    else process.env[k] = v;
  }
  // Requests until three periods were uploaded (0.7 s on a quiet machine), 30 s at most.
  const end = performance.now() + 30_000;
  while (rx.requests.length < 3 && performance.now() < end) {
    await withLabels({ endpoint: 'GET /opt', tenant: 'acme' }, async () => {
      spin(4);
      await new Promise((r) => setTimeout(r, 1));
    });
  }
  // The periods uploaded by now ended while the labeled work ran; the one stop() ships
  // next may hold only the few samples taken since, none of them labeled.
  const whileLabeled = rx.requests.length;
  await session.stop();
  // period 200 ms, not 60 s: a profile every 200 ms, to the options' exporter only, no heap.
  const got = rx.requests.map((r, i) => ({ url: new URL(r.url, 'http://x'), body: r.body, labeled: i < whileLabeled }));
  assert.ok(got.length >= 3, `${got.length} uploads`);
  for (const { url, body, labeled } of got) {
    assert.equal(url.searchParams.get('name'), 'opt-service{service_name=opt-service,env=opt-env,version=9.9.9,team=opt-team}');
    const { p, str, labels } = decodePprof(body);
    assert.ok(p.sampleType.some((v) => str(v.type) === 'wall'), 'a CPU profile (heap: false)');
    assert.equal(Number(p.period), 3e6, 'sampled every 3 ms');
    for (const s of p.sample) assert.equal(labels(s).tenant, undefined, 'the series labels are the options\'');
    if (labeled) assert.ok(p.sample.some((s) => labels(s).endpoint === 'GET /opt'), 'a period of labeled work holds its labels');
  }
});
