'use strict';
// What the served benchmarks share (labels-overhead.js, traced-service.js): servers that
// print their port and answer the parent's 'mark' and 'stop'; one client process keeping
// every server busy at once; the traced Express service and its tracers; medians and
// ranges. Run as a script it is the client: `node served.js --client PORTS --seconds S
// --warmup W`.

const path = require('node:path');
const { spawnSync } = require('node:child_process');

const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[s.length >> 1] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};

/** `median [min, max]` of `xs`, to `digits` decimals (3 by default). */
const range = (xs, digits = 3) => `${median(xs).toFixed(digits)} [${Math.min(...xs).toFixed(digits)}, ${Math.max(...xs).toFixed(digits)}]`;

function shuffle(list) {
  const a = [...list];
  for (let i = a.length - 1; i > 0; i--) {
    const j = Math.floor(Math.random() * (i + 1));
    [a[i], a[j]] = [a[j], a[i]];
  }
  return a;
}

// With two or more cores, the server and the client each get a core of their own (when
// taskset is there), so that neither's scheduling noise lands on the other.
const pinned = (cpu, argv) =>
  require('node:os').availableParallelism() >= 2 && spawnSync('taskset', ['-c', '0', 'true']).status === 0
    ? ['taskset', ['-c', String(cpu), ...argv]]
    : [argv[0], argv.slice(1)];

/** The CPU time (ns) each of this process's threads has run, summed by thread name
 * (Linux: /proc/self/task/<tid>/schedstat, ns-exact where /proc/<pid>/stat counts 10 ms
 * ticks); undefined elsewhere. A thread that ended since is not counted. */
function threadsByName() {
  const fs = require('node:fs');
  let tasks;
  try {
    tasks = fs.readdirSync('/proc/self/task');
  } catch {
    return undefined;
  }
  const out = {};
  for (const tid of tasks) {
    try {
      const ns = Number(fs.readFileSync(`/proc/self/task/${tid}/schedstat`, 'utf8').split(' ')[0]);
      // A pool's threads (`V8Worker`, numbered on some Nodes) are one name.
      const name = fs.readFileSync(`/proc/self/task/${tid}/comm`, 'utf8').trim().replace(/\d+$/, '');
      out[name] = (out[name] ?? 0) + ns;
    } catch {
      // ended as it was read
    }
  }
  return out;
}

/**
 * Listens on loopback, prints the port, and answers the parent's 'mark', 'read' and 'stop':
 * at 'read' and 'stop', the requests served since 'mark' per CPU-second, a request's CPU by
 * thread, `info()` (what the mode says of itself) and, where `signals()` counts the
 * profiler's signals, how many a request had; at 'stop', also how often the mode's profiler
 * sampled, and the server exits. `stop()` ends the mode's profiler (its result may be a
 * trace).
 */
