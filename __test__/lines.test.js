'use strict';
// Line-level attribution: V8's position ticks in the trace (lineTicks), as pprof line
// locations, and `.cpuprofile` files (node --cpu-prof) wherever the CLI reads a profile.
const { test, before } = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { spawnSync } = require('node:child_process');
const inspector = require('node:inspector');
const { performance } = require('node:perf_hooks');
const zlib = require('node:zlib');
const { Profiler, convert, readProfile } = require('..');
const { stopForExport } = require('../lib/capture/profiler');
const { assertValidTrace, decodePprof, definitionOf, lineOf, untilSignals } = require('./helpers');

/**
 * V8's CPU profiles as it hands them to selfprof's inspector session (the answers to
 * `Profiler.stop`), before any of selfprof's code reads them: the ground truth of the line
 * ticks a trace must carry.
 */
const fromV8 = [];
const sessionPost = inspector.Session.prototype.post;
inspector.Session.prototype.post = function post(method, params, callback) {
  if (method !== 'Profiler.stop' || typeof callback !== 'function') return sessionPost.call(this, method, params, callback);
  return sessionPost.call(this, method, params, (err, res) => {
    if (!err) fromV8.push(res.profile);
    callback(err, res);
  });
};

const cli = path.join(__dirname, '..', 'bin', 'selfprof.js');
const run = (...args) => spawnSync(process.execPath, [cli, ...args], { encoding: 'utf8', timeout: 60_000 });

function linesHot(ms) {
  const end = performance.now() + ms;
  let x = 0;
  while (performance.now() < end) {
    for (let i = 0; i < 5000; i++) x += Math.sqrt(i + x) * Math.sin(i); // LINES-HOT
    x %= 1e9;
  }
  return x;
}

/** Per line: ticks of the stacks whose frame is `name`'s; and those stacks' JS samples. */
function linesOfFunction(trace, name) {
  const frame = trace.frames.findIndex((f) => f.name === name);
  assert.ok(frame >= 0, `${name} is in the trace`);
  const stacks = new Set(trace.stacks.flatMap((s, i) => (s.frameId === frame ? [i] : [])));
  const lines = new Map();
  for (const l of trace.lineTicks ?? []) if (stacks.has(l.stackId)) lines.set(l.line, (lines.get(l.line) ?? 0) + l.ticks);
  const self = trace.samples.filter((s) => s.marker === undefined && stacks.has(s.stackId)).length;
  return { frame, stacks, lines, self };
}

/** `path of frames|line|ticks` per line tick, sorted: comparable across numberings. */
function lineTicksByPath(t) {
  const frame = (f) => `${f.name}@${t.resources[f.resourceId] ?? ''}:${f.line}:${f.column}`;
  const pathOf = (id) => (id === undefined ? '' : `${pathOf(t.stacks[id].parentId)};${frame(t.frames[t.stacks[id].frameId])}`);
  return (t.lineTicks ?? []).map((l) => `${pathOf(l.stackId)}|${l.line}|${l.ticks}`).sort();
}

let trace;
/** linesHot's samples and line ticks (line -> ticks) in the V8 profile selfprof was handed for `trace`. */
let v8Lines;
before(async () => {
  fromV8.length = 0;
  const p = new Profiler({ sampleInterval: 1, maxBufferSize: 100_000 });
  // Until ~250 signals, however busy the machine: one V8 recording (a long one is handed
  // over in segments, every 4,096 signals).
  untilSignals(250, () => linesHot(5));
  trace = assertValidTrace(await p.stop());
  assert.equal(fromV8.length, 1, 'the recording is one V8 profile');
  const nodes = fromV8[0].nodes.filter((n) => n.callFrame.functionName === 'linesHot' && n.callFrame.url.endsWith(path.basename(__filename)));
  const lines = new Map();
  for (const { line, ticks } of nodes.flatMap((n) => n.positionTicks ?? [])) lines.set(line, (lines.get(line) ?? 0) + ticks);
  // Its samples are those of V8's timeline (`samples`) on its nodes: on Node 24 a node's
  // hitCount leaves out some that the timeline has (245 of 267 once), and no line is given
  // for those.
  const ids = new Set(nodes.map((n) => n.id));
  v8Lines = { samples: fromV8[0].samples.filter((id) => ids.has(id)).length, lines };
});

