'use strict';
// worker_threads: each isolate profiles and labels on its own; workers that come and go
// (or are terminated mid-recording) neither exhaust the per-thread cells nor crash.
const { test } = require('node:test');
const assert = require('node:assert/strict');
const path = require('node:path');
const { Worker } = require('node:worker_threads');
const { Profiler, withLabels } = require('..');
const { spin, sampledCall, samplesIn, WorkLog, traceWork, assertRequestLabels } = require('./helpers');

const script = path.join(__dirname, 'fixtures', 'profiled-worker.js');

function runWorker(workerData) {
  const w = new Worker(script, { workerData });
  const messages = [];
  const done = new Promise((resolve, reject) => {
    w.on('message', (m) => messages.push(m));
    w.on('error', reject);
    w.on('exit', (code) => resolve({ code, result: messages.find((m) => m.busy !== undefined) }));
  });
  const started = new Promise((resolve) => w.once('message', resolve));
  return { w, done, started };
}

/** A worker's report: every sample of its work carries the labels of the round it ran for. */
function assertLabels(result, what, min = 20, floor = undefined) {
  return assertRequestLabels(result.busy, result.calls, { what, min, exact: true, floor });
}

function mainBusy(ms) {
  return spin(ms);
}

test('a worker and the main thread profile at once, each with its own labels', async (t) => {
  const p = new Profiler({ sampleInterval: 1, maxBufferSize: 100_000 });
  const worker = runWorker({ label: 'w1', ms: 10, rounds: 20, signals: 4 });
  await worker.started;
  // Each round goes on until signalled 5 times: beside the worker (and other tests) this
  // thread may wait for the CPU through much of its 8 ms.
  const log = new WorkLog({ signals: 5 });
  await withLabels({ thread: 'main' }, async () => {
    for (let i = 0; i < 20; i++) {
      withLabels({ round: String(i) }, () => log.run({ thread: 'main', round: String(i) }, mainBusy, 8));
      await new Promise((r) => setImmediate(r));
    }
  });
  const trace = await p.stop();
  const { code, result } = await worker.done;
  assert.equal(code, 0);
  t.diagnostic(`worker: ${assertLabels(result, 'worker', 30)}`);
  t.diagnostic(`main: ${assertRequestLabels(traceWork(trace, ['mainBusy']), log.calls, { what: 'main thread', min: 30, exact: true })}`);
  assert.equal(samplesIn(trace, 'workerBusy').length, 0, "the worker's stacks are not in the main thread's trace");
});

test("a thread's Profiler is full after its own samples, not after other profiled threads' signals", async (t) => {
  // Two workers sample every 1 ms while this thread's Profiler samples every 10 ms: most
  // of the process's signals are theirs, and none of them is a sample of this thread.
  const workers = ['f1', 'f2'].map((label) => runWorker({ label, ms: 10, rounds: Infinity }));
  t.after(() => Promise.all(workers.map(({ w }) => w.terminate())));
  await Promise.all(workers.map(({ started }) => started));
  const max = 60;
  const p = new Profiler({ sampleInterval: 10, maxBufferSize: max });
  let full = false;
  p.addEventListener('samplebufferfull', () => (full = true));
  // Busy until the profiler says its buffer is full (a minute at most), the loop turning
  // so that it can say so.
  const deadline = performance.now() + 60_000;
  while (!full && performance.now() < deadline) {
    spin(5);
    await new Promise((r) => setImmediate(r));
  }
  const trace = await p.stop();
  assert.ok(full, 'samplebufferfull fired');
  assert.ok(trace.samples.length >= 0.9 * max, `found full with ${trace.samples.length} samples of ${max}`);
  t.diagnostic(`${trace.samples.length} samples when found full`);
});

test('100 profiled workers one after another all get labels (cells are freed)', async (t) => {
  // More workers than there are per-thread cells (64): each worker's cell is freed as
  // its environment is torn down. Without that, workers past the 64th would take
  // samples through signals (matched) with no labels, which assertLabels refuses.
  // Each worker's few samples are judged for wrong labels (none), and the floor over all
  // of them: a fresh isolate's code is deoptimized often, V8 samples each deoptimization
  // without a signal, and one close to a label switch is left unlabeled (not certain); in
  // 4 ms rounds that is ~5% of the samples (none with --no-opt --no-maglev), ~10% beside
  // three busy loops on Node 26; those are excused, as assertRequestLabels excuses them,
  // up to the count of samples in the worker's trace no signal vouched for. A worker's
  // 12 ms of work may take no sample at all when its thread or V8's sampler waits for the
  // CPU (tests running beside this one), so the count is judged over all the workers.
  let labeledPast64 = 0;
  let right = 0;
  let all = 0;
  let excused = 0;
  for (let i = 0; i < 100; i++) {
    // Each round on until signalled twice: a loaded machine samples a fixed 4 ms less.
    const { code, result } = await runWorker({ label: `w${i}`, ms: 4, rounds: 3, signals: 2 }).done;
    assert.equal(code, 0);
    const [, r, a] = /workerBusy (\d+)\/(\d+)/.exec(assertRequestLabels(result.busy, result.calls, { what: `worker ${i}`, min: 0, floor: 0, exact: true }));
    right += Number(r);
    all += Number(a);
    excused += Math.min(result.busy.filter((s) => !s.labels).length, result.unvouched);
    if (i >= 64) labeledPast64 += result.busy.filter((s) => s.labels?.worker === `w${i}`).length;
  }
  t.diagnostic(`${right} of ${all} samples in workerBusy labeled, ${excused} unlabeled that no signal vouched for; ${labeledPast64} labeled samples in workers 64-99`);
  assert.ok(all >= 300, `the 100 workers' 1,200 ms of work took ${all} samples at 1 ms`);
  assert.ok(right + excused >= 0.9 * all, `${right} of ${all} samples in the workers' work carry their round's labels (${excused} more unlabeled, excused)`);
  assert.ok(labeledPast64 >= 36, `workers 64-99 took ${labeledPast64} labeled samples`);
});

test('terminating workers while they are profiled never crashes, and profiling goes on', async () => {
  const p = new Profiler({ sampleInterval: 1, maxBufferSize: 100_000 });
  for (let i = 0; i < 30; i++) {
    const { w, done, started } = runWorker({ label: `t${i}`, ms: 2, rounds: Infinity });
    await started;
    // Anywhere in its loop: busy in JS, between continuations, or in the profiler.
    await new Promise((r) => setTimeout(r, i % 7));
    await w.terminate();
    const { code } = await done;
    assert.equal(code, 1, 'terminated');
  }
  // A fresh worker, judged as the 100 workers above are: none wrong, and 90% labeled, as
  // V8 samples a new isolate's deoptimizations without a signal and one close to a label
  // switch is left unlabeled (under load, 2 of 18 were).
  const after = runWorker({ label: 'after', ms: 5, rounds: 10, signals: 3 });
  const { result } = await after.done;
  assertLabels(result, 'worker after the terminations', 10, 0.9);
  // 150 ms, and on until signalled 30 times: a loaded machine samples a fixed time less.
  await withLabels({ thread: 'main' }, () => sampledCall(30, 30_000, mainBusy, 150));
  const trace = await p.stop();
  assert.ok(samplesIn(trace, 'mainBusy').length >= 20, 'the main profiler still samples');
});
