'use strict';
// Service-like workloads, every profiling mode side by side in one run:
// - http: an HTTP server (4 endpoints, JSON in and out, two awaits on "I/O") in a child
//   process, driven over loopback by a keep-alive client in another process;
// - inproc: 64 concurrent in-process "requests" with five async hops and little work
//   each, the worst case for per-switch costs;
// - otel-express: the http workload's requests served by Express under OpenTelemetry's
//   HTTP and Express instrumentations, labeled by selfprof's span processor (modes none,
//   inspector, selfprof, selfprof-labels, baseline-labels; none is the tracer without a
//   profiler, inspector V8's bare profiler through the inspector);
// - dd-express: the same Express service under dd-trace (its own plugins; traces sent to a
//   closed port), labeled by selfprof's dd-trace integration (the same modes).
// Each request is labeled with its endpoint and span id where the mode labels.
//
//   node benchmark/labels-overhead.js [--workload http|inproc|otel-express|dd-express] [--seconds 3] [--rounds 5]
//                                     [--interval 10] [--node path] [--modes a,b,...]
//                                     [--baseline DIR] [--together] [--warmup 0.5]
//
// --together serves every mode at once (http, otel-express, dd-express): one server per mode, all on
// the server core, one client keeping each busy. The machine's drift then falls on every
// mode alike, and a round's ratios hold within a few percent where separate runs spread
// over ±25% here. Each server gets a share of the core, so a profiler's wall-clock
// interval lands more often per CPU-second (the output says how often) and code that runs
// rarely runs with cold caches: per-sample costs weigh more than in a server alone.
// --warmup is the seconds of requests before the measured window (0.5 by default).
//
// --baseline DIR adds 'baseline-labels': selfprof with labels loaded from another checkout
// (built), e.g. the commit before a change, measured in the same rounds as this one.
// --modes picks modes (the no-profiler run is always there: it is what ratios divide by).
//
// --instructions counts the HTTP server's instructions per request instead of timing it
// (callgrind: the same count whatever else the machine runs): the server runs under
// valgrind, counting only its requests N1 to N2 (--requests N1,N2, default 30000,36000:
// warmed up, as a service runs; callgrind counts nothing before N1, at a fraction of its
// cost), and that count divided by N2 - N1 is one request's cost. Sampling is every 1000 ms there (a
// process under valgrind runs ~50x slower, so time-based sampling would fire ~50x more per
// request): the count isolates the per-request costs, hooks and label sets
// (--count-interval MS samples more often, to count per-sample costs instead). The server
// runs with V8's --single-threaded there unless --threads is given (see singleThreaded);
// with --threads, --by-thread also counts each thread apart (the main thread against V8's
// and libuv's helpers), and --cache-sim adds callgrind's simulated cache misses a request
// (first-level instruction and data, last-level) on each side. With --predictable the
// server runs with V8's --predictable --predictable-gc-schedule instead (its collector and
// compiler on the main thread, collections at fixed heap sizes: two runs of one mode
// within ~0.5%, where the other ways differ by up to a tenth), and the main thread's count
// is split by function into V8's collector, its compiler and the rest (the JS, the
// builtins, Node and the addon: what a change of JS moves; one run's collections still
// move its collector's share by a few percent). --rounds N runs each mode N times, in
// turn, and reports medians and ranges.
//
// --allocations weighs what the server allocates instead (V8's --trace-gc-nvp, summed over
// its collections): bytes allocated and bytes promoted to the old generation a request, and
// the main thread's GC pauses a request (pause=),
// over --requests N1,N2 as --instructions does, at --interval (10 ms by default), each mode
// --rounds times (3 by default), alternating. Allocation repeats within ~1% between runs
// where time spreads over ±25%, and what a request leaves alive for the collector to copy
// is a cost that instruction counts miss.
//
// Each (mode, round) runs in fresh processes; rounds shuffle the mode order, and each
// mode's requests/s is reported as the median over rounds of its ratio to the
// no-profiler run of the same round.

const { spawnSync } = require('node:child_process');
const path = require('node:path');
const served = require('./served');

const { median, range, shuffle, serve, countedClient, startTracer, expressService } = served;

const MODES = {
  none: 'no profiler',
  als: 'bare AsyncLocalStorage.run()',
  inspector: 'bare inspector profiler',
  'inspector-als': 'inspector + bare run()',
  'selfprof-als': 'selfprof + bare run()',
  selfprof: 'selfprof, no labels',
  'selfprof-labels': 'selfprof with labels',
  datadog: '@datadog/pprof with contexts',
};
// The parent passes --baseline to the mode processes through the environment.
if (process.argv.includes('--baseline')) process.env.SELFPROF_BASELINE = path.resolve(arg('baseline'));
if (process.env.SELFPROF_BASELINE) {
  MODES['baseline-labels'] = `selfprof with labels (${path.basename(process.env.SELFPROF_BASELINE)})`;
}

