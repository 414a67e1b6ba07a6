'use strict';
// What ending a recording costs, side by side in one run: selfprof (trace object and pprof),
// @datadog/pprof with contexts, and the bare inspector Profiler (no labels), on a labeled
// service workload: concurrent in-process requests with real awaits, each with its own
// span id (so every sampled request has its own label set).
//
//   node benchmark/stop-costs.js [--samples 10000,100000] [--rounds 3] [--node PATH]
//                                [--modes bare,selfprof-json,selfprof-pprof,datadog]
//
// Per mode, size and round, in a fresh process: profile at 0.1 ms until about N samples,
// then measure
//  - buffered: RSS growth from before the recording to just before stop(), per 10k samples;
//    and the same without V8's young generation (its semi-spaces: allocation room, not
//    what the recording holds), which V8 grows once enough has survived its scavenges:
//    on Node 24 from 64 to 128 MiB within 20 s of the labeled workload, and within 60 s
//    without labels or profiler too, so it moves raw RSS by ~6 MiB per 10k at ~100k
//    samples depending on when it happened;
//  - block: the longest event-loop block from stop() to the result, in the main thread's
//    CPU time (a 1 ms ticker reads CLOCK_THREAD_CPUTIME_ID; the largest CPU time between
//    two ticks is the longest block: on a shared machine, preemption does not count);
//  - ready: wall time from stop() to the result (trace object or pprof Buffer);
//  - main CPU: the main thread's CPU time from stop() to the result, all of it (the sum
//    of the blocks: what the event loop gave up to the stop);
//  - peak: peak RSS (VmHWM, reset before the recording) of the whole recording and stop;
//  - while recording (selfprof): the main thread's CPU time of each segment hand-off (V8's
//    stop of the segment) and of its join's turn, and both per second recorded;
// and prints medians over rounds with their range, ratios to the bare inspector and to
// @datadog/pprof, and each mode's stop cost growth per extra sample between the sizes.

const { spawnSync } = require('node:child_process');
const fs = require('node:fs');
const path = require('node:path');

const MODES = {
  bare: 'bare inspector Profiler',
  'selfprof-json': 'selfprof, trace object',
  'selfprof-pprof': 'selfprof, pprof',
  datadog: '@datadog/pprof with contexts',
};
const ENDPOINTS = ['GET /users/:id', 'POST /orders', 'GET /search', 'GET /health'];

function arg(name, fallback) {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? process.argv[i + 1] : fallback;
}

const hwmMiB = () => Number(/^VmHWM:\s+(\d+)/m.exec(fs.readFileSync('/proc/self/status', 'utf8'))[1]) / 1024;
const rssMiB = () => process.memoryUsage().rss / 2 ** 20;
/** The young generation's size (V8's new space and its large objects), MiB. */
const youngMiB = () =>
  require('node:v8')
    .getHeapSpaceStatistics()
    .filter((s) => s.space_name === 'new_space' || s.space_name === 'new_large_object_space')
    .reduce((sum, s) => sum + s.space_size, 0) / 2 ** 20;

// --- one measurement (child process) -----------------------------------------------

