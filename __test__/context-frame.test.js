'use strict';
// Labels read from the async context frame (Node >= 24, and 22 with
// --experimental-async-context-frame): no hook runs, the handler reads the current store's
// id when the signal lands (src/capture/signal.rs `frame_context`), after a check on the
// running Node. Elsewhere, or when the check fails or SELFPROF_CONTEXT_FRAME=0, async_hooks
// publish the id, and the labels are as right.
const { test } = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { spawnSync } = require('node:child_process');
const { Worker } = require('node:worker_threads');
const { Profiler, withLabels } = require('..');
const { labelState } = require('../lib/capture/labels');
const { spin, samplesIn, labelVerdicts, assertOwnLabels } = require('./helpers');

const major = Number(process.versions.node.split('.')[0]);
const expected = major >= 24 ? 'context-frame' : 'async-hooks';

function frameWork(ms) {
  return spin(ms);
}

async function labeledRecording() {
  const profiler = new Profiler({ sampleInterval: 1, maxBufferSize: 100_000 });
  await Promise.all(
    [0, 1, 2, 3].map((i) =>
      withLabels({ span_id: `span-${i}` }, async () => {
        frameWork(20);
        await new Promise((r) => setTimeout(r, 5));
        frameWork(20);
      }),
    ),
  );
  // The check ends in a timer: let it.
  await new Promise((r) => setTimeout(r, 20));
  return profiler.stop();
}

test(`labels come from the ${expected} here (Node ${major}), and the trace says so`, async (t) => {
  await labeledRecording();
  const trace = await labeledRecording();
  const state = labelState();
  t.diagnostic(JSON.stringify(state));
  assert.equal(trace.metadata.labelPath, expected, JSON.stringify(state));
  assert.equal(state.path, expected);
  if (expected === 'context-frame') assert.equal(state.hooks, false, 'no hook runs');
  const samples = samplesIn(trace, 'frameWork');
  assert.ok(samples.length >= 80, `${samples.length} samples`);
  const verdicts = labelVerdicts(trace, samples, (l) => /^span-[0-3]$/.test(l.span_id));
  const right = verdicts.filter((v) => v === true).length;
  assertOwnLabels(verdicts, trace.metadata.unmatchedSamples, 'frameWork');
  assert.ok(right >= samples.length * 0.99, `${right} of ${samples.length} labeled`);
});

/** Runs `script` in a child Node with `args` and `env`; returns what it wrote to `out`. */
function child(t, script, { args = [], env = {}, execArgv = [], timeout = 120_000 } = {}) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'selfprof-frame-'));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  const out = path.join(dir, 'out.json');
  const r = spawnSync(process.execPath, [...execArgv, script, ...args, out], { env: { ...process.env, ...env }, encoding: 'utf8', timeout });
  assert.equal(r.status, 0, `exit ${r.status ?? r.signal}: ${r.stderr}`);
  return JSON.parse(fs.readFileSync(out, 'utf8'));
}

/** Every sample in stressWork carries the labels of the request whose work ran then. */
function checkStress(t, { trace, calls, requests, workers, state }, what) {
  calls.sort((a, b) => a.t0 - b.t0);
  const callAt = (ts) => {
    let lo = 0;
    let hi = calls.length - 1;
    while (lo <= hi) {
      const mid = (lo + hi) >> 1;
      if (calls[mid].t1 < ts) lo = mid + 1;
      else if (calls[mid].t0 > ts) hi = mid - 1;
      else return calls[mid];
    }
    return undefined;
  };
  const samples = samplesIn(trace, 'stressWork');
  let right = 0;
  let wrong = 0;
  for (const s of samples) {
    const call = callAt(s.timestamp);
    const labels = s.contextId === undefined ? undefined : trace.contexts[s.contextId].labels;
    if (!labels) continue;
    if (call && labels.span_id === `s${call.i}` && labels.endpoint === `e${call.i % 5}`) right++;
    else wrong++;
  }
  t.diagnostic(`${what}: ${requests} requests, ${workers} workers, ${samples.length} samples in stressWork, ${right} right, ${wrong} wrong; ${JSON.stringify(trace.metadata)}; ${JSON.stringify(state)}`);
  assert.equal(wrong, 0, `${what}: samples with another request's labels`);
  assert.ok(samples.length >= 20, `${what}: ${samples.length} samples`);
  assert.ok(right >= samples.length * 0.98, `${what}: ${right} of ${samples.length} labeled`);
}

test('under GC stress (compaction at every collection, a collection every few allocations), with other stores in the frame, setLabels and workers: no crash, no sample with another request’s labels', (t) => {
  const seconds = process.env.SELFPROF_FRAME_STRESS_SECONDS ?? '3';
  const run = child(t, path.join(__dirname, 'fixtures', 'frame-stress.js'), {
    args: [seconds],
    execArgv: ['--stress-compaction', '--gc-interval=2000'],
    // The stop of a long run's trace, under GC stress, takes a while too.
    timeout: (Number(seconds) * 2 + 120) * 1000,
  });
  assert.equal(run.trace.metadata.labelPath, expected);
  checkStress(t, run, 'GC stress');
});

test('SELFPROF_CONTEXT_FRAME=0 keeps the hooks, and the labels are as right', (t) => {
  const run = child(t, path.join(__dirname, 'fixtures', 'frame-stress.js'), { args: ['1.5'], env: { SELFPROF_CONTEXT_FRAME: '0' } });
  assert.equal(run.trace.metadata.labelPath, 'async-hooks');
  if (major >= 24) assert.equal(run.state.reason, 'SELFPROF_CONTEXT_FRAME=0');
  checkStress(t, run, 'hooks');
});

test('a worker reads its own frame', async () => {
  const code = `
    const { parentPort } = require('node:worker_threads');
    const { Profiler, withLabels } = require(${JSON.stringify(path.join(__dirname, '..'))});
    const { spin, samplesIn } = require(${JSON.stringify(path.join(__dirname, 'helpers'))});
    function workerFrameWork(ms) { return spin(ms); }
    (async () => {
      const p = new Profiler({ sampleInterval: 1, maxBufferSize: 1e5 });
      await withLabels({ where: 'worker' }, async () => { workerFrameWork(30); await new Promise((r) => setTimeout(r, 30)); workerFrameWork(30); });
      const trace = await p.stop();
      const s = samplesIn(trace, 'workerFrameWork');
      parentPort.postMessage({ path: trace.metadata.labelPath, n: s.length, labeled: s.filter((x) => trace.contexts[x.contextId]?.labels.where === 'worker').length });
    })();`;
  const result = await new Promise((resolve, reject) => {
    const w = new Worker(code, { eval: true });
    w.once('message', resolve);
    w.once('error', reject);
  });
  assert.equal(result.path, expected);
  assert.ok(result.n >= 10 && result.labeled >= result.n * 0.95, JSON.stringify(result));
});
