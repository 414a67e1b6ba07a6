'use strict';
// What heap profiles cost the event loop, next to CPU-only, in service mode on a large
// heap: each mode in a fresh process, modes shuffled per round, medians (ranges) over
// rounds. The app holds `--heap-mb` MiB of live objects allocated from many functions (a
// few hundred allocating stacks), serves labeled requests in 2 ms slices that yield to the
// event loop, and (with `--workers`) starts a short-lived worker every 500 ms; service mode
// rotates every `--period-ms` and ships to the file exporter.
//
//   node benchmark/heap-pause.js [--rounds 3] [--seconds 6] [--period-ms 1000] [--heap-mb 300] [--interval 524288] [--workers] [--modes cpu,heap,dd]
//   node benchmark/heap-pause.js --breakdown [--heap-mb 300] [--interval 524288]
//
// Modes (`--modes`, default all):
//  - cpu: service mode, CPU only (`heap: false`);
//  - heap-inspector: CPU + heap, V8's sampler started and read by the inspector
//    (`HeapProfiler.startSampling`, `getSamplingProfile`: where V8's C++ API is not
//    exported, and how selfprof took every heap profile until 5d6301d): a full garbage
//    collection before each profile, and the profile as JSON;
//  - heap-json: CPU + heap, the sampler started through V8's C++ API
//    (src/capture/heap_sampler.rs) and read by the inspector as JSON (how selfprof took
//    them until the profile was read through V8's API; still so where V8's structs are
//    not read: macOS, a Node released after the build);
//  - heap: CPU + heap, the sampler started and read through V8's C++ API
//    (src/capture/heap_profile.rs: no JSON);
//  - dd: service mode CPU only, and @datadog/pprof's heap profiler at the same interval,
//    `heap.profile()` and `encode()` every period (as dd-trace takes its heap profiles).
// `--interval` is the heap sampling interval in bytes (1024 is the smallest selfprof takes).
// Per run, on the main thread:
//  - snapshot: the wall and CPU time of each heap profile's snapshot() on the event loop
//    (V8's profile read, and flattened where it is read as JSON); for dd, heap.profile()
//    and the synchronous part of encode();
//  - longest block: the most CPU time the main thread spent between two turns of a 1 ms
//    ticker (CPU time: on a shared machine, preemption does not count), and the longest
//    wall time between two turns (which counts the main thread's waits: V8's full
//    collection marks on helper threads while the main thread waits for them);
//  - blocked: the sum of those blocks over 5 ms, in CPU and wall time (the workload's own
//    slices are 2 ms);
//  - requests per CPU-second, as a ratio to the cpu mode of the same round.
// --breakdown takes 5 profiles each way in one process and splits a profile's time: the
// inspector command (V8's profile, its serialization, the JSON crossing and JSON.parse),
// the garbage collection inside it, JSON.parse of a string of the same size, the
// flattening in JS, and the Rust build (its call on the main thread, and its work on the
// thread pool, timed as the same build run synchronously); and the same profile read
// through V8's C++ API (`heapProfileRead`) with its build's call and work; the second way's
// sampler is @datadog/pprof's, whose `heap.v8Profile()` (V8's tree as JS objects) and
// `heap.profile()` with `encode()` are timed beside selfprof's read, in main-thread CPU.

const { spawnSync } = require('node:child_process');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { parseArgs } = require('node:util');

const MODES = ['cpu', 'heap-inspector', 'heap-json', 'heap', 'dd'];

/** ~`mb` MiB of live objects in arrays, allocated by `sites` generated functions at three depths. */
function buildHeap(mb, sites = 240) {
  const keep = [];
  const makers = Array.from({ length: sites }, (_, i) => {
    const leaf = new Function('n', 'k', `return { id: n, name: 'item-' + n + '-' + k, tags: [n, k, ${i}], at: ${i} };`);
    Object.defineProperty(leaf, 'name', { value: `allocSite${i}` });
    const mid = (n, k) => leaf(n, k);
    Object.defineProperty(mid, 'name', { value: `middle${i % 24}` });
    return mid;
  });
  const perArray = 1000;
  // About 140 bytes per object with its string and array.
  const arrays = Math.ceil((mb * 2 ** 20) / (perArray * 140));
  for (let a = 0; a < arrays; a++) {
    const make = makers[a % sites];
    const arr = new Array(perArray);
    for (let i = 0; i < perArray; i++) arr[i] = make(i, a);
    keep.push(arr);
  }
  return keep;
}

