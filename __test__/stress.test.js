'use strict';
// The stress suite: every way selfprof is used, at once and compressed into 20 s (what a
// service sees in an hour or more: ~240 profiler starts and stops, buffer-full stops,
// profilers dropped to the GC, ~90 workers of which half are terminated mid-recording,
// thousands of distinct label sets, ~50 service rotations (50 minutes at the default
// 60 s period) to a receiver failing half its uploads and to a closed port, and tens of
// thousands of bad inputs), in a child process: zero crashes, no unexpected error, RSS
// bounded.
// SELFPROF_STRESS_SECONDS sets the length (default 20).
const { test } = require('node:test');
const assert = require('node:assert/strict');
const path = require('node:path');
const { spawnSync } = require('node:child_process');
const { assertRequestLabels } = require('./helpers');

const seconds = Number(process.env.SELFPROF_STRESS_SECONDS || 20);

test(`stress: ${seconds} s of storms, workers, GC, label churn, failing exporters and bad input`, (t) => {
  const started = Date.now();
  const r = spawnSync(process.execPath, ['--expose-gc', path.join(__dirname, 'fixtures', 'stress.js')], {
    encoding: 'utf8',
    env: { ...process.env, SELFPROF_STRESS_SECONDS: String(seconds) },
    timeout: (seconds + 70) * 1000, // it may run 30 s past its seconds (fixtures/stress.js)
    maxBuffer: 64 << 20,
  });
  assert.equal(r.signal, null, `the stress process died of ${r.signal}: ${r.stderr.slice(-2000)}`);
  assert.equal(r.status, 0, r.stderr.slice(-2000));
  const report = JSON.parse(r.stdout.trim().split('\n').at(-1));
  const { rssMiB, witness, ...counts } = report;
  t.diagnostic(`${((Date.now() - started) / 1000).toFixed(1)} s: ${JSON.stringify(counts)}`);
  t.diagnostic(`RSS (MiB, every 250 ms): ${rssMiB.join(' ')}`);

  assert.deepEqual(report.unexpected, [], 'no unexpected error anywhere');
  // Through all of it, a profiler recording the whole run labels every sample of a
  // request's work with that request's labels (setLabels' step included after it).
  t.diagnostic(`witness: ${assertRequestLabels(witness.samples, witness.calls, { what: 'witness', min: 100, exact: true })}`);
  // It really did all of it. (Floors about a tenth of what an idle 2-core machine does,
  // e.g. 170-240 profilers in 20 s: one oversubscribed 2.5x did a quarter of that.)
  assert.ok(report.profilers >= seconds, `profilers started: ${report.profilers}`);
  assert.ok(report.stopped >= seconds / 2, `profilers stopped: ${report.stopped}`);
  assert.ok(report.bufferFull >= 1, 'buffers filled');
  assert.ok(report.abandoned >= 1, 'profilers abandoned to the GC');
  assert.equal(report.groupSize, 0, 'the abandoned profilers left the group once collected');
  assert.ok(report.workers >= seconds / 4, `workers: ${report.workers}`);
  assert.ok(report.terminated >= seconds / 10, `workers terminated mid-recording: ${report.terminated}`);
  assert.ok(report.requests >= 10 * seconds, `labeled requests: ${report.requests}`);
  assert.ok(report.rotations >= seconds / 4, `service profiles written: ${report.rotations}`);
  assert.ok(report.serverHits >= seconds / 4, `uploads reaching the failing receiver: ${report.serverHits}`);
  assert.ok(report.badInputs >= 100 * seconds, `bad inputs rejected: ${report.badInputs}`);
  // Bounded: kept label sets, and RSS (no growth from the first half to the second).
  assert.ok(report.labels.saved <= 1 << 22, `label sets kept: ${report.labels.saved}`);
  const half = Math.floor(rssMiB.length / 2);
  const firstMax = Math.max(...rssMiB.slice(0, half));
  const lastMax = Math.max(...rssMiB.slice(half));
  assert.ok(lastMax - firstMax <= 64, `RSS grew from ${firstMax} to ${lastMax} MiB`);
  assert.ok(lastMax <= 512, `RSS ${lastMax} MiB`);
});
