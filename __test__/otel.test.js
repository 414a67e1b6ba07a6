'use strict';
// The OpenTelemetry SpanProcessor labels samples with the local root span.
const { test } = require('node:test');
const assert = require('node:assert/strict');
const { setTimeout: sleep } = require('node:timers/promises');
const api = require('@opentelemetry/api');
const { BasicTracerProvider } = require('@opentelemetry/sdk-trace-base');
const { AsyncLocalStorageContextManager } = require('@opentelemetry/context-async-hooks');
const { Profiler, getLabels, withLabels, openTelemetrySpanProcessor } = require('..');
const { spin, untilSignals, stopAll, WorkLog, traceWork, assertRequestLabels } = require('./helpers');

/**
 * A tracer whose provider has selfprof's span processor, on AsyncLocalStorage contexts;
 * `close()` shuts the provider down and unregisters both.
 */
function otelTracer() {
  api.context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
  const provider = new BasicTracerProvider({ spanProcessors: [openTelemetrySpanProcessor()] });
  api.trace.setGlobalTracerProvider(provider);
  return {
    tracer: api.trace.getTracer('selfprof-test'),
    async close() {
      await provider.shutdown();
      api.trace.disable();
      api.context.disable();
    },
  };
}

function otelRouteWork(ms) {
  return spin(ms);
}

