'use strict';
// Service mode says what it does and refuses what it cannot do: one line at start (service,
// rate, period, each exporter and where it sends, no credential), a warning when nothing
// receives the profiles, when a second session starts, and when an agent cannot be reached;
// unknown keys refused with the nearest known one; options winning over the environment.
const { test } = require('node:test');
const assert = require('node:assert/strict');
const { runNode, root } = require('./tools');

const selfprof = JSON.stringify(root);

test('unknown options are refused, naming the nearest known one', () => {
  const { start } = require('..');
  const cases = [
    [{ servce: 'x' }, /unknown option "servce" \(did you mean "service"\?\)/],
    [{ exporter: [] }, /unknown option "exporter" \(did you mean "exporters"\?\)/],
    [{ exporters: [{ type: 'file', directory: '/tmp' }] }, /the file exporter: unknown option "directory" \(did you mean "dir"\?\)/],
    [{ exporters: [{ type: 'datadog', url: 'http://127.0.0.1:9', apikey: 'k' }] }, /the datadog exporter: unknown option "apikey" \(did you mean "apiKey"\?\)/],
    [{ exporters: [{ type: 'otlp', header: {} }] }, /the otlp exporter: unknown option "header" \(did you mean "headers"\?\)/],
    // Nested option objects too, with or without an exporter that reads them.
    [{ pyroscope: { seriesLabel: ['endpoint'] } }, /^start: pyroscope: unknown option "seriesLabel" \(did you mean "seriesLabels"\?\); known: seriesLabels$/],
    [{ pyroscope: { seriesLabels: 'endpoint' } }, /^start: pyroscope\.seriesLabels must be an array of label names$/],
    [{ pyroscope: { seriesLabels: ['bad label'] } }, /pyroscope series label "bad label" is not a valid Pyroscope label name/],
  ];
  for (const [options, message] of cases) assert.throws(() => start(options), { name: 'TypeError', message }, JSON.stringify(options));
});

test('an option given to start() wins over its variable, even a malformed one', async () => {
  const r = await runNode(
    `const s = require(${selfprof}).start({ period: 1000, heap: false, workers: false, exporters: [] }); s.stop().then(() => console.log('ok'));`,
    { SELFPROF_PERIOD_MS: 'abc', SELFPROF_HEAP: 'maybe', SELFPROF_STARTUP_LOG: '0' },
  );
  assert.equal(r.code, 0, r.stderr);
  assert.match(r.stdout, /ok/);
  // Not given: the variable is read, and a malformed one is an error naming it.
  assert.throws(() => require('../lib/service/options').fromEnv({ SELFPROF_PERIOD_MS: 'abc' }), /SELFPROF_PERIOD_MS must be a number/);
});

test('one line at start says what service mode does and where it sends, without credentials', async () => {
  const r = await runNode(
    `const s = require(${selfprof}).start({ service: 'checkout', env: 'prod', period: 5000, heap: false, workers: false, exporters: [{ type: 'datadog', url: 'http://bob:S3CRET@127.0.0.1:9', apiKey: 'APIKEYSECRET' }, { type: 'file', dir: require('os').tmpdir() }] });
     s.stop(100);`,
    {},
  );
  const line = r.stderr.split('\n').find((l) => l.startsWith('selfprof: profiling'));
  assert.ok(line, r.stderr);
  assert.match(line, /^selfprof: profiling "checkout" \(prod\) at 99 Hz; a profile every 5 s to datadog http:\/\/127\.0\.0\.1:9\/, file /);
  assert.doesNotMatch(r.stderr, /S3CRET|APIKEYSECRET|bob/);
});

test('nothing configured to receive, a second session, an agent out of reach: each said once', async () => {
  const none = await runNode(`const s = require(${selfprof}).start({ heap: false, workers: false }); s.stop();`, {});
  assert.equal(none.stderr.match(/no exporter is configured/g)?.length, 1, none.stderr);
  const twice = await runNode(
    `const { start } = require(${selfprof}); const a = start({ heap: false, workers: false, exporters: [] }); const b = start({ heap: false, workers: false, exporters: [] }); Promise.all([a.stop(), b.stop()]);`,
    { SELFPROF_STARTUP_LOG: '0' },
  );
  assert.equal(twice.stderr.match(/while another session runs/g)?.length, 1, twice.stderr);
  // -r selfprof/start with the agent's port closed, a program of half a second.
  const gone = await runNode(`setTimeout(() => {}, 500);`, { NODE_OPTIONS: `--require ${JSON.stringify(require.resolve('../start.js'))}`, SELFPROF_EXPORTER: 'datadog', SELFPROF_EXPORTER_URL: 'http://127.0.0.1:9' });
  assert.equal(gone.code, 0, gone.stderr);
  assert.match(gone.stderr, /datadog exporter could not send 1 profile before shutdown .*ECONNREFUSED/, gone.stderr);
});

test("operationEndpoints: start()'s option over SELFPROF_OPERATION_ENDPOINTS, on by default; a bad value is an error naming it", () => {
  const { validate, fromEnv } = require('../lib/service/options');
  assert.equal(fromEnv({}).operationEndpoints, undefined);
  assert.equal(validate({ service: 'x' }).operationEndpoints, true, 'on by default');
  assert.equal(fromEnv({ SELFPROF_OPERATION_ENDPOINTS: '0' }).operationEndpoints, false);
  assert.equal(fromEnv({ SELFPROF_OPERATION_ENDPOINTS: '0' }, { operationEndpoints: true }).operationEndpoints, undefined, 'the option wins');
  assert.throws(() => fromEnv({ SELFPROF_OPERATION_ENDPOINTS: 'maybe' }), /SELFPROF_OPERATION_ENDPOINTS must be 1 or 0/);
  assert.throws(() => validate({ service: 'x', operationEndpoints: 'no' }), { name: 'TypeError', message: /operationEndpoints must be a boolean/ });
  assert.equal(validate({ service: 'x', operationEndpoints: false }).operationEndpoints, false);
});