async function measure(mode, samples, msPerSample) {
  const { setImmediate: immediate } = require('node:timers/promises');
  const selfprof = require('..');
  const { native } = require('../lib/native');
  const intervalMs = 0.1;
  let label = (i, endpoint, fn) => fn();
  let stop;
  fs.writeFileSync('/proc/self/clear_refs', '5');
  const rss0 = rssMiB();
  const young0 = youngMiB();
  if (mode === 'bare') {
    stop = await require('./served').startInspectorProfiler(intervalMs);
  } else if (mode.startsWith('selfprof')) {
    selfprof.setBaseInterval(intervalMs);
    const profiler = new selfprof.Profiler({ sampleInterval: intervalMs, maxBufferSize: 10_000_000 });
    stop = () => profiler.stop(mode === 'selfprof-pprof' ? { format: 'pprof' } : undefined);
    label = (i, endpoint, fn) => selfprof.withLabels({ endpoint, span_id: (0x1000_0000n + BigInt(i)).toString(16).padStart(16, '0') }, fn);
  } else {
    const { time, encode } = require('@datadog/pprof');
    const { AsyncLocalStorage, createHook } = require('node:async_hooks');
    const useCPED = Number(process.versions.node.split('.')[0]) >= 24;
    time.start({ intervalMicros: intervalMs * 1000, durationMillis: 3_600_000, withContexts: true, useCPED });
    const spanOf = (i) => (0x1000_0000n + BigInt(i)).toString(16).padStart(16, '0');
    let hook;
    if (useCPED) {
      label = (i, endpoint, fn) => time.runWithContext({ endpoint, span_id: spanOf(i) }, fn);
    } else {
      const als = new AsyncLocalStorage();
      hook = createHook({ before: () => time.setContext(als.getStore()) }).enable();
      label = (i, endpoint, fn) =>
        als.run({ endpoint, span_id: spanOf(i) }, () => {
          time.setContext(als.getStore());
          return fn();
        });
    }
    stop = async () => {
      hook?.disable();
      return encode(time.stop(false, ({ context }) => context?.context ?? {}));
    };
  }

  // The workload: 32 concurrent requests, each labeled with its own span id.
  async function handle(i) {
    const body = JSON.stringify({ id: i, items: Array.from({ length: 20 }, (_, k) => ({ sku: `sku-${(i + k) % 97}`, qty: (i * k) % 7 })) });
    await immediate();
    const order = JSON.parse(body);
    await null;
    let s = 0;
    for (const it of order.items) s += Math.sqrt(it.qty + it.sku.length);
    await new Promise((r) => process.nextTick(r));
    return s + order.items.map((it) => `${it.sku}x${it.qty}`).join(',').length;
  }
  // V8 delivers a sample every ~0.13-0.3 ms when asked for 0.1 ms, depending on the mode
  // and the machine's load: the parent learns each mode's rate from its earlier runs.
  const deadline = performance.now() + samples * msPerSample;
  let next = 0;
  await Promise.all(
    Array.from({ length: 32 }, async () => {
      while (performance.now() < deadline) {
        const i = next++;
        await label(i, ENDPOINTS[i % 4], () => handle(i));
      }
    }),
  );
  const buffered = rssMiB() - rss0;
  const bufferedOld = buffered - (youngMiB() - young0);
  const recordMs = samples * msPerSample;
  // What the recording's segment hand-offs took of the main thread (selfprof) until now.
  const segments = mode.startsWith('selfprof') ? require('../lib/capture/group').group.segmentCosts : undefined;

  // The longest block, in main-thread CPU time between 1 ms ticks.
  let lastCpu = native.threadCpuNs();
  let longest = 0;
  const ticker = setInterval(() => {
    const cpu = native.threadCpuNs();
    longest = Math.max(longest, cpu - lastCpu);
    lastCpu = cpu;
  }, 1);
  const t0 = performance.now();
  lastCpu = native.threadCpuNs();
  const cpu0 = lastCpu;
  const result = await stop();
  const ready = performance.now() - t0;
  const cpu1 = native.threadCpuNs();
  longest = Math.max(longest, cpu1 - lastCpu);
  clearInterval(ticker);
  // The peak of the recording and its stop, read before the result is counted below: a
  // pprof's count comes from decoding it in JS (pprof-format), which took more memory than
  // the stop (~85 MiB at ~100k samples) and was in the pprof modes' peaks until 2026-11-25.
  const peakMiB = hwmMiB();
  const count =
    mode === 'bare' ? result.samples.length : mode === 'selfprof-json' ? result.samples.length : pprofSamples(result);
  return { mode, samples: count, requests: next, bufferedMiB: buffered, bufferedOldMiB: bufferedOld, blockMs: longest / 1e6, mainCpuMs: (cpu1 - cpu0) / 1e6, readyMs: ready, peakMiB, recordMs, segments };
}

function pprofSamples(buffer) {
  const { Profile } = require('pprof-format');
  const p = Profile.decode(require('node:zlib').gunzipSync(buffer));
  return p.sample.reduce((n, s) => n + Number(s.value[0]), 0);
}

// --- orchestration -----------------------------------------------------------------

const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[s.length >> 1] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};

