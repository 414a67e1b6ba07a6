'use strict';
// A tracer's requests labeled from the tracer's own contexts (Node >= 24: the handler reads
// the tracer's entry of the async context frame, capture/labels/tracers.js; Node 20 and
// 22: the integration enters selfprof's own set), under dd-trace and under OpenTelemetry:
// the request's span ids and endpoint through awaits, timers and a request body's stream
// events; withLabels inside a request (its keys over the request's) and a request inside
// withLabels (the request's over withLabels'); collections while sampled; spans run one
// after another in one callback; a request begun before the recording; nothing of
// selfprof's in the contexts of a server set listening as the service starts. Every
// sample judged against what the test ran, exactly.
const { test } = require('node:test');
const assert = require('node:assert/strict');
const http = require('node:http');

// dd-trace first, as apps load it (its http plugin traces the server below).
process.env.DD_TRACE_AGENT_URL = 'http://127.0.0.1:9';
process.env.DD_INSTRUMENTATION_TELEMETRY_ENABLED = 'false';
process.env.DD_REMOTE_CONFIGURATION_ENABLED = 'false';
process.env.DD_TRACE_STARTUP_LOGS = 'false';
const ddTracer = require('dd-trace').init({ logLevel: 'error', flushInterval: 600_000 });
const api = require('@opentelemetry/api');
const { BasicTracerProvider } = require('@opentelemetry/sdk-trace-base');
const { AsyncLocalStorageContextManager } = require('@opentelemetry/context-async-hooks');
const { Profiler, withLabels, getLabels, ddTraceIntegration, openTelemetrySpanProcessor } = require('..');
const { labelState } = require('../lib/capture/labels');
const { native } = require('../lib/native');
const { spin, allocatingWork, WorkLog, traceWork, callSamples, inCallsOf, stackFrames, assertRequestLabels, unvouchedSamples, samplesAcross, stopAll } = require('./helpers');

/** Whether the handler reads the frame here (Node >= 24 with a V8 whose layout this build has). */
const frameRead = Number(process.versions.node.split('.')[0]) >= 24 && native.frameLayouts().some((l) => process.versions.v8.startsWith(`${l.v8}.`));
/** Whether AsyncLocalStorage keeps its stores in the frame (Node >= 24), not on resources. */
const storesInFrame = Number(process.versions.node.split('.')[0]) >= 24 || process.execArgv.includes('--experimental-async-context-frame');

function requestWork(ms) {
  return spin(ms);
}

/** Each tracer as the tests use it: `request(endpoint, fn)` runs `fn(ids)` in a new local
 * root span of a request to `endpoint`; `message(name, fn)` the same for a message. */
const tracers = {
  'dd-trace': () => {
    ddTraceIntegration();
    const run = (kind, endpoint, fn) =>
      ddTracer.trace(kind === 'server' ? 'web.request' : 'queue.consume', { childOf: null, type: kind === 'server' ? 'web' : 'worker', tags: { 'span.kind': kind, 'resource.name': endpoint } }, (span) =>
        fn({ span_id: span.context().toSpanId(true), trace_id: span.context().toTraceId(true), endpoint }),
      );
    // (trace() ends the span as `fn` returns, or as the promise it returns settles.)
    const message = (name, fn) => run('consumer', name, fn);
    return { name: 'dd-trace', request: (endpoint, fn) => run('server', endpoint, fn), message, messageNow: message };
  },
  OpenTelemetry: () => {
    api.context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
    api.trace.setGlobalTracerProvider(new BasicTracerProvider({ spanProcessors: [openTelemetrySpanProcessor()] }));
    const tracer = api.trace.getTracer('selfprof-test');
    const run = (kind, endpoint, fn) =>
      tracer.startActiveSpan(endpoint, { kind, root: true }, async (span) => {
        try {
          return await fn({ span_id: span.spanContext().spanId, trace_id: span.spanContext().traceId, endpoint });
        } finally {
          span.end();
        }
      });
    // A message handled synchronously: its span ends as `fn` returns.
    const messageNow = (name, fn) =>
      tracer.startActiveSpan(name, { kind: api.SpanKind.CONSUMER, root: true }, (span) => {
        try {
          return fn({ span_id: span.spanContext().spanId, trace_id: span.spanContext().traceId, endpoint: name });
        } finally {
          span.end();
        }
      });
    return { name: 'OpenTelemetry', request: (endpoint, fn) => run(api.SpanKind.SERVER, endpoint, fn), message: (name, fn) => run(api.SpanKind.CONSUMER, name, fn), messageNow };
  },
};