function arg(name, fallback) {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? process.argv[i + 1] : fallback;
}
const WORKLOAD = arg('workload', 'http');
/** Requests before the measured window, while V8 compiles the hot code (--warmup seconds). */
const WARMUP_MS = Number(arg('warmup', 0.5)) * 1000;
if (!(WARMUP_MS >= 0 && WARMUP_MS <= 600_000)) throw new Error(`--warmup is 0 to 600 seconds, not ${arg('warmup')}`);
/** Workloads of a traced Express service, by tracer. */
const TRACED = { 'otel-express': 'otel', 'dd-express': 'dd-trace' };
if (!['http', 'inproc', ...Object.keys(TRACED)].includes(WORKLOAD)) throw new Error(`--workload is http, inproc, otel-express or dd-express, not ${WORKLOAD}`);
/** Modes run only when --modes names them: what a bare run() costs under each profiler. */
const FLOOR_MODES = ['inspector-als', 'selfprof-als'];
/** The modes a run measures: --modes, else every mode its workload has but the floor's. */
function modesOf() {
  const all = TRACED[WORKLOAD] ? TRACER_MODES.filter((m) => MODES[m]) : Object.keys(MODES);
  const byDefault = all.filter((m) => !FLOOR_MODES.includes(m));
  const modes = ['none', ...(arg('modes')?.split(',') ?? byDefault).filter((m) => m !== 'none')];
  for (const m of modes) if (!MODES[m] || !all.includes(m)) throw new Error(`unknown mode ${m} for ${WORKLOAD}: ${all.join(', ')}`);
  return modes;
}

// --- profiling modes ----------------------------------------------------------------

const ENDPOINTS = ['GET /users/:id', 'POST /orders', 'GET /search', 'GET /health'];

/** Starts `mode`; returns { label(i, endpoint, fn), stop() }. */
async function startMode(mode, intervalMs) {
  const { AsyncLocalStorage, createHook } = require('node:async_hooks');
  const selfprof = mode.startsWith('baseline') ? require(process.env.SELFPROF_BASELINE) : require('..');
  let label = (i, endpoint, fn) => fn();
  let stop = async () => {};
  if (mode === 'als' || mode.endsWith('-als')) {
    // What any labeling that rides AsyncLocalStorage pays per request, with no profiler
    // (or with one that does not read it: what the frame's changes cost a profiler).
    const als = new AsyncLocalStorage();
    label = (i, endpoint, fn) => als.run({ endpoint, span_id: spanId(i) }, fn);
  }
  if (mode === 'inspector' || mode === 'inspector-als') {
    stop = await served.startInspectorProfiler(intervalMs);
  } else if (mode === 'selfprof' || mode === 'selfprof-als' || mode === 'selfprof-labels' || mode === 'baseline-labels') {
    const profiler = new selfprof.Profiler({ sampleInterval: intervalMs, maxBufferSize: 1e6 });
    stop = () => profiler.stop();
    if (mode === 'selfprof-labels' || mode === 'baseline-labels') {
      label = (i, endpoint, fn) => selfprof.withLabels({ endpoint, span_id: spanId(i) }, fn);
    }
  } else if (mode === 'datadog') {
    const { time } = require('@datadog/pprof');
    const useCPED = Number(process.versions.node.split('.')[0]) >= 24;
    time.start({ intervalMicros: intervalMs * 1000, durationMillis: 3_600_000, withContexts: true, useCPED });
    stop = async () => time.stop();
    if (useCPED) {
      // Node ≥ 24: contexts ride AsyncContextFrame, no hook (as dd-trace does there).
      label = (i, endpoint, fn) => time.runWithContext({ endpoint, span_id: spanId(i) }, fn);
    } else {
      // Node < 24: set the context on every async switch, as dd-trace's hook does.
      const als = new AsyncLocalStorage();
      const hook = createHook({ before: () => time.setContext(als.getStore()) }).enable();
      stop = async () => {
        hook.disable();
        time.stop();
      };
      label = (i, endpoint, fn) =>
        als.run({ endpoint, span_id: spanId(i) }, () => {
          time.setContext(als.getStore());
          return fn();
        });
    }
  }
  return { label, stop };
}

// --- inproc workload: one process --------------------------------------------------