/** The heap module with snapshot() timed: installed before selfprof loads, which reads it once. */
function timeTakes(mode) {
  const { native } = require('../lib/native');
  if (mode === 'heap-inspector') native.heapSamplerStart = () => 'unavailable';
  if (mode === 'heap-inspector' || mode === 'heap-json') native.heapProfileUnreadable = () => `the ${mode} mode of benchmark/heap-pause.js`;
  const heap = require('../lib/capture/heap');
  const takes = [];
  const start = heap.startHeapSampling;
  heap.startHeapSampling = (...args) => {
    const h = start(...args);
    const take = h.snapshot.bind(h);
    h.snapshot = () => {
      const { performance } = require('node:perf_hooks');
      const t0 = performance.now();
      const c0 = native.threadCpuNs();
      try {
        return take();
      } finally {
        takes.push({ wallMs: performance.now() - t0, cpuMs: (native.threadCpuNs() - c0) / 1e6 });
      }
    };
    return h;
  };
  return takes;
}

/** @datadog/pprof's heap profiler every `periodMs`, each profile and its encoding timed into `takes`. */
function ddHeap(intervalBytes, periodMs, takes) {
  const { performance } = require('node:perf_hooks');
  const { native } = require('../lib/native');
  const { heap, encode } = require('@datadog/pprof');
  heap.start(intervalBytes, 64);
  const timer = setInterval(() => {
    const t0 = performance.now();
    const c0 = native.threadCpuNs();
    // encode(): the profile's serialization here, its gzip on the thread pool.
    encode(heap.profile()).catch(() => {});
    takes.push({ wallMs: performance.now() - t0, cpuMs: (native.threadCpuNs() - c0) / 1e6 });
  }, periodMs);
  return () => {
    clearInterval(timer);
    heap.stop();
  };
}

function child(mode, { seconds, periodMs, heapMb, workers, interval }) {
  const { performance } = require('node:perf_hooks');
  const takes = timeTakes(mode);
  const selfprof = require('..');
  const { native } = require('../lib/native');
  const { Worker } = require('node:worker_threads');
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'selfprof-heap-pause-'));
  const heap = mode.startsWith('heap');
  const session = selfprof.start({ service: 'bench', period: periodMs, heap, heapSamplingInterval: interval, exporters: [{ type: 'file', dir }] });
  const stopDd = mode === 'dd' ? ddHeap(interval, periodMs, takes) : () => {};
  // Allocated while the heap sampler runs, as a service's heap is. Building it takes a few
  // periods: what is measured starts after.
  const kept = buildHeap(heapMb);
  takes.length = 0;
  // The longest block and the blocks over 10 ms, in main-thread CPU time between ticks.
  let lastCpu = native.threadCpuNs();
  let lastWall = performance.now();
  let longest = 0;
  let blocked = 0;
  let longestWall = 0;
  let blockedWall = 0;
  const tick = setInterval(() => {
    const cpu = native.threadCpuNs();
    const wall = performance.now();
    const block = (cpu - lastCpu) / 1e6;
    longest = Math.max(longest, block);
    if (block > 5) blocked += block;
    longestWall = Math.max(longestWall, wall - lastWall);
    if (wall - lastWall > 5) blockedWall += wall - lastWall;
    lastCpu = cpu;
    lastWall = wall;
  }, 1);
  let spawned = 0;
  const spawner = workers
    ? setInterval(() => {
        spawned++;
        const w = new Worker(
          'const k = []; const end = Date.now() + 150; while (Date.now() < end) k.push({ a: Math.random(), s: "w".repeat(32) }); setTimeout(() => {}, 50);',
          { eval: true },
        );
        w.unref();
      }, 500)
    : null;
  let ops = 0;
  const request = (i) => {
    const order = { id: i, items: Array.from({ length: 10 }, (_, k) => ({ sku: `sku-${k}`, qty: k % 3 })), note: 'x'.repeat(32) };
    const parsed = JSON.parse(JSON.stringify(order));
    if (i % 50 === 0) kept[i % kept.length][i % 1000] = parsed; // the heap changes a little
    return parsed.items.length;
  };
  const cpu0 = process.cpuUsage();
  const end = performance.now() + seconds * 1000;
  const run = () => {
    if (performance.now() < end) {
      const slice = performance.now() + 2;
      while (performance.now() < slice) {
        selfprof.withLabels({ endpoint: ops % 2 ? 'POST /orders' : 'GET /cart' }, request, ops);
        ops++;
      }
      return setImmediate(run);
    }
    clearInterval(tick);
    clearInterval(spawner);
    stopDd();
    const cpu = process.cpuUsage(cpu0);
    session.stop().then(() => {
      fs.rmSync(dir, { recursive: true, force: true });
      const heapUsedMb = process.memoryUsage().heapUsed / 2 ** 20;
      process.stdout.write(JSON.stringify({ ops, cpuMs: (cpu.user + cpu.system) / 1000, longest, blocked, longestWall, blockedWall, takes, heapUsedMb, spawned, kept: kept.length }));
    });
  };
  run();
}