/** `fn()` started in a callback of its own, as a server starts each request in its
 * 'request' event (on the hooks' path a request's span labels the rest of the context it
 * starts in: spans.js). */
const onItsOwn = (fn) => new Promise((resolve, reject) => setImmediate(() => fn().then(resolve, reject)));

/** Requests until labels are read the way they will be (the frame's check, then the
 * tracer's): what the tests judge runs on the path this Node gives. */
async function settled(t, tracer) {
  const profiler = new Profiler({ sampleInterval: 5, maxBufferSize: 10_000 });
  for (let i = 0; i === 0 || (i < 300 && frameRead && labelState().tracers[tracer.name] !== 'frame'); i++) {
    await onItsOwn(() => tracer.request('GET /warm', () => new Promise((resolve) => setTimeout(resolve, 2))));
  }
  await profiler.stop();
  t.diagnostic(JSON.stringify(labelState()));
  if (frameRead) assert.equal(labelState().tracers[tracer.name], 'frame', JSON.stringify(labelState()));
}

function batchWork(ms) {
  return spin(ms);
}
function afterBatchWork(ms) {
  return spin(ms);
}
function earlyRequestWork(ms) {
  return spin(ms);
}

/** Records with `run()` until each of `works` has 10 samples inside its calls in `log` (at
 * most five recordings): the samples by work, each list saying how many of the
 * recordings' samples no signal vouched for (`unvouched`: V8's own, left unlabeled). */
async function recordWorks(works, log, run) {
  const traces = [];
  const byWork = () => Object.fromEntries(works.map((w) => [w, samplesAcross(traces, (trace) => callSamples(trace, log.calls, w))]));
  let samples = byWork();
  for (let i = 0; i < 5 && works.some((w) => samples[w].length < 10); i++) {
    traces.push(await run());
    samples = byWork();
  }
  return samples;
}

