'use strict';
// Both tracers loaded (dd-trace for traces, an OpenTelemetry SDK brought by a library, each
// with its own HTTP server span per request), in either order: each backend gets the ids of
// the tracer it joins, on every Node (20 and 22 through async_hooks, 24 and 26 through the
// context frame). Fastify loaded over loopback from this process (real-apps.js); the app
// notes both tracers' ids for every handler call, and every sample taken in that work must
// carry, exactly: in the trace object dd-trace's ids as `span_id`/`trace_id` and
// OpenTelemetry's as `otel_span_id`/`otel_trace_id` with dd-trace's endpoint; in the
// Datadog upload dd-trace's span (`span id`, `local root span id`) and nothing of
// OpenTelemetry's, each request counted once in endpoint_counts; in the OTLP upload
// (decoded by opentelemetry-proto) OpenTelemetry's link and nothing of dd-trace's; in
// Pyroscope's OpenTelemetry's span (docs/labels.md: "Both tracers").
const { test } = require('node:test');
const assert = require('node:assert/strict');
const { decodeOtlp, otlpWork } = require('./tools');
const { decodePprof, traceWork, pprofWork } = require('./helpers');
const { tracing, frameExpected, testAgent, runApp, judge, warm, datadogWork, allBackends } = require('./real-apps');

const WORK = ['userWork', 'orderWork'];
const ROUTES = { GET: 'GET /users/:id', POST: 'POST /orders' };
/** Datadog's labels on every sample, not a request's. */
const THREAD_LABELS = ['thread name', 'thread id', 'os thread id'];
const agent = testAgent();

/** A sample's labels without those that are undefined (none: no labels). */
const defined = (labels) => {
  const out = Object.fromEntries(Object.entries(labels ?? {}).filter(([, v]) => v !== undefined));
  return Object.keys(out).length > 0 ? out : undefined;
};

for (const [order, preloads] of [
  ['dd-trace, then the OpenTelemetry SDK', [tracing('dd-trace'), tracing('otel-library')]],
  ['the OpenTelemetry SDK, then dd-trace', [tracing('otel-library'), tracing('dd-trace')]],
]) {
  test(`Fastify with both tracers (${order}): Datadog gets dd-trace's ids, OTLP and Pyroscope OpenTelemetry's, the trace both`, async (t) => {
    const backends = await allBackends(t, agent);
    if (backends === null) return;
    const { sink, python } = backends;
    const enough = (calls) => WORK.every((w) => calls.filter((c) => c.work === w).length >= 80);
    const run = await runApp(t, agent.current, 'fastify', preloads, backends.env, undefined, enough);
    const { trace, calls, started, labelState } = run;
    assert.ok(calls.length >= 100, `${calls.length} requests served`);
    assert.equal(started.withLabels, 0, "requests that started with a previous request's labels");
    for (const c of calls) {
      assert.match(c.spanId ?? '', /^[0-9a-f]{16}$/, "the handler saw dd-trace's request span");
      assert.match(c.otelSpanId ?? '', /^[0-9a-f]{16}$/, "the handler saw OpenTelemetry's request span");
    }
    if (frameExpected) assert.deepEqual(labelState.tracers, { 'dd-trace': 'frame', OpenTelemetry: 'frame' }, JSON.stringify(labelState));
    const endpointOf = (c) => ROUTES[c.method];

    // The trace object: both tracers' ids, dd-trace's as span_id and trace_id.
    const inTrace = judge(traceWork(trace, WORK), calls, (c) => ({ endpoint: endpointOf(c), span_id: c.spanId, trace_id: c.traceId, otel_span_id: c.otelSpanId, otel_trace_id: c.otelTraceId }), 'trace');

    // Datadog: dd-trace's span ids, nothing of OpenTelemetry's; every request counted once.
    assert.ok(run.uploads.length >= 1, 'Datadog uploads');
    const { samples, counted } = datadogWork(run, WORK);
    const fromDatadog = samples.map(({ t, work, str, num }) => {
      const labels = { ...str, ...num };
      for (const k of [...THREAD_LABELS, 'end_timestamp_ns']) delete labels[k];
      return { t, work, labels: defined(labels) };
    });
    const decimal = (hex) => BigInt(`0x${hex}`).toString();
    const inDatadog = judge(fromDatadog, calls, (c) => ({ 'trace endpoint': endpointOf(c), 'span id': decimal(c.spanId), 'local root span id': decimal(c.spanId) }), 'Datadog upload', warm(run));
    const served = Object.fromEntries(Object.entries(run.served).map(([method, n]) => [ROUTES[method], n]));
    assert.deepEqual(counted, served, 'endpoint_counts: each request once');

    // OTLP: OpenTelemetry's link, nothing of dd-trace's.
    assert.ok(sink.got.otlp.length >= 1, 'OTLP uploads');
    const fromOtlp = otlpWork(decodeOtlp(python, sink.got.otlp), WORK, run.timeOrigin);
    const inOtlp = judge(fromOtlp, calls, (c) => ({ endpoint: endpointOf(c), span_id: c.otelSpanId, trace_id: c.otelTraceId }), 'OTLP upload', warm(run));

    // Pyroscope: OpenTelemetry's span (Grafana joins its spans), the endpoint series.
    const fromPyroscope = [];
    for (const { body } of sink.got.pyroscope) {
      const pprof = decodePprof(body);
      if (!pprof.p.sampleType.some((v) => pprof.str(v.type) === 'wall')) continue; // a heap profile
      fromPyroscope.push(...pprofWork(pprof, WORK, { timeOrigin: run.timeOrigin }));
    }
    assert.ok(fromPyroscope.length > 0, 'Pyroscope uploads');
    const inPyroscope = judge(fromPyroscope, calls, (c) => ({ endpoint: endpointOf(c), span_id: c.otelSpanId }), 'Pyroscope upload', warm(run));
    t.diagnostic(`${labelState.path}: trace ${inTrace}; Datadog ${inDatadog}; OTLP ${inOtlp}; Pyroscope ${inPyroscope}; endpoint_counts ${JSON.stringify(counted)}`);
  });
}
