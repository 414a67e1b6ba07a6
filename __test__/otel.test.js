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
  api.context.disable();
});
