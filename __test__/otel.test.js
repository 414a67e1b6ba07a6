'use strict';
// The OpenTelemetry SpanProcessor labels samples with the local root span.
const { test } = require('node:test');
const assert = require('node:assert/strict');
const { setTimeout: sleep } = require('node:timers/promises');
const api = require('@opentelemetry/api');
const { BasicTracerProvider } = require('@opentelemetry/sdk-trace-base');
const { AsyncLocalStorageContextManager } = require('@opentelemetry/context-async-hooks');
const { Profiler, getLabels, openTelemetrySpanProcessor } = require('..');
const { spin, samplesIn, labelVerdicts, assertOwnLabels } = require('./helpers');

function otelRouteWork(ms) {
  return spin(ms);
}

test('samples carry the local root span id, trace id and route', async (t) => {
  api.context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
  const provider = new BasicTracerProvider({ spanProcessors: [openTelemetrySpanProcessor()] });
  api.trace.setGlobalTracerProvider(provider);
  const tracer = api.trace.getTracer('selfprof-test');

  const counts = require('../lib/integrations/requests').requestCounter();
  counts();
  const profiler = new Profiler({ sampleInterval: 2, maxBufferSize: 10_000 });
  const roots = [];
  await Promise.all(
    [0, 1].map((i) =>
      tracer.startActiveSpan(
        `request ${i}`,
        { kind: api.SpanKind.SERVER, attributes: { 'http.request.method': 'GET', 'http.route': `/users/:id${i}` } },
        async (root) => {
          roots.push(root.spanContext());
          assert.equal(getLabels().span_id, root.spanContext().spanId);
          await tracer.startActiveSpan('db query', async (child) => {
            await sleep(1);
            otelRouteWork(60); // in a child span: still the request's labels
            child.end();
          });
          assert.equal(getLabels().endpoint, `GET /users/:id${i}`);
          root.end();
        },
      ),
    ),
  );
  const trace = await profiler.stop();
  const samples = samplesIn(trace, 'otelRouteWork');
  const byRoot = new Map(roots.map((r) => [r.spanId, r.traceId]));
  const verdicts = labelVerdicts(trace, samples, (l) => byRoot.get(l.span_id) === l.trace_id && /^GET \/users\/:id[01]$/.test(l.endpoint));
  assert.ok(samples.length >= 20, `${samples.length} samples`);
  t.diagnostic(`with their root span: ${assertOwnLabels(verdicts, trace.metadata.unmatchedSamples, 'otelRouteWork')}`);
  // Each ended local root span is one request of its endpoint (Datadog's endpoint_counts).
  assert.deepEqual(counts(), { 'GET /users/:id0': 1, 'GET /users/:id1': 1 });
  await provider.shutdown();
  api.trace.disable();
  api.context.disable();
});

function beforeRouting(ms) {
  return spin(ms);
}

function afterRouting(ms) {
  return spin(ms);
}

function stillRunning(ms) {
  return spin(ms);
}

