'use strict';
const { test } = require('node:test');
const assert = require('node:assert/strict');
const { EventEmitter } = require('node:events');
const { setTimeout: sleep } = require('node:timers/promises');
const v8 = require('node:v8');
const vm = require('node:vm');
const { Profiler, withLabels, setLabels, getLabels } = require('..');
const { native } = require('../lib/native');
const { labelStats } = require('../lib/capture/labels');
const { spin, assertValidTrace, stackFrames, samplesIn, labelVerdicts, assertOwnLabels } = require('./helpers');
// Where V8 samples without a signal (Windows), samples are joined to the label switches by
// time: no cpuTime, and every label set switched to while recording is kept.
const BY_TIME = native.labelJoin() !== 'signal';
// How long each busy function runs where a few samples each are needed (and each step of
// a request below). Under wine (where Windows is tested) V8's sampler now and then stalls
// for tens of ms.
const BUSY_MS = BY_TIME ? 60 : 25;
const STEP_MS = BY_TIME ? 2 : 1;

// One distinctly named busy function per endpoint.
function usersHandlerWork(ms) {
  return spin(ms);
}
function ordersHandlerWork(ms) {
  return spin(ms);
}
function searchHandlerWork(ms) {
  return spin(ms);
}
function healthHandlerWork(ms) {
  return spin(ms);
}
const ENDPOINTS = [
  ['GET /users/:id', usersHandlerWork],
  ['POST /orders', ordersHandlerWork],
  ['GET /search', searchHandlerWork],
  ['GET /health', healthHandlerWork],
];

const spanId = (i) => (0x1000_0000_0000n + BigInt(i) * 7919n).toString(16).padStart(16, '0');

/** The labels of a sample, or undefined. */
function labelsOf(trace, sample) {
  return sample.contextId === undefined ? undefined : trace.contexts[sample.contextId].labels;
}

test('≥ 200 concurrent labeled requests: samples carry their own request’s labels', async (t) => {
  const requests = 240;
  const endpointOfSpan = new Map();

  async function handle(i) {
    const [endpoint, work] = ENDPOINTS[i % ENDPOINTS.length];
    const span_id = spanId(i);
    endpointOfSpan.set(span_id, endpoint);
    return withLabels({ endpoint, span_id }, async () => {
      work(STEP_MS);
      await null;
      work(STEP_MS);
      await new Promise((resolve) => setImmediate(resolve));
      work(STEP_MS);
      await sleep(1);
      work(STEP_MS);
      await new Promise((resolve) => process.nextTick(resolve));
      work(STEP_MS);
      assert.deepEqual(getLabels(), { endpoint, span_id });
    });
  }
  const profiler = new Profiler({ sampleInterval: 1, maxBufferSize: 100_000 });
  await Promise.all(Array.from({ length: requests }, (_, i) => handle(i)));
  const trace = assertValidTrace(await profiler.stop());

  let rightEndpoint = 0;
  let rightSpan = 0;
  const verdicts = [];
  for (const [endpoint, work] of ENDPOINTS) {
    for (const s of samplesIn(trace, work.name)) {
      const labels = labelsOf(trace, s);
      if (labels?.endpoint === endpoint) rightEndpoint++;
      if (labels && endpointOfSpan.get(labels.span_id) === endpoint) rightSpan++;
      verdicts.push(labels === undefined ? undefined : labels.endpoint === endpoint && endpointOfSpan.get(labels.span_id) === endpoint);
    }
  }
  const js = trace.samples.filter((s) => s.stackId !== undefined);
  // Joined by signal, a sample has cpuTime when its bracket was found; by time, none has.
  const matched = BY_TIME ? trace.metadata.matchedSamples : js.filter((s) => s.cpuTime !== undefined).length;
  const inEndpoints = verdicts.length;
  const endpointRate = rightEndpoint / inEndpoints;
  const considered = BY_TIME ? trace.samples.length : js.length;
  const matchRate = matched / considered;
  t.diagnostic(
    `${requests} requests: ${inEndpoints} samples in endpoint functions, ` +
      `${(100 * endpointRate).toFixed(2)}% labeled with their endpoint, ` +
      `${(100 * (rightSpan / inEndpoints)).toFixed(2)}% with a span of that endpoint; ` +
      `${matched}/${considered} ${BY_TIME ? 'samples' : 'JS samples'} (${(100 * matchRate).toFixed(2)}%) matched to a ${BY_TIME ? 'switch' : 'bracket'}; ` +
      `metadata ${JSON.stringify(trace.metadata)}; ${trace.contexts.length} contexts`,
  );
  assert.ok(inEndpoints >= 300, `enough samples in endpoint functions: ${inEndpoints}`);
  // Every sample has its own request's endpoint and span, but V8's few taken without a signal.
  assertOwnLabels(verdicts, trace.metadata.unmatchedSamples, 'endpoint functions');
  assert.ok(matchRate >= 0.95, `match rate ${matchRate}`);
  if (BY_TIME) assert.ok(endpointRate >= 0.99, `joined by time, ${endpointRate} of busy samples rightly labeled`);
  const { matchedSamples, betweenSignalsSamples, unmatchedSamples } = trace.metadata;
  assert.equal(matchedSamples + betweenSignalsSamples + unmatchedSamples, trace.samples.length);
  // Only contexts that samples reference are in the trace, and every one is referenced.
  const used = new Set(trace.samples.map((s) => s.contextId).filter((c) => c !== undefined));
  assert.equal(used.size, trace.contexts.length);
});

