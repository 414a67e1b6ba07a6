'use strict';
// The chained SIGPROF handler: installed in front of V8's while V8 samples, gone with it.
const { test } = require('node:test');
const assert = require('node:assert/strict');
const { setTimeout: sleep } = require('node:timers/promises');
const { Profiler } = require('..');
const { native } = require('../lib/native');
const { spin } = require('./helpers');

test('the handler chains in front of V8 while a profiler samples, and leaves with V8', async (t) => {
  assert.equal(native.signalHandlerInstalled(), false, 'nothing before profiling');
  assert.equal(native.installSignalHandler(), 'no-sampler', 'nothing to chain to without V8');
  assert.equal(native.signalHandlerInstalled(), false);

  const before = native.signalCount();
  const p = new Profiler({ sampleInterval: 2, maxBufferSize: 10_000 });
  assert.equal(native.signalHandlerInstalled(), true);
  assert.equal(native.installSignalHandler(), 'already-installed', 'never chains to itself');
  spin(100);
  const during = native.signalCount() - before;
  const trace = await p.stop();
  assert.equal(native.signalHandlerInstalled(), false, 'V8 restored its predecessor');

  const after = native.signalCount();
  spin(50);
  await sleep(20);
  t.diagnostic(`${during} signals in 100 ms at 2 ms; ${trace.samples.length} samples; ${native.signalCount() - after} after stop`);
  // One signal per interval at most (50); fewer when V8's sampler thread is starved.
  assert.ok(during >= 15 && during <= 60, `about one signal per interval: ${during}`);
  assert.equal(native.signalCount(), after, 'no signals reach the handler after stop');
  // Samples V8 takes without a signal (start, deoptimizations while spin warms up) have
  // no bracket; every other one is matched.
  assert.ok(trace.metadata.matchedSamples >= 0.9 * trace.samples.length, JSON.stringify(trace.metadata));
});

test('overlapping profilers keep one chain until the last one stops', async () => {
  const a = new Profiler({ sampleInterval: 5, maxBufferSize: 10_000 });
  const b = new Profiler({ sampleInterval: 5, maxBufferSize: 10_000 });
  spin(30);
  await a.stop();
  assert.equal(native.signalHandlerInstalled(), true, 'b still samples');
  const count = native.signalCount();
  spin(30);
  assert.ok(native.signalCount() > count, 'signals still reach the handler');
  const tb = await b.stop();
  assert.equal(native.signalHandlerInstalled(), false);
  assert.ok(tb.metadata.matchedSamples > 0);
});

test('signals interrupting system calls do not disturb them (SA_RESTART, errno kept)', async () => {
  const fs = require('node:fs');
  const os = require('node:os');
  const path = require('node:path');
  const file = path.join(os.tmpdir(), `selfprof-signal-${process.pid}`);
  const p = new Profiler({ sampleInterval: 1, maxBufferSize: 100_000 });
  const data = Buffer.alloc(1 << 20, 7);
  for (let i = 0; i < 200; i++) {
    fs.writeFileSync(file, data);
    assert.equal(fs.readFileSync(file).length, data.length);
    try {
      fs.statSync(`${file}-missing`);
      assert.fail('stat of a missing file succeeded');
    } catch (err) {
      assert.equal(err.code, 'ENOENT', 'errno reaches the caller unchanged');
    }
  }
  fs.rmSync(file);
  await p.stop();
});
