'use strict';
// `selfprof record` of a service that runs a tracer, as users run one: `node -r
// dd-trace/init app.js`, or the OpenTelemetry SDK preloaded. With no selfprof code in the
// app, every sample of a request's work carries that request's endpoint, span_id and
// trace_id (the record hook wires the tracer as service mode does), so `report --by
// endpoint` slices by route; SELFPROF_SPAN_LABELS=0 leaves them out, and `report --by` a
// label no sample has says how samples get one.
const { test } = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const zlib = require('node:zlib');
const { spawnSync } = require('node:child_process');
const { assertRequestLabels, traceWork } = require('./helpers');

const cli = path.join(__dirname, '..', 'bin', 'selfprof.js');
const app = path.join(__dirname, 'fixtures', 'traced-app.js');
const WORK = ['usersWork', 'ordersWork'];

/** dd-trace as `-r dd-trace/init` sets it up from the environment: no agent here, no log lines. */
const DD_ENV = { DD_TRACE_STARTUP_LOGS: 'false', DD_TRACE_AGENT_URL: 'http://127.0.0.1:9', DD_INSTRUMENTATION_TELEMETRY_ENABLED: 'false', DD_REMOTE_CONFIGURATION_ENABLED: 'false' };

function record(t, preload, env = {}) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'selfprof-record-traced-'));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  const calls = path.join(dir, 'calls.jsonl');
  const r = spawnSync(process.execPath, [cli, 'record', '-o', dir, '--by', 'endpoint', '--', process.execPath, '-r', preload, app], {
    cwd: path.join(__dirname, '..'),
    encoding: 'utf8',
    timeout: 120_000,
    env: { ...process.env, ...env, TRACED_APP_CALLS: calls },
  });
  assert.equal(r.status, 0, r.stderr);
  const trace = JSON.parse(zlib.gunzipSync(fs.readFileSync(path.join(dir, 'profile.trace.json.gz'))));
  const recorded = fs.readFileSync(calls, 'utf8').trim().split('\n').map((l) => JSON.parse(l));
  return { r, trace, calls: recorded, file: path.join(dir, 'profile.trace.json.gz') };
}

for (const [tracer, preload, env] of [
  ['dd-trace', 'dd-trace/init', DD_ENV],
  ['OpenTelemetry', path.join(__dirname, 'fixtures', 'apps', 'tracing', 'otel-sdk.js'), {}],
]) {
  test(`selfprof record -- node -r ${tracer === 'dd-trace' ? 'dd-trace/init' : '<OpenTelemetry SDK>'} app.js: samples carry each request's endpoint and span`, (t) => {
    const { r, trace, calls } = record(t, preload, env);
    assert.ok(calls.every((c) => /^[0-9a-f]{16}$/.test(c.labels.span_id)), `the tracer traced every request: ${JSON.stringify(calls[0])}`);
    const summary = assertRequestLabels(traceWork(trace, WORK), calls, { what: `${tracer}: record's trace`, min: 20, exact: false });
    t.diagnostic(summary);
    // What the user reads: the samples by route.
    assert.match(r.stdout, /samples by endpoint /, r.stdout);
    for (const route of ['GET /users/:id', 'POST /orders']) assert.match(r.stdout, new RegExp(`\\n +${route} +\\d+ +[\\d.]+% +mostly in (spin|${WORK.join('|')})`), r.stdout);
    assert.doesNotMatch(r.stdout, /no sample has the label/);
  });
}

test('record with SELFPROF_SPAN_LABELS=0 leaves the tracer out; report --by endpoint then says how samples get one', (t) => {
  const { trace, file } = record(t, 'dd-trace/init', { ...DD_ENV, SELFPROF_SPAN_LABELS: '0', TRACED_APP_REQUESTS: '5' });
  assert.ok(!trace.contexts.some((c) => c.labels.endpoint || c.labels.span_id), 'no span labels');
  const r = spawnSync(process.execPath, [cli, 'report', file, '--by', 'endpoint'], { encoding: 'utf8' });
  assert.equal(r.status, 0, r.stderr);
  assert.match(r.stdout, /no sample has the label "endpoint"( \(labels: [^)]*\))?: endpoint, span_id and trace_id come from the tracer the app runs \(OpenTelemetry or dd-trace\).*selfprof record -- node -r dd-trace\/init app\.js; any label from withLabels\(\{ endpoint: \.\.\. \}\)/);
  const other = spawnSync(process.execPath, [cli, 'report', file, '--by', 'tenant'], { encoding: 'utf8' });
  assert.match(other.stdout, /no sample has the label "tenant".*: samples get a label from withLabels\(\{ tenant: \.\.\. \}\) or setLabels in the app's code \(docs\/labels\.md\)/);
});
