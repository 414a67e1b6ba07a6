'use strict';
// Every thread: real worker_threads burning CPU, profiled through `selfprof record` and
// service mode; the pprof decoded by pprof-format; the heap report in headless Chromium.
const { test } = require('node:test');
const assert = require('node:assert/strict');
const { warningsIn } = require('./tools');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { spawn, spawnSync } = require('node:child_process');
const { performance } = require('node:perf_hooks');
const { setTimeout: sleep } = require('node:timers/promises');
const { pathToFileURL } = require('node:url');
const { decodePprof } = require('./helpers');

const root = path.join(__dirname, '..');
const cli = path.join(root, 'bin', 'selfprof.js');
const { missing, CHROMIUM, NO_CHROMIUM, launchChromium } = require('./tools');

/** An app whose worker burns CPU in `workerBusyFunction` (and keeps 8 MiB), one that throws,
 * and one still running when the main thread exits (terminated, yet recorded). The busy
 * worker runs for BUSY_MS of its own CPU time (the addon's clock of the calling thread), not
 * of wall time: on a loaded machine the wall time gave its loop a smaller share of the
 * worker's samples (101 of 183) beside the start-up's fixed work. */
const APP = `
const { Worker } = require('node:worker_threads');
const busy = new Worker(\`
const { native } = require(${JSON.stringify(path.join(root, 'lib', 'native.js'))});
globalThis.kept = [];
function workerBusyFunction(ms) { const end = native.threadCpuNs() + ms * 1e6; let x = 0; while (native.threadCpuNs() < end) for (let i = 0; i < 100000; i++) x += Math.sqrt(x + i); return x; }
function workerHeapHog() { for (let i = 0; i < 128; i++) globalThis.kept.push(new Array(8192).fill(i + 0.5)); }
workerHeapHog();
workerBusyFunction(Number(process.env.BUSY_MS || 800));
setTimeout(() => {}, Number(process.env.LINGER_MS || 0));
\`, { eval: true });
console.log('busy worker ' + busy.threadId);
const thrower = new Worker('setTimeout(() => { throw new Error("worker boom") }, 20)', { eval: true });
thrower.on('error', (e) => console.log('worker error:', e.message));
const pool = new Worker('function poolTick() { const end = Date.now() + 15; while (Date.now() < end); } setInterval(poolTick, 20);', { eval: true });
busy.on('exit', () => setTimeout(() => process.exit(0), 200));
`;

/** The commonest leaves of `stacks` (frame names, leaf first), with their counts: what else a thread was doing. */
function leaves(stacks) {
  const counts = {};
  for (const names of stacks) counts[names.slice(0, 2).join(' < ')] = (counts[names.slice(0, 2).join(' < ')] ?? 0) + 1;
  return JSON.stringify(Object.entries(counts).sort((a, b) => b[1] - a[1]).slice(0, 6));
}

