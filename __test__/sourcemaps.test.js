'use strict';
// Source maps with real tool output (tsc, esbuild bundled and minified, esbuild with an
// inline map, tsx): the hot function's frame comes back to app.ts, its line and its name,
// in the trace, pprof (read by pprof-format), folded stacks, .cpuprofile and the HTML
// report (headless Chromium). Turned off, frames are V8's; a map that cannot be used
// leaves its frames as V8 gave them, says why, and never loses the recording.

const { test, before, after } = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const zlib = require('node:zlib');
const { spawnSync } = require('node:child_process');
const { pathToFileURL } = require('node:url');
const { Profiler, convert, readProfile, fromCpuProfile, start } = require('..');
const { assertValidTrace, decodePprof, lineIn, lineOf, sampledCall, spin, v8CpuProfile } = require('./helpers');
const { group } = require('../lib/capture/group');
const { native } = require('../lib/native');

const ROOT = path.join(__dirname, '..');
const CLI = path.join(ROOT, 'bin', 'selfprof.js');
const BIN = path.join(ROOT, 'node_modules', '.bin');
const FIXTURE = path.join(__dirname, 'fixtures', 'sourcemaps');
const { missing, CHROMIUM, NO_CHROMIUM, launchChromium } = require('./tools');
const OUT = path.join(ROOT, 'out', 'test-sourcemaps');

let dir; // app.ts, main.ts and the tools' output
let appUrl; // app.ts's file:// URL
let hotLoopLine; // the line of `export function hotLoop(` in app.ts
let hotLine; // the line marked HOT-LINE

before(() => {
  dir = fs.realpathSync(fs.mkdtempSync(path.join(os.tmpdir(), 'selfprof-sourcemaps-')));
  for (const f of ['app.ts', 'main.ts']) fs.copyFileSync(path.join(FIXTURE, f), path.join(dir, f));
  const app = fs.readFileSync(path.join(dir, 'app.ts'), 'utf8');
  appUrl = pathToFileURL(path.join(dir, 'app.ts')).href;
  hotLoopLine = lineIn(app, 'export function hotLoop(');
  hotLine = lineIn(app, 'Math.sqrt(i) % 7');

  // tsc: CommonJS with a .js.map beside each file, app.ts's text in it (inlineSources: the
  // report shows a mapped file's text only from its map, never from a file a map names).
  fs.writeFileSync(
    path.join(dir, 'tsconfig.json'),
    JSON.stringify({
      compilerOptions: { target: 'es2022', module: 'commonjs', sourceMap: true, inlineSources: true, outDir: 'tsc', rootDir: '.', strict: true, types: [] },
      files: ['app.ts'],
    }),
  );
  const tsc = spawnSync(path.join(BIN, 'tsc'), ['-p', dir], { encoding: 'utf8' });
  assert.equal(tsc.status, 0, `tsc: ${tsc.stdout}${tsc.stderr}`);

  // esbuild: a minified bundle with its map beside it (names of renamed identifiers), and
  // one file with an inline map.
  const esbuild = require('esbuild');
  const common = { entryPoints: [path.join(dir, 'app.ts')], platform: 'node', format: 'cjs', logLevel: 'silent' };
  esbuild.buildSync({ ...common, bundle: true, minify: true, sourcemap: true, outfile: path.join(dir, 'min', 'app.js') });
  esbuild.buildSync({ ...common, sourcemap: 'inline', outfile: path.join(dir, 'inline', 'app.js') });
  fs.mkdirSync(OUT, { recursive: true });
});

after(() => fs.rmSync(dir, { recursive: true, force: true }));

let copies = 0;
/**
 * A copy of a generated script beside it (its map comment still finds its map): a module
 * V8 has not optimized yet. Run again, V8 inlines hotLoop into its caller at some point (on
 * Node 24 within a few runs), and the samples are the caller's.
 */
