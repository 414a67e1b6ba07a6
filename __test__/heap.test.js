'use strict';
// Heap profiles: V8's real sampling heap profiler, the pprof decoded by pprof-format, the
// converters, the CLI and the report reading it as bytes.
const { test } = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const zlib = require('node:zlib');
const { spawnSync } = require('node:child_process');
const { start, convert, readProfile, htmlReport } = require('..');
const { pathToFileURL } = require('node:url');
const { startHeapSampling, nativeReadUnavailable } = require('../lib/capture/heap');
const { native } = require('../lib/native');
const { decodePprof, definitionOf } = require('./helpers');

/** How this host reads heap profiles: through V8's C++ API on Linux where the build was
 * checked against this V8's headers (Node 20, 22, 24, 26), else through the inspector. */
const V8_API_HERE = process.platform === 'linux' && native.heapProfileLayout().v8.includes(process.versions.v8.split('.').slice(0, 2).join('.'));
const READ_HERE = V8_API_HERE ? 'v8-api' : 'inspector';
/** The pprof's comment that says how its heap profiles were read. */
const readOf = (d) => /^selfprof-heap: read=([\w,-]+)/.exec(d.p.comment.map(d.str).find((c) => c.startsWith('selfprof-heap:')) ?? '')?.[1];
/** A heap chunk built alone: `[pprof, trace]`. */
const buildChunk = (c, interval) =>
  native.buildHeapProfileSync([{ profile: c.profile, urls: c.urls, atMs: c.atMs }], { startUnixMs: Date.now(), durationMs: 1, intervalBytes: interval, trace: true });

const cli = path.join(__dirname, '..', 'bin', 'selfprof.js');
const run = (args, opts = {}) => spawnSync(process.execPath, [cli, ...args], { encoding: 'utf8', timeout: 120_000, ...opts });

/** In-use bytes per innermost function of a decoded heap pprof. */
function bytesByLeaf(d) {
  const by = new Map();
  for (const s of d.p.sample) {
    const leaf = d.names(s)[0];
    by.set(leaf, (by.get(leaf) ?? 0) + Number(s.value[1]));
  }
  return by;
}

let kept = [];
/**
 * Allocates and keeps `mib` MiB in arrays of 64 KiB, and no small object: V8's estimate
 * makes a sampled object of `size` bytes stand for 64 KiB / size of them, and one sampled
 * 16-byte number (`fill(i + 0.5)`, as it was) made the hog 4,605 objects where it has 512
 * (CI's Node 24; 5 of 120 snapshots here). The slots it keeps them in are `slots`' own.
 */
function heapHogFunction(mib) {
  kept = slots(mib * 16);
  for (let i = 0; i < mib * 16; i++) kept[i] = new Array(8192).fill(0.5);
}
const slots = (n) => new Array(n).fill(null);

/**
 * The heap hog's 32 MiB (512 arrays of 8192 doubles) in the decoded pprof `d`: V8's
 * estimate is statistical, within 25%, and most of the profile; its objects are estimated
 * from the samples alone (V8 scales bytes, selfprof counts), a looser bound.
 */
function assertHog(d) {
  const by = bytesByLeaf(d);
  const hog = by.get('heapHogFunction') ?? 0;
  const total = [...by.values()].reduce((a, b) => a + b, 0);
  assert.ok(Math.abs(hog - 32 * 2 ** 20) < 8 * 2 ** 20, `heapHogFunction holds ${(hog / 2 ** 20).toFixed(1)} MiB`);
  assert.ok(hog > 0.8 * total, `most of ${(total / 2 ** 20).toFixed(1)} MiB is heapHogFunction's`);
  const objects = d.p.sample.filter((s) => d.names(s)[0] === 'heapHogFunction').reduce((n, s) => n + Number(s.value[0]), 0);
  // (Measured at a 64 KiB interval: the hog's first run, 371-414 objects in 24 processes;
  // warm, 459-577 in 400 snapshots on Node 20 and 26. V8's sampler, not the count: the
  // bytes are right in both.)
  assert.ok(objects >= 32 * 16 * 0.5 && objects <= 32 * 16 * 1.5, `${objects} objects of 512`);
  return hog;
}