// One busy function per kind of continuation.
function afterAwait(ms) {
  return spin(ms);
}
function inSetTimeout(ms) {
  return spin(ms);
}
function inSetImmediate(ms) {
  return spin(ms);
}
function inNextTick(ms) {
  return spin(ms);
}
function inPromiseThen(ms) {
  return spin(ms);
}
function inEmitterListener(ms) {
  return spin(ms);
}
function inNestedInner(ms) {
  return spin(ms);
}
function inNestedOuter(ms) {
  return spin(ms);
}
function unlabeledWork(ms) {
  return spin(ms);
}

test('labels survive await, timers, immediates, nextTick, promise chains and EventEmitter callbacks', async (t) => {
  const seen = {};
  const check = (kind, expected) => {
    seen[kind] = getLabels();
    assert.deepEqual(getLabels(), expected, kind);
  };
  const profiler = new Profiler({ sampleInterval: 1, maxBufferSize: 100_000 });
  const ms = BUSY_MS;

  const runs = [
    withLabels({ kind: 'await' }, async () => {
      await sleep(2);
      check('await', { kind: 'await' });
      afterAwait(ms);
    }),
    withLabels({ kind: 'setTimeout' }, () =>
      new Promise((resolve) =>
        setTimeout(() => {
          check('setTimeout', { kind: 'setTimeout' });
          inSetTimeout(ms);
          resolve();
        }, 3),
      ),
    ),
    withLabels({ kind: 'setImmediate' }, () =>
      new Promise((resolve) =>
        setImmediate(() => {
          check('setImmediate', { kind: 'setImmediate' });
          inSetImmediate(ms);
          resolve();
        }),
      ),
    ),
    withLabels({ kind: 'nextTick' }, () =>
      new Promise((resolve) =>
        process.nextTick(() => {
          check('nextTick', { kind: 'nextTick' });
          inNextTick(ms);
          resolve();
        }),
      ),
    ),
    withLabels({ kind: 'then' }, () =>
      sleep(4)
        .then(() => 1)
        .then(() => {
          check('then', { kind: 'then' });
          inPromiseThen(ms);
        }),
    ),
    withLabels({ kind: 'emitter' }, () => {
      const emitter = new EventEmitter();
      const done = new Promise((resolve) =>
        emitter.on('request', () => {
          check('emitter', { kind: 'emitter' });
          inEmitterListener(ms);
          resolve();
        }),
      );
      setTimeout(() => emitter.emit('request'), 5);
      return done;
    }),
    withLabels({ kind: 'outer', tenant: 'acme' }, async () => {
      await sleep(6);
      await withLabels({ kind: 'inner', region: 'eu' }, async () => {
        await null;
        check('nested inner', { kind: 'inner', region: 'eu', tenant: 'acme' });
        inNestedInner(ms);
      });
      check('nested outer', { kind: 'outer', tenant: 'acme' });
      inNestedOuter(ms);
    }),
  ];
  unlabeledWork(ms);
  assert.deepEqual(getLabels(), {}, 'no labels outside withLabels');
  await Promise.all(runs);
  const trace = assertValidTrace(await profiler.stop());

  const expectations = [
    [afterAwait, { kind: 'await' }],
    [inSetTimeout, { kind: 'setTimeout' }],
    [inSetImmediate, { kind: 'setImmediate' }],
    [inNextTick, { kind: 'nextTick' }],
    [inPromiseThen, { kind: 'then' }],
    [inEmitterListener, { kind: 'emitter' }],
    [inNestedInner, { kind: 'inner', region: 'eu', tenant: 'acme' }],
    [inNestedOuter, { kind: 'outer', tenant: 'acme' }],
  ];
  const rates = [];
  for (const [fn, labels] of expectations) {
    const samples = samplesIn(trace, fn.name);
    const verdicts = labelVerdicts(trace, samples, (l) => JSON.stringify(l) === JSON.stringify(labels));
    rates.push(`${fn.name} ${verdicts.filter((v) => v === true).length}/${samples.length}`);
    assert.ok(samples.length >= 5, `${fn.name}: ${samples.length} samples`);
    assertOwnLabels(verdicts, trace.metadata.unmatchedSamples, `${fn.name} (${JSON.stringify(labels)})`);
  }
  const unlabeled = samplesIn(trace, 'unlabeledWork');
  assert.ok(unlabeled.length >= 5);
  assert.equal(unlabeled.filter((s) => s.contextId !== undefined).length, 0, 'unlabeled work has no labels');
  t.diagnostic(`right labels per continuation: ${rates.join(', ')}; unlabeled 0/${unlabeled.length}`);
});