// A consumer's batch: spans started and ended one after another inside one callback, with
// no async hop between them: each message's samples carry its own labels, its endpoint
// included (on Node 20 and 22 a message's samples may be kept only as its span ends, its
// set left), and what runs after the batch carries none of its messages' labels (read
// from the frame, they end with the tracer's context; on Node 20 and 22 each span's set
// leaves the callback as the span ends: spans.js). Where stores live in the frame but the
// handler does not read it (a V8 whose layout this build does not know: CI's Node 25), a
// span's set labels the rest of the callback it started in, as docs/labels.md says.
for (const [name, setUp] of Object.entries(tracers)) {
  test(`${name}: spans run one after another in one callback each carry their own labels, and what runs after them none of theirs`, async (t) => {
    const tracer = setUp();
    await settled(t, tracer);
    const log = new WorkLog({ signals: 12 });
    const byWork = await recordWorks(['batchWork', 'afterBatchWork'], log, async () => {
      const profiler = new Profiler({ sampleInterval: 1, maxBufferSize: 100_000 });
      try {
        await new Promise((resolve) =>
          setImmediate(() => {
            for (let m = 0; m < 3; m++) tracer.messageNow(`consume batch ${m}`, (ids) => log.run(ids, batchWork, 3));
            log.run({}, afterBatchWork, 3);
            resolve();
          }),
        );
        return await profiler.stop();
      } finally {
        await stopAll(profiler);
      }
    });
    const judged = assertRequestLabels(byWork.batchWork, log.calls.filter((c) => c.work === 'batchWork'), { what: `${name}: batch`, min: 10, exact: true });
    const after = byWork.afterBatchWork;
    const messages = after.filter((s) => s.labels?.span_id !== undefined);
    if (frameRead || !storesInFrame) {
      assert.ok(after.length >= 10, `${after.length} samples after the batch`);
      assert.deepEqual(messages.slice(0, 3), [], `samples after the batch with a message's labels (${messages.length} of ${after.length})`);
    }
    t.diagnostic(`${labelState().path}, ${JSON.stringify(labelState().tracers)}: ${judged}; after the batch ${after.length - messages.length}/${after.length} without a message's labels`);
  });

  test(`${name}: a request begun before the recording started carries its labels in it`, async (t) => {
    const tracer = setUp();
    await settled(t, tracer);
    const log = new WorkLog({ signals: 12 });
    const byWork = await recordWorks(['earlyRequestWork'], log, async () => {
      let begin;
      const begun = new Promise((resolve) => (begin = resolve));
      let requestDone;
      // The request starts and waits (an await on a promise, a timer) while nothing records.
      const request = onItsOwn(() =>
        tracer.request('GET /early', async (ids) => {
          await begun;
          log.run(ids, earlyRequestWork, 3);
          await new Promise((resolve) => setTimeout(resolve, 1));
          log.run(ids, earlyRequestWork, 3);
        }),
      ).then(() => (requestDone = true));
      await new Promise((resolve) => setTimeout(resolve, 5));
      const profiler = new Profiler({ sampleInterval: 1, maxBufferSize: 100_000 });
      try {
        begin();
        await request;
        assert.ok(requestDone);
        return await profiler.stop();
      } finally {
        await stopAll(profiler);
      }
    });
    t.diagnostic(`${labelState().path}, ${JSON.stringify(labelState().tracers)}: ${assertRequestLabels(byWork.earlyRequestWork, log.calls, { what: `${name}: early request`, min: 10, exact: true })}`);
  });
}

for (const [name, setUp] of Object.entries(tracers)) {
  test(`${name}: each request's samples carry its span ids and endpoint through awaits, timers, a body's events and collections; withLabels over and under requests`, async (t) => {
    const tracer = setUp();
    await settled(t, tracer);
    const log = new WorkLog({ signals: 12 });
    const server = http.createServer();
    await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
    t.after(() => server.close());
    // Recorded until each work function has its samples: its calls run until 12 signals
    // reached them. A work function's samples are those taken inside its calls
    // (`callSamples`), not those with it on their stack: code V8 optimized between this
    // file's recordings keeps no positions of what it inlined. Beside other test files on
    // Node 24, 9 of some 175 JS samples in allocatingWork's calls over five recordings had
    // it on the stack; CI's Node 22, 25 and 26 lanes saw as few. A signal may find the
    // thread collecting garbage (a sample without a stack: a quarter of such calls' samples
    // under nice 19 beside four busy loops): that collection ran for the call, and its
    // labels are judged as the call's.
    const works = ['requestWork', 'allocatingWork'];
    const samples = [];
    const metadata = [];
    const inAllocating = [];
    let unvouched = 0;
    do {
      const trace = await recordRequests(tracer, log);
      for (const work of works) samples.push(...callSamples(trace, log.calls, work));
      inAllocating.push(markersIn(trace, log.calls, 'allocatingWork'));
      unvouched += unvouchedSamples(trace);
      metadata.push(trace.metadata);
    } while (metadata.length < 5 && works.some((w) => samples.filter((s) => s.work === w).length < 10));
    // (What each recording's samples in allocatingWork's calls were goes into a failure's message too.)
    const recordings = `${metadata.length} recording(s): ${JSON.stringify(metadata)}; samples in allocatingWork's calls by kind: ${JSON.stringify(inAllocating)}`;
    t.diagnostic(`${labelState().path}, ${JSON.stringify(labelState().tracers)}: ${assertRequestLabels(samples, log.calls, { what: `${name} (${recordings})`, min: 10, exact: true, unvouched })}; ${recordings}`);
    assert.equal(labelState().pairsWithoutId, 0, 'every pair had an id');
  });
}