test('a known allocation in a named function: most in-use bytes of the heap pprof are that function', async () => {
  const heap = startHeapSampling(64 * 1024);
  try {
    heapHogFunction(32);
    const { profile, atMs } = heap.take();
    const [pprof] = native.buildHeapProfileSync([{ profile, atMs }], { startUnixMs: Date.now(), durationMs: 1, intervalBytes: heap.interval });
    const d = decodePprof(pprof);
    assert.deepEqual(d.p.sampleType.map((v) => `${d.str(v.type)}/${d.str(v.unit)}`), ['inuse_objects/count', 'inuse_space/bytes']);
    assert.equal(`${d.str(d.p.periodType.type)}/${d.str(d.p.periodType.unit)}`, 'inuse_space/bytes');
    assert.equal(Number(d.p.period), 64 * 1024);
    const hog = assertHog(d);

    // The converters keep bytes as weights: folded counts bytes, trace carries them, .cpuprofile refuses.
    const folded = convert(pprof, { to: 'folded' });
    const foldedHog = folded
      .split('\n')
      .filter((l) => /;heapHogFunction \d+$/.test(l))
      .reduce((n, l) => n + Number(l.split(' ').at(-1)), 0);
    assert.equal(foldedHog, hog);
    // As recorded: read with selfprof's own allocations (which reading leaves out by default).
    const trace = readProfile(pprof, { profilerFrames: true });
    assert.equal(trace.weight.type, 'inuse_space');
    assert.equal(trace.weight.values.length, trace.samples.length);
    assert.equal(trace.samples.length, d.p.sample.length, 'one sample per allocating stack, not expanded');
    assert.throws(() => convert(pprof, { to: 'cpuprofile' }), /heap profile .* has no \.cpuprofile form/);
    const again = decodePprof(convert(pprof, { to: 'pprof', profilerFrames: true }));
    assert.equal(again.sum(1), d.sum(1), 'pprof -> pprof keeps the bytes');
    assert.equal(again.sum(0), d.sum(0), 'and the objects');
  } finally {
    heap.release();
    kept.length = 0;
  }
});

test("a snapshot is read through V8's C++ API: the known function's bytes, objects and frames, as the inspector reads the same sampler", () => {
  const heap = startHeapSampling(64 * 1024);
  try {
    heapHogFunction(32);
    const snap = heap.snapshot();
    const insp = heap.take();
    assert.equal(snap.read, READ_HERE, `read through ${snap.read} on ${process.platform}, V8 ${process.versions.v8}`);
    assert.equal(nativeReadUnavailable() === null, V8_API_HERE, String(nativeReadUnavailable()));
    if (snap.read === 'v8-api') {
      assert.ok(snap.profile instanceof Uint8Array, 'bytes, no JSON');
      assert.ok(snap.urls.includes(pathToFileURL(__filename).href), 'this file, as the CPU profiler names it');
    }
    const [pprof, traceGz] = buildChunk(snap, heap.interval);
    const d = decodePprof(pprof);
    assert.equal(readOf(d), READ_HERE);
    assertHog(d);
    // The trace the report shows: the hog's frame in this file, at its line.
    const trace = JSON.parse(zlib.gunzipSync(traceGz));
    const frame = trace.frames.find((f) => f.name === 'heapHogFunction');
    assert.equal(trace.resources[frame.resourceId], pathToFileURL(__filename).href);
    assert.equal(frame.line, definitionOf(__filename, 'heapHogFunction').line);

    // The same sampler through the inspector: the hog's stacks and bytes alike.
    const di = decodePprof(buildChunk(insp, heap.interval)[0]);
    const stacks = (x) =>
      x.p.sample
        .filter((s) => x.names(s)[0] === 'heapHogFunction')
        .map((s) => `${x.frames(s).map((f) => `${x.str(f.name)}@${x.str(f.filename)}:${f.startLine}`).join(' < ')} ${s.value[1]}`)
        .sort();
    assert.deepEqual(stacks(d), stacks(di));
  } finally {
    heap.release();
    kept.length = 0;
  }
});