test('setLabels merges into the current async context; null removes a key', async () => {
  await withLabels({ endpoint: 'GET /a', span_id: '1' }, async () => {
    setLabels({ user: 42, span_id: null });
    assert.deepEqual(getLabels(), { endpoint: 'GET /a', user: '42' });
    await null;
    assert.deepEqual(getLabels(), { endpoint: 'GET /a', user: '42' });
    assert.ok(Object.isFrozen(getLabels()));
  });
  assert.deepEqual(getLabels(), {});
  assert.equal(
    withLabels({ a: 1n, b: true }, (x, y) => `${x}${y}${JSON.stringify(getLabels())}`, 'x', 'y'),
    'xy{"a":"1","b":"true"}',
  );
});

test('bad labels throw TypeError or RangeError', () => {
  const cases = [
    [() => withLabels(null, () => {}), TypeError, /labels must be an object/],
    [() => withLabels(['a'], () => {}), TypeError, /labels must be an object/],
    [() => withLabels({ a: 1 }), TypeError, /fn must be a function, got undefined/],
    [() => withLabels({ a: {} }, () => {}), TypeError, /label "a" must be a string, number, bigint or boolean, got object/],
    [() => withLabels({ a: Symbol('s') }, () => {}), TypeError, /got symbol/],
    [() => setLabels({ f() {} }), TypeError, /label "f"/],
    [() => withLabels({ a: 'x'.repeat(5000) }, () => {}), RangeError, /at most 4096/],
    [() => withLabels({ ['k'.repeat(300)]: 'v' }, () => {}), RangeError, /keys must be 1 to 256/],
    [() => withLabels({ '': 'v' }, () => {}), RangeError, /keys must be 1 to 256/],
    [() => withLabels(JSON.parse('{"__proto__": "x"}'), () => {}), TypeError, /"__proto__" cannot be a label key/],
    [() => setLabels(JSON.parse('{"a": "1", "__proto__": "x"}')), TypeError, /"__proto__" cannot be a label key/],
    [() => withLabels(Object.fromEntries(Array.from({ length: 65 }, (_, i) => [`k${i}`, i])), () => {}), RangeError, /at most 64 labels/],
  ];
  for (const [fn, type, message] of cases) {
    assert.throws(fn, (err) => err.constructor === type && message.test(err.message));
  }
  assert.deepEqual(getLabels(), {}, 'a failed withLabels leaves no labels behind');
});

