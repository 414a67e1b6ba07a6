'use strict';
// Service mode's last profile on every way a process ends: `process.exit()` (direct, and in
// a SIGTERM handler's graceful shutdown) and `process.exitCode`, with the file exporter and
// a real Datadog receiver (ddapm-test-agent) on loopback. The app is an HTTP server in a
// child process; its last request's work must be in the last profile with its labels, its
// exit code must be the one it chose, and its exit may take at most the documented 2 s
// longer. A profile that cannot be delivered is one warning.
const { test } = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { spawn } = require('node:child_process');
const { findTool, missing, startTestAgent, formOf, warningsIn } = require('./tools');
const { decodePprof, pprofWork, assertRequestLabels, receiver } = require('./helpers');

const root = path.join(__dirname, '..');
/** docs/service-mode.md: the exit waits at most 2 s for the last profile; the rest is a
 * loaded machine's process start-up and teardown. */
const EXIT_BUDGET_MS = 2000;
const EXIT_MARGIN_MS = 1500;

/** How long a bare Node process takes to start and end now, spawned as the apps are: on a
 * loaded machine a process's teardown (and the exit's sender, a Node process too) stretch
 * as much. */
function bareNodeMs() {
  const t0 = Date.now();
  return new Promise((resolve) => spawn(process.execPath, ['-e', '0'], { stdio: 'ignore' }).on('exit', () => resolve(Date.now() - t0)));
}
/** The margin over the documented 2 s: 1.5 s, or three bare processes' time if more. */
const marginFor = (bareMs) => Math.max(EXIT_MARGIN_MS, 3 * bareMs);

/** The last request's work in the apps: busy until the sampler signalled it 30 times (the
 * floor judges 10 samples; on a loaded machine not every signal gives V8 one), or 30 s. */
const EXIT_LAST_WORK = `function exitLastWork() {
  const { group } = require(${JSON.stringify(path.join(root, 'lib', 'capture', 'group'))});
  const until = group.ticks() + 30;
  const end = Date.now() + 30000;
  while (group.ticks() < until && Date.now() < end);
}`;

/**
 * The app: an HTTP server profiled by service mode (its exporter from argv[2]) that serves
 * one labeled request of busy work, prints `{ timeOrigin, call, exiting }`, then ends as
 * argv[1] says: `exit` (process.exit(3)), `exitCode` (process.exitCode = 4, then
 * process.exit()), `exitCode-natural` (process.exitCode = 5, the server closed), or
 * `sigterm` (waits for SIGTERM; its handler closes the server, then process.exit(0)).
 */
const app = `
  const http = require('node:http');
  const { start, withLabels } = require(${JSON.stringify(root)});
  const [how, exporter] = [process.argv[1], JSON.parse(process.argv[2])];
  start({ service: 'exits', period: 60000, exporters: [exporter] });
  ${EXIT_LAST_WORK}
  let call;
  const server = http.createServer((req, res) => {
    const t0 = performance.now();
    withLabels({ endpoint: 'GET /last' }, exitLastWork);
    call = { labels: { endpoint: 'GET /last' }, work: 'exitLastWork', t0, t1: performance.now() };
    res.end('ok');
  });
  server.listen(0, '127.0.0.1', async () => {
    await (await fetch('http://127.0.0.1:' + server.address().port + '/')).text();
    const say = () => console.log(JSON.stringify({ timeOrigin: performance.timeOrigin, call, exiting: Date.now() }));
    if (how === 'exit') { say(); process.exit(3); }
    if (how === 'exitCode') { say(); process.exitCode = 4; process.exit(); }
    if (how === 'exitCode-natural') { say(); process.exitCode = 5; server.close(); }
    if (how === 'sigterm') {
      process.on('SIGTERM', () => server.close(() => { say(); process.exit(0); }));
      console.log('ready');
    }
  });
`;

/** What each way of ending must exit with. */
const CODES = { exit: 3, exitCode: 4, 'exitCode-natural': 5, sigterm: 0 };
/** The CPU profiles each makes: a SIGTERM the app handles ships what came before it at once, then the rest at the exit. */
const PROFILES = { exit: 1, exitCode: 1, 'exitCode-natural': 1, sigterm: 2 };