/** How many of `trace`'s samples inside calls of `work` were JS (by their marker
 * otherwise), and how many had `work` on their stack (`onStack`). */
function markersIn(trace, calls, work) {
  const out = { onStack: 0 };
  for (const s of inCallsOf(trace, calls, work)) {
    const kind = s.stackId !== undefined ? 'js' : (s.marker ?? 'none');
    out[kind] = (out[kind] ?? 0) + 1;
    if (stackFrames(trace, s).some((f) => f.name === work)) out.onStack++;
  }
  return out;
}

/** One recording of three requests side by side and three messages one after another
 * (`tracer`'s), their work logged in `log`: its trace. */
async function recordRequests(tracer, log) {
  const profiler = new Profiler({ sampleInterval: 1, maxBufferSize: 100_000 });
  try {
    // Requests side by side, each through an await, a timer, and a stream's events.
    await Promise.all(
      [0, 1, 2].map((i) =>
        onItsOwn(() => tracer.request(`POST /orders/${i}`, async (ids) => {
          log.run(ids, requestWork, 3);
          await null;
          log.run(ids, requestWork, 3);
          await new Promise((resolve) => setTimeout(resolve, 1));
          log.run(ids, allocatingWork, 3);
          // A body's events, emitted by a stream the request made.
          const { PassThrough } = require('node:stream');
          const body = new PassThrough();
          const done = new Promise((resolve) => body.on('end', resolve));
          body.on('data', () => log.run(ids, requestWork, 2));
          for (let k = 0; k < 3; k++) body.write(`chunk ${k}`);
          body.end();
          await done;
          // withLabels inside the request: its keys over the request's.
          await withLabels({ tenant: `t${i}` }, async () => {
            assert.deepEqual({ ...getLabels() }, { ...ids, tenant: `t${i}` });
            log.run({ ...ids, tenant: `t${i}` }, requestWork, 3);
            await new Promise((resolve) => setTimeout(resolve, 1));
            log.run({ ...ids, tenant: `t${i}` }, requestWork, 3);
            withLabels({ endpoint: 'custom' }, () => log.run({ ...ids, tenant: `t${i}`, endpoint: 'custom' }, requestWork, 3));
          });
          log.run(ids, requestWork, 3);
        })),
      ),
    );
    // Messages consumed one after another inside withLabels, in the loop's own context (a
    // consumer's loop): each message's span ids and name over withLabels' labels.
    await withLabels({ worker: 'consumer', endpoint: 'loop' }, async () => {
      log.run({ worker: 'consumer', endpoint: 'loop' }, requestWork, 3);
      for (let m = 0; m < 3; m++) {
        await tracer.message(`consume orders ${m}`, async (ids) => {
          log.run({ worker: 'consumer', ...ids }, requestWork, 3);
          await new Promise((resolve) => setTimeout(resolve, 1));
          log.run({ worker: 'consumer', ...ids }, requestWork, 3);
        });
      }
    });
    return await profiler.stop();
  } finally {
    await stopAll(profiler);
  }
}

test("dd-trace: two local roots made children of one remote context share its trace object: neither request's samples carry the other's labels", async (t) => {
  ddTraceIntegration();
  const tracer = tracers['dd-trace']();
  await settled(t, tracer);
  const remote = ddTracer.extract('http_headers', { 'x-datadog-trace-id': '1234567890', 'x-datadog-parent-id': '987654321' });
  const profiler = new Profiler({ sampleInterval: 1, maxBufferSize: 100_000 });
  const log = new WorkLog({ signals: 12 });
  const request = (endpoint) =>
    onItsOwn(() =>
      ddTracer.trace('web.request', { childOf: remote, type: 'web', tags: { 'span.kind': 'server', 'resource.name': endpoint } }, async (span) => {
        const ids = { span_id: span.context().toSpanId(true), trace_id: span.context().toTraceId(true), endpoint };
        log.run(ids, requestWork, 3);
        await new Promise((resolve) => setTimeout(resolve, 1));
        log.run(ids, requestWork, 3);
      }),
    );
  await Promise.all([request('GET /a'), request('GET /b')]);
  const trace = await profiler.stop();
  // Labeled or not (on the frame's path neither root is certain), never the other's.
  t.diagnostic(assertRequestLabels(traceWork(trace, ['requestWork']), log.calls, { what: 'shared remote parent', floor: 0, min: 10, exact: true }));
});