async function inproc(mode, seconds, intervalMs) {
  const { setImmediate: immediate } = require('node:timers/promises');
  function makeOrder(i) {
    return { id: i, items: Array.from({ length: 30 }, (_, k) => ({ sku: `sku-${(i + k) % 97}`, qty: (i * k) % 7 })) };
  }
  function score(order) {
    let s = 0;
    for (const it of order.items) s += Math.sqrt(it.qty + it.sku.length) * (it.qty % 3);
    return s;
  }
  function render(order) {
    return order.items.map((it) => `<li>${it.sku} x${it.qty}</li>`).join('');
  }
  async function handle(i) {
    const body = JSON.stringify(makeOrder(i));
    await immediate();
    const order = JSON.parse(body);
    await null;
    const s = score(order);
    await new Promise((resolve) => process.nextTick(resolve));
    const html = render(order);
    await Promise.resolve();
    return html.length + s;
  }

  const { label, stop } = await startMode(mode, intervalMs);
  let served = 0;
  let next = 0;
  let measuring = false;
  let running = true;
  async function worker() {
    while (running) {
      const i = next++;
      await label(i, ENDPOINTS[i % 4], () => handle(i));
      if (measuring) served++;
    }
  }
  const workers = Array.from({ length: 64 }, worker);
  await new Promise((r) => setTimeout(r, 500)); // warm-up
  measuring = true;
  const t0 = performance.now();
  const cpu0 = process.cpuUsage();
  await new Promise((r) => setTimeout(r, seconds * 1000));
  const cpu = process.cpuUsage(cpu0);
  const rps = served / ((performance.now() - t0) / 1000);
  const perCpuSecond = served / ((cpu.user + cpu.system) / 1e6);
  running = false;
  await Promise.all(workers);
  await stop();
  return { rps, perCpuSecond };
}

// --- http workload: server and client processes ------------------------------------

async function server(mode, intervalMs) {
  const http = require('node:http');
  const { setImmediate: immediate } = require('node:timers/promises');
  const { label, stop } = await startMode(mode, intervalMs);
  const users = Array.from({ length: 500 }, (_, i) => ({ id: i, name: `user-${i}`, email: `u${i}@example.test`, tags: ['a', 'b', 'c'] }));
  const routes = {
    'GET /users/:id': async (req, id) => {
      await immediate(); // the "database"
      return users[id % users.length];
    },
    'POST /orders': async (req) => {
      let body = '';
      for await (const chunk of req) body += chunk;
      const order = JSON.parse(body);
      await immediate();
      return { ok: true, total: order.items.reduce((s, it) => s + it.qty * it.price, 0) };
    },
    'GET /search': async (req, q) => {
      await immediate();
      return users.filter((u) => u.name.includes(String(q % 10))).slice(0, 20);
    },
    'GET /health': async () => ({ status: 'ok', uptime: process.uptime() }),
  };
  let requests = 0;
  const exitAfter = Number(arg('exit-after', 0));
  let finished = 0;
  const srv = http.createServer((req, res) => {
    // Exit once `exitAfter` responses are out (the last to arrive may not finish last).
    if (exitAfter) res.on('finish', () => ++finished === exitAfter && stop().then(exitCounted));
    const [, first, arg] = req.url.split('/');
    const endpoint = req.method === 'POST' ? 'POST /orders' : first === 'users' ? 'GET /users/:id' : first === 'search' ? 'GET /search' : 'GET /health';
    const i = requests++;
    label(i, endpoint, async () => {
      const result = await routes[endpoint](req, Number(arg) || 0);
      const body = JSON.stringify(result);
      res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) });
      res.end(body);
    }).catch((err) => {
      res.statusCode = 500;
      res.end(String(err));
    });
  });
  serve(srv, () => requests, stop);
}

// Express under a tracer, as a traced service runs: the labels come from selfprof's
// integration with the tracer, not from a call per request. No profiler, selfprof without
// the integration, and selfprof with it (or the baseline's).
// - otel-express: OpenTelemetry's HTTP and Express instrumentations, spans batched to an
//   exporter that drops them; selfprof's span processor;
// - dd-express: dd-trace with its own plugins, sending traces to a closed port (no agent);
//   selfprof's ddTraceIntegration().
const TRACER_MODES = ['none', 'inspector', 'selfprof', 'selfprof-labels', 'baseline-labels'];
async function tracedServer(mode, intervalMs) {
  if (!TRACER_MODES.includes(mode)) throw new Error(`the ${WORKLOAD} workload has modes ${TRACER_MODES.join(', ')}, not ${mode}`);
  const selfprof = mode.startsWith('baseline') ? require(process.env.SELFPROF_BASELINE) : require('..');
  const labeled = mode !== 'none' && mode !== 'selfprof';
  if (TRACED[WORKLOAD] === 'dd-trace') {
    startTracer('dd-trace');
    if (labeled) selfprof.ddTraceIntegration();
  } else {
    startTracer('otel', { spanProcessors: labeled ? [selfprof.openTelemetrySpanProcessor()] : [] });
  }
  let stop = async () => {};
  if (mode === 'inspector') {
    // The limit: V8's profiler through the inspector, at the same interval.
    stop = await served.startInspectorProfiler(intervalMs);
  } else if (mode !== 'none') {
    const profiler = new selfprof.Profiler({ sampleInterval: intervalMs, maxBufferSize: 1e6 });
    stop = () => profiler.stop();
  }
  let requests = 0;
  const exitAfter = Number(arg('exit-after', 0));
  let finished = 0;
  const srv = expressService((req, res) => {
    requests++;
    if (exitAfter) res.on('finish', () => ++finished === exitAfter && stop().then(exitCounted));
  });
  serve(srv, () => requests, stop);
}