test("where V8's C++ API cannot read the profile, a snapshot is the inspector's, and its pprof says so", () => {
  const unreadable = native.heapProfileUnreadable;
  native.heapProfileUnreadable = () => 'V8 0.0 is not a version this build was checked against (a test)';
  const heap = startHeapSampling(64 * 1024);
  try {
    heapHogFunction(8);
    assert.match(nativeReadUnavailable(), /a test/);
    const snap = heap.snapshot();
    assert.equal(snap.read, 'inspector');
    assert.equal(typeof snap.profile, 'string');
    const d = decodePprof(buildChunk(snap, heap.interval)[0]);
    assert.equal(readOf(d), 'inspector');
    const hog = bytesByLeaf(d).get('heapHogFunction') ?? 0;
    assert.ok(Math.abs(hog - 8 * 2 ** 20) < 2 * 2 ** 20, `heapHogFunction holds ${(hog / 2 ** 20).toFixed(1)} MiB`);
  } finally {
    native.heapProfileUnreadable = unreadable;
    heap.release();
    kept.length = 0;
  }
});

test("service mode: a worker's heap read through V8's C++ API crosses to the main thread; where it cannot be read, one line says so", () => {
  const root = path.join(__dirname, '..');
  // A case's patch of the binding is preloaded, so it holds in the worker too.
  const preload = (patch) => `const { native } = require(${JSON.stringify(path.join(root, 'lib', 'native'))});\n${patch}\n`;
  const app = `
    const session = require(${JSON.stringify(root)}).start({ service: 'heapw', period: 60000, heapSamplingInterval: 65536, exporters: [{ type: 'file', dir: process.argv[1] }] });
    const { Worker } = require('node:worker_threads'); // the Worker start() wraps
    const kept = [];
    function mainHeapHog() { for (let i = 0; i < 64; i++) kept.push(new Array(8192).fill(i + 0.5)); }
    // The profile holds what is alive: the backing store each fill() leaves behind (the
    // array's elements change kind) goes first, whether or not a collection would have
    // come by the read (CI's Node 26 once read 6.0 MiB here, of 4 alive).
    // (A worker refuses --expose-gc in its execArgv: the flag is set here.)
    const collect = () => { require('node:v8').setFlagsFromString('--expose-gc'); require('node:vm').runInNewContext('gc')(); };
    mainHeapHog();
    collect();
    // Stopped once the worker allocated and the session knows it: the session answers the
    // agent's hello (sent after its 'started') with a config, which this listener of
    // selfprof's channel hears too.
    const channel = new BroadcastChannel('selfprof:threads:v1');
    let ready = false;
    let known = false;
    const stop = async () => { if (!ready || !known) return; channel.close(); await session.stop(); await w.terminate(); };
    const w = new Worker(\`
      const { parentPort } = require('node:worker_threads');
      const kept = [];
      function workerHeapHog() { for (let i = 0; i < 128; i++) kept.push(new Array(8192).fill(i + 0.5)); }
      workerHeapHog();
      require('node:v8').setFlagsFromString('--expose-gc');
      require('node:vm').runInNewContext('gc')();
      parentPort.postMessage('ready');
      setInterval(() => {}, 1000);
    \`, { eval: true });
    let started = false;
    channel.onmessage = (e) => {
      if (e.data?.type === 'started' && e.data.threadId === w.threadId) started = true;
      else if (e.data?.type === 'config' && started) { known = true; stop(); }
    };
    w.once('message', () => { ready = true; stop(); });
  `;
  const cases = [
    { name: 'as built', patch: '', read: READ_HERE, line: V8_API_HERE ? /heap too;/ : /heap too \(read through the inspector: / },
    { name: 'unreadable here', patch: "native.heapProfileUnreadable = () => 'not on this host (a test)';", read: 'inspector', line: /heap too \(read through the inspector: not on this host \(a test\)\)/ },
  ];
  if (V8_API_HERE) {
    // Readable as far as is known, then a read fails: one warning, the inspector's from then on.
    cases.push({ name: 'a read that fails', patch: "native.heapProfileRead = () => { throw new Error('read failed (a test)'); };", read: 'inspector', line: /heap too;/, warning: /heap profiles are read through the inspector from now on, .*read failed \(a test\)/ });
  }
  for (const c of cases) {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'selfprof-heapw-'));
    try {
      fs.writeFileSync(path.join(dir, 'patch.js'), preload(c.patch));
      const r = spawnSync(process.execPath, ['-r', path.join(dir, 'patch.js'), '-e', app, dir], { encoding: 'utf8', timeout: 60_000 });
      assert.equal(r.status, 0, r.stderr);
      assert.match(r.stderr, c.line, `${c.name}: ${r.stderr}`);
      // One warning a thread (the main thread's and the worker's).
      if (c.warning) assert.equal(r.stderr.split('\n').filter((l) => c.warning.test(l)).length, 2, `${c.name}: one warning a thread: ${r.stderr}`);
      else assert.doesNotMatch(r.stderr, /Warning/, `${c.name}: ${r.stderr}`);
      const heaps = fs.readdirSync(dir).filter((f) => f.endsWith('.heap.pb.gz'));
      assert.equal(heaps.length, 1, fs.readdirSync(dir).join());
      const d = decodePprof(fs.readFileSync(path.join(dir, heaps[0])));
      assert.equal(readOf(d), c.read, c.name);
      const by = bytesByLeaf(d);
      for (const [fn, mib] of [['mainHeapHog', 4], ['workerHeapHog', 8]]) {
        const bytes = by.get(fn) ?? 0;
        assert.ok(Math.abs(bytes - mib * 2 ** 20) < (mib * 2 ** 20) / 2, `${c.name}: ${fn} holds ${(bytes / 2 ** 20).toFixed(1)} MiB of ${mib}`);
      }
      const worker = d.p.sample.filter((s) => d.names(s)[0] === 'workerHeapHog');
      assert.ok(worker.every((s) => /^Worker #\d+ Event Loop$/.test(d.labels(s)['thread name'])), `${c.name}: the worker's thread`);
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  }
});

test('heap options: bad intervals are one clear error; a second sampler shares the first', () => {
  for (const bad of [0, 1023, 2 ** 31, 1.5, -1]) assert.throws(() => startHeapSampling(bad), RangeError);
  for (const bad of ['1', NaN, Infinity, null]) assert.throws(() => startHeapSampling(bad), TypeError);
  assert.throws(() => start({ heap: 'yes' }), /heap must be a boolean/);
  assert.throws(() => start({ heapSamplingInterval: 10 }), /start: heapSamplingInterval must be a whole number of bytes from 1024/);
  const a = startHeapSampling(128 * 1024);
  const b = startHeapSampling(256 * 1024);
  assert.equal(b.interval, 128 * 1024, "the first user's interval is the one in use");
  a.release();
  assert.ok(b.take().profile.length > 0, 'still sampling while a user holds it');
  b.release();
  assert.throws(() => b.take(), /stopped/);
});

test('a huge allocation is one heap sample, not a crash', () => {
  const heap = startHeapSampling();
  try {
    const big = Buffer.alloc(1); // external memory is not V8 heap; a 256 MiB JS array is
    const huge = new Array(32 * 2 ** 20).fill(0.5); // 256 MiB of doubles
    const { profile, atMs } = heap.take();
    const [pprof] = native.buildHeapProfileSync([{ profile, atMs }], { startUnixMs: 0, durationMs: 0, intervalBytes: heap.interval });
    const d = decodePprof(pprof);
    assert.ok(d.sum(1) >= 200 * 2 ** 20, `${d.sum(1)} bytes`);
    assert.equal(huge.length + big.length, 32 * 2 ** 20 + 1);
  } finally {
    heap.release();
  }
});

test('service mode: the heap pprof beside each period, off with heap: false; file exporter', async () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'selfprof-heap-'));
  const session = start({ service: 'heapy', period: 60_000, exporters: [{ type: 'file', dir }] });
  heapHogFunction(16);
  await session.stop();
  const heaps = fs.readdirSync(dir).filter((f) => f.endsWith('.heap.pb.gz'));
  assert.equal(heaps.length, 1, fs.readdirSync(dir).join());
  const d = decodePprof(fs.readFileSync(path.join(dir, heaps[0])));
  assert.ok((bytesByLeaf(d).get('heapHogFunction') ?? 0) > 8 * 2 ** 20, 'the hog is in the period\'s heap profile');
  assert.ok(Number(d.p.timeNanos) > 0 && Number(d.p.durationNanos) > 0, 'the period\'s window');
  kept.length = 0;

  const off = fs.mkdtempSync(path.join(os.tmpdir(), 'selfprof-heap-off-'));
  const s2 = start({ service: 'noheap', period: 60_000, heap: false, exporters: [{ type: 'file', dir: off }] });
  await s2.stop();
  assert.deepEqual(fs.readdirSync(off).filter((f) => f.includes('.heap.')), []);
  const env = spawnSync(process.execPath, ['-e', `require('./').start({ service: 'x', exporters: [{ type: 'file', dir: process.argv[1] }] }).stop()`, off], {
    cwd: path.join(__dirname, '..'),
    env: { ...process.env, SELFPROF_HEAP: 'maybe' },
    encoding: 'utf8',
  });
  assert.match(env.stderr, /SELFPROF_HEAP must be 1 or 0/);
  fs.rmSync(dir, { recursive: true });
  fs.rmSync(off, { recursive: true });
});

