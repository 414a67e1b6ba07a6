'use strict';
// What a dd-trace user expects of service mode: with no service name set, the app's
// package.json names it as dd-trace names it (so profiles and traces are filed under one
// service), and the start line says where the name came from; when dd-trace's own profiler
// runs in the process too, one warning says so. (Agentless uploads: datadog-agentless.test.js.)
const { test } = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { runNode, root } = require('./tools');
const { receiver } = require('./helpers');

const start = require.resolve('../start.js');
/** The environment without the variables a developer's shell may have that name a service or a backend. */
const clean = Object.fromEntries(Object.keys(process.env).filter((k) => /^(DD_|SELFPROF_|OTEL_)/.test(k)).map((k) => [k, undefined]));

test("no service name set: the app's package.json names it as dd-trace does, and the start line says so", async (t) => {
  const app = fs.mkdtempSync(path.join(os.tmpdir(), 'selfprof-named-'));
  t.after(() => fs.rmSync(app, { recursive: true, force: true }));
  fs.writeFileSync(path.join(app, 'package.json'), JSON.stringify({ name: '@Acme/Checkout-API', version: '1.0.0' }));
  fs.mkdirSync(path.join(app, 'src'));
  const agent = await receiver();
  t.after(() => agent.close());
  const env = { ...clean, NODE_OPTIONS: `--require ${JSON.stringify(start)}`, SELFPROF_EXPORTER: 'datadog', SELFPROF_EXPORTER_URL: agent.url, SELFPROF_HEAP: '0', SELFPROF_WORKERS: '0' };
  const r = await runNode('const end = Date.now() + 200; while (Date.now() < end);', env, { cwd: path.join(app, 'src') });
  assert.equal(r.code, 0, r.stderr);
  const line = r.stderr.split('\n').find((l) => l.startsWith('selfprof: profiling'));
  assert.equal(line, `selfprof: profiling "acme/checkout-api" at 99 Hz; a profile every 60 s to datadog ${agent.url}/; the service name is the name in ${path.join(app, 'package.json')}: SELFPROF_SERVICE or DD_SERVICE sets another`);
  assert.equal(agent.requests.length, 1, r.stderr);
  const event = JSON.parse(/filename="event\.json"\r\nContent-Type: application\/json\r\n\r\n(.*)\r\n/.exec(agent.requests[0].body.toString('latin1'))[1]);
  assert.match(event.tags_profiler, /(^|,)service:acme\/checkout-api(,|$)/);
  assert.equal(event.info.application.service, 'acme/checkout-api');

  // A name that is set wins, and the line says nothing more; no package.json: "node", said.
  const named = await runNode('0', { ...env, DD_SERVICE: 'checkout' }, { cwd: app });
  assert.match(named.stderr, /^selfprof: profiling "checkout" at 99 Hz; a profile every 60 s to datadog [^;]*$/m);
  const none = await runNode('0', env, { cwd: os.tmpdir() });
  assert.ok(!fs.existsSync(path.join(os.tmpdir(), 'package.json')) && !fs.existsSync('/package.json'), 'no package.json above the temporary directory');
  assert.match(none.stderr, /^selfprof: profiling "node" at 99 Hz; .*; the service name is the default \(no package\.json names the app\): SELFPROF_SERVICE or DD_SERVICE sets another$/m);
});

test("dd-trace's own profiler beside selfprof's: one warning, from DD_PROFILING_ENABLED or from dd-trace started later", async () => {
  const env = { ...clean, SELFPROF_EXPORTER: 'file', SELFPROF_DIR: fs.mkdtempSync(path.join(os.tmpdir(), 'selfprof-dd-')), SELFPROF_HEAP: '0', SELFPROF_WORKERS: '0', SELFPROF_STARTUP_LOG: '0' };
  const dd = { DD_TRACE_STARTUP_LOGS: 'false', DD_TRACE_AGENT_URL: 'http://127.0.0.1:9', DD_INSTRUMENTATION_TELEMETRY_ENABLED: 'false', DD_REMOTE_CONFIGURATION_ENABLED: 'false' };
  const warnings = (r) => r.stderr.match(/dd-trace's own profiler runs in this process too/g)?.length ?? 0;
  // Set in the environment: said at start.
  const byEnv = await runNode(`const s = require(${JSON.stringify(root)}).start(); s.stop();`, { ...env, DD_PROFILING_ENABLED: 'true' });
  assert.equal(warnings(byEnv), 1, byEnv.stderr);
  assert.match(byEnv.stderr, /\(DD_PROFILING_ENABLED=true\): both sample it and both upload profiles to Datadog, at twice the cost; turn one off/);
  // dd-trace started with its profiler after selfprof: said at the next rotation, once.
  const later = await runNode(
    `const s = require(${JSON.stringify(root)}).start({ period: 200 }); require('dd-trace').init({ profiling: true }); setTimeout(() => s.stop(), 1200);`,
    { ...env, ...dd },
  );
  assert.equal(later.code, 0, later.stderr);
  assert.equal(warnings(later), 1, later.stderr);
  assert.match(later.stderr, /\(dd-trace says its profiler started\)/);
  // dd-trace without its profiler: nothing said.
  const tracingOnly = await runNode(
    `const s = require(${JSON.stringify(root)}).start({ period: 200 }); require('dd-trace').init({ profiling: false }); setTimeout(() => s.stop(), 800);`,
    { ...env, ...dd },
  );
  assert.equal(tracingOnly.code, 0, tracingOnly.stderr);
  assert.equal(warnings(tracingOnly), 0, tracingOnly.stderr);
});