function serve(srv, served, stop, info = () => undefined, signals = () => undefined) {
  srv.keepAliveTimeout = 60_000;
  srv.listen(0, '127.0.0.1', () => process.stdout.write(`${srv.address().port}\n`));
  let mark = null;
  /** What was served since 'mark'. */
  const measure = () => {
    const cpu = process.cpuUsage(mark.cpu);
    const main = process.threadCpuUsage?.(mark.main);
    const count = served() - mark.requests;
    // The profiler's signals a request in the window (selfprof's modes): what a request
    // pays per sample is this many times a sample's cost.
    const signalsPerRequest = mark.signals === undefined ? undefined : (signals() - mark.signals) / count;
    // The main thread's share: the rest is V8's and libuv's threads (profiler, collector).
    const mainShare = main ? (main.user + main.system) / (cpu.user + cpu.system) : undefined;
    // A request's CPU in µs, where it went: the main thread's user and system time, the
    // other threads' (a ratio says how much; this says on which side it is).
    const us = (t) => t / count;
    const perRequest = main
      ? { mainUser: us(main.user), mainSystem: us(main.system), otherUser: us(cpu.user - main.user), otherSystem: us(cpu.system - main.system) }
      : undefined;
    // The share of the window the server's threads were on a core: a server short of
    // requests (its client not keeping up) spends more a request, in more wake-ups.
    const busy = (cpu.user + cpu.system) / 1e3 / (performance.now() - mark.at);
    // Each thread name's CPU µs a request: on which thread a difference between modes is.
    const now = threadsByName();
    const byThread = now && Object.fromEntries(Object.entries(now).map(([name, ns]) => [name, (ns - (mark.threads?.[name] ?? 0)) / 1e3 / count]));
    return { perCpuSecond: count / ((cpu.user + cpu.system) / 1e6), signalsPerRequest, mainShare, perRequest, byThread, busy, info: info() };
  };
  process.on('message', async (msg) => {
    if (msg === 'mark') {
      // The threads' /proc files read first: that reading is not in the window's CPU.
      const threads = threadsByName();
      mark = { requests: served(), cpu: process.cpuUsage(), main: process.threadCpuUsage?.(), signals: signals(), threads, at: performance.now() };
    } else if (msg === 'read') {
      process.send(measure());
    } else if (msg === 'served') {
      process.send({ served: served() });
    } else if (msg === 'stop') {
      const got = measure();
      const all = process.cpuUsage();
      const trace = await stop();
      // Samples over the whole recording's CPU: how often the mode's profiler sampled.
      const samples = Array.isArray(trace?.samples) ? trace.samples.length / ((all.user + all.system) / 1e6) : undefined;
      process.send({ ...got, samplesPerCpuSecond: samples }, () => {
        srv.close();
        process.exit(0);
      });
    }
  });
}

/**
 * A switch for the labels' work in this server (OpenTelemetry): `set(on, { frame })` takes
 * selfprof's span processor out of `provider`'s list or puts it back, and with `frame` the
 * handler's frame read off or on with it. Their set-up stays (processor-toggled.js,
 * traced-service.js's service-labels-off).
 */
function labelsSwitch(provider) {
  const { PROCESSOR } = require('../lib/integrations/otel');
  const list = provider._activeSpanProcessor._spanProcessors;
  const ours = list.find((p) => p?.[PROCESSOR]);
  if (ours === undefined) throw new Error("selfprof's span processor is not in the provider's list");
  return (on, { frame = false } = {}) => {
    const at = list.indexOf(ours);
    if (on && at < 0) list.unshift(ours);
    if (!on && at >= 0) list.splice(at, 1);
    if (frame) require('../lib/native').native.frameEnable(on);
  };
}

/**
 * V8's bare profiler through the inspector, sampling every `intervalMs` (the limit a
 * profiler is held to); returns `stop()`, which resolves to the inspector's CPU profile.
 */
async function startInspectorProfiler(intervalMs) {
  const inspector = require('node:inspector');
  const session = new inspector.Session();
  session.connect();
  const post = (m, p) => new Promise((res, rej) => session.post(m, p, (e, r) => (e ? rej(e) : res(r))));
  await post('Profiler.enable');
  await post('Profiler.setSamplingInterval', { interval: Math.round(intervalMs * 1000) });
  await post('Profiler.start');
  return async () => (await post('Profiler.stop')).profile;
}

const ORDER = JSON.stringify({ items: Array.from({ length: 10 }, (_, k) => ({ sku: `s${k}`, qty: k, price: 3 })) });
const PATHS = [['GET', '/users/'], ['POST', '/orders'], ['GET', '/search/'], ['GET', '/health']];