test('cpuTime adds up to the CPU the thread spent', { skip: BY_TIME && 'no per-sample CPU time where samples are joined by time' }, async (t) => {
  const startCpu = process.cpuUsage(); // before the profiler: its start-up CPU is counted too
  const profiler = new Profiler({ sampleInterval: 2, maxBufferSize: 10_000 });
  withLabels({ endpoint: 'cpu' }, () => spin(300));
  const trace = await profiler.stop();
  const used = process.cpuUsage(startCpu);
  const sampledCpu = trace.samples.reduce((sum, s) => sum + (s.cpuTime ?? 0), 0);
  const processCpu = (used.user + used.system) / 1000;
  t.diagnostic(`sum of cpuTime ${sampledCpu.toFixed(1)} ms; process CPU ${processCpu.toFixed(1)} ms`);
  // The samples cover the thread's CPU up to the last sample (≤ one interval short of the
  // profiler's life); the process also counts V8's sampler and other threads. (On a
  // loaded machine the 300 ms spin gets less CPU: compare with what it got.)
  assert.ok(processCpu >= 50, `the spin ran: ${processCpu} ms of CPU`);
  assert.ok(sampledCpu >= 0.75 * processCpu && sampledCpu <= processCpu + 5, `${sampledCpu} vs ${processCpu}`);
  assert.ok(trace.samples.every((s) => s.cpuTime === undefined || s.cpuTime >= 0));
});

function gcNow() {
  v8.setFlagsFromString('--expose-gc');
  vm.runInNewContext('gc')();
}


test('100 start/stop cycles with labels active: no crash, no leaked label sets', async (t) => {
  const before = labelStats();
  let contexts = 0;
  for (let i = 0; i < 100; i++) {
    await withLabels({ endpoint: 'loop', span_id: spanId(i) }, async () => {
      const p = new Profiler({ sampleInterval: 1, maxBufferSize: 1000 });
      withLabels({ step: String(i) }, () => spin(10));
      await null;
      const trace = assertValidTrace(await p.stop());
      for (const c of trace.contexts) assert.equal(c.labels.span_id, spanId(i));
      contexts += trace.contexts.length;
    });
  }
  const after = labelStats();
  t.diagnostic(
    `${contexts} labeled contexts in 100 traces; label sets kept/unbuilt recordings: ` +
      `before ${before.saved}/${before.unbuilt}, after ${after.saved}/${after.unbuilt}`,
  );
  // Each trace has its request's labels (a loaded machine may starve a trace of samples).
  assert.ok(contexts >= 90, `traces with labels: ${contexts} contexts in 100 traces`);
  const { prefetchHits, ...left } = after;
  assert.deepEqual(left, { saved: 0, bytes: 0, unbuilt: 0, dropped: 0, prefetched: 0, records: 0 });
  assert.equal(native.signalHandlerInstalled(), false, 'V8 took the chain down with its sampler');
});

test("a long recording's stop() looks its label sets up while V8 stops; the build finds them there, and they are right", { skip: BY_TIME && 'it records until 20,000 signals' }, async (t) => {
  const { setBaseInterval } = require('..');
  setBaseInterval(0.1);
  try {
    // A short recording does without: the lookup would save little and compete with V8's stop.
    const short = new Profiler({ sampleInterval: 1, maxBufferSize: 10_000 });
    await withLabels({ endpoint: 'prefetch', span_id: spanId(999) }, async () => usersHandlerWork(20));
    const before = labelStats();
    assert.ok(assertValidTrace(await short.stop()).contexts.length >= 1);
    assert.equal(labelStats().prefetchHits, before.prefetchHits, 'a short recording looked its sets up ahead');

    // A long one (past 16,384 samples: ~2-5 s at 0.1 ms), a span id per request.
    const p = new Profiler({ sampleInterval: 0.1, maxBufferSize: 200_000 });
    const signals = native.signalCount();
    const ours = new Set();
    const deadline = performance.now() + 30_000;
    for (let i = 0; native.signalCount() - signals < 20_000 && performance.now() < deadline; i++) {
      ours.add(spanId(1000 + i));
      await withLabels({ endpoint: 'prefetch', span_id: spanId(1000 + i) }, async () => {
        await null;
        usersHandlerWork(2);
      });
    }
    const hitsBefore = labelStats().prefetchHits;
    // Sampled as stop() is called: saved after the lookups began, looked up by the build.
    ours.add(spanId(99_999));
    const built = await withLabels({ endpoint: 'prefetch', span_id: spanId(99_999) }, () => {
      usersHandlerWork(3);
      return p.stop();
    });
    const hits = labelStats().prefetchHits - hitsBefore;
    const samples = samplesIn(built, 'usersHandlerWork');
    const verdicts = labelVerdicts(built, samples, (l) => l.endpoint === 'prefetch' && ours.has(l.span_id));
    t.diagnostic(
      `${built.samples.length} samples; ${hits} of ${built.contexts.length} contexts found prefetched; ` +
        assertOwnLabels(verdicts, built.metadata.unmatchedSamples, 'usersHandlerWork'),
    );
    assert.ok(built.samples.length >= 16_384, `a long recording: ${built.samples.length} samples`);
    assert.ok(hits >= built.contexts.length * 0.9 && hits <= built.contexts.length, `${hits} sets found prefetched of ${built.contexts.length}`);
    // Each request's samples carry its own span id: one context per span id.
    const spans = built.contexts.map((c) => c.labels.span_id);
    assert.equal(new Set(spans).size, spans.length, 'a span id in two contexts');
    assert.equal(labelStats().prefetched, 0, 'the build took what was looked up');
    assert.equal(labelStats().saved, 0, 'and let go of the sets');
  } finally {
    setBaseInterval(1);
  }
});