// A service as apps start it: dd-trace, then selfprof, then a server set listening on a
// host (Node looks the host up: dd-trace traces that lookup, a local root, while the
// frame's check is still under way). What selfprof enters then would stay in the
// listening server's context and so in every request's frame for good, copied at each
// of the tracer's context switches. Once the handler reads dd-trace's contexts, nothing
// of selfprof's is in a request's frame, and each request's labels are its own.
test("dd-trace: a server set listening as the service starts carries nothing of selfprof's into its requests' contexts", { skip: !storesInFrame && 'AsyncLocalStorage keeps no frame here (Node < 24)' }, async () => {
  const { runNode, root } = require('./tools');
  const fs = require('node:fs');
  const os = require('node:os');
  const path = require('node:path');
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'selfprof-listen-'));
  const script = `
    const tracer = require('dd-trace').init({ logLevel: 'error', flushInterval: 600_000 });
    const selfprof = require(${JSON.stringify(root)});
    const session = selfprof.start({ exporters: [{ type: 'file', dir: ${JSON.stringify(dir)} }], heap: false, workers: false });
    const { als } = require(${JSON.stringify(path.join(root, 'lib/capture/labels/thread.js'))});
    const { native } = require(${JSON.stringify(path.join(root, 'lib/native.js'))});
    const { labelState } = require(${JSON.stringify(path.join(root, 'lib/capture/labels'))});
    const http = require('node:http');
    const seen = [];
    const server = http.createServer((req, res) => {
      const [frame] = native.frameCurrent();
      const span = tracer.scope().active();
      const read = labelState().tracers['dd-trace'] === 'frame';
      seen.push({ read, selfprofs: frame?.has(als) ? 1 : 0, span_id: span?.context().toSpanId(true), labels: { ...selfprof.getLabels() } });
      res.end('ok');
    });
    server.listen(0, '127.0.0.1', async () => {
      const { port } = server.address();
      for (let i = 0; i < 40; i++) {
        await new Promise((resolve, reject) => http.get({ port, host: '127.0.0.1', path: '/users/' + i, agent: false }, (res) => res.resume().on('end', resolve)).on('error', reject));
        await new Promise((resolve) => setTimeout(resolve, 2));
      }
      server.close();
      await session.stop();
      console.log(JSON.stringify({ seen, state: labelState() }));
    });`;
  try {
    const r = await runNode(script, { DD_TRACE_AGENT_URL: 'http://127.0.0.1:9', DD_INSTRUMENTATION_TELEMETRY_ENABLED: 'false', DD_REMOTE_CONFIGURATION_ENABLED: 'false', DD_TRACE_STARTUP_LOGS: 'false', SELFPROF_STARTUP_LOG: '0' });
    assert.equal(r.code, 0, r.stderr);
    const { seen, state } = JSON.parse(r.stdout.trim().split('\n').pop());
    assert.equal(seen.length, 40);
    const framed = state.tracers['dd-trace'] === 'frame';
    assert.equal(framed, frameRead, JSON.stringify(state));
    if (!framed) return;
    // (A request that began before they were read may hold its own set.)
    const read = seen.filter((s) => s.read);
    assert.ok(read.length >= 30, `${read.length} of 40 requests once dd-trace's contexts were read`);
    assert.deepEqual(read.filter((s) => s.selfprofs !== 0).map((s) => s.span_id), [], "requests whose frame holds a set of selfprof's");
    // Each request's labels are its own span's.
    for (const s of read) assert.equal(s.labels.span_id, s.span_id, JSON.stringify(s));
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});