/** Runs the app ending `how` with `exporter`; resolves to { code, signal, stderr, said, exitedAt }. */
async function runApp(how, exporter, { killAfterMs = 20_000, env } = {}) {
  const bareMs = await bareNodeMs();
  return new Promise((resolve) => {
    const p = spawn(process.execPath, ['-e', app, how, JSON.stringify(exporter)], { cwd: root, stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, SELFPROF_STARTUP_LOG: '0', ...env } });
    const killer = setTimeout(() => p.kill('SIGKILL'), killAfterMs);
    let stdout = '';
    let stderr = '';
    p.stdout.on('data', (d) => {
      stdout += d;
      if (how === 'sigterm' && stdout.startsWith('ready\n') && !p.signalled) {
        p.signalled = Date.now();
        p.kill('SIGTERM');
      }
    });
    p.stderr.on('data', (d) => (stderr += d));
    p.on('exit', (code, signal) => {
      clearTimeout(killer);
      const line = stdout.split('\n').find((l) => l.startsWith('{'));
      resolve({ code, signal, stderr, said: line ? JSON.parse(line) : null, exitedAt: Date.now(), signalledAt: p.signalled, bareMs });
    });
  });
}

/**
 * The app ended as it chose, within the budget, and its last work is in `pprofs` (its
 * profiles, decoded) with its labels; `labels(pprof, sample)` reads a sample's.
 */
function assertKept(t, how, r, pprofs, labels = (pprof, s) => pprof.labels(s)) {
  assert.equal(r.code, CODES[how], `${how}: the exit code the app chose (${r.signal ?? ''}): ${r.stderr}`);
  assert.ok(r.said, `${how}: the app ran: ${r.stderr}`);
  const after = r.exitedAt - r.said.exiting;
  t.diagnostic(`${how}: exited ${after} ms after it chose to (its teardown and the test's hearing of it included)`);
  assert.ok(after <= EXIT_BUDGET_MS + marginFor(r.bareMs), `${how}: exited ${after} ms after it chose to (docs/service-mode.md: 2 s; a bare Node process took ${r.bareMs} ms)`);
  if (r.signalledAt) {
    // Before the app's handler ran, what came before the signal was shipped (2 s at most).
    const total = r.exitedAt - r.signalledAt;
    t.diagnostic(`${how}: exited ${total} ms after SIGTERM`);
    assert.ok(total <= 2 * EXIT_BUDGET_MS + marginFor(r.bareMs), `${how}: exited ${total} ms after SIGTERM (docs/service-mode.md: 2 s at the signal, 2 s at the exit)`);
  }
  const samples = pprofs.flatMap((pprof) => pprofWork(pprof, ['exitLastWork'], { timeOrigin: r.said.timeOrigin, labels: (s) => labels(pprof, s) }));
  assertRequestLabels(samples, [r.said.call], { what: how, min: 10 });
}

test('file exporter: process.exit(), a SIGTERM handler that exits, and process.exitCode each keep the last profile', async (t) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'selfprof-exit-'));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  for (const how of Object.keys(CODES)) {
    const out = path.join(dir, how);
    const r = await runApp(how, { type: 'file', dir: out });
    assert.doesNotMatch(warningsIn(r.stderr), /selfprof/, `${how}: no warning`);
    const files = fs.existsSync(out) ? fs.readdirSync(out) : [];
    const cpu = files.filter((f) => /^exits-.*Z\.pb\.gz$/.test(f));
    assert.equal(cpu.length, PROFILES[how], `${how}: CPU profiles: ${files.join(', ') || 'no file'}`);
    assert.equal(files.filter((f) => f.endsWith('.heap.pb.gz')).length, PROFILES[how], `${how}: the heap profiles too: ${files.join(', ')}`);
    assert.deepEqual(files.filter((f) => f.includes('.tmp')), [], `${how}: no temporary file left`);
    assertKept(t, how, r, cpu.map((f) => decodePprof(fs.readFileSync(path.join(out, f)))));
  }
});