test('selfprof record: a worker busy for 0.8 s appears with its thread label, a terminated pool worker too', (t) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'selfprof-threads-'));
  fs.writeFileSync(path.join(dir, 'app.js'), APP);
  // A heap sample every 64 KiB on average: the hog's 8 MiB is ~128 samples. At the default
  // 512 KiB (~16 samples) its estimate fell under 4 MiB about once in a hundred runs.
  const r = spawnSync(process.execPath, [cli, 'record', '-o', 'out', '--heap', '--heap-interval', '65536', '--by', 'thread name', '--', process.execPath, 'app.js'], {
    cwd: dir,
    encoding: 'utf8',
    timeout: 120_000,
  });
  assert.equal(r.status, 0, r.stderr);
  assert.match(r.stdout, /worker error: worker boom/, 'the throwing worker behaved as without selfprof');
  assert.match(r.stderr, /pid \d+: \d+ samples \(\d+ in JS, 4 threads\)/, r.stderr);
  const { p, names, labels } = decodePprof(fs.readFileSync(path.join(dir, 'out', 'profile.pb.gz')));
  // Every sample of the busy function carries the busy worker's own thread, by its threadId.
  const id = /busy worker (\d+)/.exec(r.stdout)[1];
  const busy = p.sample.filter((s) => names(s)[0] === 'workerBusyFunction');
  assert.deepEqual(new Set(busy.map((s) => `${labels(s)['thread name']} / ${labels(s)['thread id']}`)), new Set([`Worker #${id} Event Loop / ${id}`]));
  // Most of that worker's JS samples: what it was caught doing is its busy loop (how many
  // samples its 0.8 s gives depends on how much CPU it got).
  // (In it: selfprof's own work may interrupt it, as a segment's join does.)
  const own = p.sample.filter((s) => labels(s)['thread id'] === id && !/^\(/.test(names(s)[0] ?? '('));
  const inBusy = own.filter((s) => names(s).includes('workerBusyFunction')).length;
  const others = leaves(own.filter((s) => !names(s).includes('workerBusyFunction')).map(names));
  assert.ok(inBusy >= 20 && inBusy >= 0.6 * own.length, `${inBusy} samples in workerBusyFunction of the worker's ${own.length} JS samples; the others' leaves: ${others}`);
  t.diagnostic(`${inBusy} samples in workerBusyFunction of the worker's ${own.length} JS samples; the others' leaves: ${others}`);
  const pool = p.sample.filter((s) => names(s)[0] === 'poolTick');
  assert.ok(pool.length > 50, `the pool worker, ended by the main thread's exit, was recorded (${pool.length})`);
  assert.ok(p.sample.some((s) => labels(s)['thread name'] === 'Main Event Loop'));
  assert.match(r.stdout, /samples by thread name[^\n]*\n(.*\n)*\s+Worker #\d+ Event Loop\s+\d+/);
  // The heap of the worker too, with its thread.
  const heap = decodePprof(fs.readFileSync(path.join(dir, 'out', 'profile.heap.pb.gz')));
  const hog = heap.p.sample.filter((s) => heap.names(s)[0] === 'workerHeapHog');
  assert.ok(hog.reduce((n, s) => n + Number(s.value[1]), 0) > 4 * 2 ** 20, 'the worker\'s 8 MiB');
  assert.ok(hog.every((s) => /^Worker #/.test(heap.labels(s)['thread name'])));
  fs.rmSync(dir, { recursive: true });
});

test('selfprof record: a worker ended by terminate() keeps what it recorded until its last checkpoint', (t) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'selfprof-threads-terminated-'));
  fs.writeFileSync(
    path.join(dir, 'app.js'),
    `const { recordCheckpoints } = require(${JSON.stringify(path.join(__dirname, 'helpers.js'))});
const { Worker } = require('node:worker_threads');
const w = new Worker(\`
const { parentPort } = require('node:worker_threads');
const { native } = require(${JSON.stringify(path.join(root, 'lib', 'native.js'))});
let told = false;
function terminatedWork() {
  const end = Date.now() + 5;
  while (Date.now() < end);
  // 200 ms of its own CPU time: ~200 samples at no load, ~100 under load (a fixed 0.8 s of
  // wall time gives a loaded machine's worker fewer).
  if (!told && native.threadCpuNs() > 200e6) parentPort.postMessage((told = 'busy enough'));
  setImmediate(terminatedWork);
}
terminatedWork();
\`, { eval: true });
// Ended once the worker has been busy enough and the recorder has checkpointed it six
// times since, or after 30 s.
const parts = () => recordCheckpoints(process.env.SELFPROF_RECORD_DIR, process.pid, w.threadId);
const t0 = Date.now();
let since = null;
w.once('message', () => (since = parts()));
const wait = setInterval(() => {
  if ((since === null || parts() < since + 6) && Date.now() - t0 < 30000) return;
  clearInterval(wait);
  w.terminate().then(() => setTimeout(() => {}, 100));
}, 50);
`,
  );
  const r = spawnSync(process.execPath, [cli, 'record', '-o', 'out', '--', process.execPath, 'app.js'], {
    cwd: dir,
    encoding: 'utf8',
    timeout: 60_000,
    env: { ...process.env, SELFPROF_RECORD_CHECKPOINT_MS: '150' },
  });
  assert.equal(r.status, 0, r.stderr);
  assert.match(r.stderr, /pid \d+'s Worker #\d+ Event Loop ended before it wrote its profile: kept what it recorded until its last checkpoint, [\d.]+ s in/, r.stderr);
  const { p, names, labels } = decodePprof(fs.readFileSync(path.join(dir, 'out', 'profile.pb.gz')));
  const work = p.sample.filter((s) => names(s).includes('terminatedWork'));
  assert.ok(work.length > 50, `the terminated worker's samples until its last checkpoint: ${work.length}`);
  t.diagnostic(`${work.length} samples of the terminated worker kept`);
  assert.ok(work.every((s) => /^Worker #\d+ Event Loop$/.test(labels(s)['thread name'])));
  fs.rmSync(dir, { recursive: true });
});

test('service mode: the worker\'s busy function with its thread label, in one pprof per period with the main thread', (t) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'selfprof-svc-threads-'));
  const script = `
    const session = require(${JSON.stringify(root)}).start({ service: 'threads', period: 1000, exporters: [{ type: 'file', dir: ${JSON.stringify(dir)} }] });
    ${APP.replace("busy.on('exit', () => setTimeout(() => process.exit(0), 200));", "busy.on('exit', () => setTimeout(async () => { await session.stop(); process.exit(0); }, 200));")}
  `;
  const r = spawnSync(process.execPath, ['-e', script], { cwd: dir, encoding: 'utf8', timeout: 60_000, env: { ...process.env, BUSY_MS: '1500' } });
  assert.equal(r.status, 0, r.stderr);
  assert.doesNotMatch(warningsIn(r.stderr), /selfprof/, 'no warning');
  const pprofs = fs.readdirSync(dir).filter((f) => /Z\.pb\.gz$/.test(f));
  assert.ok(pprofs.length >= 2, pprofs.join());
  const id = /busy worker (\d+)/.exec(r.stdout)[1];
  let busy = 0;
  let own = 0;
  let inBusy = 0;
  const otherStacks = [];
  let mainSamples = 0;
  for (const f of pprofs) {
    const { p, names, labels } = decodePprof(fs.readFileSync(path.join(dir, f)));
    for (const s of p.sample) {
      if (names(s)[0] === 'workerBusyFunction') {
        busy++;
        assert.equal(`${labels(s)['thread name']} / ${labels(s)['thread id']}`, `Worker #${id} Event Loop / ${id}`, "the busy worker's own thread");
      }
      if (labels(s)['thread id'] === id && !/^\(/.test(names(s)[0] ?? '(')) {
        own++;
        if (names(s).includes('workerBusyFunction')) inBusy++;
        else otherStacks.push(names(s));
      }
      if (labels(s)['thread name'] === 'Main Event Loop') mainSamples++;
    }
  }
  // 99 Hz for 1.5 s: up to ~150 samples, as many as the CPU it got allows; most of the
  // worker's JS samples are its busy loop.
  assert.ok(busy >= 20 && inBusy >= 0.6 * own, `${inBusy} samples in workerBusyFunction of the worker's ${own} JS samples; the others' leaves: ${leaves(otherStacks)}`);
  t.diagnostic(`${inBusy} samples in workerBusyFunction of the worker's ${own} JS samples; the others' leaves: ${leaves(otherStacks)}`);
  assert.ok(mainSamples > 0, 'the main thread is in the same pprofs');
  fs.rmSync(dir, { recursive: true });
});