test('a recording carries V8 line ticks: the hot line of a function, adding up to its samples', (t) => {
  const { lines, self, stacks } = linesOfFunction(trace, 'linesHot');
  const hot = lineOf(__filename, 'LINES-HOT');
  const def = definitionOf(__filename, 'linesHot').line;
  const ticks = [...lines.values()].reduce((a, b) => a + b, 0);
  assert.ok(self > 50, `linesHot has samples (${self})`);
  // selfprof passes on the line ticks of the profile V8 handed it, line by line, as they
  // are (it kept every sample of the function): no floor. (V8 gives most samples a line,
  // fewer on a loaded machine: 71% in one CI run on Node 26; which samples have one is V8's
  // business, whether they all reach the trace is selfprof's.)
  t.diagnostic(`${ticks} of ${self} samples with a line; V8 handed over ${v8Lines.samples} samples, ${[...v8Lines.lines.values()].reduce((a, b) => a + b, 0)} with a line`);
  assert.equal(self, v8Lines.samples, "the function's samples, as V8 recorded them");
  assert.deepEqual(new Map([...lines].sort()), new Map([...v8Lines.lines].sort()), "V8's line ticks, line by line");
  assert.ok(ticks <= self, `its lines cover ${ticks} of its ${self} samples`);
  assert.ok(lines.get(hot) > ticks / 2, `line ${hot} is the hot one: ${JSON.stringify([...lines])}`);
  // V8 counts a sample taken inside a function it inlined (here `performance.now`'s Node
  // internals) at the inlined function's line, under the caller (docs/api.md, "Line ticks"):
  // a stray tick outside the body. Under load on Node 22 that was one tick of ~220, at
  // line 139 or 546, in 7 of 24 runs; the rest must be the function's own lines.
  const outside = [...lines].filter(([line]) => line < def || line > def + 8);
  const strays = outside.reduce((n, [, t]) => n + t, 0);
  assert.ok(strays <= Math.max(2, ticks * 0.02), `${strays} of ${ticks} ticks outside the function: ${JSON.stringify(outside)}`);
  // Per stack too, never more ticks than samples.
  for (const id of stacks) {
    const onStack = trace.samples.filter((s) => s.stackId === id && s.marker === undefined).length;
    const t = trace.lineTicks.filter((l) => l.stackId === id).reduce((n, l) => n + l.ticks, 0);
    assert.ok(t <= onStack, `stack ${id}: ${t} ticks, ${onStack} samples`);
  }
  // Sorted by stack then line, each (stack, line) once.
  const keys = trace.lineTicks.map((l) => l.stackId * 1e6 + l.line);
  assert.deepEqual(keys, [...keys].sort((a, b) => a - b));
  assert.equal(new Set(keys).size, keys.length);
});

test('pprof: one location per (function, line), whose samples are the line ticks (pprof-format decodes)', async () => {
  const { lines, self } = linesOfFunction(trace, 'linesHot');
  // Off by default: the line of one sample is an apportionment, so it is asked for.
  assert.equal(pprofLineCounts(decodePprof(convert(trace, { to: 'pprof' }))).size, 0, 'no line-level locations unless asked');
  const d = decodePprof(convert(trace, { to: 'pprof', lines: true }));
  assert.equal(d.sum(0), trace.samples.length, 'every sample once');
  const perLine = new Map();
  const def = definitionOf(__filename, 'linesHot').line;
  for (const s of d.p.sample) {
    const leaf = d.p.location.find((l) => Number(l.id) === Number(s.locationId[0]));
    const fn = d.p.function.find((f) => Number(f.id) === Number(leaf.line[0].functionId));
    if (d.str(fn.name) !== 'linesHot') continue;
    assert.equal(Number(fn.startLine), def, 'the function keeps its definition line');
    const line = Number(leaf.line[0].line);
    perLine.set(line, (perLine.get(line) ?? 0) + Number(s.value[0]));
  }
  const ticks = [...lines.values()].reduce((a, b) => a + b, 0);
  const expected = new Map(lines);
  if (self > ticks) expected.set(def, (expected.get(def) ?? 0) + self - ticks); // no line: the function's own location
  assert.deepEqual(new Map([...perLine].sort()), new Map([...expected].sort()));
  assert.deepEqual(pprofLineCounts(d), traceLineCounts(trace));
  const pairs = d.p.location.map((l) => `${l.line[0].functionId}:${l.line[0].line}:${l.line[0].column}`);
  assert.equal(new Set(pairs).size, pairs.length, 'one location per (function, line)');
  // Read back: the same line ticks, on the same call paths (ids may be numbered anew).
  const back = readProfile(convert(trace, { to: 'pprof', lines: true }));
  assert.deepEqual(lineTicksByPath(back), lineTicksByPath(trace));
  assert.equal(back.frames.length, trace.frames.length, 'line locations come back as their function');

  // The profiler's own pprof (the service mode's) has them too: compared with the trace of
  // the same recording.
  const p = new Profiler({ sampleInterval: 1, maxBufferSize: 100_000 });
  linesHot(100);
  const both = await p[stopForExport](true, true, { lines: true });
  const same = JSON.parse(zlib.gunzipSync(both.trace));
  const own = decodePprof(both.pprof);
  const lineLocations = pprofLineCounts(own);
  assert.ok(lineLocations.size > 0, 'line-level locations');
  assert.deepEqual(lineLocations, traceLineCounts(same));
});