/** Where one profile's time goes, each way, in this process. */
function breakdown({ heapMb, interval }) {
  const { performance, PerformanceObserver } = require('node:perf_hooks');
  const inspector = require('node:inspector');
  const { native } = require('../lib/native');
  const { post } = require('../lib/capture/inspector-post');
  // eslint-disable-next-line no-unused-vars -- never read: it keeps each way's heap alive while V8 samples it
  let kept = [];
  const gcs = [];
  new PerformanceObserver((l) => gcs.push(...l.getEntries())).observe({ entryTypes: ['gc'] });
  const rows = [];
  let liveMb = 0;
  const measureWay = async (way) => {
    const s = new inspector.Session();
    s.connect();
    if (way === 'inspector') {
      post(s, 'HeapProfiler.enable');
      post(s, 'HeapProfiler.startSampling', { samplingInterval: interval });
    } else {
      // Started by @datadog/pprof (the same V8 call as heapSamplerStart's, no collection per
      // profile): its reads of the sampler are timed beside selfprof's.
      require('@datadog/pprof').heap.start(interval, 128);
    }
    // The heap, allocated while V8 samples (the last way's goes).
    kept = [];
    kept = buildHeap(heapMb);
    const { flatten } = require('../lib/capture/heap');
    for (let i = 0; i < 5; i++) {
      await new Promise((r) => setTimeout(r, 20));
      gcs.length = 0;
      const t0 = performance.now();
      const { profile } = post(s, 'HeapProfiler.getSamplingProfile');
      const tPost = performance.now() - t0;
      const t1 = performance.now();
      const flat = flatten(profile, interval);
      const tFlat = performance.now() - t1;
      const text = JSON.stringify({ profile });
      const t2 = performance.now();
      JSON.parse(text);
      const tParse = performance.now() - t2;
      const t3 = performance.now();
      const built = native.buildHeapProfile([{ profile: flat.json, atMs: performance.now() }], {
        startUnixMs: Date.now(),
        durationMs: 1000,
        intervalBytes: interval,
        trace: false,
        sourceMaps: false,
      });
      const tCall = performance.now() - t3;
      await built;
      // The thread pool's work, timed as the same build run here.
      const t4 = performance.now();
      native.buildHeapProfileSync([{ profile: flat.json, atMs: performance.now() }], { startUnixMs: Date.now(), durationMs: 1000, intervalBytes: interval, trace: false, sourceMaps: false });
      const tBuild = performance.now() - t4;
      // The same sampler read through V8's C++ API, and its build; and (V8's API way) by
      // @datadog/pprof, its tree as JS objects and its whole profile, in main-thread CPU.
      const cpu = (f) => {
        const c0 = native.threadCpuNs();
        const out = f();
        return [(native.threadCpuNs() - c0) / 1e6, out];
      };
      const t5 = performance.now();
      const [cpuRead, read] = cpu(() => native.heapProfileRead(process.versions.v8));
      const tRead = performance.now() - t5;
      const dd = way === 'inspector' ? null : require('@datadog/pprof');
      const [cpuDdTree] = dd ? cpu(() => dd.heap.v8Profile()) : [NaN];
      const [cpuDdProfile] = dd ? cpu(() => dd.encode(dd.heap.profile()).catch(() => {})) : [NaN];
      const bin = { profile: read.profile, urls: read.scripts, atMs: performance.now() };
      const binOptions = { startUnixMs: Date.now(), durationMs: 1000, intervalBytes: interval, trace: false, sourceMaps: false };
      const t6 = performance.now();
      const binBuilt = native.buildHeapProfile([bin], binOptions);
      const tBinCall = performance.now() - t6;
      await binBuilt;
      const t7 = performance.now();
      native.buildHeapProfileSync([bin], binOptions);
      const tBinBuild = performance.now() - t7;
      await new Promise((r) => setImmediate(r)); // the gc entries of the command arrive
      if (way === 'inspector' && i === 0) liveMb = process.memoryUsage().heapUsed / 2 ** 20; // just collected
      const gcMs = gcs.filter((g) => g.startTime >= t0 && g.startTime <= t0 + tPost).reduce((a, g) => a + g.duration, 0);
      rows.push({ way, tPost, gcMs, tParse, tFlat, tCall, tBuild, tRead, tBinCall, tBinBuild, cpuRead, cpuDdTree, cpuDdProfile, readBytes: read.profile.length, bytes: text.length, nodes: flat.urls.length, samples: profile.samples.length });
    }
    if (way === 'inspector') post(s, 'HeapProfiler.stopSampling');
    else require('@datadog/pprof').heap.stop();
    s.disconnect();
  };
  (async () => {
    await measureWay('inspector');
    await measureWay('v8-api');
    const med = (xs) => [...xs].sort((a, b) => a - b)[xs.length >> 1];
    const fmt = (xs) => (xs.some(Number.isNaN) ? '–' : `${med(xs).toFixed(1)} (${Math.min(...xs).toFixed(1)}–${Math.max(...xs).toFixed(1)})`);
    console.log(`Node ${process.version}, ${liveMb.toFixed(0)} MiB of heap in use after a collection, sampled every ${interval} bytes; ms per profile, median (range) of 5`);
    console.log(
      "| started by | getSamplingProfile | of it, GC | JSON.parse of its size | flatten | build: call | build: work | read through V8's API | its build: call | its build: work | read, main-thread CPU | @datadog/pprof's v8Profile(), CPU | its profile() and encode(), CPU | profile |",
    );
    console.log('| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |');
    for (const way of ['inspector', 'v8-api']) {
      const r = rows.filter((x) => x.way === way);
      const pick = (k) => fmt(r.map((x) => x[k]));
      const last = r.at(-1);
      console.log(
        `| ${way === 'inspector' ? "the inspector's startSampling" : "V8's C++ API (@datadog/pprof's heap.start)"} | ${pick('tPost')} | ${pick('gcMs')} | ${pick('tParse')} | ${pick('tFlat')} | ${pick('tCall')} | ${pick('tBuild')} | ${pick('tRead')} | ${pick('tBinCall')} | ${pick('tBinBuild')} | ${pick('cpuRead')} | ${pick('cpuDdTree')} | ${pick('cpuDdProfile')} | ${last.samples} samples, ${last.nodes} nodes, ${(last.bytes / 1024).toFixed(0)} KiB JSON, ${(last.readBytes / 1024).toFixed(0)} KiB read |`,
      );
    }
  })();
}