/** A counted server's end (--exit-after): under --allocations (--expose-gc), a last
 * collection first, so that --trace-gc-nvp counts what was allocated since the one before. */
function exitCounted() {
  globalThis.gc?.();
  process.exit(0);
}

/** One mode's server alone on the server core (`runTogether` with one mode). */
async function runHttp(node, mode, seconds, interval) {
  return (await runTogether(node, [mode], seconds, interval))[mode];
}

/** --together: every mode's server at once on the server core, one client keeping each
 * busy (served.js). */
function runTogether(node, modes, seconds, interval) {
  return served.runTogether({ node, script: __filename, modes, serverArgs: ['--workload', WORKLOAD, '--interval', String(interval)], seconds, warmupMs: WARMUP_MS });
}

function runInproc(node, mode, seconds, interval) {
  const run = spawnSync(node, [__filename, '--inproc', mode, '--seconds', String(seconds), '--interval', String(interval)], {
    cwd: path.join(__dirname, '..'),
    encoding: 'utf8',
  });
  if (run.status !== 0) throw new Error(`${mode} failed:\n${run.stderr}`);
  return JSON.parse(run.stdout.trim().split('\n').pop());
}

function spanId(i) {
  return (0x1000_0000n + BigInt(i)).toString(16).padStart(16, '0');
}

// --- parent: orchestrate -------------------------------------------------------------

// V8's collector and compiler on the main thread, in the same order every run: counts of
// one mode that moved by thousands of instructions a request between runs repeat closely.
// `--threads` keeps V8's helper threads (the service's real shape; noisier counts).
const singleThreaded = !process.argv.includes('--threads');

/** The sampling interval under callgrind (--count-interval ms, 1000 by default). */
const COUNT_INTERVAL = Number(arg('count-interval', 1000));
if (!(COUNT_INTERVAL >= 1 && COUNT_INTERVAL <= 60_000)) throw new Error(`--count-interval is 1 to 60000 ms, not ${arg('count-interval')}`);

const predictable = process.argv.includes('--predictable');
const byThread = process.argv.includes('--by-thread');
if (byThread && singleThreaded) throw new Error('--by-thread counts V8\'s helper threads: give --threads too');
if (predictable && (byThread || !singleThreaded)) throw new Error('--predictable runs V8 on the main thread: no --threads or --by-thread');

const cacheSim = process.argv.includes('--cache-sim');
if (cacheSim && !byThread) throw new Error('--cache-sim goes with --threads --by-thread');

/** Each thread's counts in callgrind's per-thread files under `dir` (`<out>-NN`), by thread
 * number: `{ Ir, I1mr, ... }` (instructions, and with --cache-sim the simulated misses). */
function threadCounts(dir) {
  const fs = require('node:fs');
  const out = {};
  for (const f of fs.readdirSync(dir)) {
    const text = fs.readFileSync(path.join(dir, f), 'utf8');
    const thread = /^thread: (\d+)/m.exec(text)?.[1];
    const events = /^events: (.+)$/m.exec(text)?.[1].trim().split(/\s+/);
    const totals = /^(?:totals|summary): (.+)$/m.exec(text)?.[1].trim().split(/\s+/).map(Number);
    if (thread === undefined || events === undefined || totals === undefined) continue;
    out[thread] ??= {};
    events.forEach((event, i) => (out[thread][event] = (out[thread][event] ?? 0) + (totals[i] ?? 0)));
  }
  return out;
}

/** Where an instruction of the main thread was spent, by its function's name: V8's
 * collector, its compiler, or the rest (--predictable). */
function partOf(name) {
  if (/compiler::|maglev|turboshaft/i.test(name)) return 'compiler';
  if (/Mark|Scaveng|Sweep|Heap::|heap::|Evacuat|GC|Remembered|Slot/.test(name)) return 'collector';
  return 'rest';
}

/** The main thread's instructions by part (`partOf`), from callgrind's per-thread file
 * `file`: each function's own cost (its lines), not its callees' (`calls=` lines). */
