'use strict';
// Labels are never lost to the size of the SIGPROF ring (65,536 records shared by every
// sampling thread): a labeled recording longer than the ring holds keeps its labels.
const { test } = require('node:test');
const assert = require('node:assert/strict');
const { Worker } = require('node:worker_threads');
const { Profiler, withLabels, setBaseInterval } = require('..');
const { native } = require('../lib/native');
const { spin, stopAll, WorkLog, traceWork, assertRequestLabels } = require('./helpers');

function drainWork(ms) {
  return spin(ms);
}

/** A worker that samples itself at 0.1 ms while it spins, until terminated. */
function samplingWorker() {
  const worker = new Worker(
    `const { Profiler, setBaseInterval } = require(${JSON.stringify(require.resolve('..'))});
     const { parentPort } = require('node:worker_threads');
     setBaseInterval(0.1);
     new Profiler({ sampleInterval: 0.1, maxBufferSize: 1e6 });
     parentPort.postMessage('sampling');
     (function busy() { const e = Date.now() + 20; while (Date.now() < e); setImmediate(busy); })();`,
    { eval: true },
  );
  return new Promise((resolve) => worker.once('message', () => resolve(worker)));
}

test('a labeled recording longer than the ring holds keeps its labels', async (t) => {
  // Workers sampling too: the ring, shared by every thread, wraps sooner.
  const workers = await Promise.all([samplingWorker(), samplingWorker()]);
  setBaseInterval(0.1);
  let p;
  try {
    p = new Profiler({ sampleInterval: 0.1, maxBufferSize: 1_000_000 });
    const signals0 = native.signalCount();
    const capacity = native.ringCapacity();
    // A guard, not a length: at a load of 12 the ring took over 60 s to wrap (58,278 signals).
    const deadline = performance.now() + 300_000;
    const log = new WorkLog();
    let i = 0;
    // Until the ring has been written round more than once since the recording began.
    while (native.signalCount() - signals0 < 1.3 * capacity && performance.now() < deadline) {
      const labels = { endpoint: 'GET /long', span_id: String(i++) };
      await withLabels(labels, async () => {
        log.run(labels, drainWork, 4);
        await new Promise((r) => setImmediate(r));
      });
    }
    const wrapped = native.signalCount() - signals0;
    const trace = await p.stop();
    t.diagnostic(
      `${wrapped} signals in the ring (capacity ${capacity}) during ${((trace.samples.at(-1).timestamp - trace.samples[0].timestamp) / 1000).toFixed(1)} s; ` +
        `${trace.samples.length} samples; ${assertRequestLabels(traceWork(trace, ['drainWork']), log.calls, { what: 'drainWork', min: 1000, exact: true })}; metadata ${JSON.stringify(trace.metadata)}`,
    );
    assert.ok(wrapped > capacity, `the ring wrapped during the recording: ${wrapped} signals`);
  } finally {
    await stopAll(p); // (setBaseInterval throws while one runs)
    setBaseInterval(1);
    await Promise.all(workers.map((w) => w.terminate()));
  }
});
