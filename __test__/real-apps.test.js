'use strict';
// Labels in real apps: each framework under each tracer as users run them (real packages,
// `-r selfprof/start` in service mode uploading to Datadog's test agent), loaded over
// loopback from this process with autocannon. The app records, for every handler call, its
// route, when its work ran and the ids its tracer gave the request; every sample taken in
// that work must carry that request's endpoint (as the framework names the route: GET
// /users/:id) and its local root span, in the trace object and in the Datadog upload, and
// the uploads' endpoint_counts must count the requests the handlers served.
const { test, before, after } = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { fork } = require('node:child_process');
const { performance } = require('node:perf_hooks');
const autocannon = require('autocannon');
const http = require('node:http');
const { findTool, missing, startTestAgent, formOf, decodeOtlp, otlpWork } = require('./tools');
const { decodePprof, stackFrames, pprofWork, assertRequestLabels } = require('./helpers');

const root = path.join(__dirname, '..');
const apps = path.join(__dirname, 'fixtures', 'apps');
const tracing = (name) => path.join(apps, 'tracing', `${name}.js`);
const START = path.join(root, 'start.js');
const WORK = ['userWork', 'orderWork'];
/** Whether the handler reads the frame here: Node >= 24 with a V8 whose layout this build has. */
const frameExpected =
  Number(process.versions.node.split('.')[0]) >= 24 && require('../lib/native').native.frameLayouts().some((l) => process.versions.v8.startsWith(`${l.v8}.`));
/** Of the samples in the handlers' work, at least this share carries the request's labels. */
const FLOOR = 0.99;
/** The work function of a call, by its method. */
const workOf = (call) => (call.method === 'GET' ? 'userWork' : 'orderWork');
/** Of each handler's work, the samples judged at least (the floor below is a share of them). */
const MIN_SAMPLES = 40;
/** The load goes on until the app served this many requests while recorded, and the sampler
 * signalled this many times in each handler's work, or until LOAD_TIMEOUT_MS. Twice
 * MIN_SAMPLES: not every signal gives V8 a sample on a loaded machine (at a load of ~10, 71
 * signals in userWork gave it 50 samples). */
const MIN_REQUESTS = 100;
const SIGNALS_IN_WORK = 2 * MIN_SAMPLES;
const LOAD_TIMEOUT_MS = 60_000;
const loaded = (p) => p.served >= MIN_REQUESTS && ['GET', 'POST'].every((m) => (p.signalsIn[m] ?? 0) >= SIGNALS_IN_WORK);

let agent = null;
before(async () => {
  const binary = findTool('ddagent', 'ddapm-test-agent');
  if (binary) agent = await startTestAgent(binary);
});
after(() => agent?.stop());