function mainThreadParts(file) {
  const fs = require('node:fs');
  const names = new Map();
  const parts = { collector: 0, compiler: 0, rest: 0 };
  let part = 'rest';
  let callCost = false;
  for (const line of fs.readFileSync(file, 'utf8').split('\n')) {
    const fn = /^(c?)fn=\((\d+)\)(?: (.*))?$/.exec(line);
    if (fn) {
      if (fn[3] !== undefined) names.set(fn[2], fn[3]);
      if (fn[1] === '') part = partOf(names.get(fn[2]) ?? '');
      continue;
    }
    if (line.startsWith('calls=')) {
      callCost = true;
      continue;
    }
    if (!/^[\d+*-]/.test(line)) continue;
    if (callCost) {
      callCost = false;
      continue;
    }
    const cost = Number(line.trim().split(/\s+/).pop());
    if (Number.isFinite(cost)) parts[part] += cost;
  }
  return parts;
}

/** The server's instructions for its requests `from`..`to` alone, under callgrind (with
 * --by-thread, by thread; with --predictable, the main thread's by part). Callgrind runs
 * with its instrumentation off (`--instr-atstart=no`) through start-up and the first
 * `from` requests, at a fraction of its cost, and `callgrind_control` turns it on for the
 * rest: a warmed window is counted in one process, with nothing of start-up in it. */
function serverInstructions(node, mode, from, to) {
  const { spawn } = require('node:child_process');
  const fs = require('node:fs');
  const perThread = byThread || predictable;
  const dir = perThread ? fs.mkdtempSync(path.join(require('node:os').tmpdir(), 'selfprof-callgrind-')) : null;
  const outFile = perThread ? ['--separate-threads=yes', ...(cacheSim ? ['--cache-sim=yes'] : []), `--callgrind-out-file=${path.join(dir, 'cg')}`] : ['--callgrind-out-file=/dev/null'];
  const v8Flags = predictable ? ['--predictable', '--predictable-gc-schedule'] : singleThreaded ? ['--single-threaded'] : [];
  return new Promise((resolve, reject) => {
    const args = ['--tool=callgrind', '--instr-atstart=no', ...outFile, node, ...v8Flags, __filename, '--server', mode, '--workload', WORKLOAD, '--interval', String(COUNT_INTERVAL), '--exit-after', String(to)];
    const srv = spawn('valgrind', args, { cwd: path.join(__dirname, '..'), stdio: ['ignore', 'pipe', 'pipe', 'ipc'] });
    let err = '';
    let counting = false;
    srv.stderr.on('data', (d) => (err += d));
    srv.on('error', reject);
    const client = (port, count) =>
      new Promise((done, failed) => {
        const cl = spawn(node, [__filename, '--counted-client', String(port), '--count', String(count)], { stdio: 'inherit' });
        cl.on('error', failed);
        cl.on('exit', (code) => (code === 0 ? done() : failed(new Error(`client failed (${code})`))));
      });
    srv.stdout.once('data', async (data) => {
      const port = Number(String(data).trim());
      try {
        await client(port, from);
        const on = spawnSync('callgrind_control', ['--instr=on', String(srv.pid)], { encoding: 'utf8' });
        if (on.status !== 0 || !/OK/.test(on.stdout)) throw new Error(`callgrind_control could not turn counting on: ${(on.stderr || on.stdout || on.error?.message || '').trim()}`);
        counting = true;
        await client(port, to - from);
      } catch (e) {
        srv.kill();
        reject(e);
      }
    });
    srv.on('exit', (code, signal) => {
      // A server that failed (a mode that cannot start) counted nothing of its requests.
      if (code !== 0 || !counting) {
        if (dir !== null) fs.rmSync(dir, { recursive: true, force: true });
        const said = err.split('\n').filter((line) => !line.startsWith('=='));
        return reject(new Error(`the ${mode} server exited with ${code ?? signal}${counting ? '' : ' before its window'}:\n${said.join('\n').slice(-1000)}`));
      }
      const m = /Collected : (\d+)/.exec(err);
      const threads = m && byThread ? threadCounts(dir) : null;
      const main = m && predictable ? fs.readdirSync(dir).find((f) => f.endsWith('-01')) : undefined;
      const parts = main === undefined ? null : mainThreadParts(path.join(dir, main));
      if (dir !== null) fs.rmSync(dir, { recursive: true, force: true });
      if (!m) reject(new Error(`no count from callgrind:\n${err.slice(-1000)}`));
      else if (predictable && parts === null) reject(new Error('no main thread file from callgrind'));
      else resolve(predictable ? parts : byThread ? threads : Number(m[1]));
    });
  });
}

