'use strict';
// The chained SIGPROF handler: installed in front of V8's while V8 samples, gone with it.
const { test } = require('node:test');
const assert = require('node:assert/strict');
const { setTimeout: sleep } = require('node:timers/promises');
const { Profiler, setBaseInterval } = require('..');
const { native } = require('../lib/native');
const { spin, stopAll } = require('./helpers');

test('the handler chains in front of V8 while a profiler samples, and leaves with V8', async (t) => {
  assert.equal(native.signalHandlerInstalled(), false, 'nothing before profiling');
  assert.equal(native.installSignalHandler(), 'no-sampler', 'nothing to chain to without V8');
  assert.equal(native.signalHandlerInstalled(), false);

  const before = native.signalCount();
  const t0 = performance.now();
  const p = new Profiler({ sampleInterval: 2, maxBufferSize: 10_000 });
  assert.equal(native.signalHandlerInstalled(), true);
  assert.equal(native.installSignalHandler(), 'already-installed', 'never chains to itself');
  // 100 ms and 50 signals (100 ms alone gave 20 samples under load, where the few V8 takes
  // without a signal weigh more than a tenth), or 30 s.
  spin(100);
  for (const end = performance.now() + 30_000; native.signalCount() - before < 50 && performance.now() < end; ) spin(5);
  const during = native.signalCount() - before;
  const elapsed = performance.now() - t0;
  const trace = await p.stop();
  const all = native.signalCount() - before;
  assert.equal(native.signalHandlerInstalled(), false, 'V8 restored its predecessor');

  const after = native.signalCount();
  spin(50);
  await sleep(20);
  t.diagnostic(`${during} signals in ${elapsed.toFixed(0)} ms at 2 ms; ${trace.samples.length} samples; ${native.signalCount() - after} after stop`);
  // Every signal reached the handler and made one of V8's samples (how many there are
  // depends on the CPU V8's sampler thread got), and never more than one per interval.
  assert.ok(during >= 1, 'signals reached the handler');
  assert.ok(during <= elapsed / 2 + 2, `at most one signal per interval: ${during} in ${elapsed.toFixed(0)} ms`);
  assert.ok(trace.metadata.matchedSamples <= all && trace.metadata.matchedSamples >= 0.9 * all, `${all} signals, ${trace.metadata.matchedSamples} samples joined to one`);
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
  // Busy until a signal came (or 30 s went by: a machine too busy to signal in that long).
  const deadline = performance.now() + 30_000;
  while (native.signalCount() === count && performance.now() < deadline) spin(5);
  assert.ok(native.signalCount() > count, 'signals still reach the handler');
  const tb = await b.stop();
  assert.equal(native.signalHandlerInstalled(), false);
  assert.ok(tb.metadata.matchedSamples > 0);
});

test('a system call the signals interrupt restarts (SA_RESTART): a blocking read of a FIFO never sees EINTR', async (t) => {
  // Regular-file I/O is never interrupted on Linux; a read of a FIFO with no data blocks
  // in the kernel until a signal or data comes. libuv does not retry a read on EINTR, so
  // without SA_RESTART on the handler, fs.readSync would throw EINTR at the first signal.
  const fs = require('node:fs');
  const os = require('node:os');
  const path = require('node:path');
  const { spawn, spawnSync } = require('node:child_process');
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'selfprof-fifo-'));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  const fifo = path.join(dir, 'fifo');
  assert.equal(spawnSync('mkfifo', [fifo]).status, 0, 'mkfifo');
  const fd = fs.openSync(fifo, 'r+'); // read and write: open does not wait for a writer
  const p = new Profiler({ sampleInterval: 1, maxBufferSize: 100_000 });
  const buf = Buffer.alloc(16);
  let reads = 0;
  let interrupted = 0;
  try {
    for (let i = 0; i < 5; i++) {
      // Another process writes a byte once this one has blocked in read() a while.
      const writer = spawn(process.execPath, ['-e', `setTimeout(() => require('node:fs').writeFileSync(${JSON.stringify(fifo)}, 'x'), 60)`]);
      const before = native.signalCount();
      try {
        assert.equal(fs.readSync(fd, buf, 0, 16, null), 1);
        reads++;
      } catch (err) {
        if (err.code !== 'EINTR') throw err;
        interrupted++;
      }
      t.diagnostic(`read ${i}: ${native.signalCount() - before} signals while it blocked`);
      await new Promise((r) => writer.on('exit', r));
    }
  } finally {
    fs.closeSync(fd);
  }
  const trace = await p.stop();
  assert.equal(interrupted, 0, 'a read ended with EINTR');
  assert.equal(reads, 5);
  assert.ok(trace.samples.length > 0);
});

test('errno reaches the caller unchanged under signals', async () => {
  const fs = require('node:fs');
  const os = require('node:os');
  const path = require('node:path');
  const missing = path.join(os.tmpdir(), `selfprof-signal-${process.pid}-missing`);
  setBaseInterval(0.1);
  let p;
  try {
    p = new Profiler({ sampleInterval: 0.1, maxBufferSize: 100_000 });
    // Failing system calls, many per signal: a handler that changed errno between a call's
    // return and its caller's read of errno would turn some ENOENT into another code.
    const codes = new Map();
    const end = performance.now() + 200;
    while (performance.now() < end) {
      try {
        fs.statSync(missing);
        assert.fail('stat of a missing file succeeded');
      } catch (err) {
        codes.set(err.code, (codes.get(err.code) ?? 0) + 1);
      }
    }
    await p.stop();
    assert.deepEqual([...codes.keys()], ['ENOENT'], JSON.stringify([...codes]));
  } finally {
    await stopAll(p); // (setBaseInterval throws while one runs)
    setBaseInterval(1);
  }
});