function fresh(file) {
  const copy = file.replace(/\.js$/, `-${++copies}.js`);
  fs.copyFileSync(file, copy);
  return copy;
}

/** The signals a hot function runs for: at 1 ms, 30 samples in it and to spare however
 * loaded the machine is (300 ms of wall time gave 27 under two busy loops). */
const HOT_SIGNALS = 60;

/** Runs `file`'s hot function until the sampler has signalled `signals` times. */
function runHot(file, signals = HOT_SIGNALS) {
  const until = group.ticks() + signals;
  return require(file).runWhile(() => group.ticks() < until);
}

/** Runs `file`'s hot function under one profiler per `stops` entry (stop options). */
async function profileModule(file, stops) {
  require(file);
  const profilers = stops.map(() => new Profiler({ sampleInterval: 1, maxBufferSize: 100_000 }));
  runHot(file);
  return Promise.all(profilers.map((p, i) => p.stop(stops[i])));
}

/** The frame with the most self samples, and its id. */
function hottest(trace) {
  const self = new Map();
  for (const s of trace.samples) {
    if (s.stackId === undefined) continue;
    const f = trace.stacks[s.stackId].frameId;
    self.set(f, (self.get(f) ?? 0) + 1);
  }
  const [id, n] = [...self].sort((a, b) => b[1] - a[1])[0];
  return { id, frame: trace.frames[id], samples: n };
}

/**
 * The hot function is hotLoop in app.ts at its line. Its line ticks are app.ts's lines
 * (`lines: true`), or, where the tool put the function on one generated line (minified
 * code, tsx's output), none: V8 counts ticks per generated line, which holds many.
 */
function assertMapped(trace, what, { lines = true } = {}) {
  assertValidTrace(trace);
  const { id, frame, samples } = hottest(trace);
  assert.equal(frame.name, 'hotLoop', `${what}: the hottest function is named as in app.ts`);
  assert.equal(trace.resources[frame.resourceId], appUrl, `${what}: in app.ts`);
  assert.equal(frame.line, hotLoopLine, `${what}: at hotLoop's line in app.ts`);
  assert.ok(samples >= 30, `${what}: ${samples} samples in hotLoop`);
  // Line ticks: the loop's line of app.ts has the most.
  const stacks = new Set(trace.stacks.flatMap((s, i) => (s.frameId === id ? [i] : [])));
  const perLine = new Map();
  for (const l of trace.lineTicks ?? []) if (stacks.has(l.stackId)) perLine.set(l.line, (perLine.get(l.line) ?? 0) + l.ticks);
  if (lines) {
    const top = [...perLine].sort((a, b) => b[1] - a[1])[0];
    assert.ok(top, `${what}: hotLoop has line ticks`);
    assert.equal(top[0], hotLine, `${what}: the hot line is app.ts's marked line (${JSON.stringify([...perLine])})`);
  } else {
    assert.deepEqual([...perLine], [], `${what}: no line of app.ts is claimed`);
    assert.ok(trace.sourceMaps.droppedLineTicks >= samples / 2, `${what}: the ticks are counted as dropped`);
  }
  return { id, frame };
}

/** The generated position selfprof kept for frame `id`. */
function generatedOf(trace, id) {
  return trace.sourceMaps.generated.find((g) => g.frameId === id);
}

function assertPprof(buf, what) {
  const { p, str } = decodePprof(buf);
  const fns = p.function.filter((f) => str(f.name) === 'hotLoop');
  assert.equal(fns.length, 1, `${what}: one pprof function hotLoop`);
  assert.equal(str(fns[0].filename), appUrl, `${what}: its file is app.ts`);
  assert.equal(Number(fns[0].startLine), hotLoopLine, `${what}: at its line`);
}