/** Sends exactly `count` requests (8 at a time) to the server, then exits. */
async function countedClient(port, count) {
  const http = require('node:http');
  const agent = new http.Agent({ keepAlive: true, maxSockets: 8 });
  let next = 0;
  const one = (i) =>
    new Promise((resolve, reject) => {
      const [method, p] = PATHS[i % 4];
      const req = http.request({ host: '127.0.0.1', port, method, path: p.endsWith('/') ? p + i : p, agent }, (res) => {
        res.resume();
        res.on('end', resolve);
      });
      req.on('error', reject);
      req.end(method === 'POST' ? ORDER : undefined);
    });
  await Promise.all(Array.from({ length: 8 }, async () => {
    while (next < count) await one(next++);
  }));
  agent.destroy();
}

/** Keeps 32 requests in flight to each of `ports` (one server per mode, or one) for
 * `seconds` after `warmupMs`; returns each server's requests per second. */
async function client(ports, seconds, warmupMs) {
  const http = require('node:http');
  const done = ports.map(() => 0);
  let failed = 0;
  let measuring = false;
  let running = true;
  const agents = ports.map(() => new http.Agent({ keepAlive: true, maxSockets: 32 }));
  function one(s, i) {
    const [method, p] = PATHS[i % 4];
    return new Promise((resolve) => {
      const req = http.request({ host: '127.0.0.1', port: ports[s], method, path: p.endsWith('/') ? p + i : p, agent: agents[s] }, (res) => {
        res.resume();
        res.on('end', () => {
          if (res.statusCode !== 200) failed++;
          else if (measuring) done[s]++;
          resolve();
        });
      });
      req.on('error', () => {
        failed++;
        resolve();
      });
      if (method === 'POST') req.end(ORDER);
      else req.end();
    });
  }
  let n = 0;
  const loops = ports.flatMap((_, s) =>
    Array.from({ length: 32 }, async () => {
      while (running) await one(s, n++);
    }),
  );
  await new Promise((r) => setTimeout(r, warmupMs));
  measuring = true;
  const t0 = performance.now();
  await new Promise((r) => setTimeout(r, seconds * 1000));
  const rps = done.map((d) => d / ((performance.now() - t0) / 1000));
  running = false;
  await Promise.all(loops);
  agents.forEach((agent) => agent.destroy());
  if (failed) throw new Error(`${failed} requests failed`);
  return { rps };
}

/**
 * One server per mode (`node script --server MODE ...serverArgs`), all at once on the
 * server core. Together (the default), one client keeps each busy at once: the machine's
 * drift between and within rounds falls on every mode alike, but the servers share the
 * core's caches and each gets its profiler's signals for a fraction of the core. In turn
 * (`inTurn`), every server is warmed at once, then each is driven alone for `seconds`, in
 * the order of `modes`, the others idle: a server has the core, its caches and its
 * signals' rate to itself, as in a service. Returns `{ mode: { rps, perCpuSecond,
 * samplesPerCpuSecond, mainShare, perRequest } }`. With `warmupRequests`, the warm-up
 * lasts until every server has served that many requests (driven WARMUP_STEP_S at a time,
 * at most WARMUP_LIMIT_S) instead of `warmupMs`: a server sharing the core with many
 * others gets a few seconds of CPU in a timed warm-up, and V8 may still be compiling it.
 * A server that ends early fails the run, naming its mode; on any failure no server or
 * client is left running.
 */
