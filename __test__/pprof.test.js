'use strict';
// stop({ format: 'pprof' }) read back by an independent decoder (pprof-format).
const { test } = require('node:test');
const assert = require('node:assert/strict');
const { pathToFileURL } = require('node:url');
const { setTimeout: sleep } = require('node:timers/promises');
const { Profiler, withLabels } = require('..');
const { spin, decodePprof, definitionOf, WorkLog, pprofWork, assertRequestLabels } = require('./helpers');

function pprofCheckoutWork(ms) {
  return spin(ms);
}

test('pprof: sample types, functions with file and position, labels, plausible totals', async (t) => {
  pprofCheckoutWork(30); // warm: its first deoptimizations (samples V8 takes without a signal) before the recording
  const startedAt = Date.now();
  const cpu0 = process.cpuUsage();
  const t0 = performance.now(); // the recording starts in the constructor
  const profiler = new Profiler({ sampleInterval: 10, maxBufferSize: 10_000 });
  const t1 = performance.now();
  const constructed = Date.now();
  const log = new WorkLog();
  await Promise.all(
    Array.from({ length: 8 }, (_, i) => {
      const labels = { endpoint: i % 2 ? 'POST /checkout' : 'GET /cart', span_id: (0xabc0n + BigInt(i)).toString(16).padStart(16, '0') };
      return withLabels(labels, async () => {
        for (let k = 0; k < 5; k++) {
          log.run(labels, pprofCheckoutWork, 10);
          await sleep(2);
        }
      });
    }),
  );
  const t2 = performance.now(); // and ends in stop()
  const used = process.cpuUsage(cpu0);
  const processCpuMs = (used.user + used.system) / 1000;
  const buffer = await profiler.stop({ format: 'pprof' });
  const elapsedMs = performance.now() - t0;
  assert.ok(Buffer.isBuffer(buffer));
  const pprof = decodePprof(buffer);
  const { p, str, frames } = pprof;

  assert.deepEqual(p.sampleType.map((v) => [str(v.type), str(v.unit)]), [
    ['sample', 'count'],
    ['wall', 'nanoseconds'],
    ['cpu', 'nanoseconds'],
  ]);
  assert.deepEqual([str(p.periodType.type), str(p.periodType.unit)], ['wall', 'nanoseconds']);
  assert.equal(Number(p.period), 10_000_000);
  const timeMs = Number(p.timeNanos) / 1e6;
  assert.ok(timeMs >= startedAt - 5 && timeMs <= constructed + 5, `timeNanos ${timeMs}: not within ${startedAt}..${constructed}`);
  const durationMs = Number(p.durationNanos) / 1e6;
  assert.ok(durationMs >= t2 - t1 - 1 && durationMs <= elapsedMs + 1, `duration ${durationMs} ms: not within ${t2 - t1}..${elapsedMs} ms`);

  const wallMs = p.sample.reduce((n, s) => n + Number(s.value[1]), 0) / 1e6;
  const cpuMs = p.sample.reduce((n, s) => n + Number(s.value[2]), 0) / 1e6;
  t.diagnostic(`${p.sample.length} samples; wall ${wallMs.toFixed(1)} ms of ${durationMs.toFixed(1)} ms; cpu ${cpuMs.toFixed(1)} ms`);
  assert.ok(Math.abs(wallMs - durationMs) <= 0.1 * durationMs, 'sum of wall ≈ duration ±10%');
  // The 400 ms of busy work is most of the process's CPU (less of it on a loaded machine).
  assert.ok(cpuMs >= 0.7 * processCpuMs && cpuMs <= processCpuMs + 5, `cpu ${cpuMs} ms of the process's ${processCpuMs} ms`);

  const busy = p.sample.filter((s) => frames(s).some((f) => str(f.name) === 'pprofCheckoutWork'));
  assert.ok(busy.length >= 20, `${busy.length} samples in the busy function`);
  const f = frames(busy[0]).find((fr) => str(fr.name) === 'pprofCheckoutWork');
  assert.equal(str(f.filename), pathToFileURL(__filename).href);
  assert.equal(Number(f.startLine), definitionOf(__filename, 'pprofCheckoutWork').line);
  // Each sample carries its own request's endpoint and span id (placed on the requests'
  // time line by its wall time, the time since the previous sample).
  t.diagnostic(assertRequestLabels(pprofWork(pprof, ['pprofCheckoutWork']), log.calls, { what: 'pprofCheckoutWork', min: 10, exact: true }));
});
