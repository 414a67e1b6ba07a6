'use strict';
// The real apps (fixtures/apps/) as the real-apps tests run them: a framework under a tracer
// as users run it (`-r <tracer setup> -r selfprof/start`, service mode uploading to Datadog's
// test agent, or exporters given in code), warmed and then loaded over loopback from the test
// process with autocannon; what the app recorded of its handlers' calls, its trace and what
// the backends received come back for the test to judge (real-apps.test.js,
// real-apps-graphql.test.js, real-apps-tracers.test.js).
const { before, after } = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const http = require('node:http');
const { fork } = require('node:child_process');
const { performance } = require('node:perf_hooks');
const autocannon = require('autocannon');
const { findTool, missing, startTestAgent, formOf } = require('./tools');
const { decodePprof, assertRequestLabels } = require('./helpers');

const root = path.join(__dirname, '..');
const apps = path.join(__dirname, 'fixtures', 'apps');
const tracing = (name) => path.join(apps, 'tracing', `${name}.js`);
const START = path.join(root, 'start.js');
/** Whether the handler reads the frame here: Node >= 24 with a V8 whose layout this build has. */
const frameExpected =
  Number(process.versions.node.split('.')[0]) >= 24 && require('../lib/native').native.frameLayouts().some((l) => process.versions.v8.startsWith(`${l.v8}.`));
/** Of the samples in the handlers' work, at least this share carries the request's labels. */
const FLOOR = 0.99;
/** The REST apps' two requests (frameworks.js). */
const REST_REQUESTS = [
  { method: 'GET', path: '/users/42' },
  { method: 'POST', path: '/orders', headers: { 'content-type': 'application/json' }, body: '{"item":"book"}' },
];

/** Datadog's test agent for this file's tests: `{ current }`, null where it is not installed. */
function testAgent() {
  const agent = { current: null };
  before(async () => {
    const binary = findTool('ddagent', 'ddapm-test-agent');
    if (binary) agent.current = await startTestAgent(binary);
  });
  after(() => agent.current?.stop());
  return agent;
}

/** Profiling uploads in the agent since its last clear: `{ event, pprof }`. */
async function uploads(agent) {
  const out = [];
  for (const r of (await agent.requests()).filter((x) => x.path === '/profiling/v1/input')) {
    const form = await formOf(r.body, r.headers['Content-Type']);
    out.push({
      event: JSON.parse(await form.get('event').text()),
      pprof: decodePprof(Buffer.from(await form.get('wall.pprof').arrayBuffer())),
    });
  }
  return out;
}

/** Of each handler's work, the samples judged at least (the floor is a share of them). */
const MIN_SAMPLES = 40;
/** The load goes on until the app served this many calls while recorded, and the sampler
 * signalled this many times in each work function, or until LOAD_TIMEOUT_MS. Twice
 * MIN_SAMPLES: not every signal gives V8 a sample on a loaded machine (at a load of ~10, 71
 * signals in userWork gave it 50 samples). */
const MIN_REQUESTS = 100;
const SIGNALS_IN_WORK = 2 * MIN_SAMPLES;
const LOAD_TIMEOUT_MS = 60_000;
const WORKS = ['userWork', 'orderWork'];

/**
 * Runs the app of `framework` under `preloads`, loads it with `requests` (autocannon's),
 * and returns what it recorded (`trace`, `calls`, `served`, `started`, `timeOrigin`,
 * `labelState`), its stderr, how it was loaded (`load`) and the Datadog uploads the agent
 * received. Loaded in rounds until it made MIN_REQUESTS calls and the sampler signalled
 * SIGNALS_IN_WORK times in each work function, and `enough(calls)` (the calls so far,
 * `{ work, operation, batched }`) says so where given: however busy the machine, never by
 * the clock alone.
 */