async function instructions() {
  const node = arg('node', process.execPath);
  const [n1, n2] = requestsArg('30000,36000');
  const modes = modesOf();
  const version = spawnSync(node, ['--version'], { encoding: 'utf8' }).stdout.trim();
  console.log(`${WORKLOAD} server instructions per request (callgrind, requests ${n1} to ${n2} counted, sampling every ${COUNT_INTERVAL} ms): node ${version}`);
  if (predictable) return predictableInstructions(node, modes, n1, n2);
  const per = {};
  for (const mode of modes) {
    const counted = await serverInstructions(node, mode, n1, n2);
    if (byThread) {
      // Thread 1 is the main thread; the rest are V8's helpers (collector, compiler), the
      // profiler's and libuv's.
      const perThread = (t, event) => (counted[t]?.[event] ?? 0) / (n2 - n1);
      const threads = Object.keys(counted);
      const side = (event, main) => threads.filter((t) => (t === '1') === main).reduce((sum, t) => sum + perThread(t, event), 0);
      const both = (events, main) => events.reduce((sum, e) => sum + side(e, main), 0);
      const misses = (main) =>
        cacheSim ? `, misses: I1 ${both(['I1mr'], main).toFixed(0)}, D1 ${both(['D1mr', 'D1mw'], main).toFixed(0)}, LL ${both(['ILmr', 'DLmr', 'DLmw'], main).toFixed(0)}` : '';
      per[mode] = side('Ir', true) + side('Ir', false);
      console.log(`${MODES[mode].padEnd(30)} main thread ${side('Ir', true).toFixed(0).padStart(9)}${misses(true)}; other threads ${side('Ir', false).toFixed(0).padStart(9)}${misses(false)}`);
      continue;
    }
    per[mode] = counted / (n2 - n1);
    console.log(`${MODES[mode].padEnd(30)}${per[mode].toFixed(0).padStart(10)}  ${(per.none / per[mode]).toFixed(3)}× no profiler (requests per instruction)`);
  }
  if (per['selfprof-labels'] && per.selfprof) {
    console.log(`selfprof with labels: ${(per.selfprof / per['selfprof-labels']).toFixed(3)}× selfprof without labels`);
  }
}

/** --requests N1,N2 (`fallback` if not given), checked: whole numbers with 0 < N1 < N2. */
function requestsArg(fallback) {
  const [n1, n2] = arg('requests', fallback).split(',').map(Number);
  if (!(Number.isInteger(n1) && Number.isInteger(n2) && n1 > 0 && n2 > n1)) throw new Error(`--requests is N1,N2 with 0 < N1 < N2, not ${arg('requests')}`);
  return [n1, n2];
}

/** --rounds (`fallback` if not given), checked: a whole number from 1 to `max`. */
function roundsArg(fallback, max) {
  const rounds = Number(arg('rounds', fallback));
  if (!(Number.isInteger(rounds) && rounds >= 1 && rounds <= max)) throw new Error(`--rounds is 1 to ${max}, not ${arg('rounds')}`);
  return rounds;
}

/** --predictable: each mode's main-thread instructions a request by part, --rounds times
 * in turn (both counts of a mode side by side), as medians [min, max]; and the rest and
 * the whole with labels against without (selfprof's modes, where both are measured). */
async function predictableInstructions(node, modes, n1, n2) {
  const rounds = roundsArg(1, 20);
  const runs = Object.fromEntries(modes.map((m) => [m, []]));
  for (let round = 0; round < rounds; round++) {
    for (const mode of modes) {
      const counted = await serverInstructions(node, mode, n1, n2);
      const per = (part) => counted[part] / (n2 - n1);
      runs[mode].push({ all: per('collector') + per('compiler') + per('rest'), collector: per('collector'), compiler: per('compiler'), rest: per('rest') });
    }
  }
  console.log(`main thread, a request (median [min, max] of ${rounds} rounds): all, V8's collector, its compiler, the rest`);
  for (const mode of modes) {
    const r = runs[mode];
    console.log(`${MODES[mode].padEnd(30)} ${['all', 'collector', 'compiler', 'rest'].map((k) => range(r.map((x) => x[k]), 0)).join('   ')}`);
  }
  const ratio = (top, bottom, part) => `${(median(runs[bottom].map((x) => x[part])) / median(runs[top].map((x) => x[part]))).toFixed(3)}`;
  for (const labeled of ['selfprof-labels', 'baseline-labels']) {
    if (runs[labeled] && runs.selfprof) console.log(`${MODES[labeled]} ÷ without labels (requests per instruction): the rest ${ratio(labeled, 'selfprof', 'rest')}, all ${ratio(labeled, 'selfprof', 'all')}`);
  }
  if (runs.inspector && runs.selfprof) console.log(`${MODES.selfprof} ÷ the bare inspector profiler (requests per instruction): the rest ${ratio('selfprof', 'inspector', 'rest')}, all ${ratio('selfprof', 'inspector', 'all')}`);
}