/** The threads service mode profiles at once, the main thread included (docs/reliability.md). */
const THREAD_CAP = 32;

/**
 * Runs an app with `workers` workers under service mode (file exporter, a profile every
 * 0.5 s), all alive at once until the test has seen `expected` threads in its profiles (or
 * 60 s went by: a loaded machine's workers answer a rotation late, and theirs go into the
 * next); then the app stops its session and ends them. Resolves to the distinct `thread id`s
 * of every profile written, the workers' ids, and what it printed.
 */
async function capRun(t, workers, expected) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'selfprof-cap-'));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  const script = `
    const session = require(${JSON.stringify(root)}).start({ service: 'cap', period: 500, heap: false, exporters: [{ type: 'file', dir: process.argv[1] }] });
    // Taken after start(): the wrapped Worker.
    const { Worker } = require('node:worker_threads');
    const workers = [];
    let ready = 0;
    // Each worker runs until it is ended, so all run at once however slowly they start; the
    // app ends them when told (a line on its stdin).
    for (let i = 0; i < ${workers}; i++) {
      const w = new Worker('const { parentPort } = require("node:worker_threads"); parentPort.postMessage(1); parentPort.once("message", () => {})', { eval: true });
      w.once('message', () => {
        if (++ready === ${workers}) console.log('all ran: ' + workers.map((w) => w.threadId).join(' '));
      });
      workers.push(w);
    }
    process.stdin.once('data', async () => {
      await session.stop();
      for (const w of workers) w.terminate();
      process.stdin.destroy();
    });
  `;
  const child = spawn(process.execPath, ['-e', script, dir], { cwd: dir, stdio: ['pipe', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (d) => (stdout += d));
  child.stderr.on('data', (d) => (stderr += d));
  const exited = new Promise((resolve) => child.on('exit', (code) => resolve(code)));
  /** The thread ids of the profiles written so far (one being written is read next time). */
  const seen = () => {
    const ids = new Set();
    for (const f of fs.readdirSync(dir).filter((f) => /Z\.pb\.gz$/.test(f))) {
      try {
        const { p, labels } = decodePprof(fs.readFileSync(path.join(dir, f)));
        // (A profile of the main thread alone, before any worker's came, has no thread labels.)
        for (const s of p.sample) if (labels(s)['thread id'] !== undefined) ids.add(labels(s)['thread id']);
      } catch {
        // not whole yet
      }
    }
    return ids;
  };
  const deadline = performance.now() + 60_000;
  while (!/all ran/.test(stdout) && child.exitCode === null && performance.now() < deadline) await sleep(100);
  while (seen().size < expected && child.exitCode === null && performance.now() < deadline) await sleep(200);
  child.stdin.end('stop\n');
  const code = await exited;
  assert.equal(code, 0, stderr);
  const ids = [...(/all ran: ([\d ]+)/.exec(stdout)?.[1].split(' ') ?? [])];
  assert.equal(ids.length, workers, `all ${workers} workers ran: ${stdout}`);
  return { threads: seen(), workers: ids, stderr };
}

test(`at the thread cap (${THREAD_CAP - 1} workers and the main thread): every thread profiled, no warning`, async (t) => {
  const { threads, workers, stderr } = await capRun(t, THREAD_CAP - 1, THREAD_CAP);
  assert.doesNotMatch(warningsIn(stderr), /selfprof/, 'no warning');
  assert.deepEqual([...threads].sort(), ['0', ...workers].sort(), 'every thread in the profiles');
});

test(`one past the thread cap (${THREAD_CAP} workers): one warning naming the worker left out, the others profiled, the app unharmed`, async (t) => {
  const { threads, workers, stderr } = await capRun(t, THREAD_CAP, THREAD_CAP);
  const warnings = [...warningsIn(stderr).matchAll(/selfprof: more than (\d+) threads at once; worker (\d+) and any others past the cap are not profiled/g)];
  assert.equal(warnings.length, 1, stderr);
  assert.equal(Number(warnings[0][1]), THREAD_CAP, 'the cap named');
  const left = warnings[0][2];
  assert.ok(workers.includes(left), `worker ${left} is one of the app's`);
  assert.deepEqual([...threads].sort(), ['0', ...workers.filter((w) => w !== left)].sort(), `every thread but worker ${left} in the profiles`);
});

test('in headless Chromium: a heap profile is a flame graph of bytes', async (t) => {
  if (!fs.existsSync(CHROMIUM)) {
    if (missing(t, NO_CHROMIUM)) return;
  }
  const { htmlReport } = require('..');
  const { startHeapSampling } = require('../lib/capture/heap');
  const { native } = require('../lib/native');
  const kept = [];
  function reportHeapHog() {
    for (let i = 0; i < 160; i++) kept.push(new Array(8192).fill(i + 0.5));
  }
  const heap = startHeapSampling(64 * 1024);
  reportHeapHog();
  const { profile, atMs } = heap.take();
  heap.release();
  const [pprof] = native.buildHeapProfileSync([{ profile, atMs }], { startUnixMs: Date.now(), durationMs: 1, intervalBytes: 64 * 1024 });
  // The bytes the report shows: the profile's, less any selfprof's own code allocated
  // (hidden, as the report reads it; this test process runs selfprof).
  const shown = JSON.parse(require('..').convert(pprof, { to: 'trace' }));
  const bytes = shown.weight.values.reduce((a, b) => a + b, 0);
  assert.ok(bytes > 0.9 * decodePprof(pprof).sum(1), 'the bytes shown are the profile\'s but a few');
  const out = path.join(root, 'out', 'test-report');
  fs.mkdirSync(out, { recursive: true });
  const file = path.join(out, 'heap.html');
  fs.writeFileSync(file, htmlReport(pprof, { title: 'heap' }));
  const browser = await launchChromium();
  try {
    const page = await browser.newPage({ viewport: { width: 1200, height: 900 } });
    const problems = [];
    page.on('pageerror', (e) => problems.push(e.message));
    await page.goto(pathToFileURL(file).href);
    await page.waitForSelector('body[data-ready="true"]');
    assert.deepEqual(problems, []);
    assert.equal(await page.getAttribute('body', 'data-weighted'), 'bytes');
    assert.equal(await page.isHidden('#timeline-section'), true, 'no time line for a snapshot');
    // The root box weighs every byte; the hog's box its bytes.
    const rootBytes = Number(await page.getAttribute('#flamegraph .frame[data-key="root"]', 'data-samples'));
    assert.equal(rootBytes, bytes);
    const hogBytes = await page.$$eval('#flamegraph .frame[data-name="reportHeapHog"]', (els) => els.reduce((n, e) => n + Number(e.dataset.samples), 0));
    assert.ok(hogBytes > 0.8 * bytes, `${hogBytes} of ${bytes} bytes in reportHeapHog's box`);
    const topRow = await page.$$eval('#top-functions tbody tr', (rows) => rows[0].textContent);
    assert.match(topRow, /MiB.*reportHeapHog/);
    assert.match(await page.textContent('#summary'), /heap profile \(inuse_space\): [\d.]+ MiB/);
    await page.screenshot({ path: path.join(out, 'heap.png') });
  } finally {
    await browser.close();
  }
});
