'use strict';
// What sharing one sampler costs, each next to the bare inspector in the same run:
// 1. the gap with no samples when a profiler joins or leaves the group (V8's recording
//    is taken and the sampler restarted), next to a bare inspector Profiler.stop; and a
//    leave that keeps the GCD (a service rotation: a hand-off, no restart), its gap and
//    main-thread CPU next to a leave that restarts, with 20k functions' code to log;
// 2. stop() for ~10k and ~100k samples, next to a bare inspector Profiler.stop of the
//    same amount; for stop() both the time the event loop is blocked and the time until
//    the trace is there (the conversion runs on the thread pool).
//
//   node benchmark/group-costs.js [--repeat 15]

const inspector = require('node:inspector');
const { performance } = require('node:perf_hooks');
const { Profiler, setBaseInterval } = require('..');
const { native } = require('../lib/native');

const repeat = Number(process.argv[process.argv.indexOf('--repeat') + 1]) || 15;
const median = (xs) => [...xs].sort((a, b) => a - b)[xs.length >> 1];
const fmt = (xs) => `median ${median(xs).toFixed(2)} ms, max ${Math.max(...xs).toFixed(2)} ms`;

function spin(ms) {
  const end = performance.now() + ms;
  let x = 0;
  let i = 0;
  while ((i & 1023) !== 0 || performance.now() < end) x += Math.sqrt(i++ + x);
  return x;
}

function bareSession(intervalUs) {
  const session = new inspector.Session();
  session.connect();
  const post = (m, p) => {
    let out;
    session.post(m, p, (err, res) => {
      if (err) throw err;
      out = res;
    });
    return out;
  };
  post('Profiler.enable');
  post('Profiler.setSamplingInterval', { interval: intervalUs });
  post('Profiler.start');
  return {
    stop() {
      const t0 = performance.now();
      const { profile } = post('Profiler.stop');
      const ms = performance.now() - t0;
      session.disconnect();
      return { ms, samples: profile.samples.length };
    },
  };
}

/**
 * The longest spacing between `trace`'s samples around `at` (from `before` ms before it to
 * `after` ms after), less the 2 ms interval: the time with no samples.
 */
function gapAround(trace, at, after, before = 3) {
  let worst = 0;
  for (let i = 1; i < trace.samples.length; i++) {
    const [p, q] = [trace.samples[i - 1].timestamp, trace.samples[i].timestamp];
    if (q >= at - before && p <= at + after) worst = Math.max(worst, q - p - 2);
  }
  return worst;
}

async function gcdChangeGap() {
  const joinGaps = [];
  const leaveGaps = [];
  const bare = [];
  for (let r = 0; r < repeat; r++) {
    const a = new Profiler({ sampleInterval: 2, maxBufferSize: 100_000 });
    spin(200);
    const joinAt = performance.now();
    const b = new Profiler({ sampleInterval: 1, maxBufferSize: 100_000 }); // the GCD moves to 1 ms
    spin(100);
    const leaveAt = performance.now();
    await b.stop();
    spin(100);
    const trace = await a.stop();
    joinGaps.push(gapAround(trace, joinAt, 20));
    leaveGaps.push(gapAround(trace, leaveAt, 20));
    // The same amount of recording (200 ms at 2 ms), stopped with the bare inspector.
    const s = bareSession(2000);
    spin(200);
    bare.push(s.stop().ms);
  }
  console.log(`GCD change (a 2 ms profiler running 200 ms, joined and left by a 1 ms one; ${repeat} times):`);
  console.log(`  gap with no samples when a profiler joins:  ${fmt(joinGaps)}`);
  console.log(`  gap with no samples when a profiler leaves: ${fmt(leaveGaps)}`);
  console.log(`  bare inspector Profiler.stop, same recording: ${fmt(bare)}`);
}

/** A leave that keeps the GCD (hand-off) next to one that changes it (restart). */
async function handOffCost() {
  // Code for V8 to log at a restart, as a service of some size has.
  const fns = Array.from({ length: 20_000 }, (_, i) => new Function('x', `return x * ${i} + ${i}`));
  for (const f of fns) f(1);
  const rows = { 'hand-off (interval kept)': { gap: [], cpu: [] }, 'restart (interval changed)': { gap: [], cpu: [] } };
  for (let r = 0; r < repeat; r++) {
    for (const [name, interval] of [['hand-off (interval kept)', 2], ['restart (interval changed)', 1]]) {
      const a = new Profiler({ sampleInterval: 2, maxBufferSize: 100_000 });
      spin(50);
      const b = new Profiler({ sampleInterval: interval, maxBufferSize: 100_000 });
      spin(100);
      const leaveAt = performance.now();
      const c0 = native.threadCpuNs();
      const stopped = b.stop();
      rows[name].cpu.push((native.threadCpuNs() - c0) / 1e6);
      spin(100);
      await stopped;
      const trace = await a.stop();
      rows[name].gap.push(gapAround(trace, leaveAt, 60));
    }
  }
  console.log(`a 1 or 2 ms profiler leaving a 2 ms one, 20k functions loaded (${repeat} times):`);
  for (const [name, { gap, cpu }] of Object.entries(rows)) {
    console.log(`  ${name.padEnd(28)} gap with no samples ${fmt(gap)}; main-thread CPU of the leave ${fmt(cpu)}`);
  }
}

/** Samples per ms V8 manages when asked for one every 50 µs (it cannot keep up). */
function sampleRate() {
  const s = bareSession(50);
  spin(300);
  return s.stop().samples / 300;
}

async function stopCost(target, rate) {
  // 50 µs between samples, to reach 100k samples in seconds rather than minutes.
  const busyMs = target / rate;
  setBaseInterval(0.05);
  const blocked = [];
  const total = [];
  const bare = [];
  let samples = 0;
  let bareSamples = 0;
  const rounds = Math.max(3, Math.round(repeat / (target / 10_000)));
  try {
    for (let r = 0; r < rounds; r++) {
      const p = new Profiler({ sampleInterval: 0.05, maxBufferSize: 10 * target });
      spin(busyMs);
      const t0 = performance.now();
      const pending = p.stop();
      blocked.push(performance.now() - t0);
      const trace = await pending;
      total.push(performance.now() - t0);
      samples = trace.samples.length;
      const s = bareSession(50);
      spin(busyMs);
      const got = s.stop();
      bare.push(got.ms);
      bareSamples = got.samples;
    }
  } finally {
    setBaseInterval(1);
  }
  console.log(`stop() with ~${target / 1000}k samples (selfprof ${samples}, bare ${bareSamples}; ${rounds} rounds):`);
  console.log(`  selfprof stop(), event loop blocked: ${fmt(blocked)}`);
  console.log(`  selfprof stop(), until the trace:    ${fmt(total)}`);
  console.log(`  bare inspector Profiler.stop:        ${fmt(bare)}`);
  console.log(`  ratio (until the trace / bare):      ${(median(total) / median(bare)).toFixed(2)}×`);
}

(async () => {
  console.log(`group costs: node ${process.version}`);
  await gcdChangeGap();
  const rate = sampleRate();
  await stopCost(10_000, rate);
  await stopCost(100_000, rate);
  await handOffCost(); // last: its 20k functions would be in every later recording
})();
