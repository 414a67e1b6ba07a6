'use strict';
// selfprof's own frames in the user's profile (src/trace/profiler_frames.rs): withLabels,
// the span integrations, the label hooks, a rotation and the CLI's preload run on the
// app's threads. By default they are hidden from every view: a run of selfprof's frames
// (and the runtime frames they called) between two of the user's is removed, one that
// reaches a sample's leaf becomes `(selfprof)`. Checked on real recordings of a labeled
// Express service with OpenTelemetry (__test__/fixtures/profiler-frames-app.js), through the
// Profiler API, service mode (with a worker), `selfprof record` (with its heap profile),
// the converters, the CLI's summaries and the HTML report in Chromium.
const { test, before } = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const zlib = require('node:zlib');
const { spawnSync } = require('node:child_process');
const { pathToFileURL } = require('node:url');
const { readProfile, convert, htmlReport, fromCpuProfile } = require('..');
const { decodePprof, assertValidTrace, lineOf } = require('./helpers');
const { missing, CHROMIUM, NO_CHROMIUM, launchChromium } = require('./tools');
const { storesInFrame } = require('../lib/capture/labels');

const ROOT = path.resolve(__dirname, '..');
const cli = path.join(ROOT, 'bin', 'selfprof.js');
const fixture = path.join(__dirname, 'fixtures', 'profiler-frames-app.js');
/** The fixture's middleware that runs the rest of the request in withLabels. */
const MIDDLEWARE_LINE = lineOf(fixture, 'withLabels({ tenant');
const tmp = (name) => fs.mkdtempSync(path.join(os.tmpdir(), `selfprof-frames-${name}-`));
const gunzipJson = (file) => JSON.parse(zlib.gunzipSync(fs.readFileSync(file)));

/** selfprof's own files: under this checkout's root (what the fixture loads). */
const OWN_FILE = new RegExp(`^(file://)?${ROOT.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}/(lib/|bin/|index\\.js|start\\.js|worker\\.js|binding\\.js)`);
const OWN_NAMES = ['withLabels', 'emitWithLabels', 'runWithStore', 'setLabels', 'getLabels', 'storeWith'];
const isOwn = (t, f) => f.resourceId !== undefined && OWN_FILE.test(t.resources[f.resourceId]);
const isRuntime = (t, f) => (f.resourceId === undefined ? f.line === undefined : t.resources[f.resourceId].startsWith('node:'));
const keyOf = (t, f) => `${f.name} ${f.resourceId === undefined ? '' : t.resources[f.resourceId]}:${f.line}:${f.column}`;
const framesOf = (t, id) => {
  const out = [];
  for (; id !== undefined; id = t.stacks[id].parentId) out.unshift(t.frames[t.stacks[id].frameId]);
  return out;
};

/**
 * The stack of a sample as hidden, from its stack as recorded, by the rule as the docs
 * state it: selfprof's frames, and the runtime frames they called, up to the user's next
 * frame are left out; if that run reaches the leaf, `(selfprof)` stands for it.
 */
function expectedHidden(t, stackId) {
  const out = [];
  let inRun = false;
  for (const f of framesOf(t, stackId)) {
    if (isOwn(t, f)) inRun = true;
    else if (!(inRun && isRuntime(t, f))) {
      inRun = false;
      out.push(keyOf(t, f));
    }
  }
  if (inRun) out.push('(selfprof) :undefined:undefined');
  return out;
}