async function runApp(t, agent, framework, preloads, env = {}, requests = REST_REQUESTS, enough = undefined) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'selfprof-real-'));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  const out = path.join(dir, 'out.json');
  await agent.clear();
  const child = fork(path.join(apps, 'app.js'), [framework], {
    cwd: dir,
    execArgv: preloads.flatMap((p) => ['-r', p]),
    stdio: ['ignore', 'pipe', 'pipe', 'ipc'],
    env: {
      ...process.env,
      SELFPROF_TEST_OUT: out,
      SELFPROF_SERVICE: 'real-app',
      SELFPROF_EXPORTER: 'datadog',
      SELFPROF_EXPORTER_URL: agent.url,
      SELFPROF_PERIOD_MS: '1000',
      SELFPROF_SAMPLE_INTERVAL_MS: '1',
      SELFPROF_HEAP: '0',
      DD_TRACE_AGENT_URL: agent.url,
      DD_INSTRUMENTATION_TELEMETRY_ENABLED: 'false',
      DD_REMOTE_CONFIGURATION_ENABLED: 'false',
      // (not OTEL_TRACES_EXPORTER=none: dd-trace reads it as "tracing off")
      OTEL_METRICS_EXPORTER: 'none',
      OTEL_LOGS_EXPORTER: 'none',
      ...env,
    },
  });
  let stderr = '';
  child.stderr.on('data', (d) => (stderr += d));
  child.stdout.resume();
  const exited = new Promise((resolve) => child.on('exit', (code, signal) => resolve({ code, signal })));
  const message = (want) =>
    new Promise((resolve, reject) => {
      const onMessage = (m) => {
        if (m?.error) reject(new Error(`${framework}: ${m.error}\n${stderr}`));
        else if (want(m)) {
          child.off('message', onMessage);
          resolve(m);
        }
      };
      child.on('message', onMessage);
      exited.then(({ code, signal }) => reject(new Error(`${framework} exited (${code ?? signal}) early:\n${stderr}`)));
    });
  const { port } = await message((m) => m?.port);
  const url = `http://127.0.0.1:${port}`;
  // A warm service, as one is profiled: the JIT's first deoptimizations are behind it.
  await autocannon({ url, connections: 4, amount: 200, requests });
  child.send('start');
  await message((m) => m === 'started');
  const loaded = ({ calls, signalsIn }) =>
    calls.length >= MIN_REQUESTS && WORKS.every((w) => (signalsIn[w] ?? 0) >= SIGNALS_IN_WORK) && (enough === undefined || enough(calls));
  const t0 = performance.now();
  let non2xx = 0;
  let rounds = 0;
  let progress;
  do {
    rounds++;
    const round = await autocannon({ url, connections: 4, amount: MIN_REQUESTS, requests });
    non2xx += round.non2xx;
    child.send('progress');
    ({ progress } = await message((m) => m?.progress));
  } while (!loaded(progress) && performance.now() < t0 + LOAD_TIMEOUT_MS);
  const loadMs = performance.now() - t0;
  assert.equal(non2xx, 0, `${framework}: every request answered 2xx`);
  child.send('stop');
  await message((m) => m === 'stopped');
  const { code } = await exited;
  assert.equal(code, 0, stderr);
  const recorded = JSON.parse(fs.readFileSync(out, 'utf8'));
  const load = `${rounds} rounds of ${MIN_REQUESTS} requests in ${(loadMs / 1000).toFixed(1)} s; signals in the work ${JSON.stringify(progress.signalsIn)}`;
  return { ...recorded, stderr, load, uploads: await uploads(agent) };
}

/**
 * Checks `samples` (each `{ t, work, labels }`: when it was taken, the work function on its
 * stack, its labels) against the calls (helpers' assertRequestLabels) whose labels
 * `truthOf(call)` gives, exactly: none carries labels not its request's, and of those the
 * warm app's (`warm(run)`) at least FLOOR carry them. Returns per-work counts.
 */