test('selfprof record --heap and report: bytes per function, a flame graph of bytes', async () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'selfprof-heaprec-'));
  const app = path.join(dir, 'app.js');
  fs.writeFileSync(app, `const kept = (globalThis.kept = []); // still in use at exit\n\nfunction recordHeapHog() { for (let i = 0; i < 320; i++) kept.push(new Array(8192).fill(i + 0.5)); }\nrecordHeapHog();\n`);
  const r = run(['record', '-o', path.join(dir, 'out'), '--heap', '--heap-interval', '65536', '--', process.execPath, app], { cwd: dir });
  assert.equal(r.status, 0, r.stderr);
  assert.match(r.stdout, /heap profile \(inuse_space\): [\d.]+ MiB/);
  const files = fs.readdirSync(path.join(dir, 'out')).sort();
  assert.deepEqual(files, ['profile.heap.html', 'profile.heap.pb.gz', 'profile.html', 'profile.pb.gz', 'profile.trace.json.gz']);
  const d = decodePprof(fs.readFileSync(path.join(dir, 'out', 'profile.heap.pb.gz')));
  const hog = bytesByLeaf(d).get('recordHeapHog') ?? 0;
  assert.ok(Math.abs(hog - 20 * 2 ** 20) < 5 * 2 ** 20, `recordHeapHog: ${(hog / 2 ** 20).toFixed(1)} MiB of 20`);

  const rep = run(['report', path.join(dir, 'out', 'profile.heap.pb.gz')]);
  assert.equal(rep.status, 0, rep.stderr);
  assert.match(rep.stdout, /^heap profile \(inuse_space\): /);
  assert.match(rep.stdout, /\n\s*[\d.]+ MiB\s+[\d.]+\s+[\d.]+ MiB\s+[\d.]+\s+recordHeapHog /, rep.stdout);
  assert.doesNotMatch(rep.stdout, /0 samples \(0 in JS\)/);
  const diff = run(['diff', path.join(dir, 'out', 'profile.heap.pb.gz'), path.join(dir, 'out', 'profile.pb.gz')]);
  assert.equal(diff.status, 1);
  assert.match(diff.stderr, /is a heap profile \(inuse_space\); diff compares CPU profiles/);
  const conv = run(['convert', path.join(dir, 'out', 'profile.heap.pb.gz'), '--to', 'cpuprofile']);
  assert.equal(conv.status, 1);
  assert.match(conv.stderr, /no \.cpuprofile form/);

  const html = htmlReport(fs.readFileSync(path.join(dir, 'out', 'profile.heap.pb.gz')));
  assert.match(html, /"weight":\{"type":"inuse_space","unit":"bytes"/);
  fs.rmSync(dir, { recursive: true });
});