/** Asserts `hidden` is `shown` with its frames hidden, sample by sample; returns the (selfprof) total. */
function assertHiddenFrom(shown, hidden, what) {
  const w = (t, i) => (t.weight ? t.weight.values[i] : 1);
  assert.equal(hidden.samples.length, shown.samples.length, `${what}: every sample kept`);
  let selfprof = 0;
  shown.samples.forEach((s, i) => {
    const h = hidden.samples[i];
    // (Times through the JSON reader may differ in their last bit.)
    assert.ok(Math.abs(h.timestamp - s.timestamp) < 1e-6, `${what}: sample ${i}'s time`);
    assert.deepEqual([h.marker, h.contextId, w(hidden, i)], [s.marker, s.contextId, w(shown, i)]);
    const expect = s.stackId === undefined ? [] : expectedHidden(shown, s.stackId);
    const got = h.stackId === undefined ? [] : framesOf(hidden, h.stackId).map((f) => keyOf(hidden, f));
    assert.deepEqual(got, expect, `${what}: sample ${i}`);
    if (expect.at(-1)?.startsWith('(selfprof) ')) selfprof += w(shown, i);
  });
  const ownTotal = hidden.samples.reduce((n, s, i) => n + (s.stackId !== undefined && hidden.frames[hidden.stacks[s.stackId].frameId].name === '(selfprof)' ? w(hidden, i) : 0), 0);
  assert.equal(ownTotal, selfprof, `${what}: (selfprof) is what selfprof's own code took`);
  return selfprof;
}

/**
 * Asserts the heap profile `hidden` is `shown` with selfprof's frames hidden: its
 * allocations at a leaf run (selfprof's own memory) left out, every other sample kept in
 * order with its bytes, its stack hidden. Returns the bytes left out.
 */
function assertHeapHiddenFrom(shown, hidden, what) {
  const kept = [];
  let left = 0;
  shown.samples.forEach((s, i) => {
    const expect = s.stackId === undefined ? [] : expectedHidden(shown, s.stackId);
    if (expect.at(-1)?.startsWith('(selfprof) ')) left += shown.weight.values[i];
    else kept.push({ expect, bytes: shown.weight.values[i], objects: shown.weight.counts[i] });
  });
  assert.equal(hidden.samples.length, kept.length, `${what}: the samples of selfprof's own allocations left out, the others kept`);
  hidden.samples.forEach((h, i) => {
    const got = h.stackId === undefined ? [] : framesOf(hidden, h.stackId).map((f) => keyOf(hidden, f));
    assert.deepEqual(got, kept[i].expect, `${what}: sample ${i}`);
    assert.deepEqual([hidden.weight.values[i], hidden.weight.counts[i]], [kept[i].bytes, kept[i].objects], `${what}: sample ${i}'s bytes and objects`);
  });
  assert.deepEqual(hidden.frames.filter((f) => f.name === '(selfprof)'), [], `${what}: no (selfprof) in a heap profile`);
  return left;
}

/** Asserts no frame of selfprof's own files (or by its functions' names) is in `t`. */
function assertNoOwnFrames(t, what) {
  assert.deepEqual(t.resources.filter((r) => OWN_FILE.test(r)), [], `${what}: no selfprof script`);
  assert.deepEqual(t.frames.filter((f) => OWN_NAMES.includes(f.name)).map((f) => f.name), [], `${what}: no selfprof function`);
}

/** Samples (or bytes) on stacks holding a frame named `name`. */
const on = (t, name) =>
  t.samples.reduce((n, s, i) => n + (s.stackId !== undefined && framesOf(t, s.stackId).some((f) => f.name === name) ? (t.weight ? t.weight.values[i] : 1) : 0), 0);

function runFixture(env, args = []) {
  const r = spawnSync(process.execPath, [...args, fixture], { encoding: 'utf8', timeout: 60_000, env: { ...process.env, ...env } });
  assert.equal(r.status, 0, r.stderr);
  return r;
}

let api; // the Profiler API's and service mode's outputs of one run
before(() => {
  const dir = tmp('api');
  runFixture(
    { SELFPROF_TEST_OUT: dir, SELFPROF_TEST_WORKER: '1', SELFPROF_SERVICE: 'frames', SELFPROF_EXPORTER: 'file', SELFPROF_DIR: dir, SELFPROF_PERIOD_MS: '60000' },
    ['-r', path.join(ROOT, 'start.js')],
  );
  const find = (suffix) => fs.readdirSync(dir).filter((f) => f.startsWith('frames-') && f.endsWith(suffix)).map((f) => path.join(dir, f));
  api = {
    dir,
    shown: assertValidTrace(JSON.parse(fs.readFileSync(path.join(dir, 'shown.json'), 'utf8'))),
    hidden: assertValidTrace(JSON.parse(fs.readFileSync(path.join(dir, 'hidden.json'), 'utf8'))),
    pprof: fs.readFileSync(path.join(dir, 'hidden.pb.gz')),
    service: find('Z.pb.gz').map((f) => fs.readFileSync(f)),
    heap: find('.heap.pb.gz').map((f) => fs.readFileSync(f)),
  };
});

