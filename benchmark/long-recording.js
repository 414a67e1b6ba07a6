'use strict';
// A long labeled recording at 1 ms: how many of its samples keep their labels, and what it
// holds in memory. The workload is a labeled in-process service (a unique span id per
// request, real awaits); the SIGPROF ring holds 65,536 records (~65 s at 1 ms for one
// thread), so anything past that length tests the drain thread (src/capture/drain.rs).
//
//   node benchmark/long-recording.js [--minutes 10] [--interval 1]
//
// Prints, at the end: samples, the share of JS samples taken inside a request that carry
// its labels, trace.metadata (matched, between signals, unmatched, labels lost), RSS before
// stop and peak RSS.

const fs = require('node:fs');
const { Profiler, withLabels } = require('..');

function arg(name, fallback) {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? process.argv[i + 1] : fallback;
}
const minutes = Number(arg('minutes', 10));
const interval = Number(arg('interval', 1));
const rssMiB = () => process.memoryUsage().rss / 2 ** 20;
const hwmMiB = () => Number(/^VmHWM:\s+(\d+)/m.exec(fs.readFileSync('/proc/self/status', 'utf8'))[1]) / 1024;

function requestWork(i) {
  let x = 0;
  const end = performance.now() + 0.5 + (i % 3) * 0.25;
  while (performance.now() < end) x += Math.sqrt(x + i);
  return x;
}

async function main() {
  const rss0 = rssMiB();
  const p = new Profiler({ sampleInterval: interval, maxBufferSize: 10_000_000 });
  const deadline = performance.now() + minutes * 60_000;
  const endpoints = ['GET /users/:id', 'POST /orders', 'GET /search', 'GET /health'];
  let requests = 0;
  const worker = async (w) => {
    for (let i = w; performance.now() < deadline; i += 8) {
      await withLabels({ endpoint: endpoints[i % 4], span_id: (0x1000000n + BigInt(i)).toString(16).padStart(16, '0') }, async () => {
        requestWork(i);
        await new Promise((r) => setImmediate(r));
        requestWork(i + 1);
      });
      requests++;
    }
  };
  const t0 = performance.now();
  const progress = setInterval(() => console.error(`${((performance.now() - t0) / 60_000).toFixed(1)} min, ${requests} requests, RSS ${rssMiB().toFixed(0)} MiB`), 60_000);
  await Promise.all(Array.from({ length: 8 }, (_, w) => worker(w)));
  clearInterval(progress);
  const rssBefore = rssMiB();
  const trace = await p.stop();
  const inRequest = trace.samples.filter((s) => s.stackId !== undefined && trace.frames[trace.stacks[s.stackId].frameId].name === 'requestWork');
  const labeled = inRequest.filter((s) => s.contextId !== undefined && trace.contexts[s.contextId].labels.span_id !== undefined);
  console.log(
    JSON.stringify({
      node: process.version,
      minutes,
      intervalMs: interval,
      requests,
      samples: trace.samples.length,
      inRequestSamples: inRequest.length,
      labeledShare: labeled.length / Math.max(1, inRequest.length),
      metadata: trace.metadata,
      rssGrowthMiB: Math.round(rssBefore - rss0),
      peakRssMiB: Math.round(hwmMiB()),
    }),
  );
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