test('a trace with bad weights is refused', () => {
  const trace = { resources: [], frames: [{ name: 'f' }], stacks: [{ frameId: 0 }], samples: [{ timestamp: 0, stackId: 0 }], contexts: [], weight: { type: 'inuse_space', unit: 'bytes', values: [] } };
  assert.throws(() => convert(JSON.stringify(trace), { to: 'folded' }), /weight\.values .* one finite number per sample/);
  trace.weight.values = [1024];
  assert.equal(convert(JSON.stringify(trace), { to: 'folded' }), 'f 1024\n');
  assert.equal(zlib.gunzipSync(convert(JSON.stringify(trace), { to: 'pprof' })).length > 0, true);
});

test('taking a heap profile runs no garbage collection on the thread; it still has the live objects', () => {
  const v8 = require('node:v8');
  const h = startHeapSampling(64 * 1024);
  try {
    heapHogFunction(4);
    const gcs = new v8.GCProfiler();
    gcs.start();
    const flats = [];
    for (let i = 0; i < 5; i++) flats.push(JSON.parse(h.take().profile));
    for (let i = 0; i < 5; i++) h.snapshot();
    const majors = gcs.stop().statistics.filter((s) => s.gcType === 'MarkSweepCompact').length;
    // The inspector's sampler ran a full collection before every profile.
    assert.ok(majors <= 1, `${majors} full collections in 10 heap profiles`);
    for (const flat of flats) {
      const hog = flat.nodes.findIndex((n) => n.name === 'heapHogFunction');
      assert.ok(hog >= 0, 'the function that keeps 4 MiB is in the profile');
      let bytes = 0;
      for (let k = 0; k < flat.samples.length; k += 2) if (flat.samples[k] === hog) bytes += flat.samples[k + 1];
      assert.ok(bytes >= 2 ** 20, `heapHogFunction holds ${bytes} bytes of samples`);
    }
  } finally {
    h.release();
  }
});

