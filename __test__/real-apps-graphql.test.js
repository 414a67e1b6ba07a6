'use strict';
// GraphQL operations as endpoints: Apollo Server 4 as Express middleware (one URL, POST
// /graphql, for every operation) under OpenTelemetry's NodeSDK with the auto-instrumentations
// (instrumentation-graphql among them) and under dd-trace with its plugins, loaded over
// loopback from this process (real-apps.js) with named queries and mutations, an anonymous
// query and batches of both. Each resolver notes the operation it ran in (type, name,
// whether its HTTP request was a batch) and the tracer's ids; every sample taken in a
// resolver's work must carry, exactly: its operation as endpoint (`query GetUser`, `mutation
// AddItem`) with the route as `http_route` where the request ran that one named operation,
// else the route (`POST /graphql`); and its request's span. In the trace object, the
// Datadog upload (`trace endpoint`, and endpoint_counts by operation), and with OpenTelemetry
// Pyroscope's endpoint series and OTLP's attributes too. SELFPROF_OPERATION_ENDPOINTS=0 keeps
// the route everywhere.
const { test } = require('node:test');
const assert = require('node:assert/strict');
const { missing, decodeOtlp, otlpWork } = require('./tools');
const { decodePprof, traceWork, pprofWork, callAt } = require('./helpers');
const { tracing, START, frameExpected, FLOOR, testAgent, runApp, judge, warm, datadogWork, allBackends } = require('./real-apps');

const WORK = ['userWork', 'orderWork'];
const ROUTE = 'POST /graphql';
const agent = testAgent();