/** What the server allocates and promotes over `count` requests (V8's --trace-gc-nvp). */
function serverAllocations(node, mode, count, interval) {
  const { spawn } = require('node:child_process');
  return new Promise((resolve, reject) => {
    const srv = spawn(node, ['--trace-gc-nvp', '--expose-gc', __filename, '--server', mode, '--workload', WORKLOAD, '--interval', String(interval), '--exit-after', String(count)], {
      cwd: path.join(__dirname, '..'),
      stdio: ['ignore', 'pipe', 'inherit', 'ipc'],
    });
    const sums = { allocated: 0, promoted: 0, pause: 0 };
    let pending = '';
    let started = false;
    srv.stdout.on('data', (chunk) => {
      const lines = (pending + chunk).split('\n');
      pending = lines.pop();
      for (const line of lines) {
        if (!started && /^\d+$/.test(line)) {
          started = true;
          const cl = spawn(node, [__filename, '--counted-client', line, '--count', String(count)], { stdio: 'inherit' });
          cl.on('exit', (code) => code !== 0 && reject(new Error(`client failed (${code})`)));
          continue;
        }
        const allocated = /\ballocated=(\d+)/.exec(line);
        if (allocated === null) continue;
        sums.allocated += Number(allocated[1]);
        sums.promoted += Number(/\bpromoted=(\d+)/.exec(line)?.[1] ?? 0);
        sums.pause += Number(/\bpause=([\d.]+)/.exec(line)?.[1] ?? 0);
      }
    });
    srv.on('error', reject);
    srv.on('exit', (code) => (code === 0 && started ? resolve(sums) : reject(new Error(`server exited with ${code}`))));
  });
}

async function allocations() {
  const node = arg('node', process.execPath);
  const [n1, n2] = requestsArg('2000,12000');
  const rounds = roundsArg(3, 100);
  const interval = Number(arg('interval', 10));
  if (!(interval >= 1 && interval <= 60_000)) throw new Error(`--interval is 1 to 60000 ms, not ${arg('interval')}`);
  const modes = modesOf();
  const version = spawnSync(node, ['--version'], { encoding: 'utf8' }).stdout.trim();
  console.log(`${WORKLOAD} server allocations per request (--trace-gc-nvp, ${n1} and ${n2} requests, sampling every ${interval} ms, ${rounds} rounds): node ${version}`);
  const per = Object.fromEntries(modes.map((m) => [m, { allocated: [], promoted: [], pauseUs: [] }]));
  for (let round = 0; round < rounds; round++) {
    for (const mode of modes) {
      const a = await serverAllocations(node, mode, n1, interval);
      const b = await serverAllocations(node, mode, n2, interval);
      per[mode].allocated.push((b.allocated - a.allocated) / (n2 - n1));
      per[mode].promoted.push((b.promoted - a.promoted) / (n2 - n1));
      per[mode].pauseUs.push(((b.pause - a.pause) * 1000) / (n2 - n1));
    }
  }
  // The main thread's GC pauses (V8's pause=, scavenges and the mark-compact's atomic part).
  console.log(`${'a request, median [min, max]'.padEnd(36)}${'bytes allocated'.padStart(24)}${'bytes promoted'.padStart(24)}${'GC pause µs'.padStart(24)}`);
  for (const mode of modes) {
    console.log(`${MODES[mode].padEnd(36)}${range(per[mode].allocated, 0).padStart(24)}${range(per[mode].promoted, 0).padStart(24)}${range(per[mode].pauseUs, 2).padStart(24)}`);
  }
}