test('labels of requests that finished before stop() are still in the trace', async (t) => {
  const p = new Profiler({ sampleInterval: 1, maxBufferSize: 10_000 });
  for (let i = 0; i < 20; i++) {
    await withLabels({ endpoint: 'done-early', span_id: spanId(i) }, async () => {
      await null;
      usersHandlerWork(5);
    });
  }
  // Many more requests that are too short to be sampled: their labels are not kept.
  await Promise.all(Array.from({ length: 2000 }, (_, i) => withLabels({ endpoint: 'tiny', span_id: spanId(i) }, async () => {
    await null;
  })));
  // The requests' stores are garbage now; their labels must survive until the build.
  for (let i = 0; i < 3; i++) {
    gcNow();
    await sleep(5);
  }
  const kept = labelStats().saved;
  const trace = await p.stop();
  const samples = samplesIn(trace, 'usersHandlerWork');
  const verdicts = labelVerdicts(trace, samples, (l) => l.endpoint === 'done-early');
  t.diagnostic(`${kept} sampled label sets kept; ${verdicts.filter((v) => v === true).length}/${samples.length} samples of finished requests labeled`);
  // Joined by time, every set switched to while recording is kept (none is known sampled).
  if (BY_TIME) assert.ok(kept >= 2020, `every label set switched to is kept: ${kept} of 2020`);
  else assert.ok(kept >= 20 && kept < 200, `only sampled label sets are kept: ${kept} of 2020`);
  assertOwnLabels(verdicts, trace.metadata.unmatchedSamples, 'usersHandlerWork');
  assert.equal(labelStats().saved, 0, 'dropped once the trace was built');
});

function longRequestWork(ms) {
  return spin(ms);
}

test('a long request sampled by two overlapping recordings keeps its labels in both', async (t) => {
  const first = new Profiler({ sampleInterval: 1, maxBufferSize: 10_000 });
  let step;
  let resume;
  const request = withLabels({ endpoint: 'GET /long-poll' }, async () => {
    longRequestWork(BUSY_MS - 5); // sampled by the first recording only
    await new Promise((r) => (step = r));
    longRequestWork(BUSY_MS - 5); // sampled by both
    await new Promise((r) => (resume = r)); // parked: alive, but no longer current
  });
  const second = new Profiler({ sampleInterval: 1, maxBufferSize: 10_000 });
  step();
  await sleep(1);
  const firstTrace = await first.stop(); // built: what only it needed may go
  withLabels({ endpoint: 'GET /other' }, () => spin(5));
  const secondTrace = await second.stop();
  resume();
  await request;
  for (const [name, trace] of [['first', firstTrace], ['second', secondTrace]]) {
    const samples = samplesIn(trace, 'longRequestWork');
    const verdicts = labelVerdicts(trace, samples, (l) => l.endpoint === 'GET /long-poll');
    t.diagnostic(`${name}: ${verdicts.filter((v) => v === true).length}/${samples.length} labeled`);
    assert.ok(samples.length >= 5, `${name}: ${samples.length} samples`);
    assertOwnLabels(verdicts, trace.metadata.unmatchedSamples, name);
  }
});