/** Profiling uploads in the agent since its last clear: `{ event, pprof }`. */
async function uploads() {
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

/** Runs the app under `preloads`, loads it, and returns what it recorded and uploaded. */
async function runApp(t, framework, preloads, env = {}) {
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
  const requests = [
    { method: 'GET', path: '/users/42' },
    { method: 'POST', path: '/orders', headers: { 'content-type': 'application/json' }, body: '{"item":"book"}' },
  ];
  // A warm service, as one is profiled: the JIT's first deoptimizations are behind it.
  await autocannon({ url, connections: 4, amount: 200, requests });
  child.send('start');
  await message((m) => m === 'started');
  // Loaded in rounds until it served MIN_REQUESTS and the sampler signalled SIGNALS_IN_WORK
  // times in each handler's work (however busy the machine: a fixed time gives a loaded
  // one fewer samples), or LOAD_TIMEOUT_MS went by.
  const t0 = performance.now();
  const deadline = t0 + LOAD_TIMEOUT_MS;
  let non2xx = 0;
  let rounds = 0;
  let progress;
  do {
    rounds++;
    const round = await autocannon({ url, connections: 4, amount: MIN_REQUESTS, requests });
    non2xx += round.non2xx;
    child.send('progress');
    ({ progress } = await message((m) => m?.progress));
  } while (!loaded(progress) && performance.now() < deadline);
  const loadMs = performance.now() - t0;
  assert.equal(non2xx, 0, `${framework}: every request answered 2xx`);
  child.send('stop');
  await message((m) => m === 'stopped');
  const { code } = await exited;
  assert.equal(code, 0, stderr);
  const recorded = JSON.parse(fs.readFileSync(out, 'utf8'));
  const load = `${rounds} rounds of ${MIN_REQUESTS} requests in ${(loadMs / 1000).toFixed(1)} s; signals in the work ${JSON.stringify(progress.signalsIn)}`;
  return { ...recorded, stderr, load, uploads: await uploads() };
}

/**
 * Checks `samples` (each `{ t, work, labels }`: when it was taken, the work function on its
 * stack, its labels as `{ endpoint, span }`) against the calls (helpers' assertRequestLabels);
 * returns per-work counts.
 */
function judge(samples, calls, endpointOf, spanIdOf, what) {
  const truth = calls.map((c) => ({ labels: { endpoint: endpointOf(c), span: spanIdOf(c) }, work: workOf(c), t0: c.t0, t1: c.t1 }));
  const labeled = samples.map((s) => ({ ...s, labels: s.labels && Object.fromEntries(Object.entries(s.labels).filter(([, v]) => v !== undefined)) }));
  return assertRequestLabels(labeled, truth, { what, floor: FLOOR, min: MIN_SAMPLES, exact: true });
}

/** Runs one framework under one tracer setup and checks everything it must show. */
async function check(t, { framework, preloads, routed = true, env }) {
  if (!agent && missing(t, 'ddapm-test-agent')) return;
  const run = await runApp(t, framework, preloads, env);
  const { trace, calls, timeOrigin, started } = run;
  assert.ok(calls.length >= MIN_REQUESTS, `${framework}: ${calls.length} requests served`);
  assert.ok(started.requests >= calls.length, 'http.server.request.start seen');
  assert.equal(started.withLabels, 0, `${framework}: requests that started with a previous request's labels`);
  for (const c of calls) {
    assert.match(c.spanId ?? '', /^[0-9a-f]{16}$/, 'the handler saw its request span');
  }
  const endpointOf = (call) => (routed ? `${call.method} ${call.method === 'GET' ? '/users/:id' : '/orders'}` : call.method);
  // Where the handler reads the frame, it reads the tracer's own contexts there: nothing is
  // entered per request (capture/labels/tracers.js). Else the integration enters its own.
  const tracerName = preloads.includes(tracing('dd-trace')) ? 'dd-trace' : 'OpenTelemetry';
  const read = run.labelState.tracers[tracerName];
  if (frameExpected) assert.equal(run.labelState.path, 'context-frame', JSON.stringify(run.labelState));
  if (run.labelState.path === 'context-frame') assert.equal(read, 'frame', `${framework}: ${tracerName}'s contexts read from the frame (${JSON.stringify(run.labelState)})`);
  else assert.notEqual(read, 'frame', JSON.stringify(run.labelState));

  // The trace object.
  const fromTrace = [];
  for (const s of trace.samples) {
    if (s.stackId === undefined) continue;
    const work = stackFrames(trace, s).find((f) => WORK.includes(f.name))?.name;
    if (!work) continue;
    const labels = s.contextId === undefined ? undefined : trace.contexts[s.contextId].labels;
    fromTrace.push({ t: s.timestamp, work, labels: labels && { endpoint: labels.endpoint, span: labels.span_id } });
  }
  const inTrace = judge(fromTrace, calls, endpointOf, (c) => c.spanId, `${framework}: trace`);
  for (const c of trace.contexts) {
    for (const v of Object.values(c.labels)) assert.notEqual(v, 'undefined', 'no label value is "undefined"');
  }

  // The Datadog uploads: `trace endpoint`, and the numeric `local root span id` with
  // `end_timestamp_ns` (Unix ns) placing each sample on the calls' time line.
  assert.ok(run.uploads.length >= 1, `${framework}: uploads`);
  const fromUploads = [];
  const counted = {};
  for (const { event, pprof } of run.uploads) {
    for (const [endpoint, n] of Object.entries(event.endpoint_counts ?? {})) counted[endpoint] = (counted[endpoint] ?? 0) + n;
    for (const s of pprof.p.sample) {
      const work = pprof.names(s).find((n) => WORK.includes(n));
      if (!work) continue;
      const str = pprof.labels(s);
      const num = pprof.numLabels(s);
      const t = Number(BigInt(num.end_timestamp_ns) / 1000n) / 1000 - timeOrigin;
      const span = num['local root span id'];
      fromUploads.push({ t, work, labels: (str['trace endpoint'] || span) && { endpoint: str['trace endpoint'], span } });
    }
  }
  const inUploads = judge(fromUploads, calls, endpointOf, (c) => BigInt(`0x${c.spanId}`).toString(), `${framework}: Datadog upload`);
  // Every request the handlers served, counted once by its route, across the uploads.
  const served = Object.fromEntries(Object.entries(run.served).map(([method, n]) => [endpointOf({ method }), n]));
  assert.deepEqual(counted, served, `${framework}: endpoint_counts`);
  t.diagnostic(`${framework}: ${run.load}; trace ${inTrace}; upload ${inUploads}; endpoint_counts ${JSON.stringify(counted)}`);
}

const otelSdk = (framework) => ({ framework, preloads: [tracing('otel-sdk'), START] });
for (const framework of ['express4', 'express5', 'fastify', 'koa', 'nest']) {
  test(`OpenTelemetry NodeSDK + auto-instrumentations, wired by -r selfprof/start: ${framework}`, (t) => check(t, otelSdk(framework)));
}
test('OpenTelemetry NodeSDK: plain node:http (no route: the span name)', (t) => check(t, { ...otelSdk('http'), routed: false }));
test('OpenTelemetry NodeSDK loaded after -r selfprof/start: express4', (t) =>
  check(t, { framework: 'express4', preloads: [START, tracing('otel-sdk')] }));
for (const framework of ['express4', 'fastify']) {
  test(`OpenTelemetry provider with the processor added by hand (contrib instrumentations): ${framework}`, (t) =>
    check(t, { framework, preloads: [tracing('otel-provider'), START] }));
}
for (const framework of ['express4', 'express5', 'fastify', 'koa', 'nest']) {
  test(`dd-trace with its own plugins, wired by -r selfprof/start: ${framework}`, (t) =>
    check(t, { framework, preloads: [tracing('dd-trace'), START] }));
}
test('dd-trace: plain node:http (no route: the resource)', (t) =>
  check(t, { framework: 'http', preloads: [tracing('dd-trace'), START], routed: false }));

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

test("every backend gets the route and the request's span: Pyroscope's endpoint series, OTLP's attributes and links (start() in code)", async (t) => {
  if (!agent && missing(t, 'ddapm-test-agent')) return;
  const python = findTool('otlp', 'python');
  if (!python && missing(t, 'opentelemetry-proto (Python)')) return;
  const sink = await receiver(t);
  const exporters = [
    { type: 'datadog', url: agent.url },
    { type: 'pyroscope', url: sink.url },
    { type: 'otlp', url: `${sink.url}/v1development/profiles` },
  ];
  const run = await runApp(t, 'express4', [tracing('otel-sdk')], { SELFPROF_TEST_EXPORTERS: JSON.stringify(exporters), SELFPROF_EXPORTER: '' });
  const { calls, timeOrigin } = run;
  const endpointOf = (call) => `${call.method} ${call.method === 'GET' ? '/users/:id' : '/orders'}`;

  // Pyroscope: `endpoint` is a series label (a sample label the server lifts), `span_id`
  // the span profile's: each sample's those of its own request (placed on the calls' time
  // line by its wall time, the time since the previous sample).
  assert.ok(sink.got.pyroscope.length >= 1, 'Pyroscope uploads');
  const fromPyroscope = [];
  for (const { url, body } of sink.got.pyroscope) {
    assert.equal(url.searchParams.get('format'), 'pprof');
    const pprof = decodePprof(body);
    if (!pprof.p.sampleType.some((v) => pprof.str(v.type) === 'wall')) continue; // a heap profile
    for (const s of pprofWork(pprof, WORK, { timeOrigin })) fromPyroscope.push({ ...s, labels: s.labels && { endpoint: s.labels.endpoint, span: s.labels.span_id } });
  }
  const inPyroscope = judge(fromPyroscope, calls, endpointOf, (c) => c.spanId, 'express4: Pyroscope');

  // OTLP, read back by opentelemetry-proto: the endpoint attribute and the span link,
  // each sample placed on the calls' time line by its timestamp.
  assert.ok(sink.got.otlp.length >= 1, 'OTLP uploads');
  const fromOtlp = otlpWork(decodeOtlp(python, sink.got.otlp), WORK, timeOrigin).map((s) => ({ ...s, labels: s.labels?.span_id && { endpoint: s.labels.endpoint, span: s.labels.span_id } }));
  const inOtlp = judge(fromOtlp, calls, endpointOf, (c) => c.spanId, 'express4: OTLP');
  t.diagnostic(`Pyroscope ${inPyroscope}; OTLP ${inOtlp}`);
});