/** `function:line` -> samples at selfprof's line-level locations of a decoded pprof. */
function pprofLineCounts(d) {
  const from = Number(/locations from id (\d+)/.exec(d.p.comment.map(d.str).find((c) => c.startsWith('selfprof-lines:')) ?? '')?.[1]);
  const out = new Map();
  for (const s of d.p.sample) {
    const leaf = d.p.location.find((l) => Number(l.id) === Number(s.locationId[0]));
    if (!(Number(leaf.id) >= from)) continue;
    const fn = d.p.function.find((f) => Number(f.id) === Number(leaf.line[0].functionId));
    const key = `${d.str(fn.name)}:${leaf.line[0].line}`;
    out.set(key, (out.get(key) ?? 0) + Number(s.value[0]));
  }
  return new Map([...out].sort());
}

/** `function:line` -> the trace's line ticks. */
function traceLineCounts(t) {
  const out = new Map();
  for (const l of t.lineTicks ?? []) {
    const key = `${t.frames[t.stacks[l.stackId].frameId].name || '(anonymous)'}:${l.line}`;
    out.set(key, (out.get(key) ?? 0) + l.ticks);
  }
  return new Map([...out].sort());
}

test('.cpuprofile from node --cpu-prof: read with its line ticks; report, convert and diff take it', () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'selfprof-cpuprof-'));
  const app = path.join(__dirname, 'fixtures', 'cpu-prof-app.js');
  const r = spawnSync(process.execPath, ['--cpu-prof', '--cpu-prof-dir', dir, '--cpu-prof-interval', '500', app, '300'], { encoding: 'utf8' });
  assert.equal(r.status, 0, r.stderr);
  const file = path.join(dir, fs.readdirSync(dir).find((f) => f.endsWith('.cpuprofile')));
  const profile = JSON.parse(fs.readFileSync(file, 'utf8'));

  const t = assertValidTrace(readProfile(fs.readFileSync(file)));
  assert.equal(t.samples.length, profile.samples.length);
  // Line ticks: V8's positionTicks of the hot function's nodes, summed per line.
  const v8 = new Map();
  for (const n of profile.nodes) {
    if (n.callFrame.functionName !== 'cpuProfHot') continue;
    for (const { line, ticks } of n.positionTicks ?? []) v8.set(line, (v8.get(line) ?? 0) + ticks);
  }
  const ours = linesOfFunction(t, 'cpuProfHot');
  assert.ok(v8.size > 0, 'node --cpu-prof wrote position ticks');
  assert.deepEqual(new Map([...ours.lines].sort()), new Map([...v8].sort()));
  const hot = lineOf(app, 'CPU-PROF-HOT');
  assert.equal([...ours.lines].sort((a, b) => b[1] - a[1])[0][0], hot);

  const report = run('report', file, '--html', path.join(dir, 'r.html'));
  assert.equal(report.status, 0, report.stderr);
  assert.match(report.stdout, /cpuProfHot/);
  // A .cpuprofile names its scripts, nothing says they are what ran: the report reads no
  // file it names (the line ticks are there, without text).
  assert.ok(!fs.readFileSync(path.join(dir, 'r.html'), 'utf8').includes('CPU-PROF-HOT'), 'no file the profile names is read');
  const pprof = run('convert', file, '--to', 'pprof', '-o', path.join(dir, 'p.pb.gz'));
  assert.equal(pprof.status, 0, pprof.stderr);
  assert.equal(decodePprof(fs.readFileSync(path.join(dir, 'p.pb.gz'))).sum(0), profile.samples.length);
  const folded = run('convert', file, '--to', 'folded');
  assert.match(folded.stdout, /cpuProfHot \d+/);
  const same = run('diff', file, file);
  assert.equal(same.status, 0, same.stderr);
  assert.match(same.stdout, /no change/);
  // A broken one is one clear line.
  fs.writeFileSync(path.join(dir, 'broken.cpuprofile'), JSON.stringify({ ...profile, timeDeltas: [] }));
  const broken = run('report', path.join(dir, 'broken.cpuprofile'));
  assert.equal(broken.status, 1);
  assert.match(broken.stderr, /^selfprof: .*broken\.cpuprofile: V8 CPU profile has \d+ samples but 0 timeDeltas\n$/);
  fs.rmSync(dir, { recursive: true });
});