const json = (body) => ({ method: 'POST', path: '/graphql', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
const GET_USER = { operationName: 'GetUser', query: 'query GetUser($id: ID!) { user(id: $id) { id n } }', variables: { id: '42' } };
const ADD_ITEM = { operationName: 'AddItem', query: 'mutation AddItem($name: String!) { addItem(name: $name) { ok n } }', variables: { name: 'book' } };
const ANONYMOUS = { query: '{ user(id: "7") { id n } }' };
const REQUESTS = [json(GET_USER), json(ADD_ITEM), json(ANONYMOUS), json([GET_USER, ADD_ITEM])];
/** The endpoint each kind of request is counted under (the app counts them by kind). */
const ENDPOINT_OF_KIND = { GetUser: 'query GetUser', AddItem: 'mutation AddItem', anonymous: ROUTE, batch: ROUTE };

/** The labels a resolver's call must carry: its operation where its request ran that one
 * named operation (the route then as http_route), else the route. */
function requestLabels(call, operations) {
  if (!operations || call.operation === null || call.batched) return { endpoint: ROUTE };
  return { endpoint: `${call.type} ${call.operation}`, http_route: ROUTE };
}

/** A resolver call's kind of request: its operation, and whether it was in a batch. */
const kindOf = (c) => `${c.batched ? 'batched ' : ''}${c.operation ?? 'anonymous'}`;
const KINDS = ['GetUser', 'AddItem', 'anonymous', 'batched GetUser', 'batched AddItem'];

/**
 * `judge` (none wrong, 99% of each work function's samples right), and the same share of
 * each kind of request's: of the samples the warm app took in its resolvers' work
 * (real-apps.js `warm`), at least FLOOR carry exactly that request's labels (GetUser's and
 * AddItem's apart). Returns the counts by kind.
 */
function judgeOperations(samples, calls, truthOf, what, isWarm) {
  judge(samples, calls, truthOf, what, isWarm);
  const sorted = [...calls].sort((a, b) => a.t0 - b.t0);
  const counts = Object.fromEntries(KINDS.map((k) => [k, { right: 0, all: 0 }]));
  for (const s of samples.filter(isWarm)) {
    const call = callAt(sorted, s.t);
    if (call === undefined || call.work !== s.work) continue;
    const c = counts[kindOf(call)];
    c.all++;
    const want = truthOf(call);
    const got = Object.fromEntries(Object.entries(s.labels ?? {}).filter(([, v]) => v !== undefined));
    if (Object.keys(got).length === Object.keys(want).length && Object.keys(want).every((k) => got[k] === want[k])) c.right++;
  }
  for (const [kind, c] of Object.entries(counts)) {
    assert.ok(c.all >= 10, `${what}: ${c.all} samples in ${kind}'s resolvers`);
    assert.ok(c.right >= Math.floor(FLOOR * c.all), `${what}: ${c.right} of ${c.all} samples in ${kind}'s resolvers carry its labels`);
  }
  return KINDS.map((k) => `${k} ${counts[k].right}/${counts[k].all}`).join(', ');
}

/** Runs Apollo under `preloads` and checks the trace object and the Datadog upload. */
async function check(t, { preloads, tracerName, operations = true, env = {} }) {
  // Load until each kind of request ran its resolvers often enough to judge it.
  const enough = (calls) => KINDS.every((k) => calls.filter((c) => kindOf(c) === k).length >= 40);
  const run = await runApp(t, agent.current, 'apollo', preloads, env, REQUESTS, enough);
  const { trace, calls, started, labelState } = run;
  assert.ok(calls.length >= 100, `${calls.length} resolver calls`);
  assert.equal(started.withLabels, 0, "requests that started with a previous request's labels");
  for (const kind of KINDS) assert.ok(calls.some((c) => kindOf(c) === kind), `resolver calls of ${kind}`);
  for (const c of calls) assert.match(c.spanId ?? '', /^[0-9a-f]{16}$/, 'the resolver saw its request span');
  if (frameExpected) assert.equal(labelState.tracers[tracerName], 'frame', JSON.stringify(labelState));

  // The trace object: the endpoint, http_route where an operation named it, the span.
  const fromTrace = traceWork(trace, WORK).map(({ t, work, labels }) => ({ t, work, labels: labels && { endpoint: labels.endpoint, http_route: labels.http_route, span: labels.span_id } }));
  const inTrace = judgeOperations(fromTrace, calls, (c) => ({ ...requestLabels(c, operations), span: c.spanId }), 'trace', warm(run));

  // Datadog: `trace endpoint` by operation, and endpoint_counts.
  assert.ok(run.uploads.length >= 1, 'Datadog uploads');
  const { samples, counted } = datadogWork(run, WORK);
  const fromUploads = samples.map(({ t, work, str, num }) => {
    const span = num['local root span id'];
    return { t, work, labels: (str['trace endpoint'] || span) && { endpoint: str['trace endpoint'], http_route: str.http_route, span } };
  });
  const inUploads = judgeOperations(fromUploads, calls, (c) => ({ ...requestLabels(c, operations), span: BigInt(`0x${c.spanId}`).toString() }), 'Datadog upload', warm(run));
  const served = {};
  for (const [kind, n] of Object.entries(run.served)) {
    const endpoint = operations ? ENDPOINT_OF_KIND[kind] : ROUTE;
    served[endpoint] = (served[endpoint] ?? 0) + n;
  }
  assert.deepEqual(counted, served, 'endpoint_counts: every request, by its endpoint');
  t.diagnostic(`${labelState.path}: trace ${inTrace}; Datadog ${inUploads}; endpoint_counts ${JSON.stringify(counted)}`);
  return run;
}

test('Apollo Server 4 + Express under dd-trace (wired by -r selfprof/start): one named operation is the endpoint', async (t) => {
  if (!agent.current && missing(t, 'ddapm-test-agent')) return;
  await check(t, { preloads: [tracing('dd-trace'), START], tracerName: 'dd-trace' });
});

test('Apollo Server 4 + Express under OpenTelemetry (NodeSDK, instrumentation-graphql): the operation in every backend', async (t) => {
  const backends = await allBackends(t, agent);
  if (backends === null) return;
  const { sink, python } = backends;
  const run = await check(t, { preloads: [tracing('otel-sdk')], tracerName: 'OpenTelemetry', env: backends.env });
  const { calls, timeOrigin } = run;

  // Pyroscope: the operation as the `endpoint` series label (http_route is no series label
  // unless asked for), and the request's span.
  const fromPyroscope = [];
  for (const { body } of sink.got.pyroscope) {
    const pprof = decodePprof(body);
    if (!pprof.p.sampleType.some((v) => pprof.str(v.type) === 'wall')) continue; // a heap profile
    fromPyroscope.push(...pprofWork(pprof, WORK, { timeOrigin }));
  }
  assert.ok(fromPyroscope.length > 0, 'Pyroscope uploads');
  const inPyroscope = judgeOperations(fromPyroscope, calls, (c) => ({ endpoint: requestLabels(c, true).endpoint, span_id: c.spanId }), 'Pyroscope upload', warm(run));

  // OTLP: endpoint and http_route as attributes, the span as the link.
  assert.ok(sink.got.otlp.length >= 1, 'OTLP uploads');
  const fromOtlp = otlpWork(decodeOtlp(python, sink.got.otlp), WORK, timeOrigin);
  const inOtlp = judgeOperations(fromOtlp, calls, (c) => ({ ...requestLabels(c, true), span_id: c.spanId, trace_id: c.traceId }), 'OTLP upload', warm(run));
  t.diagnostic(`Pyroscope ${inPyroscope}; OTLP ${inOtlp}`);
});

test('SELFPROF_OPERATION_ENDPOINTS=0: every GraphQL request keeps its route', async (t) => {
  if (!agent.current && missing(t, 'ddapm-test-agent')) return;
  await check(t, { preloads: [tracing('otel-sdk'), START], tracerName: 'OpenTelemetry', operations: false, env: { SELFPROF_OPERATION_ENDPOINTS: '0' } });
});