async function parent() {
  const workload = WORKLOAD;
  const seconds = Number(arg('seconds', 3));
  const rounds = Number(arg('rounds', 5));
  const interval = Number(arg('interval', 10));
  const node = arg('node', process.execPath);
  const version = spawnSync(node, ['--version'], { encoding: 'utf8' }).stdout.trim();
  const together = process.argv.includes('--together');
  if (together && workload === 'inproc') throw new Error('--together is for the http and traced workloads');
  const run = workload === 'inproc' ? runInproc : runHttp;
  const how = together ? 'all modes at once on one core' : 'per mode';
  console.log(`labels overhead (${workload}): node ${version}, ${interval} ms interval, ${rounds} rounds × ${seconds} s ${how}`);
  const modes = modesOf();
  const results = Object.fromEntries(modes.map((m) => [m, { rps: [], ratio: [], cpuRatio: [], samples: [], mainShare: [], perRequest: [] }]));
  const perRound = [];
  for (let round = 0; round < rounds; round++) {
    let got = {};
    if (together) got = await runTogether(node, shuffle(modes), seconds, interval);
    else for (const mode of shuffle(modes)) got[mode] = await run(node, mode, seconds, interval);
    perRound.push(got);
    for (const mode of modes) {
      results[mode].rps.push(got[mode].rps);
      results[mode].ratio.push(got[mode].rps / got.none.rps);
      results[mode].cpuRatio.push(got[mode].perCpuSecond / got.none.perCpuSecond);
      if (got[mode].samplesPerCpuSecond !== undefined) results[mode].samples.push(got[mode].samplesPerCpuSecond);
      if (got[mode].mainShare !== undefined) results[mode].mainShare.push(got[mode].mainShare);
      if (got[mode].perRequest !== undefined) results[mode].perRequest.push(got[mode].perRequest);
    }
    process.stderr.write(`round ${round + 1}/${rounds} done\n`);
  }
  console.log('\nmode                          req/s (median)  req/s × none [min, max]   req per CPU-s × none [min, max]');
  for (const mode of modes) {
    const [title, r] = [MODES[mode], results[mode]];
    console.log(`${title.padEnd(30)}${median(r.rps).toFixed(0).padStart(14)}  ${range(r.ratio).padEnd(26)}${range(r.cpuRatio)}`);
  }
  // Sharing a core, a server gets a share of it, and a profiler's wall-clock interval lands
  // more often per CPU-second than alone.
  for (const mode of modes) {
    const { samples, mainShare } = results[mode];
    const main = mainShare.length ? `, ${(median(mainShare) * 100).toFixed(1)}% of its CPU on the main thread` : '';
    if (samples.length || main) console.log(`${MODES[mode]}: ${samples.length ? median(samples).toFixed(0) : '-'} samples per CPU-second${main}`);
  }
  const parts = ['mainUser', 'mainSystem', 'otherUser', 'otherSystem'];
  if (modes.every((mode) => results[mode].perRequest.length === rounds)) {
    console.log('\nCPU µs a request, medians: main thread user, system; other threads user, system');
    for (const mode of modes) {
      const cols = parts.map((k) => median(results[mode].perRequest.map((p) => p[k])).toFixed(1).padStart(8));
      console.log(`${MODES[mode].padEnd(30)}${cols.join('')}`);
    }
  }
  // Paired within each round (the machine's load shifts between rounds more than between
  // modes of one round): one mode's requests per CPU-second ÷ another's, median [min, max].
  const paired = (mode, other, name = `${MODES[mode]} ÷ ${MODES[other]}`) => {
    if (!results[mode] || !results[other]) return;
    const ratios = perRound.map((got) => got[mode].perCpuSecond / got[other].perCpuSecond);
    console.log(`${name}, per round (CPU efficiency): ${range(ratios)}`);
  };
  // What a bare run() per request costs under each profiler: the floor of any labeling
  // that rides AsyncLocalStorage there.
  paired('inspector-als', 'inspector');
  paired('selfprof-als', 'selfprof');
  if (!results['selfprof-labels']) {
    paired('baseline-labels', 'selfprof-als');
    return;
  }
  const summary = (key) => {
    const labels = median(results['selfprof-labels'][key]);
    const vs = (other, name) => (results[other] ? `, ${(labels / median(results[other][key])).toFixed(3)}× ${name}` : '');
    return `${labels.toFixed(3)}× no profiler${vs('datadog', '@datadog/pprof with contexts')}${vs('baseline-labels', 'the baseline')}`;
  };
  console.log(`\nselfprof with labels, throughput:     ${summary('ratio')}`);
  console.log(`selfprof with labels, CPU efficiency: ${summary('cpuRatio')}`);
  for (const [other, name] of [['selfprof', 'selfprof without labels'], ['selfprof-als', 'selfprof without labels, a bare run() a request'], ['datadog', '@datadog/pprof with contexts'], ['baseline-labels', 'the baseline']]) {
    paired('selfprof-labels', other, `selfprof with labels ÷ ${name}`);
  }
  console.log('(targets: ≥ 0.97× selfprof without labels and ≥ 1.05× @datadog/pprof, CPU efficiency)');
}

const out = (result) => process.stdout.write(JSON.stringify(typeof result === 'number' ? { rps: result } : result) + '\n');
const fail = (err) => {
  console.error(err);
  process.exit(1);
};
if (process.argv.includes('--inproc')) {
  inproc(arg('inproc'), Number(arg('seconds')), Number(arg('interval'))).then(out, fail);
} else if (process.argv.includes('--server')) {
  (TRACED[WORKLOAD] ? tracedServer : server)(arg('server'), Number(arg('interval'))).catch(fail);
} else if (process.argv.includes('--counted-client')) {
  countedClient(Number(arg('counted-client')), Number(arg('count'))).then(() => process.exit(0), fail);
} else if (process.argv.includes('--instructions')) {
  instructions().catch(fail);
} else if (process.argv.includes('--allocations')) {
  allocations().catch(fail);
} else {
  parent().catch(fail);
}