function judge(samples, calls, truthOf, what, isWarm = () => true) {
  const truth = calls.map((c) => ({ labels: truthOf(c), work: c.work, t0: c.t0, t1: c.t1 }));
  const labeled = samples.map((s) => ({ ...s, labels: s.labels && Object.fromEntries(Object.entries(s.labels).filter(([, v]) => v !== undefined)) }));
  assertRequestLabels(labeled, truth, { what, floor: 0, min: 0, exact: true, unvouched: 0 });
  return assertRequestLabels(labeled.filter(isWarm), truth, { what, floor: FLOOR, min: MIN_SAMPLES, exact: true, unvouched: 0 });
}

/**
 * Whether a sample (`{ t }`) is the warm app's: taken once the test had warmed the app up
 * and started its Profiler. Service mode runs from the app's start, and its uploads hold
 * the cold app's first requests too, where V8 samples fresh code's many deoptimizations
 * without a signal: those samples carry no labels by design (no signal vouched for their
 * context, docs/labels.md), one to three a run: enough to fail the floor of an operation's
 * ~140 samples (real-apps-graphql). Their labels are still judged: none may be another
 * request's.
 */
const warm = (run) => (s) => s.t >= run.profiledAt;

/** The Datadog uploads' samples in `works` (`{ t, work, str, num }`: string and numeric
 * labels, `end_timestamp_ns` placing each on the calls' time line), and their
 * endpoint_counts summed. */
function datadogWork(run, works) {
  const samples = [];
  const counted = {};
  for (const { event, pprof } of run.uploads) {
    for (const [endpoint, n] of Object.entries(event.endpoint_counts ?? {})) counted[endpoint] = (counted[endpoint] ?? 0) + n;
    for (const s of pprof.p.sample) {
      const work = pprof.names(s).find((n) => works.includes(n));
      if (!work) continue;
      const num = pprof.numLabels(s);
      const t = Number(BigInt(num.end_timestamp_ns) / 1000n) / 1000 - run.timeOrigin;
      samples.push({ t, work, str: pprof.labels(s), num });
    }
  }
  return { samples, counted };
}

/**
 * Every backend at once, for an app that starts service mode in code with the exporters of
 * `env` (SELFPROF_TEST_EXPORTERS): Datadog's test agent, and Pyroscope and OTLP on a
 * loopback receiver (`sink`). Returns `{ env, sink, python }` (`python`: opentelemetry-proto's,
 * to decode OTLP), or null where a tool is missing (the test skipped, or under CI failed,
 * saying which).
 */
async function allBackends(t, agent) {
  if (!agent.current && missing(t, 'ddapm-test-agent')) return null;
  const python = findTool('otlp', 'python');
  if (!python && missing(t, 'opentelemetry-proto (Python)')) return null;
  const sink = await receiver(t);
  const exporters = [
    { type: 'datadog', url: agent.current.url },
    { type: 'pyroscope', url: sink.url },
    { type: 'otlp', url: `${sink.url}/v1development/profiles` },
  ];
  return { sink, python, env: { SELFPROF_TEST_EXPORTERS: JSON.stringify(exporters), SELFPROF_EXPORTER: '' } };
}

/** A loopback receiver keeping the bodies of Pyroscope's /ingest and OTLP's profiles. */
async function receiver(t) {
  const got = { pyroscope: [], otlp: [] };
  const server = http.createServer((req, res) => {
    const chunks = [];
    req.on('data', (c) => chunks.push(c));
    req.on('end', () => {
      const body = Buffer.concat(chunks);
      if (req.url.startsWith('/ingest')) got.pyroscope.push({ url: new URL(req.url, 'http://x'), body });
      else if (req.url.startsWith('/v1development/profiles')) got.otlp.push(body);
      res.end();
    });
  });
  await new Promise((r) => server.listen(0, '127.0.0.1', r));
  t.after(() => new Promise((r) => server.close(r)));
  return { url: `http://127.0.0.1:${server.address().port}`, got };
}

module.exports = { tracing, START, frameExpected, FLOOR, MIN_REQUESTS, REST_REQUESTS, testAgent, runApp, judge, warm, datadogWork, receiver, allBackends };