test("a request's samples carry the route its span ends with, those taken before routing and in earlier segments too", async (t) => {
  const { setBaseInterval } = require('..');
  const { group, SEGMENT_SIGNALS } = require('../lib/capture/group');
  const { native } = require('../lib/native');
  api.context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
  const provider = new BasicTracerProvider({ spanProcessors: [openTelemetrySpanProcessor()] });
  api.trace.setGlobalTracerProvider(provider);
  const tracer = api.trace.getTracer('selfprof-test');
  const counts = require('../lib/integrations/requests').requestCounter();
  counts();
  setBaseInterval(0.1);
  try {
    const profiler = new Profiler({ sampleInterval: 0.1, maxBufferSize: 1_000_000 });
    const segments0 = group.segments;
    const signals0 = native.signalCount();
    const ids = [];
    // As the HTTP instrumentation does: the server span starts as `GET`; the route comes
    // once routing ran, the final name at the end.
    for (let i = 0; i < 4; i++) {
      await tracer.startActiveSpan('GET', { kind: api.SpanKind.SERVER, attributes: { 'http.request.method': 'GET' } }, async (root) => {
        ids.push(root.spanContext().spanId);
        assert.equal(getLabels().endpoint, 'GET');
        // Long enough before routing for a segment to be handed off and joined.
        const until = native.signalCount() + SEGMENT_SIGNALS / 3;
        while (native.signalCount() < until) {
          beforeRouting(5);
          await sleep(0);
        }
        root.setAttribute('http.route', `/users/:id${i % 2}`);
        root.updateName(`GET /users/:id${i % 2}`);
        afterRouting(20);
        root.end();
        assert.equal(getLabels().endpoint, `GET /users/:id${i % 2}`, 'getLabels() follows the span');
      });
    }
    const trace = await profiler.stop();
    const segments = group.segments - segments0;
    t.diagnostic(`${native.signalCount() - signals0} signals, ${segments} segments joined while it ran`);
    assert.ok(segments >= 1, 'segments were joined before the routes were known');
    const idOf = new Set(ids);
    for (const name of ['beforeRouting', 'afterRouting']) {
      const samples = samplesIn(trace, name);
      assert.ok(samples.length >= 20, `${samples.length} samples in ${name}`);
      const verdicts = labelVerdicts(trace, samples, (l) => idOf.has(l.span_id) && l.endpoint === `GET /users/:id${ids.indexOf(l.span_id) % 2}`);
      t.diagnostic(`${name}: ${assertOwnLabels(verdicts, trace.metadata.unmatchedSamples, name)}`);
      assert.ok(verdicts.filter((v) => v === true).length >= samples.length * 0.99, `${name}: labeled`);
    }
    for (const c of trace.contexts) assert.notEqual(c.labels.endpoint, 'GET', 'no context keeps the name the span started with');
    assert.deepEqual(counts(), { 'GET /users/:id0': 2, 'GET /users/:id1': 2 });
  } finally {
    setBaseInterval(1);
    await provider.shutdown();
    api.trace.disable();
    api.context.disable();
  }
});

test('a request still running at stop() carries the route known then; a span that never gets one keeps its name, never "undefined"', async () => {
  api.context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
  const provider = new BasicTracerProvider({ spanProcessors: [openTelemetrySpanProcessor()] });
  api.trace.setGlobalTracerProvider(provider);
  const tracer = api.trace.getTracer('selfprof-test');
  const RPC = api.createContextKey('OpenTelemetry SDK Context Key RPC_METADATA');
  try {
    const profiler = new Profiler({ sampleInterval: 1, maxBufferSize: 100_000 });
    let release;
    const released = new Promise((r) => (release = r));
    let stopped;
    const running = tracer.startActiveSpan('GET', { kind: api.SpanKind.SERVER, attributes: { 'http.request.method': 'GET' } }, async (root) => {
      // The framework's instrumentation routes the request: the route goes to the RPC
      // metadata (as Express's does), and a child span starts in that context.
      // A middleware's span starts before routing; routing then writes the route, and
      // nothing tells the span processor until the trace is built.
      const rpc = { type: 0, span: root };
      await api.context.with(api.context.active().setValue(RPC, rpc), async () => {
        tracer.startSpan('middleware - query', { attributes: { 'express.type': 'middleware', 'http.route': '/' } }).end();
        stillRunning(40);
        rpc.route = '/slow/:id';
        stillRunning(40);
        stopped = profiler.stop();
        await released;
      });
      root.end();
    });
    const trace = await stopped;
    release();
    await running;
    const samples = samplesIn(trace, 'stillRunning');
    assert.ok(samples.length >= 20, `${samples.length} samples`);
    const verdicts = labelVerdicts(trace, samples, (l) => l.endpoint === 'GET /slow/:id');
    assertOwnLabels(verdicts, trace.metadata.unmatchedSamples, 'stillRunning');

    // A span with no route keeps its name; a span named "undefined" gives no endpoint.
    const p2 = new Profiler({ sampleInterval: 1, maxBufferSize: 100_000 });
    for (const name of ['GET', 'undefined']) {
      tracer.startActiveSpan(name, { kind: api.SpanKind.SERVER }, (root) => {
        otelRouteWork(30);
        root.end();
      });
    }
    const t2 = await p2.stop();
    const endpoints = new Set(samplesIn(t2, 'otelRouteWork').map((s) => t2.contexts[s.contextId]?.labels.endpoint));
    assert.ok(endpoints.has('GET'), `the span name, when no route is set: ${[...endpoints]}`);
    assert.ok(!endpoints.has('undefined'), 'never "undefined"');
  } finally {
    await provider.shutdown();
    api.trace.disable();
    api.context.disable();
  }
});

