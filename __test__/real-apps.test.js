'use strict';
// Labels in real apps: each framework under each tracer as users run them (real packages,
// `-r selfprof/start` in service mode uploading to Datadog's test agent), loaded over
// loopback from this process with autocannon. The app records, for every handler call, its
// route, when its work ran and the ids its tracer gave the request; every sample taken in
// that work must carry that request's endpoint (as the framework names the route: GET
// /users/:id) and its local root span, in the trace object and in the Datadog upload, and
// the uploads' endpoint_counts must count the requests the handlers served.
const { test } = require('node:test');
const assert = require('node:assert/strict');
const { missing, decodeOtlp, otlpWork } = require('./tools');
const { decodePprof, traceWork, pprofWork, callAt, assertRequestLabels } = require('./helpers');
const { tracing, START, frameExpected, MIN_REQUESTS, FLOOR, testAgent, runApp, judge, warm, datadogWork, allBackends } = require('./real-apps');

const WORK = ['userWork', 'orderWork'];
const agent = testAgent();

/** Runs one framework under one tracer setup and checks everything it must show. */
async function check(t, { framework, preloads, routed = true, env }) {
  if (!agent.current && missing(t, 'ddapm-test-agent')) return;
  const run = await runApp(t, agent.current, framework, preloads, env);
  const { trace, calls, started } = run;
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
  const fromTrace = traceWork(trace, WORK).map(({ t, work, labels }) => ({ t, work, labels: labels && { endpoint: labels.endpoint, span: labels.span_id } }));
  const truthOf = (c) => ({ endpoint: endpointOf(c), span: c.spanId });
  const inTrace = judge(fromTrace, calls, truthOf, `${framework}: trace`);
  for (const c of trace.contexts) {
    for (const v of Object.values(c.labels)) assert.notEqual(v, 'undefined', 'no label value is "undefined"');
  }

  // The Datadog uploads: `trace endpoint`, and the numeric `local root span id` with
  // `end_timestamp_ns` (Unix ns) placing each sample on the calls' time line.
  assert.ok(run.uploads.length >= 1, `${framework}: uploads`);
  const { samples, counted } = datadogWork(run, WORK);
  const fromUploads = samples.map(({ t, work, str, num }) => {
    const span = num['local root span id'];
    return { t, work, labels: (str['trace endpoint'] || span) && { endpoint: str['trace endpoint'], span } };
  });
  const inUploads = judge(fromUploads, calls, (c) => ({ endpoint: endpointOf(c), span: BigInt(`0x${c.spanId}`).toString() }), `${framework}: Datadog upload`, warm(run));
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

// A service that keeps a share of its traces: a dropped trace's span is not the SDK's (no
// processor sees it), though the request's context holds it as a kept one's does.
test("OpenTelemetry NodeSDK keeping half the traces (traceidratio): a kept request's samples carry its span and route, a dropped one's no span", async (t) => {
  if (!agent.current && missing(t, 'ddapm-test-agent')) return;
  const env = { OTEL_TRACES_SAMPLER: 'traceidratio', OTEL_TRACES_SAMPLER_ARG: '0.5' };
  const { trace, calls } = await runApp(t, agent.current, 'express4', [tracing('otel-sdk'), START], env);
  const kept = calls.filter((c) => c.sampled);
  const dropped = calls.filter((c) => !c.sampled);
  assert.ok(kept.length >= MIN_REQUESTS / 4 && dropped.length >= MIN_REQUESTS / 4, `both kinds of request: ${kept.length} kept, ${dropped.length} dropped`);
  const samples = traceWork(trace, WORK).map(({ t, work, labels }) => ({ t, work, labels: labels && { endpoint: labels.endpoint, span: labels.span_id } }));
  const sorted = [...calls].sort((a, b) => a.t0 - b.t0);
  const inKept = samples.filter((s) => callAt(sorted, s.t)?.sampled === true);
  const inDropped = samples.filter((s) => callAt(sorted, s.t)?.sampled === false);
  const endpointOf = (c) => `${c.method} ${c.method === 'GET' ? '/users/:id' : '/orders'}`;
  const truth = kept.map((c) => ({ labels: { endpoint: endpointOf(c), span: c.spanId }, work: c.work, t0: c.t0, t1: c.t1 }));
  const right = assertRequestLabels(inKept, truth, { what: 'kept requests', floor: FLOOR, min: 10 });
  const spanned = inDropped.filter((s) => s.labels?.span !== undefined);
  assert.ok(inDropped.length >= 10, `samples in dropped requests' work: ${inDropped.length}`);
  assert.deepEqual(spanned.slice(0, 3), [], `samples of dropped requests with a span (${spanned.length} of ${inDropped.length})`);
  t.diagnostic(`${kept.length} requests kept, ${dropped.length} dropped; kept: ${right}; dropped: ${inDropped.length} samples, none with a span`);
});

test("every backend gets the route and the request's span: Pyroscope's endpoint series, OTLP's attributes and links (start() in code)", async (t) => {
  const backends = await allBackends(t, agent);
  if (backends === null) return;
  const { sink, python } = backends;
  const run = await runApp(t, agent.current, 'express4', [tracing('otel-sdk')], backends.env);
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
  const truthOf = (c) => ({ endpoint: endpointOf(c), span: c.spanId });
  const inPyroscope = judge(fromPyroscope, calls, truthOf, 'express4: Pyroscope', warm(run));

  // OTLP, read back by opentelemetry-proto: the endpoint attribute and the span link,
  // each sample placed on the calls' time line by its timestamp.
  assert.ok(sink.got.otlp.length >= 1, 'OTLP uploads');
  const fromOtlp = otlpWork(decodeOtlp(python, sink.got.otlp), WORK, timeOrigin).map((s) => ({ ...s, labels: s.labels?.span_id && { endpoint: s.labels.endpoint, span: s.labels.span_id } }));
  const inOtlp = judge(fromOtlp, calls, truthOf, 'express4: OTLP', warm(run));
  t.diagnostic(`Pyroscope ${inPyroscope}; OTLP ${inOtlp}`);
});