test('stop(): selfprof frames are on every request stack as recorded, and hidden by default with every sample kept', () => {
  const { shown, hidden } = api;
  // As recorded (profilerFrames: true): the handlers' work runs inside withLabels.
  for (const name of ['userLookup', 'userOrder']) {
    const samples = shown.samples.filter((s) => s.stackId !== undefined && framesOf(shown, s.stackId).some((f) => f.name === name));
    assert.ok(samples.length > 3, `${name} was sampled (${samples.length})`);
    for (const s of samples) assert.ok(framesOf(shown, s.stackId).some((f) => f.name === 'withLabels'), `${name} runs inside withLabels`);
  }
  // The requests' events are bound to the span's labels only where AsyncLocalStorage keeps
  // its stores in the frame and the handler does not read OpenTelemetry's contexts
  // (integrations/http-requests.js); on async_hooks (Node < 24) the hooks' publication labels
  // them (context-frame.test.js holds that), with no frame of selfprof's on their stacks.
  if (!storesInFrame()) assert.equal(on(shown, 'emitWithLabels'), 0, 'no request event bound on async_hooks');

  // stop(): none of it; the middleware links straight to what withLabels ran (express's
  // next, as OpenTelemetry's instrumentation wraps it).
  assertNoOwnFrames(hidden, 'stop()');
  const m = hidden.metadata;
  assert.equal(hidden.samples.length, m.matchedSamples + m.betweenSignalsSamples + m.unmatchedSamples, 'no sample dropped');
  const lookups = hidden.samples.filter((s) => s.stackId !== undefined && framesOf(hidden, s.stackId).some((f) => f.name === 'userLookup'));
  assert.ok(lookups.length > 3);
  for (const s of lookups) {
    const frames = framesOf(hidden, s.stackId);
    const names = frames.map((f) => `${f.name}@${path.basename(hidden.resources[f.resourceId] ?? '')}`);
    const middleware = frames.findIndex((f) => f.line === MIDDLEWARE_LINE && hidden.resources[f.resourceId].endsWith('/profiler-frames-app.js'));
    const next = frames[middleware + 1];
    assert.ok(middleware >= 0 && /\/node_modules\/(express|@opentelemetry)\//.test(hidden.resources[next.resourceId]), names.join(' > '));
  }
  // The user's loop over getLabels: selfprof's work at the leaf, under the user's function.
  const own = hidden.samples.filter((s) => s.stackId !== undefined && hidden.frames[hidden.stacks[s.stackId].frameId].name === '(selfprof)');
  // (A (selfprof) sample alone on its stack, selfprof's drain run from a timer, has no caller.)
  assert.ok(own.some((s) => framesOf(hidden, s.stackId).at(-2)?.name === 'labelsInALoop'), '(selfprof) under labelsInALoop');
});

test('the (selfprof) share equals what selfprof\'s own code took: the recorded trace read back hidden, sample by sample', () => {
  const selfprof = assertHiddenFrom(api.shown, readProfile(api.shown), 'readProfile');
  assert.ok(selfprof > 0, `selfprof's own work was sampled (${selfprof})`);
  assert.deepEqual(readProfile(api.shown, { profilerFrames: true }).frames.length, api.shown.frames.length);
  // Read back hidden, a hidden trace stays as it is.
  assert.deepEqual(readProfile(api.hidden).stacks, api.hidden.stacks);
});

test('pprof and folded stacks: no selfprof frame unless asked for, samples unchanged', () => {
  const p = decodePprof(api.pprof);
  const files = p.p.function.map((f) => p.str(f.filename));
  assert.deepEqual(files.filter((f) => OWN_FILE.test(f)), [], 'no selfprof function in stop({ format: "pprof" })');
  assert.equal(p.sum(0), p.join.matchedSamples + p.join.betweenSignalsSamples + p.join.unmatchedSamples, 'every sample counted');
  assert.ok(p.p.function.some((f) => p.str(f.name) === '(selfprof)'));

  const sum = (folded) => folded.trim().split('\n').reduce((n, l) => n + Number(l.slice(l.lastIndexOf(' ') + 1)), 0);
  const hidden = convert(api.shown, { to: 'folded' });
  const shown = convert(api.shown, { to: 'folded', profilerFrames: true });
  assert.equal(sum(hidden), api.shown.samples.length);
  assert.equal(sum(shown), api.shown.samples.length);
  assert.doesNotMatch(hidden, /\bwithLabels\b|emitWithLabels|runWithStore/);
  assert.match(hidden, /;labelsInALoop;\(selfprof\) \d+$/m);
  assert.match(shown, /;withLabels;/);
  const cpuprofile = JSON.parse(convert(api.shown, { to: 'cpuprofile' }));
  assert.ok(!cpuprofile.nodes.some((n) => OWN_FILE.test(n.callFrame.url)));
  assert.throws(() => convert(api.shown, { to: 'folded', profilerFrames: 'yes' }), { name: 'TypeError', message: /profilerFrames must be a boolean/ });
});

test('fromCpuProfile hides them from a V8 profile, as stop() does; profilerFrames: true keeps them', async () => {
  const profile = JSON.parse(convert(api.shown, { to: 'cpuprofile', profilerFrames: true }));
  assert.ok(profile.nodes.some((n) => n.callFrame.functionName === 'withLabels'));
  const hidden = await fromCpuProfile(profile);
  assertNoOwnFrames(hidden, 'fromCpuProfile');
  assert.equal(hidden.samples.length, api.shown.samples.length);
  assert.ok(on(await fromCpuProfile(profile, { profilerFrames: true }), 'withLabels') > 0);
  await assert.rejects(fromCpuProfile(profile, { profilerFrames: 1 }), { name: 'TypeError', message: /profilerFrames must be a boolean/ });
});

test('service mode: the uploaded CPU and heap profiles, the worker\'s samples included, hold no selfprof frame', () => {
  assert.equal(api.service.length, 1);
  const cpu = readProfile(api.service[0], { profilerFrames: true });
  assertNoOwnFrames(cpu, 'service pprof');
  const threads = new Set(cpu.contexts.map((c) => c.labels['thread name']));
  assert.ok([...threads].some((n) => /^Worker #\d+ Event Loop$/.test(n)), `the worker is in it (${[...threads]})`);
  assert.ok(on(cpu, 'resizeImage') > 0);
  assert.equal(api.heap.length, 1);
  const heap = readProfile(api.heap[0], { profilerFrames: true });
  assertNoOwnFrames(heap, 'service heap pprof');
  // selfprof's own allocations are left out of a heap profile (its comment says how many bytes).
  assert.deepEqual(heap.frames.filter((f) => f.name === '(selfprof)'), [], 'no (selfprof) in the heap profile');
  assert.ok(heap.samples.length > 0);
});

test('start({ profilerFrames: true }) shows them, in the workers\' samples too', () => {
  const dir = tmp('service-shown');
  runFixture({
    SELFPROF_TEST_WORKER: '1',
    SELFPROF_TEST_SERVICE: JSON.stringify({ service: 'shown', period: 60_000, heap: false, exporters: [{ type: 'file', dir }], profilerFrames: true }),
  });
  const files = fs.readdirSync(dir).filter((f) => f.endsWith('.pb.gz'));
  assert.equal(files.length, 1, files.join());
  const t = readProfile(fs.readFileSync(path.join(dir, files[0])), { profilerFrames: true });
  const thread = (s) => t.contexts[s.contextId]?.labels['thread name'];
  const inWorker = t.samples.filter((s) => s.contextId !== undefined && /^Worker/.test(thread(s)) && s.stackId !== undefined);
  assert.ok(inWorker.some((s) => framesOf(t, s.stackId).some((f) => f.name === 'withLabels')), 'withLabels in the worker');
  assert.ok(on(t, 'withLabels') > on(t, 'resizeImage') / 2);
  fs.rmSync(dir, { recursive: true });
});

test('selfprof record: the top functions, trace, pprof and heap profile hide selfprof; --profiler-frames keeps them', () => {
  const dir = tmp('record');
  const record = (out, ...flags) => {
    const r = spawnSync(process.execPath, [cli, 'record', '-o', out, '--heap', '--heap-interval', '4096', ...flags, '--', process.execPath, fixture], {
      encoding: 'utf8',
      timeout: 60_000,
      env: { ...process.env, SELFPROF_TEST_WORKER: '1', SELFPROF_PROFILER_FRAMES: '' },
    });
    assert.equal(r.status, 0, r.stderr);
    return r;
  };
  const hidden = record(path.join(dir, 'hidden'));
  const table = hidden.stdout.split('\n').filter((l) => /^\s*\d/.test(l));
  assert.ok(table.length > 5, hidden.stdout);
  for (const l of table) assert.doesNotMatch(l, new RegExp(`${OWN_NAMES.join('|')}|/lib/capture/|record-hook`), l);
  assert.match(hidden.stdout, /\(selfprof\)\s+\(profiler\)/, 'selfprof\'s own work is named as its own');
  const trace = gunzipJson(path.join(dir, 'hidden', 'profile.trace.json.gz'));
  assertNoOwnFrames(trace, 'record trace');
  const pprof = decodePprof(fs.readFileSync(path.join(dir, 'hidden', 'profile.pb.gz')));
  assert.deepEqual(pprof.p.function.map((f) => pprof.str(f.filename)).filter((f) => OWN_FILE.test(f)), []);
  assert.equal(pprof.sum(0), trace.samples.length);
  const heap = readProfile(fs.readFileSync(path.join(dir, 'hidden', 'profile.heap.pb.gz')), { profilerFrames: true });
  assertNoOwnFrames(heap, 'record heap');
  assert.deepEqual(heap.frames.filter((f) => f.name === '(selfprof)'), [], 'record heap: selfprof\'s own allocations left out');

  const shown = record(path.join(dir, 'shown'), '--profiler-frames');
  const shownTrace = gunzipJson(path.join(dir, 'shown', 'profile.trace.json.gz'));
  assert.ok(on(shownTrace, 'withLabels') > 0, 'withLabels as recorded');
  assert.ok(shownTrace.resources.some((r) => /\/lib\/cli\/record-hook\.js$/.test(r)), 'the preload as recorded');
  assert.ok(shown.stdout.length > 0);
  // The heap profile as recorded, hidden when read: selfprof's own allocations left out.
  const shownHeap = readProfile(fs.readFileSync(path.join(dir, 'shown', 'profile.heap.pb.gz')), { profilerFrames: true });
  assert.ok(shownHeap.frames.some((f) => isOwn(shownHeap, f)), 'selfprof allocated');
  const bytes = assertHeapHiddenFrom(shownHeap, readProfile(fs.readFileSync(path.join(dir, 'shown', 'profile.heap.pb.gz'))), 'heap');
  assert.ok(bytes > 0, 'some of the heap as recorded is selfprof\'s');

  // The CLI's views of the trace recorded with them: hidden unless --profiler-frames.
  const file = path.join(dir, 'shown', 'profile.trace.json.gz');
  const run = (...args) => spawnSync(process.execPath, [cli, ...args], { encoding: 'utf8', timeout: 30_000, env: { ...process.env, SELFPROF_PROFILER_FRAMES: '' } });
  const report = run('report', file, '--top', '500');
  assert.equal(report.status, 0, report.stderr);
  // The report's table lists functions by their own samples: withLabels, a thin wrapper,
  // has none in some runs (CI, Node 24 and 26); selfprof's files together always have some.
  assert.doesNotMatch(report.stdout, /withLabels|record-hook|lib\/capture\//);
  assert.match(run('report', file, '--top', '500', '--profiler-frames').stdout, /\blib\/capture\/(?:[\w-]+\/)?[\w-]+\.js:\d+/);
  assert.doesNotMatch(run('convert', file, '--to', 'folded').stdout, /\bwithLabels\b/);
  assert.match(run('convert', file, '--to', 'folded', '--profiler-frames').stdout, /\bwithLabels\b/);
  const fromEnv = spawnSync(process.execPath, [cli, 'convert', file, '--to', 'folded'], { encoding: 'utf8', env: { ...process.env, SELFPROF_PROFILER_FRAMES: '1' } });
  assert.match(fromEnv.stdout, /\bwithLabels\b/, 'SELFPROF_PROFILER_FRAMES=1 is the default of --profiler-frames');
  const diff = run('diff', file, file, '--top', '500');
  assert.equal(diff.status, 0, diff.stderr);
  assert.doesNotMatch(diff.stdout, /withLabels/);
  fs.rmSync(dir, { recursive: true });
});

test('a copy of selfprof loaded twice, from a linked directory of another name, is found by its root', () => {
  // Named with what a file URL cannot keep as it is: Node drops the line break and reads
  // the backslash as a slash in the scripts' URLs.
  const dir = tmp('twice');
  const vendored = path.join(dir, 'vendored\nb c"d\'e\\f');
  fs.symlinkSync(ROOT, vendored);
  const script = `
    const a = require(${JSON.stringify(ROOT)});
    const b = require(${JSON.stringify(vendored)});
    if (a.withLabels === b.withLabels) throw new Error('one copy');
    function vendoredWork() { let x = 0; for (let i = 0; i < 2e6; i++) x += Math.sqrt(i); return x; }
    (async () => {
      const [p, q] = [0, 1].map(() => new a.Profiler({ sampleInterval: 1, maxBufferSize: 1e5 }));
      for (let i = 0; i < 20; i++) b.withLabels({ k: 'v' }, vendoredWork);
      const [shown, hidden] = await Promise.all([p.stop({ profilerFrames: true }), q.stop()]);
      process.stdout.write(JSON.stringify({ shown, hidden }));
    })();`;
  const r = spawnSync(process.execPath, ['--preserve-symlinks', '-e', script], { encoding: 'utf8', timeout: 30_000 });
  assert.equal(r.status, 0, r.stderr);
  const { shown, hidden } = JSON.parse(r.stdout);
  const second = (t) => t.resources.filter((u) => u.startsWith(pathToFileURL(dir).href));
  assert.ok(second(shown).some((u) => u.includes('/lib/capture/labels/')), 'the second copy ran withLabels');
  assert.deepEqual(second(hidden), []);
  assert.ok(on(hidden, 'vendoredWork') > 0);
  fs.rmSync(dir, { recursive: true });
});

test('in headless Chromium: the report\'s flame graph has (selfprof) and no selfprof box; profilerFrames shows them', async (t) => {
  // Under CI a missing Chromium is a failure, never a skip (tools.js).
  if (!fs.existsSync(CHROMIUM) && missing(t, NO_CHROMIUM)) return;
  const out = path.join(ROOT, 'out', 'test-report');
  fs.mkdirSync(out, { recursive: true });
  const browser = await launchChromium();
  try {
    const boxes = async (options, file) => {
      fs.writeFileSync(file, htmlReport(api.shown, { sampleInterval: 1, ...options }));
      const page = await browser.newPage({ viewport: { width: 1400, height: 1000 } });
      await page.route('**/*', (route) => (route.request().url().startsWith('file:') ? route.continue() : route.abort()));
      await page.goto(pathToFileURL(file).href);
      const names = await page.$$eval('#flamegraph .frame', (els) => els.map((e) => e.dataset.name));
      const total = Number(await page.textContent('#total-samples'));
      const top = await page.$$eval('#top-functions td.fn', (els) => els.map((e) => e.textContent));
      await page.close();
      return { names, total, top };
    };
    const hidden = await boxes({}, path.join(out, 'profiler-frames-hidden.html'));
    assert.equal(hidden.total, api.shown.samples.length);
    assert.ok(hidden.names.includes('(selfprof)') && hidden.names.includes('userLookup'));
    assert.deepEqual(hidden.names.filter((n) => OWN_NAMES.includes(n)), []);
    assert.deepEqual(hidden.top.filter((n) => OWN_NAMES.includes(n)), []);
    const shown = await boxes({ profilerFrames: true }, path.join(out, 'profiler-frames-shown.html'));
    assert.equal(shown.total, api.shown.samples.length);
    assert.ok(shown.names.includes('withLabels'));
  } finally {
    await browser.close();
  }
});