test('the old HTTP semantic conventions (http.method) give the same endpoint', async () => {
  api.context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
  const provider = new BasicTracerProvider({ spanProcessors: [openTelemetrySpanProcessor()] });
  api.trace.setGlobalTracerProvider(provider);
  const tracer = api.trace.getTracer('selfprof-test');
  try {
    const profiler = new Profiler({ sampleInterval: 1, maxBufferSize: 100_000 });
    // As instrumentation-http did before the stable conventions: `HTTP POST`, then the
    // route at the end.
    tracer.startActiveSpan('HTTP POST', { kind: api.SpanKind.SERVER, attributes: { 'http.method': 'POST', 'http.target': '/orders' } }, (root) => {
      otelRouteWork(30);
      root.setAttribute('http.route', '/orders');
      root.end();
    });
    const trace = await profiler.stop();
    const samples = samplesIn(trace, 'otelRouteWork');
    assert.ok(samples.length >= 10, `${samples.length} samples`);
    assertOwnLabels(labelVerdicts(trace, samples, (l) => l.endpoint === 'POST /orders'), trace.metadata.unmatchedSamples, 'old conventions');
  } finally {
    await provider.shutdown();
    api.trace.disable();
    api.context.disable();
  }
});

test('service mode adds its span processor to the registered provider once; spanLabels: false leaves it alone; an unknown provider gets the line to add', async () => {
  const { NodeTracerProvider } = require('@opentelemetry/sdk-trace-node');
  const { start } = require('..');
  const { PROCESSOR } = require('../lib/integrations/otel');
  api.trace.disable();
  const provider = new NodeTracerProvider();
  provider.register();
  const ours = () => provider._activeSpanProcessor._spanProcessors.filter((p) => p[PROCESSOR]).length;
  const warnings = [];
  const onWarning = (w) => warnings.push(w.message);
  process.on('warning', onWarning);
  try {
    let session = start({ exporters: [], heap: false, workers: false, spanLabels: false });
    await session.stop();
    assert.equal(ours(), 0, 'spanLabels: false adds nothing');
    session = start({ exporters: [], heap: false, workers: false });
    const again = start({ exporters: [], heap: false, workers: false });
    assert.equal(ours(), 1, 'added once, however many sessions');
    // Its spans label samples.
    const tracer = api.trace.getTracer('selfprof-test');
    const profiler = new Profiler({ sampleInterval: 1, maxBufferSize: 100_000 });
    let spanId;
    tracer.startActiveSpan('GET', { kind: api.SpanKind.SERVER, attributes: { 'http.request.method': 'GET', 'http.route': '/wired' } }, (root) => {
      spanId = root.spanContext().spanId;
      otelRouteWork(30);
      root.end();
    });
    const trace = await profiler.stop();
    const samples = samplesIn(trace, 'otelRouteWork');
    assertOwnLabels(labelVerdicts(trace, samples, (l) => l.span_id === spanId && l.endpoint === 'GET /wired'), trace.metadata.unmatchedSamples, 'wired');
    await Promise.all([session.stop(), again.stop()]);
    await provider.shutdown();
    api.trace.disable();
    api.context.disable();

    // A provider that is not the SDK's: one warning with the line to add.
    api.trace.setGlobalTracerProvider({ getTracer: () => api.trace.getTracer('noop') });
    session = start({ exporters: [], heap: false, workers: false });
    await session.stop();
    await new Promise((r) => setImmediate(r));
    assert.equal(warnings.filter((m) => m.includes('openTelemetrySpanProcessor()')).length, 1, warnings.join('\n'));
  } finally {
    process.off('warning', onWarning);
    api.trace.disable();
  }
});