test("where V8's API is not reachable the inspector samples; a sampler someone else started is shared and left running", () => {
  const inspector = require('node:inspector');
  const { post } = require('../lib/capture/inspector-post');
  const hogIn = (flat) => flat.nodes.some((n) => n.name === 'heapHogFunction');
  heapHogFunction(1);
  // Not reachable (another runtime): the inspector's sampler, as before.
  const startNative = native.heapSamplerStart;
  native.heapSamplerStart = () => 'unavailable';
  try {
    const h = startHeapSampling(64 * 1024);
    heapHogFunction(1);
    assert.ok(hogIn(JSON.parse(h.take().profile)));
    h.release();
  } finally {
    native.heapSamplerStart = startNative;
  }
  // DevTools (another session) samples already: selfprof reads that sampler, and its
  // release does not stop it.
  const other = new inspector.Session();
  other.connect();
  post(other, 'HeapProfiler.enable');
  post(other, 'HeapProfiler.startSampling', { samplingInterval: 64 * 1024 });
  try {
    const h = startHeapSampling(64 * 1024);
    heapHogFunction(1);
    assert.ok(hogIn(JSON.parse(h.take().profile)));
    h.release();
    const { profile } = post(other, 'HeapProfiler.getSamplingProfile');
    assert.ok(profile.samples.length > 0, "the other session's sampler still runs");
  } finally {
    post(other, 'HeapProfiler.stopSampling');
    other.disconnect();
  }
});