test('Datadog agent: process.exit(), a SIGTERM handler that exits, and process.exitCode each upload the last profile', async (t) => {
  const binary = findTool('ddagent', 'ddapm-test-agent');
  if (!binary && missing(t, 'ddapm-test-agent')) return;
  const agent = await startTestAgent(binary);
  t.after(() => agent.stop());
  for (const how of Object.keys(CODES)) {
    await agent.clear();
    let r = await runApp(how, { type: 'datadog', url: agent.url });
    // On a loaded machine the test agent (Python) may not answer within the 2 s the exit
    // waits: that profile is named lost, in one warning, as it should be. Judged again then,
    // up to 4 runs in all (under a load of 12 on 2 cores it was slow twice in a row).
    for (let runs = 1; runs < 4 && /got no answer within the 2 s it had/.test(r.stderr); runs++) {
      assert.equal(r.code, CODES[how], `${how}: the exit code the app chose, its profile lost: ${r.stderr}`);
      assert.equal(warningsIn(r.stderr).match(/Warning: selfprof/g)?.length, 1, `${how}: one warning names the lost profile: ${r.stderr}`);
      t.diagnostic(`${how}: the agent did not answer in time (run ${runs}); run again: ${warningsIn(r.stderr)}`);
      await agent.clear();
      r = await runApp(how, { type: 'datadog', url: agent.url });
    }
    assert.doesNotMatch(warningsIn(r.stderr), /selfprof/, `${how}: no warning`);
    const uploads = (await agent.requests()).filter((x) => x.path === '/profiling/v1/input');
    assert.equal(uploads.length, PROFILES[how], `${how}: uploads: ${uploads.length}: ${r.stderr}`);
    const pprofs = [];
    for (const upload of uploads) {
      const form = await formOf(upload.body, upload.headers['Content-Type']);
      const event = JSON.parse(await form.get('event').text());
      assert.match(event.tags_profiler, /(^|,)snapshot:on_shutdown(,|$)/, `${how}: a profile at the end`);
      assert.deepEqual([...form.keys()], ['event', 'wall.pprof', 'space.pprof'], `${how}: the CPU and heap profiles`);
      pprofs.push(decodePprof(Buffer.from(await form.get('wall.pprof').arrayBuffer())));
    }
    // Datadog's dialect: the endpoint is `trace endpoint`.
    assertKept(t, how, r, pprofs, (pprof, s) => {
      const l = pprof.labels(s);
      return l['trace endpoint'] ? { endpoint: l['trace endpoint'] } : undefined;
    });
  }
  // An app whose NODE_OPTIONS preloads code into every thread (a tracer's -r): the last
  // profile is sent from a process without it, and the preload runs in the app alone.
  await agent.clear();
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'selfprof-exit-preload-'));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  const preload = path.join(dir, 'preload.js');
  const log = path.join(dir, 'loaded');
  fs.writeFileSync(preload, `require('node:fs').appendFileSync(${JSON.stringify(log)}, process.pid + ' ' + require('node:worker_threads').threadId + '\\n');`);
  const r = await runApp('exit', { type: 'datadog', url: agent.url }, { env: { NODE_OPTIONS: `--require ${JSON.stringify(preload)}` } });
  assert.equal(r.code, 3, r.stderr);
  assert.doesNotMatch(warningsIn(r.stderr), /selfprof/, r.stderr);
  const uploads = (await agent.requests()).filter((x) => x.path === '/profiling/v1/input');
  assert.equal(uploads.length, 1, 'the last profile arrived');
  assert.equal(fs.readFileSync(log, 'utf8').trim().split('\n').length, 1, 'the preload ran once, in the app');
});

test('process.exit() with a receiver out of reach or that never answers: the exit waits at most 2 s, and one warning names the lost profile', async (t) => {
  const closed = await receiver();
  const closedUrl = closed.url;
  await closed.close();
  const never = await require('node:http').createServer(() => {});
  await new Promise((r) => never.listen(0, '127.0.0.1', r));
  t.after(() => {
    never.closeAllConnections();
    never.close();
  });
  const cases = { 'out of reach': closedUrl, 'never answers': `http://127.0.0.1:${never.address().port}` };
  for (const [name, url] of Object.entries(cases)) {
    const r = await runApp('exit', { type: 'datadog', url });
    assert.equal(r.code, 3, `${name}: ${r.stderr}`);
    const after = r.exitedAt - r.said.exiting;
    t.diagnostic(`${name}: exited ${after} ms after process.exit()`);
    assert.ok(after <= EXIT_BUDGET_MS + marginFor(r.bareMs), `${name}: exited ${after} ms after process.exit() (docs/service-mode.md: 2 s; a bare Node process took ${r.bareMs} ms)`);
    const lost = warningsIn(r.stderr).match(/selfprof: .*/g) ?? [];
    assert.equal(lost.length, 1, `${name}: one warning: ${r.stderr}`);
    assert.match(lost[0], /^selfprof: datadog exporter could not send 1 profile at exit \((CPU and heap profiles )?\d{4}-\d\d-\d\dT[\d:.]+Z to [\d:.]+Z \(the last\)\): upload to http:\/\/127\.0\.0\.1:\d+\/profiling\/v1\/input /, name);
  }
});