function median(xs) {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[s.length >> 1] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
}

function main() {
  const { values } = parseArgs({
    options: {
      rounds: { type: 'string' },
      seconds: { type: 'string' },
      'period-ms': { type: 'string' },
      'heap-mb': { type: 'string' },
      interval: { type: 'string' },
      modes: { type: 'string' },
      workers: { type: 'boolean' },
      breakdown: { type: 'boolean' },
      child: { type: 'string' },
    },
  });
  const opts = {
    seconds: Number(values.seconds ?? 6),
    periodMs: Number(values['period-ms'] ?? 1000),
    heapMb: Number(values['heap-mb'] ?? 300),
    interval: Number(values.interval ?? 512 * 1024),
    workers: values.workers ?? false,
  };
  if (!Number.isInteger(opts.interval) || opts.interval < 1024) throw new Error(`--interval must be a whole number of bytes, at least 1024, got ${values.interval}`);
  const modes = values.modes ? values.modes.split(',') : MODES;
  for (const m of modes) if (!MODES.includes(m)) throw new Error(`--modes: ${m} is none of ${MODES.join(', ')}`);
  if (!modes.includes('cpu')) modes.unshift('cpu'); // the ratios' baseline
  if (values.breakdown) return breakdown(opts);
  if (values.child) return child(values.child, opts);
  const rounds = Number(values.rounds ?? 3);
  const runs = Object.fromEntries(modes.map((m) => [m, []]));
  const perCpu = Object.fromEntries(modes.map((m) => [m, []]));
  for (let r = 0; r < rounds; r++) {
    const order = [...modes].sort(() => Math.random() - 0.5);
    const results = {};
    for (const mode of order) {
      const args = [__filename, '--child', mode, '--seconds', String(opts.seconds), '--period-ms', String(opts.periodMs), '--heap-mb', String(opts.heapMb), '--interval', String(opts.interval)];
      if (opts.workers) args.push('--workers');
      const out = spawnSync(process.execPath, args, { encoding: 'utf8', maxBuffer: 64 << 20 });
      if (out.status !== 0) throw new Error(`${mode}: ${out.stderr}`);
      results[mode] = JSON.parse(out.stdout);
      runs[mode].push(results[mode]);
    }
    for (const mode of modes) perCpu[mode].push(results[mode].ops / results[mode].cpuMs / (results.cpu.ops / results.cpu.cpuMs));
    process.stderr.write(
      `round ${r + 1}/${rounds}: ${order.map((m) => `${m}: blocked ${results[m].blockedWall.toFixed(0)} ms, longest ${results[m].longestWall.toFixed(0)} ms (wall), ${results[m].takes.length} snapshots`).join('; ')}\n`,
    );
  }
  const fmt = (xs, d = 1) => (xs.length ? `${median(xs).toFixed(d)} (${Math.min(...xs).toFixed(d)}–${Math.max(...xs).toFixed(d)})` : '–');
  const heapUsed = median(runs.cpu.map((x) => x.heapUsedMb));
  console.log(
    `Node ${process.version}, ${rounds} rounds × ${opts.seconds} s, period ${opts.periodMs} ms, heap sampled every ${opts.interval} bytes, heap used ~${heapUsed.toFixed(0)} MiB${opts.workers ? `, a worker every 500 ms` : ''}; median (range)`,
  );
  console.log('| mode | snapshot, wall ms | snapshot, main-thread CPU ms | longest block, wall ms | longest block, CPU ms | blocked per run (blocks > 5 ms), wall ms | blocked per run, CPU ms | requests per CPU-s, × CPU only |');
  console.log('| --- | --- | --- | --- | --- | --- | --- | --- |');
  const names = {
    cpu: 'CPU only',
    'heap-inspector': 'CPU + heap, started and read by the inspector',
    'heap-json': "CPU + heap, started by V8's API, read by the inspector (before)",
    heap: "CPU + heap, started and read by V8's API (after)",
    dd: 'CPU only + @datadog/pprof heap',
  };
  for (const mode of modes) {
    const rs = runs[mode];
    const takes = rs.flatMap((x) => x.takes);
    // Each run against the CPU-only run of its round.
    const x = (key) => (mode === 'cpu' ? '' : ` (× ${fmt(rs.map((r, i) => r[key] / Math.max(runs.cpu[i][key], 1)), 1)})`);
    const col = (key) => `${fmt(rs.map((r) => r[key]), 0)}${x(key)}`;
    console.log(
      `| ${names[mode]} | ${fmt(takes.map((t) => t.wallMs))} | ${fmt(takes.map((t) => t.cpuMs))} | ${col('longestWall')} | ${col('longest')} | ${col('blockedWall')} | ${col('blocked')} | ${fmt(perCpu[mode], 3)} |`,
    );
  }
}

main();