async function runTogether({ node, script, modes, serverArgs, seconds, warmupMs, warmupRequests = 0, env, inTurn = false }) {
  const { spawn } = require('node:child_process');
  const servers = modes.map((mode) =>
    spawn(...pinned(1, [node, script, '--server', mode, ...serverArgs]), {
      cwd: path.join(__dirname, '..'),
      stdio: ['ignore', 'pipe', 'inherit', 'ipc'],
      env: { ...process.env, ...env },
    }),
  );
  // Its reply, sent just before it exits, still wins over its exit.
  const ended = servers.map(
    (srv, i) =>
      new Promise((resolve, reject) => {
        srv.on('error', reject);
        srv.once('exit', (code, signal) => setTimeout(() => reject(new Error(`the ${modes[i]} server ended (${signal ?? `exit code ${code}`})`)), 1000).unref());
      }),
  );
  ended.forEach((p) => p.catch(() => {}));
  /** Server i's reply to `msg`. */
  const ask = (i, msg) => {
    const reply = new Promise((resolve) => servers[i].once('message', resolve));
    servers[i].send(msg);
    return Promise.race([reply, ended[i]]);
  };
  const clients = [];
  /** A client keeping the servers `which` busy for `secs` after `warmMs`, the servers marked
   * as it starts measuring; their requests per second. */
  const drive = async (ports, which, secs, warmMs) => {
    const cl = spawn(...pinned(0, [node, __filename, '--client', which.map((i) => ports[i]).join(','), '--seconds', String(secs), '--warmup', String(warmMs / 1000)]), {
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    clients.push(cl);
    let out = '';
    cl.stdout.on('data', (d) => (out += d));
    setTimeout(() => which.forEach((i) => servers[i].connected && servers[i].send('mark')), warmMs); // the client's warm-up
    const code = await Promise.race([new Promise((resolve) => cl.on('exit', resolve)), ...which.map((i) => ended[i])]);
    if (code !== 0) throw new Error(`client failed (${code})`);
    return JSON.parse(out.trim()).rps;
  };
  try {
    const ports = await Promise.all(servers.map((srv, i) => Promise.race([ended[i], new Promise((resolve) => srv.stdout.once('data', (port) => resolve(Number(port))))])));
    const all = modes.map((_, i) => i);
    if (warmupRequests > 0) await warmUntil(warmupRequests, () => drive(ports, all, WARMUP_STEP_S, 0), () => Promise.all(all.map((i) => ask(i, 'served'))), modes);
    // Warmed by requests: the window's client needs only its connections opened first.
    const windowWarmupMs = warmupRequests > 0 ? IN_TURN_WARMUP_MS : warmupMs;
    if (!inTurn) {
      const rps = await drive(ports, all, seconds, windowWarmupMs);
      const got = await Promise.all(all.map((i) => ask(i, 'stop')));
      return Object.fromEntries(modes.map((mode, i) => [mode, { rps: rps[i], ...got[i] }]));
    }
    if (warmupRequests === 0) await drive(ports, all, 0.1, warmupMs);
    const got = [];
    for (const i of all) {
      const [rps] = await drive(ports, [i], seconds, IN_TURN_WARMUP_MS);
      got[i] = { rps, ...(await ask(i, 'read')) };
    }
    const stopped = await Promise.all(all.map((i) => ask(i, 'stop')));
    return Object.fromEntries(modes.map((mode, i) => [mode, { ...got[i], samplesPerCpuSecond: stopped[i].samplesPerCpuSecond }]));
  } finally {
    for (const child of [...servers, ...clients]) if (child.exitCode === null && child.signalCode === null) child.kill();
  }
}
/** In turn, a server's requests before its window: its connections open, its caches its own again. */
const IN_TURN_WARMUP_MS = 300;
/** A request-counted warm-up drives every server this many seconds at a time, and gives up after WARMUP_LIMIT_S. */
const WARMUP_STEP_S = 2;
const WARMUP_LIMIT_S = 900;

/** Drives (`step()`) until each server's count (`counts()`, `{ served }` each) reaches
 * `requests`; an error naming the slowest mode if that takes over WARMUP_LIMIT_S. */
async function warmUntil(requests, step, counts, modes) {
  const start = performance.now();
  for (;;) {
    await step();
    const served = (await counts()).map((c) => c.served);
    const least = Math.min(...served);
    if (least >= requests) return;
    if (performance.now() - start > WARMUP_LIMIT_S * 1000) {
      throw new Error(`the ${modes[served.indexOf(least)]} server served ${least} of the ${requests} warm-up requests in ${WARMUP_LIMIT_S} s`);
    }
  }
}

// --- the traced Express service ------------------------------------------------------

/**
 * Starts the tracer `kind` ('otel': OpenTelemetry's HTTP and Express instrumentations, spans
 * batched to an exporter that drops them; 'dd-trace': dd-trace with its own plugins,
 * sending traces to a closed port). `spanProcessors` go before OpenTelemetry's batch
 * processor; `ddOptions` are merged into dd-trace's init options.
 */
function startTracer(kind, { spanProcessors = [], ddOptions = {}, ddEnv = {} } = {}) {
  if (kind === 'dd-trace') {
    Object.assign(process.env, {
      DD_TRACE_AGENT_URL: 'http://127.0.0.1:9',
      DD_INSTRUMENTATION_TELEMETRY_ENABLED: 'false',
      DD_REMOTE_CONFIGURATION_ENABLED: 'false',
      DD_TRACE_STARTUP_LOGS: 'false',
      ...ddEnv,
    });
    return require('dd-trace').init({ profiling: false, logLevel: 'error', ...ddOptions });
  }
  if (kind !== 'otel') throw new Error(`no tracer ${kind}: otel or dd-trace`);
  const { NodeTracerProvider, BatchSpanProcessor } = require('@opentelemetry/sdk-trace-node');
  const { registerInstrumentations } = require('@opentelemetry/instrumentation');
  const { HttpInstrumentation } = require('@opentelemetry/instrumentation-http');
  const { ExpressInstrumentation } = require('@opentelemetry/instrumentation-express');
  const discard = { export: (spans, done) => done({ code: 0 }), shutdown: () => Promise.resolve(), forceFlush: () => Promise.resolve() };
  const provider = new NodeTracerProvider({ spanProcessors: [...spanProcessors, new BatchSpanProcessor(discard)] });
  provider.register();
  registerInstrumentations({ instrumentations: [new HttpInstrumentation(), new ExpressInstrumentation()] });
  return provider;
}

/**
 * The Express service (four routes, JSON in and out, an await on "I/O" in three), as an
 * HTTP server; `onRequest(req, res)` runs first in each request, then the middleware
 * `around(req, res, next)` if given. Load it after the tracer.
 */
function expressService(onRequest = () => {}, around = null) {
  const http = require('node:http');
  const express = require('express');
  const { setImmediate: immediate } = require('node:timers/promises');
  const users = Array.from({ length: 500 }, (_, i) => ({ id: i, name: `user-${i}`, email: `u${i}@example.test`, tags: ['a', 'b', 'c'] }));
  const app = express();
  app.use((req, res, next) => {
    onRequest(req, res);
    next();
  });
  if (around) app.use(around);
  app.get('/users/:id', async (req, res) => {
    await immediate(); // the "database"
    res.json(users[Number(req.params.id) % users.length]);
  });
  app.post('/orders', express.json({ type: () => true }), async (req, res) => {
    await immediate();
    res.json({ ok: true, total: req.body.items.reduce((s, it) => s + it.qty * it.price, 0) });
  });
  app.get('/search/:q', async (req, res) => {
    await immediate();
    res.json(users.filter((u) => u.name.includes(String(Number(req.params.q) % 10))).slice(0, 20));
  });
  app.get('/health', (req, res) => res.json({ status: 'ok', uptime: process.uptime() }));
  return http.createServer(app);
}

module.exports = { median, range, shuffle, pinned, serve, countedClient, client, runTogether, startTracer, expressService, labelsSwitch, startInspectorProfiler };

if (require.main === module && process.argv.includes('--client')) {
  const arg = (name) => process.argv[process.argv.indexOf(`--${name}`) + 1];
  client(arg('client').split(',').map(Number), Number(arg('seconds')), Number(arg('warmup')) * 1000).then(
    (result) => process.stdout.write(JSON.stringify(result) + '\n'),
    (err) => {
      console.error(err);
      process.exit(1);
    },
  );
}
