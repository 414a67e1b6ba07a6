'use strict';
// What one label set costs at the call, apart from any request: CPU time per call of
// `AsyncLocalStorage.run()` (the floor of labels carried by AsyncLocalStorage) and of
// `withLabels()`, synchronous and around an async function of two awaits, with a Profiler
// recording (sampling every 100 s: no sample lands). Rounds alternate the modes; medians of
// the rounds, ns of this process's CPU per call.
//
//   node benchmark/label-call-costs.js [--rounds 15] [--calls 200000] [--node PATH]

const { AsyncLocalStorage } = require('node:async_hooks');
const { spawnSync } = require('node:child_process');

function arg(name, fallback) {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? process.argv[i + 1] : fallback;
}

if (arg('node') && !process.env.SELFPROF_BENCH_CHILD) {
  const r = spawnSync(arg('node'), process.argv.slice(1).filter((a, i, all) => a !== '--node' && all[i - 1] !== '--node'), {
    stdio: 'inherit',
    env: { ...process.env, SELFPROF_BENCH_CHILD: '1' },
  });
  process.exit(r.status ?? 1);
}

const rounds = Number(arg('rounds', 15));
const calls = Number(arg('calls', 200_000));
if (!(rounds >= 1 && calls >= 1)) {
  console.error('label-call-costs: --rounds and --calls must be positive numbers');
  process.exit(2);
}
const selfprof = require('..');
const { labelState } = require('../lib/capture/labels');
const als = new AsyncLocalStorage();
const fn = () => 1;
async function request() {
  await null;
  await null;
}

function cpuPerCall(f) {
  const t = process.cpuUsage();
  for (let i = 0; i < calls; i++) f(i);
  const d = process.cpuUsage(t);
  return ((d.user + d.system) * 1000) / calls;
}

async function cpuPerAsyncCall(f) {
  const n = Math.ceil(calls / 10);
  const t = process.cpuUsage();
  for (let i = 0; i < n; i++) await f(i);
  const d = process.cpuUsage(t);
  return ((d.user + d.system) * 1000) / n;
}

(async () => {
  const profiler = new selfprof.Profiler({ sampleInterval: 100_000, maxBufferSize: 1e6 });
  selfprof.withLabels({ warm: '1' }, fn);
  await new Promise((r) => setTimeout(r, 50)); // the context frame's check ends in a timer
  const modes = {
    'AsyncLocalStorage.run()': () => cpuPerCall(() => als.run({ id: 1 }, fn)),
    'withLabels()': () => cpuPerCall(() => selfprof.withLabels({ endpoint: 'GET /users/:id', span_id: '00f067aa0ba902b7' }, fn)),
    'async request, bare': () => cpuPerAsyncCall(() => request()),
    'async request in run()': () => cpuPerAsyncCall(() => als.run({ id: 1 }, request)),
    'async request in withLabels()': () => cpuPerAsyncCall(() => selfprof.withLabels({ endpoint: 'GET /users/:id', span_id: '00f067aa0ba902b7' }, request)),
  };
  const results = Object.fromEntries(Object.keys(modes).map((k) => [k, []]));
  for (let r = 0; r < rounds; r++) for (const [name, measure] of Object.entries(modes)) results[name].push(await measure());
  const median = (a) => [...a].sort((x, y) => x - y)[a.length >> 1];
  console.log(`label call costs: node ${process.version}, labels via ${labelState().path}, ${rounds} rounds, ns of CPU per call (median [min, max])`);
  for (const [name, a] of Object.entries(results)) {
    console.log(`  ${name.padEnd(32)} ${median(a).toFixed(0).padStart(6)}  [${Math.min(...a).toFixed(0)}, ${Math.max(...a).toFixed(0)}]`);
  }
  await profiler.stop();
})();