function parent() {
  const sizes = arg('samples', '10000,100000').split(',').map(Number);
  const rounds = Number(arg('rounds', 3));
  const node = arg('node', process.execPath);
  const modes = arg('modes', Object.keys(MODES).join(',')).split(',');
  const version = spawnSync(node, ['--version'], { encoding: 'utf8' }).stdout.trim();
  console.log(`stop costs: node ${version}, 0.1 ms interval, ${rounds} rounds, labeled in-process service workload`);
  const results = {}; // size -> mode -> [measurements]
  const msPerSample = Object.fromEntries(modes.map((m) => [m, 0.14]));
  // A short calibration run per mode, then the rounds (modes shuffled in each).
  for (const mode of modes) {
    const r = spawnSync(node, ['--expose-gc', __filename, '--child', mode, '--size', '3000', '--ms-per-sample', '0.14'], { cwd: path.join(__dirname, '..'), encoding: 'utf8' });
    if (r.status !== 0) throw new Error(`${mode} calibration failed:\n${r.stderr}`);
    const m = JSON.parse(r.stdout.trim().split('\n').pop());
    msPerSample[mode] = (3000 * 0.14) / m.samples;
  }
  for (let round = 0; round < rounds; round++) {
    for (const size of sizes) {
      for (const mode of modes.sort(() => Math.random() - 0.5)) {
        const r = spawnSync(node, ['--expose-gc', __filename, '--child', mode, '--size', String(size), '--ms-per-sample', String(msPerSample[mode])], {
          cwd: path.join(__dirname, '..'),
          encoding: 'utf8',
          maxBuffer: 1 << 26,
        });
        if (r.status !== 0) throw new Error(`${mode} ${size} failed:\n${r.stderr}`);
        const m = JSON.parse(r.stdout.trim().split('\n').pop());
        ((results[size] ??= {})[mode] ??= []).push(m);
        // Keep the rate current (a loaded machine samples less often).
        msPerSample[mode] = (msPerSample[mode] + (size * msPerSample[mode]) / m.samples) / 2;
      }
    }
    process.stderr.write(`round ${round + 1}/${rounds} done\n`);
  }
  const fmt = (xs, digits = 1) => `${median(xs).toFixed(digits)} [${Math.min(...xs).toFixed(digits)}–${Math.max(...xs).toFixed(digits)}]`;
  for (const size of sizes) {
    console.log(`\n~${size} samples`);
    console.log(`${'mode'.padEnd(30)}${'samples'.padStart(8)}  ${'longest block ms'.padEnd(20)}${'main CPU ms'.padEnd(20)}${'until the result ms'.padEnd(22)}${'RSS per 10k buffered MiB'.padEnd(26)}${'same, w/o young gen'.padEnd(22)}peak RSS MiB`);
    for (const mode of modes) {
      const ms = results[size][mode];
      const per10k = ms.map((m) => (m.bufferedMiB * 10_000) / m.samples);
      const oldPer10k = ms.map((m) => (m.bufferedOldMiB * 10_000) / m.samples);
      console.log(
        `${MODES[mode].padEnd(30)}${String(median(ms.map((m) => m.samples))).padStart(8)}  ${fmt(ms.map((m) => m.blockMs)).padEnd(20)}${fmt(ms.map((m) => m.mainCpuMs)).padEnd(20)}${fmt(ms.map((m) => m.readyMs)).padEnd(22)}${fmt(per10k, 2).padEnd(26)}${fmt(oldPer10k, 2).padEnd(22)}${fmt(ms.map((m) => m.peakMiB), 0)}`,
      );
    }
    const ratio = (mode, base, key) => {
      if (!results[size][mode] || !results[size][base]) return '–';
      return (median(results[size][mode].map((m) => m[key])) / median(results[size][base].map((m) => m[key]))).toFixed(2);
    };
    for (const mode of modes.filter((m) => m.startsWith('selfprof'))) {
      const ms = results[size][mode].filter((m) => m.segments);
      const seg = (key) => median(ms.map((m) => m.segments[key]));
      const perSecond = median(ms.map((m) => ((m.segments.handOffMs + m.segments.joinMs) * 1000) / m.recordMs));
      console.log(
        `  ${MODES[mode]}, while recording: ${seg('segments')} segment hand-offs; main-thread CPU per hand-off ` +
          `${(seg('handOffMs') / Math.max(1, seg('segments'))).toFixed(2)} ms (longest ${seg('maxHandOffMs').toFixed(2)}), ` +
          `per join ${(seg('joinMs') / Math.max(1, seg('segments'))).toFixed(2)} ms (longest ${seg('maxJoinMs').toFixed(2)}); ` +
          `${perSecond.toFixed(2)} ms per second recorded`,
      );
      console.log(
        `  ${MODES[mode]}: block ${ratio(mode, 'bare', 'blockMs')}× bare, ${ratio(mode, 'datadog', 'blockMs')}× @datadog/pprof; ` +
          `main CPU ${ratio(mode, 'bare', 'mainCpuMs')}× bare, ${ratio(mode, 'datadog', 'mainCpuMs')}× @datadog/pprof; ` +
          `until the result ${ratio(mode, 'bare', 'readyMs')}× bare, ${ratio(mode, 'datadog', 'readyMs')}× @datadog/pprof`,
      );
    }
  }
  if (sizes.length >= 2) {
    const [a, b] = [sizes[0], sizes.at(-1)];
    console.log(`\nstop cost growth, µs per extra sample until the result (~${a} → ~${b} samples):`);
    for (const mode of modes) {
      const ma = results[a][mode];
      const mb = results[b][mode];
      const growth = ((median(mb.map((m) => m.readyMs)) - median(ma.map((m) => m.readyMs))) * 1000) / (median(mb.map((m) => m.samples)) - median(ma.map((m) => m.samples)));
      console.log(`  ${MODES[mode].padEnd(30)}${growth.toFixed(2)}`);
    }
  }
}

if (process.argv.includes('--child')) {
  measure(arg('child'), Number(arg('size')), Number(arg('ms-per-sample', 0.14))).then(
    (r) => process.stdout.write(`${JSON.stringify(r)}\n`),
    (err) => {
      console.error(err);
      process.exit(1);
    },
  );
} else {
  parent();
}