test('a file exporter that cannot write at process.exit(): one warning, the exit code kept', async (t) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'selfprof-exit-'));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  // Its dir is a file: nothing can be written under it.
  const blocked = path.join(dir, 'blocked');
  fs.writeFileSync(blocked, '');
  // Under /proc, Node's recursive mkdir would loop forever: the exit must not hang there.
  const cases = { 'a file in the way': [blocked, /ENOTDIR|EEXIST/], ...(fs.existsSync('/proc/self') && { '/proc': ['/proc/x/y', /ENOENT/] }) };
  for (const [name, [where, code]] of Object.entries(cases)) {
    const r = await runApp('exit', { type: 'file', dir: where });
    assert.equal(r.code, 3, `${name}: ${r.signal} ${r.stderr}`);
    const lines = warningsIn(r.stderr).match(/selfprof: .*/g) ?? [];
    assert.equal(lines.length, 1, `${name}: ${r.stderr}`);
    assert.match(lines[0], /^selfprof: file exporter could not write 1 profile at exit \(.*\(the last\)\): /, name);
    assert.match(lines[0], code, name);
  }
});

test('a library that hears SIGTERM and raises it again (signal-exit), before or after start(): the process still ends by it, its profile shipped first', async (t) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'selfprof-exit-'));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  // signal-exit raises the signal again only when its listeners are the last: selfprof's
  // must get out of the way, and ship before the process ends without another JS turn.
  const script = (order) => `
    const { start, withLabels } = require(${JSON.stringify(root)});
    const listen = () => require('signal-exit').onExit((code, signal) => require('node:fs').writeSync(1, 'onExit ' + signal + '\\n'));
    if (${JSON.stringify(order)} === 'before') listen();
    start({ service: 'sigexit', period: 60000, exporters: [{ type: 'file', dir: process.argv[1] }] });
    if (${JSON.stringify(order)} === 'after') listen();
    ${EXIT_LAST_WORK}
    const t0 = performance.now();
    withLabels({ endpoint: 'GET /last' }, exitLastWork);
    const call = { labels: { endpoint: 'GET /last' }, work: 'exitLastWork', t0, t1: performance.now() };
    setInterval(() => {}, 1000);
    console.log(JSON.stringify({ timeOrigin: performance.timeOrigin, call }));
  `;
  for (const order of ['before', 'after']) {
    const out = path.join(dir, order);
    const bareMs = await bareNodeMs();
    const r = await new Promise((resolve) => {
      const p = spawn(process.execPath, ['-e', script(order), out], { cwd: root, stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, SELFPROF_STARTUP_LOG: '0' } });
      const killer = setTimeout(() => p.kill('SIGKILL'), 20_000);
      let [stdout, stderr, signalledAt] = ['', '', 0];
      p.stdout.on('data', (d) => {
        stdout += d;
        if (!signalledAt && stdout.includes('\n')) {
          signalledAt = Date.now();
          p.kill('SIGTERM');
        }
      });
      p.stderr.on('data', (d) => (stderr += d));
      p.on('exit', (code, signal) => {
        clearTimeout(killer);
        resolve({ code, signal, stdout, stderr, after: Date.now() - signalledAt });
      });
    });
    assert.equal(r.signal, 'SIGTERM', `${order}: ended by the signal (${r.code}): ${r.stderr}`);
    assert.match(r.stdout, /onExit SIGTERM/, `${order}: signal-exit's handler ran`);
    assert.doesNotMatch(warningsIn(r.stderr), /selfprof/, `${order}: no warning`);
    t.diagnostic(`signal-exit ${order} start(): ended ${r.after} ms after SIGTERM`);
    assert.ok(r.after <= EXIT_BUDGET_MS + marginFor(bareMs), `${order}: ended ${r.after} ms after SIGTERM (a bare Node process took ${bareMs} ms)`);
    const cpu = fs.readdirSync(out).filter((f) => /^sigexit-.*Z\.pb\.gz$/.test(f));
    assert.equal(cpu.length, 1, `${order}: ${fs.readdirSync(out).join(', ')}`);
    const said = JSON.parse(r.stdout.split('\n')[0]);
    const pprof = decodePprof(fs.readFileSync(path.join(out, cpu[0])));
    assertRequestLabels(pprofWork(pprof, ['exitLastWork'], { timeOrigin: said.timeOrigin }), [said.call], { what: order, min: 10 });
  }
});
