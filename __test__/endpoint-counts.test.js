'use strict';
// Requests per endpoint (Datadog's endpoint_counts) bounded whatever the routes'
// cardinality, in memory and in each upload; and no integration makes "undefined" an
// endpoint. Run in child processes with OpenTelemetry's SDK and dd-trace, as apps run them.
const { test } = require('node:test');
const assert = require('node:assert/strict');
const path = require('node:path');
const { runNode, formOf } = require('./tools');
const { receiver } = require('./helpers');
const { MAX_ENDPOINTS, OTHER_ENDPOINTS } = require('../lib/integrations/requests');

const root = JSON.stringify(path.join(__dirname, '..'));
const ROUTES = 300_000;

/**
 * Ends ROUTES server spans, each with its own `http.route`, through OpenTelemetry's SDK with
 * selfprof's span processor; with a session (argv[1] = a Datadog url), which then stops
 * (its one upload). Prints the heap retained after a full GC, in MiB.
 */
const manyRoutes = `
  const api = require('@opentelemetry/api');
  const { BasicTracerProvider } = require('@opentelemetry/sdk-trace-base');
  const { openTelemetrySpanProcessor, start } = require(${root});
  const provider = new BasicTracerProvider({ spanProcessors: [openTelemetrySpanProcessor()] });
  const tracer = provider.getTracer('routes');
  const url = process.argv[1];
  const session = url ? start({ service: 'routes', period: 60000, heap: false, exporters: [{ type: 'datadog', url }] }) : null;
  const heap = () => { global.gc(); global.gc(); return process.memoryUsage().heapUsed; };
  const before = heap();
  for (let i = 0; i < ${ROUTES}; i++) {
    const span = tracer.startSpan('GET', { kind: api.SpanKind.SERVER, attributes: { 'http.request.method': 'GET', 'http.route': '/items/' + i } });
    span.end();
  }
  const retainedMiB = (heap() - before) / 2 ** 20;
  (session ? session.stop() : Promise.resolve()).then(() => console.log(JSON.stringify({ retainedMiB })));
`;

test(`${ROUTES.toLocaleString('en')} distinct routes: the heap they retain and each upload's endpoint_counts are bounded`, async (t) => {
  // No session: nothing reads the counts, so nothing is kept.
  const alone = await runNode(manyRoutes, {}, { execArgv: ['--expose-gc'] });
  assert.equal(alone.code, 0, alone.stderr);
  const { retainedMiB: aloneMiB } = JSON.parse(alone.stdout);
  t.diagnostic(`without a session: ${aloneMiB.toFixed(1)} MiB retained`);
  assert.ok(aloneMiB < 8, `${aloneMiB.toFixed(1)} MiB retained by ${ROUTES} routes without a session`);

  // A session: its upload counts MAX_ENDPOINTS endpoints and the rest under one key.
  const agent = await receiver();
  t.after(() => agent.close());
  const run = await runNode(manyRoutes, { SELFPROF_STARTUP_LOG: '0' }, { execArgv: ['--expose-gc'], args: [agent.url] });
  assert.equal(run.code, 0, run.stderr);
  const { retainedMiB } = JSON.parse(run.stdout);
  t.diagnostic(`with a session: ${retainedMiB.toFixed(1)} MiB retained`);
  assert.ok(retainedMiB < 8, `${retainedMiB.toFixed(1)} MiB retained by ${ROUTES} routes with a session`);
  assert.equal(agent.requests.length, 1);
  const form = await formOf(agent.requests[0].body, agent.requests[0].headers['content-type']);
  const eventJson = await form.get('event').text();
  const counts = JSON.parse(eventJson).endpoint_counts;
  t.diagnostic(`upload: ${agent.requests[0].body.length} bytes, event.json ${eventJson.length} bytes, ${Object.keys(counts).length} endpoint_counts keys`);
  assert.equal(Object.keys(counts).length, MAX_ENDPOINTS + 1);
  assert.equal(counts['GET /items/0'], 1);
  assert.equal(counts[OTHER_ENDPOINTS], ROUTES - MAX_ENDPOINTS);
  assert.equal(Object.values(counts).reduce((a, b) => a + b, 0), ROUTES, 'every request counted once');
  assert.ok(eventJson.length < 128 << 10, `event.json is ${eventJson.length} bytes`);
});

test('"undefined" never becomes an endpoint: not from dd-trace\'s tags, not from OpenTelemetry\'s attributes', async () => {
  // Each span: its tags or attributes, and the endpoint its labels and count must carry.
  const ddtrace = `
    const tracer = require('dd-trace').init({ startupLogs: false, plugins: false });
    const selfprof = require(${root});
    selfprof.ddTraceIntegration();
    const counts = require(${root} + '/lib/integrations/requests').requestCounter();
    const cases = [
      [{ 'resource.name': 'undefined', 'http.method': 'GET', 'http.route': '/x' }, 'GET /x'],
      [{ 'http.method': 'GET', 'http.route': 'undefined' }, 'GET'],
      [{ 'resource.name': 'undefined', 'http.method': 'undefined', 'http.route': 'undefined' }, null],
    ];
    const endpoints = cases.map(([tags]) => {
      const span = tracer.startSpan('web.request', { tags: { 'span.type': 'web', 'span.kind': 'server', ...tags } });
      // dd-trace names the resource after the operation unless told: unset it.
      if (!('resource.name' in tags)) span.setTag('resource.name', undefined);
      const endpoint = tracer.scope().activate(span, () => selfprof.getLabels().endpoint ?? null);
      span.finish();
      return endpoint;
    });
    console.log(JSON.stringify({ endpoints, expected: cases.map((c) => c[1]), counts: counts() }));
  `;
  const otel = `
    const api = require('@opentelemetry/api');
    const { BasicTracerProvider } = require('@opentelemetry/sdk-trace-base');
    const { AsyncLocalStorageContextManager } = require('@opentelemetry/context-async-hooks');
    const selfprof = require(${root});
    api.context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
    api.trace.setGlobalTracerProvider(new BasicTracerProvider({ spanProcessors: [selfprof.openTelemetrySpanProcessor()] }));
    const tracer = api.trace.getTracer('undefined-routes');
    const counts = require(${root} + '/lib/integrations/requests').requestCounter();
    const cases = [
      ['GET', { 'http.request.method': 'GET', 'http.route': 'undefined' }, 'GET'],
      ['GET', { 'http.request.method': 'undefined', 'http.route': '/x' }, '/x'],
      ['undefined', { 'http.method': 'undefined' }, null],
    ];
    const endpoints = cases.map(([name, attributes]) =>
      tracer.startActiveSpan(name, { kind: api.SpanKind.SERVER, attributes }, (span) => {
        const endpoint = selfprof.getLabels().endpoint ?? null;
        span.end();
        return endpoint;
      }),
    );
    console.log(JSON.stringify({ endpoints, expected: cases.map((c) => c[2]), counts: counts() }));
  `;
  for (const [tracer, script] of Object.entries({ 'dd-trace': ddtrace, OpenTelemetry: otel })) {
    const r = await runNode(script, { DD_TRACE_ENABLED: 'true', DD_INSTRUMENTATION_TELEMETRY_ENABLED: 'false' });
    assert.equal(r.code, 0, r.stderr);
    const { endpoints, expected, counts } = JSON.parse(r.stdout);
    assert.deepEqual(endpoints, expected, `${tracer}: each span's endpoint label`);
    const want = {};
    for (const e of expected.filter(Boolean)) want[e] = (want[e] ?? 0) + 1;
    assert.deepEqual(counts, want, `${tracer}: requests counted by their endpoint, none under "undefined"`);
  }
});