test('samples carry the local root span id, trace id and route', async (t) => {
  const { tracer, close } = otelTracer();

  const counts = require('../lib/integrations/requests').requestCounter();
  counts();
  const profiler = new Profiler({ sampleInterval: 2, maxBufferSize: 10_000 });
  try {
    const log = new WorkLog();
    const roots = [];
    await Promise.all(
      [0, 1].map((i) =>
        tracer.startActiveSpan(
          `request ${i}`,
          { kind: api.SpanKind.SERVER, attributes: { 'http.request.method': 'GET', 'http.route': `/users/:id${i}` } },
          async (root) => {
            const { spanId, traceId } = root.spanContext();
            roots.push(root.spanContext());
            assert.equal(getLabels().span_id, root.spanContext().spanId);
            await tracer.startActiveSpan('db query', async (child) => {
              await sleep(1);
              // In a child span: still the request's labels, its local root span's.
              untilSignals(30, () => log.run({ span_id: spanId, trace_id: traceId, endpoint: `GET /users/:id${i}` }, otelRouteWork, 4));
              child.end();
            });
            assert.equal(getLabels().endpoint, `GET /users/:id${i}`);
            root.end();
          },
        ),
      ),
    );
    const trace = await profiler.stop();
    t.diagnostic(`with their root span: ${assertRequestLabels(traceWork(trace, ['otelRouteWork']), log.calls, { what: 'otelRouteWork', exact: true })}`);
    // Each ended local root span is one request of its endpoint (Datadog's endpoint_counts).
    assert.deepEqual(counts(), { 'GET /users/:id0': 1, 'GET /users/:id1': 1 });
  } finally {
    await stopAll(profiler);
    await close();
  }
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

function unnamedWork(ms) {
  return spin(ms);
}

test("a request's samples carry the route its span ends with, those taken before routing and in earlier segments too", async (t) => {
  const { setBaseInterval } = require('..');
  const { group, SEGMENT_SIGNALS } = require('../lib/capture/group');
  const { native } = require('../lib/native');
  const { tracer, close } = otelTracer();
  const counts = require('../lib/integrations/requests').requestCounter();
  counts();
  setBaseInterval(0.1);
  let profiler;
  try {
    profiler = new Profiler({ sampleInterval: 0.1, maxBufferSize: 1_000_000 });
    const segments0 = group.segments;
    const signals0 = native.signalCount();
    const ids = [];
    // Each call on until signalled 10 times (at 0.1 ms, a loaded machine gives a fixed
    // 20 ms few samples).
    const log = new WorkLog({ signals: 10 });
    // As the HTTP instrumentation does: the server span starts as `GET`; the route comes
    // once routing ran, the final name at the end.
    for (let i = 0; i < 4; i++) {
      await tracer.startActiveSpan('GET', { kind: api.SpanKind.SERVER, attributes: { 'http.request.method': 'GET' } }, async (root) => {
        ids.push(root.spanContext().spanId);
        // What the request's samples must carry: the route its span ends with.
        const labels = { span_id: root.spanContext().spanId, trace_id: root.spanContext().traceId, endpoint: `GET /users/:id${i % 2}` };
        assert.equal(getLabels().endpoint, 'GET');
        // Long enough before routing for a segment to be handed off and joined.
        const until = native.signalCount() + SEGMENT_SIGNALS / 3;
        while (native.signalCount() < until) {
          log.run(labels, beforeRouting, 5);
          await sleep(0);
        }
        root.setAttribute('http.route', `/users/:id${i % 2}`);
        root.updateName(`GET /users/:id${i % 2}`);
        log.run(labels, afterRouting, 20);
        root.end();
        assert.equal(getLabels().endpoint, `GET /users/:id${i % 2}`, 'getLabels() follows the span');
      });
    }
    const trace = await profiler.stop();
    const segments = group.segments - segments0;
    t.diagnostic(`${native.signalCount() - signals0} signals, ${segments} segments joined while it ran`);
    assert.ok(segments >= 1, 'segments were joined before the routes were known');
    t.diagnostic(assertRequestLabels(traceWork(trace, ['beforeRouting', 'afterRouting']), log.calls, { what: 'routed late', exact: true }));
    for (const c of trace.contexts) assert.notEqual(c.labels.endpoint, 'GET', 'no context keeps the name the span started with');
    assert.deepEqual(counts(), { 'GET /users/:id0': 2, 'GET /users/:id1': 2 });
  } finally {
    // Stopped first: setBaseInterval throws while a profiler runs.
    await stopAll(profiler);
    setBaseInterval(1);
    await close();
  }
});

test("getLabels() in a request gives the route as soon as a handler's span brings it, before the request's span ends", async () => {
  const { tracer, close } = otelTracer();
  // The route as routing brings it: the request's RPC metadata names its span, and the
  // span of the handler it routed to (Express's, the router package's) carries http.route.
  const RPC_METADATA = Symbol.for('OpenTelemetry SDK Context Key RPC_METADATA');
  try {
    for (const route of ['/users/:id', '/orders/:id']) {
      await tracer.startActiveSpan('GET', { kind: api.SpanKind.SERVER, attributes: { 'http.request.method': 'GET' } }, async (root) => {
        const ctx = api.context.active().setValue(RPC_METADATA, { type: 'http', span: root });
        await api.context.with(ctx, async () => {
          assert.equal(getLabels().endpoint, 'GET');
          await sleep(0);
          const handler = tracer.startSpan(`request handler - ${route}`, { attributes: { 'http.route': route } });
          assert.equal(getLabels().endpoint, `GET ${route}`, 'the route, while the request runs');
          await sleep(0);
          assert.equal(getLabels().endpoint, `GET ${route}`, 'and after an await');
          handler.end();
        });
        root.end();
      });
    }
  } finally {
    await close();
  }
});

test('a request still running at stop() carries the route known then; a span that never gets one keeps its name, never "undefined"', async () => {
  const { tracer, close } = otelTracer();
  const RPC = api.createContextKey('OpenTelemetry SDK Context Key RPC_METADATA');
  let profiler;
  let p2;
  try {
    profiler = new Profiler({ sampleInterval: 1, maxBufferSize: 100_000 });
    // Each call on until signalled 20 times: a fixed 40 ms gave a loaded machine 9 samples.
    const log = new WorkLog({ signals: 20 });
    let release;
    const released = new Promise((r) => (release = r));
    let stopped;
    const running = tracer.startActiveSpan('GET', { kind: api.SpanKind.SERVER, attributes: { 'http.request.method': 'GET' } }, async (root) => {
      // The framework's instrumentation routes the request: the route goes to the RPC
      // metadata (as Express's does), and a child span starts in that context.
      // A middleware's span starts before routing; routing then writes the route, and
      // nothing tells the span processor until the trace is built.
      const rpc = { type: 0, span: root };
      const labels = { span_id: root.spanContext().spanId, trace_id: root.spanContext().traceId, endpoint: 'GET /slow/:id' };
      await api.context.with(api.context.active().setValue(RPC, rpc), async () => {
        tracer.startSpan('middleware - query', { attributes: { 'express.type': 'middleware', 'http.route': '/' } }).end();
        log.run(labels, stillRunning, 40);
        rpc.route = '/slow/:id';
        log.run(labels, stillRunning, 40);
        stopped = profiler.stop();
        await released;
      });
      root.end();
    });
    const trace = await stopped;
    release();
    await running;
    assertRequestLabels(traceWork(trace, ['stillRunning']), log.calls, { what: 'stillRunning', exact: true });

    // A span with no route keeps its name; a span named "undefined" gives no endpoint.
    p2 = new Profiler({ sampleInterval: 1, maxBufferSize: 100_000 });
    const log2 = new WorkLog();
    for (const name of ['GET', 'undefined']) {
      tracer.startActiveSpan(name, { kind: api.SpanKind.SERVER }, (root) => {
        const { spanId, traceId } = root.spanContext();
        untilSignals(30, () => log2.run({ span_id: spanId, trace_id: traceId, ...(name === 'GET' && { endpoint: 'GET' }) }, name === 'GET' ? otelRouteWork : unnamedWork, 2));
        root.end();
      });
    }
    const t2 = await p2.stop();
    assertRequestLabels(traceWork(t2, ['otelRouteWork', 'unnamedWork']), log2.calls, { what: 'no route', min: 10, exact: true });
  } finally {
    await stopAll(profiler, p2);
    await close();
  }
});

test('the old HTTP semantic conventions (http.method) give the same endpoint', async () => {
  const { tracer, close } = otelTracer();
  let profiler;
  try {
    profiler = new Profiler({ sampleInterval: 1, maxBufferSize: 100_000 });
    const log = new WorkLog();
    // As instrumentation-http did before the stable conventions: `HTTP POST`, then the
    // route at the end.
    tracer.startActiveSpan('HTTP POST', { kind: api.SpanKind.SERVER, attributes: { 'http.method': 'POST', 'http.target': '/orders' } }, (root) => {
      const { spanId, traceId } = root.spanContext();
      untilSignals(30, () => log.run({ span_id: spanId, trace_id: traceId, endpoint: 'POST /orders' }, otelRouteWork, 2));
      root.setAttribute('http.route', '/orders');
      root.end();
    });
    const trace = await profiler.stop();
    assertRequestLabels(traceWork(trace, ['otelRouteWork']), log.calls, { what: 'old conventions', min: 10, exact: true });
  } finally {
    await stopAll(profiler);
    await close();
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
  let session;
  let again;
  let profiler;
  try {
    session = start({ exporters: [], heap: false, workers: false, spanLabels: false });
    await session.stop();
    assert.equal(ours(), 0, 'spanLabels: false adds nothing');
    session = start({ exporters: [], heap: false, workers: false });
    again = start({ exporters: [], heap: false, workers: false });
    assert.equal(ours(), 1, 'added once, however many sessions');
    // Its spans label samples.
    const tracer = api.trace.getTracer('selfprof-test');
    profiler = new Profiler({ sampleInterval: 1, maxBufferSize: 100_000 });
    const log = new WorkLog();
    tracer.startActiveSpan('GET', { kind: api.SpanKind.SERVER, attributes: { 'http.request.method': 'GET', 'http.route': '/wired' } }, (root) => {
      const { spanId, traceId } = root.spanContext();
      untilSignals(30, () => log.run({ span_id: spanId, trace_id: traceId, endpoint: 'GET /wired' }, otelRouteWork, 2));
      root.end();
    });
    const trace = await profiler.stop();
    assertRequestLabels(traceWork(trace, ['otelRouteWork']), log.calls, { what: 'wired', min: 10, exact: true });
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
    await stopAll(profiler, session, again);
    process.off('warning', onWarning);
    api.trace.disable();
  }
});

function adoptedWork(ms) {
  return spin(ms);
}

/** Two requests, each in a root span with a child span, labels around and inside; the
 * samples of `adoptedWork` judged against what each call's request set. */
async function twoLabeledRequests(t, tracer, what) {
  const profiler = new Profiler({ sampleInterval: 2, maxBufferSize: 10_000 });
  const log = new WorkLog();
  let trace;
  try {
    await withLabels({ tenant: 'acme' }, () =>
      Promise.all(
        [0, 1].map((i) =>
          tracer.startActiveSpan(`request ${i}`, { kind: api.SpanKind.SERVER, attributes: { 'http.request.method': 'GET', 'http.route': `/orders/:id${i}` } }, async (root) => {
            const { spanId, traceId } = root.spanContext();
            const want = { tenant: 'acme', span_id: spanId, trace_id: traceId, endpoint: `GET /orders/:id${i}` };
            assert.deepEqual({ ...getLabels() }, want);
            await tracer.startActiveSpan('db query', async (child) => {
              await sleep(1);
              // The active span is OpenTelemetry's own, through awaits and withLabels.
              assert.equal(api.trace.getActiveSpan(), child);
              withLabels({ step: 'query' }, () => {
                assert.equal(api.trace.getActiveSpan(), child);
                untilSignals(20, () => log.run({ ...want, step: 'query' }, adoptedWork, 4));
              });
              await new Promise((resolve) => setTimeout(resolve, 1));
              untilSignals(20, () => log.run(want, adoptedWork, 4));
              child.end();
            });
            assert.equal(api.trace.getActiveSpan(), root);
            root.end();
          }),
        ),
      ),
    );
    trace = await profiler.stop();
  } finally {
    await stopAll(profiler);
  }
  t.diagnostic(`${what}: ${assertRequestLabels(traceWork(trace, ['adoptedWork']), log.calls, { what: 'adoptedWork', exact: true })}`);
}

/** AsyncLocalStorage on V8's continuation data (each store entered copies the frame). */
const storesInFrame = Number(process.versions.node.split('.')[0]) >= 24 || process.execArgv.includes('--experimental-async-context-frame');

/** Where the handler reads the frame here (Node >= 24 with a V8 whose layout this build has). */
const frameRead = storesInFrame && require('../lib/native').native.frameLayouts().some((l) => process.versions.v8.startsWith(`${l.v8}.`));
const { labelState } = require('../lib/capture/labels');
const selfprofStore = () => require('../lib/capture/labels/thread').als.getStore();

/** Requests until the frame's checks (selfprof's, then the manager's) are done. */
async function untilTracerChecked(tracer) {
  const profiler = new Profiler({ sampleInterval: 5, maxBufferSize: 10_000 });
  try {
    // (A new manager is seen at its first span: one at least.)
    for (let i = 0; i === 0 || (i < 200 && labelState().tracers.OpenTelemetry !== 'frame'); i++) {
      await tracer.startActiveSpan('warm', { kind: api.SpanKind.SERVER }, async (span) => {
        await new Promise((resolve) => setTimeout(resolve, 2));
        span.end();
      });
    }
  } finally {
    await stopAll(profiler);
  }
}

test("where the handler reads the frame (Node >= 24), it reads OpenTelemetry's own contexts: nothing is entered per request, labels and active spans right", async (t) => {
  const { tracer, close } = otelTracer();
  await untilTracerChecked(tracer);
  t.diagnostic(JSON.stringify(labelState()));
  assert.equal(labelState().tracers.OpenTelemetry === 'frame', frameRead, JSON.stringify(labelState()));
  let entered;
  const outside = selfprofStore();
  tracer.startActiveSpan('request', { kind: api.SpanKind.SERVER }, (span) => {
    entered = selfprofStore() !== outside;
    assert.equal(api.trace.getActiveSpan(), span);
    span.end();
  });
  assert.equal(entered, !frameRead, frameRead ? "the processor entered nothing of selfprof's" : "the processor entered the request's labels");
  await twoLabeledRequests(t, tracer, frameRead ? 'contexts read from the frame' : 'labels entered');
  await close();
});

// With a subscriber, Node builds and publishes a message at every request's start: selfprof
// listens only while it binds requests' events (where a tracer's contexts are not read from
// the frame, but selfprof's stores are in it: integrations/http-requests.js).
test("requests' starts are listened to only while their events are bound: not where the tracer's contexts are read from the frame, nor on async_hooks", async () => {
  const http = require('node:http');
  const dc = require('node:diagnostics_channel');
  const { tracer, close } = otelTracer();
  const server = http.createServer((req, res) => res.end('ok'));
  try {
    await untilTracerChecked(tracer);
    await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
    // (The first request's start finds the events need no binding, and stops listening.)
    for (let i = 0; i < 2; i++) await (await fetch(`http://127.0.0.1:${server.address().port}/`)).text();
    const bound = storesInFrame && labelState().tracers.OpenTelemetry !== 'frame';
    assert.equal(dc.hasSubscribers('http.server.request.start'), bound, JSON.stringify(labelState()));
  } finally {
    server.close();
    await close();
  }
});

test('SELFPROF_TRACER_CONTEXTS=0, or a context manager on async_hooks, keeps the processor entering the labels; a value the switch does not know is named once', async (t) => {
  process.env.SELFPROF_TRACER_CONTEXTS = '0';
  const { tracers } = require('../lib/capture/labels/tracers');
  const before = tracers[2];
  try {
    tracers[2] = null;
    const { tracer, close } = otelTracer();
    await untilTracerChecked(tracer);
    assert.equal(labelState().tracers.OpenTelemetry, undefined, 'not read');
    const outside = selfprofStore();
    tracer.startActiveSpan('request', { kind: api.SpanKind.SERVER }, (span) => {
      assert.notEqual(selfprofStore(), outside, 'the processor entered the labels');
      span.end();
    });
    await twoLabeledRequests(t, tracer, 'SELFPROF_TRACER_CONTEXTS=0');
    await close();
  } finally {
    delete process.env.SELFPROF_TRACER_CONTEXTS;
    tracers[2] ??= before;
  }
  // A value the switch does not know leaves it on, and says so once.
  process.env.SELFPROF_TRACER_CONTEXTS = 'nope';
  const warnings = [];
  const onWarning = (w) => warnings.push(w.message);
  process.on('warning', onWarning);
  try {
    for (let i = 0; i < 2; i++) {
      const { tracer, close } = otelTracer();
      tracer.startActiveSpan('request', { kind: api.SpanKind.SERVER }, (span) => span.end());
      await close();
    }
    await new Promise((resolve) => setImmediate(resolve));
    const named = warnings.filter((m) => m.includes('SELFPROF_TRACER_CONTEXTS'));
    // (Read only where contexts live in the frame.)
    assert.deepEqual(named, storesInFrame ? ['selfprof: SELFPROF_TRACER_CONTEXTS must be 1 or 0 (true or false), got "nope": left on'] : []);
  } finally {
    process.off('warning', onWarning);
    delete process.env.SELFPROF_TRACER_CONTEXTS;
  }
  // A manager on async_hooks (no AsyncLocalStorage of its own to read).
  const { AsyncHooksContextManager } = require('@opentelemetry/context-async-hooks');
  api.context.setGlobalContextManager(new AsyncHooksContextManager().enable());
  const provider = new BasicTracerProvider({ spanProcessors: [openTelemetrySpanProcessor()] });
  api.trace.setGlobalTracerProvider(provider);
  const tracer = api.trace.getTracer('selfprof-test');
  const outside = selfprofStore();
  tracer.startActiveSpan('request', { kind: api.SpanKind.SERVER }, (span) => {
    assert.notEqual(selfprofStore(), outside, 'the processor entered the labels');
    span.end();
  });
  await twoLabeledRequests(t, tracer, 'AsyncHooksContextManager');
  await provider.shutdown();
  api.trace.disable();
  api.context.disable();
});
