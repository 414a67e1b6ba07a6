'use strict';
// What one label set costs at the call, apart from any request: CPU time per call of
// `AsyncLocalStorage.run()` (the floor of labels carried by AsyncLocalStorage) and of
// `withLabels()`, synchronous and around an async function of two awaits, with a Profiler
// recording (sampling every 100 s: no sample lands). Rounds alternate the modes; medians of
// the rounds, ns of this process's CPU per call.
//
//   node benchmark/label-call-costs.js [--rounds 15] [--calls 200000] [--node PATH]
//
// --instructions counts instead (callgrind, with V8's --single-threaded: a mode's count
// repeats within a few hundred instructions a request, where the HTTP service's moves by
// thousands): async requests of two awaits, eight at a time, in a frame that holds another
// AsyncLocalStorage's store (as a tracer's), bare, in run(), in withLabels(), and in the
// withLabels() of another checkout (`--baseline DIR`, built); a request's instructions are
// the difference of two runs (`--requests N1,N2`, default 10000,60000) over N2 - N1.
//
//   node benchmark/label-call-costs.js --instructions [--requests 10000,60000] [--node PATH] [--baseline DIR]

const { AsyncLocalStorage } = require('node:async_hooks');
const { spawnSync } = require('node:child_process');

const als = new AsyncLocalStorage();

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

if (process.argv.includes('--count-child')) {
  countChild(arg('count-child'), arg('root'), Number(arg('n')));
} else if (process.argv.includes('--instructions')) {
  instructions();
} else {
  timed();
}

/** One counted run: `n` requests labeled as `mode` says, with `root`'s selfprof. */
async function countChild(mode, root, n) {
  const selfprof = require(root);
  const other = new AsyncLocalStorage();
  let sink = 0;
  const handler = async (i) => {
    await null;
    sink += i;
    await null;
  };
  const label = {
    bare: (i) => handler(i),
    run: (i) => als.run({ endpoint: 'GET /users/:id', span_id: `s${i}` }, handler, i),
    labels: (i) => selfprof.withLabels({ endpoint: 'GET /users/:id', span_id: `s${i}` }, handler, i),
  }[mode === 'baseline' ? 'labels' : mode];
  const profiler = new selfprof.Profiler({ sampleInterval: 100_000, maxBufferSize: 1e6 });
  selfprof.withLabels({ warm: '1' }, () => {});
  await new Promise((r) => setTimeout(r, 100)); // the context frame's check ends in a timer
  await other.run({ tracer: 'span' }, async () => {
    for (let i = 0; i < n; i += 8) await Promise.all([0, 1, 2, 3, 4, 5, 6, 7].map((k) => label(i + k)));
  });
  await profiler.stop();
  return sink;
}

function instructions() {
  const [n1, n2] = arg('requests', '10000,60000').split(',').map(Number);
  const baseline = arg('baseline');
  const root = require('node:path').resolve(__dirname, '..');
  const count = (mode, n) => {
    const r = spawnSync('valgrind', ['--tool=callgrind', '--callgrind-out-file=/dev/null', process.execPath, '--single-threaded', __filename, '--count-child', mode, '--root', mode === 'baseline' ? require('node:path').resolve(baseline) : root, '--n', String(n)], { encoding: 'utf8', env: { ...process.env, SELFPROF_BENCH_CHILD: '1' } });
    const m = /Collected : (\d+)/.exec(r.stderr);
    if (!m) throw new Error(`no count from callgrind (${mode}):\n${r.stderr.slice(-1000)}`);
    return Number(m[1]);
  };
  console.log(`label instructions per async request (callgrind, ${n1} and ${n2} requests): node ${process.version}`);
  const per = {};
  for (const mode of ['bare', 'run', 'labels', ...(baseline ? ['baseline'] : [])]) {
    per[mode] = (count(mode, n2) - count(mode, n1)) / (n2 - n1);
    const over = mode === 'bare' ? '' : `  +${(per[mode] - per.bare).toFixed(0)} over bare`;
    console.log(`  ${{ bare: 'bare', run: 'in run()', labels: 'in withLabels()', baseline: `in withLabels() (${baseline})` }[mode].padEnd(40)} ${per[mode].toFixed(0).padStart(7)}${over}`);
  }
}

async function timed() {
  const rounds = Number(arg('rounds', 15));
  const calls = Number(arg('calls', 200_000));
  if (!(rounds >= 1 && calls >= 1)) {
    console.error('label-call-costs: --rounds and --calls must be positive numbers');
    process.exit(2);
  }
  const selfprof = require('..');
  const { labelState } = require('../lib/capture/labels');
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
}