function assertFoldedAndCpuprofile(trace, what, { lines = true } = {}) {
  const folded = convert(trace, { to: 'folded' });
  const hot = folded
    .trim()
    .split('\n')
    .filter((l) => /;hotLoop \d+$/.test(l))
    .reduce((n, l) => n + Number(l.slice(l.lastIndexOf(' ') + 1)), 0);
  assert.ok(hot >= 30, `${what}: folded stacks end in hotLoop (${hot} samples)`);
  const cp = JSON.parse(convert(trace, { to: 'cpuprofile' }));
  const node = cp.nodes.find((n) => n.callFrame.functionName === 'hotLoop');
  assert.equal(node.callFrame.url, appUrl, `${what}: .cpuprofile's url`);
  assert.equal(node.callFrame.lineNumber, hotLoopLine - 1, `${what}: .cpuprofile's 0-based line`);
  if (lines) assert.ok(node.positionTicks.some((t) => t.line === hotLine), `${what}: position ticks at app.ts's hot line`);
}

let tscTrace;

test('tsc: the hot function is in app.ts at its line, in the trace, pprof, folded stacks and .cpuprofile', async () => {
  const js = fresh(path.join(dir, 'tsc', 'app.js'));
  const [trace, pprof] = await profileModule(js, [undefined, { format: 'pprof' }]);
  tscTrace = trace;
  const { id } = assertMapped(trace, 'tsc');
  // The hot line's text, from the map's sourcesContent.
  assert.match(trace.sourceText?.[appUrl]?.[hotLine] ?? '', /total \+= Math\.sqrt\(i\) % 7; \/\/ HOT-LINE/);
  const generated = fs.readFileSync(js, 'utf8');
  const line = lineIn(generated, 'function hotLoop(');
  assert.notEqual(line, hotLoopLine, 'tsc moved it');
  const g = generatedOf(trace, id);
  const column = generated.split('\n')[line - 1].indexOf('(') + 1;
  assert.deepEqual([g.line, g.column, g.name], [line, column, undefined], 'its place in app.js is kept');
  const script = trace.sourceMaps.scripts[g.script];
  assert.deepEqual(script, { url: pathToFileURL(js).href, map: pathToFileURL(path.join(dir, 'tsc', 'app.js.map')).href });
  assertPprof(pprof, 'tsc pprof');
  assertFoldedAndCpuprofile(trace, 'tsc');
});

test('esbuild, bundled and minified: the name comes back from the map, in every format', async () => {
  const js = fresh(path.join(dir, 'min', 'app.js'));
  const [trace, pprof, off] = await profileModule(js, [undefined, { format: 'pprof' }, { sourceMaps: false }]);
  const { id } = assertMapped(trace, 'esbuild --minify', { lines: false });
  const g = generatedOf(trace, id);
  assert.equal(g.line, 1, 'minified: all on one line');
  assert.ok(g.name && g.name !== 'hotLoop' && g.name.length <= 2, `V8 knew it as ${g.name}`);
  assertPprof(pprof, 'minified pprof');
  assertFoldedAndCpuprofile(trace, 'minified', { lines: false });
  // Unmapped, the same recording's hot function is the minified one in the bundle.
  const raw = hottest(off);
  assert.equal(raw.frame.name, g.name);
  assert.equal(off.resources[raw.frame.resourceId], pathToFileURL(js).href);
  assert.equal(off.sourceMaps, undefined);
  assert.doesNotMatch(convert(off, { to: 'folded' }), /hotLoop/);
});

test('esbuild with an inline map (data: URL)', async () => {
  const js = fresh(path.join(dir, 'inline', 'app.js'));
  assert.match(fs.readFileSync(js, 'utf8'), /\/\/# sourceMappingURL=data:application\/json;base64,/);
  const [trace] = await profileModule(js, [undefined]);
  const { id } = assertMapped(trace, 'inline');
  assert.equal(trace.sourceMaps.scripts[generatedOf(trace, id).script].map, 'inline');
});

/** `selfprof record ARGS -- COMMAND`, in the package root; the traces it wrote, by file. */
function record(name, args, command, env = {}) {
  const out = path.join(dir, name);
  const r = spawnSync(process.execPath, [CLI, 'record', '-o', out, ...args, '--', ...command], {
    cwd: ROOT,
    encoding: 'utf8',
    timeout: 120_000,
    env: { ...process.env, RUN_MS: '600', ...env },
  });
  assert.equal(r.status, 0, `record: ${r.stdout}${r.stderr}`);
  const traces = fs
    .readdirSync(out)
    .filter((f) => f.endsWith('.trace.json.gz'))
    .map((f) => ({ file: path.join(out, f), trace: JSON.parse(zlib.gunzipSync(fs.readFileSync(path.join(out, f)))) }));
  return { out, stdout: r.stdout, traces };
}

/** The recorded process that ran app.ts. */
function appProcess(traces) {
  const found = traces.filter(({ trace }) => trace.frames.some((f) => f.name === 'hotLoop' || trace.resources[f.resourceId] === appUrl));
  assert.equal(found.length, 1, `one process ran app.ts (of ${traces.length})`);
  return found[0];
}

let tsxReport; // the HTML report `record` wrote for the tsx process

test('selfprof record -- npx tsx main.ts: the hot function at its line in app.ts (trace, pprof, report)', async () => {
  const { traces } = record('tsx', [], ['npx', 'tsx', path.join(dir, 'main.ts')]);
  const { file, trace } = appProcess(traces);
  // Behind two wrappers (npx's npm, tsx's launcher), the app's process is the one named profile.*.
  assert.ok(traces.length >= 3, `npx, tsx and the app were recorded (${traces.length})`);
  assert.equal(path.basename(file), 'profile.trace.json.gz');
  const { id } = assertMapped(trace, 'tsx', { lines: false });
  // tsx compiled app.ts in memory: the map is the one Node held for it.
  assert.equal(trace.sourceMaps.scripts[generatedOf(trace, id).script].map, 'runtime');
  assertPprof(fs.readFileSync(file.replace(/\.trace\.json\.gz$/, '.pb.gz')), 'tsx pprof');
  tsxReport = file.replace(/\.trace\.json\.gz$/, '.html');

  // The bug as filed: without source maps, tsx's generated line (not app.ts's).
  const off = appProcess(record('tsx-off', ['--no-source-maps'], ['npx', 'tsx', path.join(dir, 'main.ts')]).traces).trace;
  const raw = hottest(off);
  assert.equal(raw.frame.name, 'hotLoop');
  assert.equal(off.resources[raw.frame.resourceId], appUrl);
  assert.notEqual(raw.frame.line, hotLoopLine, `without maps, V8's line (${raw.frame.line})`);
  assert.equal(off.sourceMaps, undefined);
});

test('selfprof record --heap -- node --import tsx main.ts: one process, its summary names app.ts:line, its heap profile too', async () => {
  const { out, stdout, traces } = record('tsx-import', ['--heap', '--heap-interval', '4096'], [process.execPath, '--import', 'tsx', path.join(dir, 'main.ts')], {
    KEEP: '4000',
  });
  assertMapped(appProcess(traces).trace, 'node --import tsx', { lines: false });
  // The heap profile, built by the CLI, with the map tsx left in the app's process.
  const { p, str } = decodePprof(fs.readFileSync(path.join(out, 'profile.heap.pb.gz')));
  const keepLine = lineOf(path.join(dir, 'app.ts'), 'export function keepArrays(');
  const keepers = p.function.filter((f) => str(f.name) === 'keepArrays').map((f) => `${str(f.filename)}:${f.startLine}`);
  assert.deepEqual(keepers, [`${appUrl}:${keepLine}`]);
  const row = stdout.split('\n').find((l) => /\bhotLoop\b/.test(l));
  assert.ok(row, stdout);
  assert.match(row, new RegExp(`app\\.ts:${hotLoopLine}:\\d+\\s*$`));
});

test('the HTML report in Chromium: hotLoop at app.ts:line (tsx, from record), app.ts\'s hot line and its text from the map (tsc)', async (t) => {
  if (!fs.existsSync(CHROMIUM)) {
    if (missing(t, NO_CHROMIUM)) return;
  }
  assert.ok(tsxReport && tscTrace, 'the tsx and tsc recordings ran');
  const browser = await launchChromium();
  const open = async (name, html) => {
    const file = path.join(OUT, `${name}.html`);
    fs.writeFileSync(file, html);
    const url = pathToFileURL(file).href;
    const page = await browser.newPage({ viewport: { width: 1400, height: 1000 } });
    page.problems = [];
    page.on('pageerror', (e) => page.problems.push(e.message));
    await page.route('**/*', (route) => (route.request().url() === url ? route.continue() : route.abort()));
    await page.goto(url);
    await page.waitForSelector('body[data-ready="true"]');
    return page;
  };
  // The top JS function: tsx's loader thread is recorded too, and its idle samples can
  // put the (idle) row first.
  const topRow = (page) =>
    page.$eval('#top-functions tbody tr:has(td.fn:not(.none))', (r) => ({ name: r.querySelector('td.fn').textContent, loc: r.querySelector('td.loc').textContent }));
  try {
    const tsx = await open('tsx-report', fs.readFileSync(tsxReport, 'utf8'));
    const row = await topRow(tsx);
    assert.equal(row.name, 'hotLoop');
    assert.ok(row.loc.endsWith(`${dir}/app.ts:${hotLoopLine}:17`), row.loc);
    await tsx.screenshot({ path: path.join(OUT, 'tsx-report.png'), fullPage: true });

    const tsc = await open('tsc-report', require('..').htmlReport(tscTrace, { view: 'sandwich' }));
    assert.ok((await topRow(tsc)).loc.includes(`${dir}/app.ts:${hotLoopLine}:`));
    // hotLoop's sandwich: its hot lines by app.ts's numbers, with app.ts's text (sourcesContent).
    await tsc.click('#top-functions tbody tr:first-child td.fn span');
    await tsc.waitForSelector('#lines-table tbody tr[data-line]');
    const lines = await tsc.$$eval('#lines-table tbody tr[data-line]', (trs) =>
      trs.map((r) => ({ line: Number(r.dataset.line), src: r.cells[3].textContent })));
    assert.equal(lines[0].line, hotLine);
    assert.match(lines[0].src, /total \+= Math\.sqrt\(i\) % 7; \/\/ HOT-LINE/);
    await tsc.screenshot({ path: path.join(OUT, 'tsc-report-lines.png'), fullPage: true });
    assert.deepEqual([...tsx.problems, ...tsc.problems], []);
  } finally {
    await browser.close();
  }
});

test('off switches: stop({ sourceMaps: false }), SELFPROF_SOURCE_MAPS=0; files map only when asked', async () => {
  const js = fresh(path.join(dir, 'tsc', 'app.js'));
  const jsUrl = pathToFileURL(js).href;
  const generatedLine = lineOf(js, 'function hotLoop(');
  const [off] = await profileModule(js, [{ sourceMaps: false }]);
  const raw = hottest(off).frame;
  assert.deepEqual([raw.name, off.resources[raw.resourceId], raw.line], ['hotLoop', jsUrl, generatedLine]);
  assert.equal(off.sourceMaps, undefined);

  // The environment turns the default off (a child process: read at each stop).
  const child = spawnSync(
    process.execPath,
    ['-e', `const { Profiler } = require(${JSON.stringify(ROOT)}); const p = new Profiler({ sampleInterval: 1, maxBufferSize: 1e5 });
      require(${JSON.stringify(js)}).runFor(200);
      p.stop().then((t) => console.log(JSON.stringify(t.frames.filter((f) => f.name === 'hotLoop').map((f) => [t.resources[f.resourceId], f.line]))));`],
    { encoding: 'utf8', env: { ...process.env, SELFPROF_SOURCE_MAPS: '0' } },
  );
  assert.equal(child.status, 0, child.stderr);
  assert.deepEqual(JSON.parse(child.stdout), [[jsUrl, generatedLine]]);

  // A trace file is taken as recorded, unless asked: convert, readProfile, the CLI.
  assert.equal(readProfile(off).frames.find((f) => f.name === 'hotLoop').line, generatedLine);
  const mapped = readProfile(off, { sourceMaps: true });
  assertMapped(mapped, 'readProfile({ sourceMaps: true })');
  assert.match(convert(off, { to: 'folded', sourceMaps: true }), /;hotLoop \d+/);
  const file = path.join(dir, 'off.json');
  fs.writeFileSync(file, JSON.stringify(off));
  const report = (...args) => spawnSync(process.execPath, [CLI, 'report', file, '--top', '1', ...args], { encoding: 'utf8' });
  assert.match(report().stdout, new RegExp(`hotLoop\\s+\\S*tsc/${path.basename(js).replace('.', '\\.')}:${generatedLine}:`));
  assert.match(report('--source-maps').stdout, new RegExp(`hotLoop\\s+\\S*/app\\.ts:${hotLoopLine}:`));

  // Bad values are TypeErrors naming the option.
  await assert.rejects(new Profiler({ sampleInterval: 1, maxBufferSize: 10 }).stop({ sourceMaps: 'no' }), { name: 'TypeError', message: /sourceMaps/ });
  assert.throws(() => convert(off, { to: 'trace', sourceMaps: 1 }), { name: 'TypeError', message: /sourceMaps/ });
  assert.throws(() => start({ sourceMaps: 'off', exporters: [] }), { name: 'TypeError', message: /sourceMaps/ });
});

test('fromCpuProfile maps V8\'s profile as stop() does; { sourceMaps: false } does not', async () => {
  const js = fresh(path.join(dir, 'tsc', 'app.js'));
  // V8's inspector samples it (no selfprof signal to count): 600 ms of this thread's CPU
  // (250 ms of the process's gave 25 samples under load on Node 26).
  const cpuMs = () => native.threadCpuNs() / 1e6;
  const until = cpuMs() + 600;
  const profile = await v8CpuProfile(() => require(js).runWhile(() => cpuMs() < until));
  assertMapped(await fromCpuProfile(profile), 'fromCpuProfile');
  const raw = hottest(await fromCpuProfile(profile, { sourceMaps: false })).frame;
  assert.equal(raw.line, lineOf(js, 'function hotLoop('));
});

test('maps that cannot be used: the recording is whole, their frames are V8\'s, and trace.sourceMaps says why', async () => {
  const broken = path.join(dir, 'broken');
  fs.mkdirSync(broken);
  const script = (name, comment) => {
    const file = path.join(broken, `${name}.js`);
    fs.writeFileSync(file, `'use strict';\nmodule.exports = function ${name}(ms) { return spin(ms); };\nconst { spin } = require(${JSON.stringify(path.join(__dirname, 'helpers'))});\n${comment}\n`);
    return file;
  };
  const files = {
    smMissing: script('smMissing', '//# sourceMappingURL=gone.js.map'),
    smMalformed: script('smMalformed', '//# sourceMappingURL=smMalformed.js.map'),
    smHuge: script('smHuge', '//# sourceMappingURL=smHuge.js.map'),
    smBadInline: script('smBadInline', '//# sourceMappingURL=data:application/json;base64,%%%%'),
  };
  fs.writeFileSync(path.join(broken, 'smMalformed.js.map'), '{"version":3,"sources":["a.ts"],"mappings":"AAAA,{{{{"');
  // 33 MiB, sparse: over the 32 MiB limit without writing it.
  fs.closeSync(fs.openSync(path.join(broken, 'smHuge.js.map'), 'w'));
  fs.truncateSync(path.join(broken, 'smHuge.js.map'), 33 << 20);
  const p = new Profiler({ sampleInterval: 1, maxBufferSize: 100_000 });
  // Each busy until signalled 20 times: on a loaded machine 60 ms gave one no sample.
  for (const file of Object.values(files)) sampledCall(20, 30_000, require(file), 60);
  const trace = assertValidTrace(await p.stop());
  for (const [name, file] of Object.entries(files)) {
    const f = trace.frames.find((fr) => fr.name === name);
    assert.ok(f, `${name} was sampled`);
    assert.deepEqual([trace.resources[f.resourceId], f.line], [pathToFileURL(file).href, 2], `${name} as V8 gave it`);
  }
  const why = Object.fromEntries(trace.sourceMaps.scripts.map((s) => [path.basename(s.url, '.js'), s.error]));
  assert.match(why.smMissing, /gone\.js\.map is not there/);
  assert.match(why.smMalformed, /not a valid source map/);
  assert.match(why.smHuge, /is 33\.0 MiB; maps are read up to 32\.0 MiB/);
  assert.match(why.smBadInline, /inline source map that is not base64/);
  assert.equal(trace.sourceMaps.mappedFrames, 0);
  assert.ok(hottest(trace).samples > 0 && spin);
});

test('service mode: each period\'s pprof and trace have the mapped frames; start({ sourceMaps: false }) sends V8\'s', async () => {
  const exported = async (options) => {
    const out = fs.mkdtempSync(path.join(dir, 'service-'));
    const js = fresh(path.join(dir, 'tsc', 'app.js'));
    const session = start({
      service: 'maps',
      period: 60_000,
      sampleInterval: 1,
      heapSamplingInterval: 4096,
      exporters: [{ type: 'file', dir: out, trace: true }],
      ...options,
    });
    runHot(js);
    require(js).keepArrays(4000);
    await session.stop();
    const files = fs.readdirSync(out);
    // The CPU profile's files, and the heap profile's (*.heap.*).
    const read = (suffix, heap = false) => fs.readFileSync(path.join(out, files.find((f) => f.endsWith(suffix) && f.includes('.heap.') === heap)));
    return {
      js,
      trace: JSON.parse(zlib.gunzipSync(read('.trace.json.gz'))),
      pprof: read('.pb.gz'),
      heap: JSON.parse(zlib.gunzipSync(read('.trace.json.gz', true))),
    };
  };
  /** The heap trace's frames named keepArrays, as `name url:line`. */
  const keepers = (heap) =>
    heap.frames.filter((f) => f.name === 'keepArrays').map((f) => `${f.name} ${heap.resources[f.resourceId]}:${f.line}`);
  const on = await exported({});
  assertMapped(on.trace, 'service trace');
  assertPprof(on.pprof, 'service pprof');
  // The heap profile's frames are mapped as the CPU profile's are.
  const keepLine = lineOf(path.join(dir, 'app.ts'), 'export function keepArrays(');
  assert.deepEqual(keepers(on.heap), [`keepArrays ${appUrl}:${keepLine}`]);
  assert.ok(on.heap.sourceMaps?.mappedFrames > 0);
  const off = await exported({ sourceMaps: false });
  const raw = hottest(off.trace).frame;
  assert.deepEqual([raw.name, off.trace.resources[raw.resourceId]], ['hotLoop', pathToFileURL(off.js).href]);
  assert.deepEqual(keepers(off.heap).map((k) => k.split(':').slice(0, -1).join(':')), [`keepArrays ${pathToFileURL(off.js).href}`]);
  const { p, str } = decodePprof(off.pprof);
  assert.deepEqual(p.function.filter((f) => str(f.name) === 'hotLoop').map((f) => str(f.filename)), [pathToFileURL(off.js).href]);
});
