'use strict';
// Converters: a real trace to .cpuprofile and folded stacks, read back.
const { test } = require('node:test');
const assert = require('node:assert/strict');
const zlib = require('node:zlib');
const { Profiler, convert, readProfile, fromCpuProfile, withLabels } = require('..');
const { stopForExport } = require('../lib/capture/profiler');
const { spin, sampledCall, samplesIn, stackFrames, decodePprof, assertValidTrace, WorkLog, pprofWork, assertRequestLabels } = require('./helpers');

const foldedTotal = (text) => text.trim().split('\n').reduce((n, l) => n + Number(l.slice(l.lastIndexOf(' ') + 1)), 0);

function convertedBusyWork(ms) {
  return spin(ms);
}

/** The calls of convertedBusyWork in realTrace's recordings: each on until signalled 30
 * times (a fixed 80 ms gave a loaded machine 8 samples where 10 are judged). */
const realCalls = new WorkLog({ signals: 30 });

async function realTrace(format) {
  const p = new Profiler({ sampleInterval: 2, maxBufferSize: 10_000 });
  await withLabels({ endpoint: 'GET /x' }, async () => {
    realCalls.run({ endpoint: 'GET /x' }, convertedBusyWork, 80);
    await new Promise((r) => setTimeout(r, 20));
  });
  return p.stop(format && { format });
}

test('.cpuprofile: a well-formed DevTools profile with the same samples', async () => {
  const trace = await realTrace();
  const profile = JSON.parse(convert(trace, { to: 'cpuprofile' }));
  // The schema DevTools reads: unique ids, root first, children that exist, one parent
  // each, samples naming nodes, one time delta per sample.
  const ids = new Set(profile.nodes.map((n) => n.id));
  assert.equal(ids.size, profile.nodes.length);
  assert.equal(profile.nodes[0].callFrame.functionName, '(root)');
  const parents = new Map();
  for (const n of profile.nodes) {
    for (const key of ['functionName', 'scriptId', 'url', 'lineNumber', 'columnNumber']) assert.ok(key in n.callFrame);
    for (const c of n.children) {
      assert.ok(ids.has(c));
      assert.ok(!parents.has(c), 'one parent per node');
      parents.set(c, n.id);
    }
  }
  assert.equal(profile.samples.length, trace.samples.length);
  assert.equal(profile.timeDeltas.length, profile.samples.length);
  assert.ok(profile.samples.every((s) => ids.has(s)));
  assert.equal(profile.nodes.reduce((n, x) => n + x.hitCount, 0), profile.samples.length);
  // Read back through the V8-profile reader: the same busy samples, frames and positions.
  const back = await fromCpuProfile(profile);
  assert.equal(samplesIn(back, 'convertedBusyWork').length, samplesIn(trace, 'convertedBusyWork').length);
  const frame = (t) => t.frames.find((f) => f.name === 'convertedBusyWork');
  assert.deepEqual({ ...frame(back), resourceId: undefined }, { ...frame(trace), resourceId: undefined });
});

test('folded stacks: line totals equal the sample count; json-gzip input works', async () => {
  const gz = await realTrace('json-gzip');
  const folded = convert(gz, { to: 'folded' });
  const lines = folded.trim().split('\n');
  const total = lines.reduce((n, l) => n + Number(l.slice(l.lastIndexOf(' ') + 1)), 0);
  const trace = JSON.parse(require('node:zlib').gunzipSync(gz));
  assert.equal(total, trace.samples.length);
  const busy = lines.filter((l) => /;convertedBusyWork(;|\s)/.test(l));
  assert.ok(busy.length > 0);
  const inBusy = busy.reduce((n, l) => n + Number(l.slice(l.lastIndexOf(' ') + 1)), 0);
  assert.equal(inBusy, samplesIn(trace, 'convertedBusyWork').length);
});

test('pprof target: pprof-format reads the same samples, functions and labels', async () => {
  const trace = await realTrace();
  const pprof = convert(trace, { to: 'pprof' });
  assert.ok(Buffer.isBuffer(pprof));
  const d = decodePprof(pprof);
  assert.deepEqual(d.p.sampleType.map((t) => `${d.str(t.type)}/${d.str(t.unit)}`), ['sample/count', 'wall/nanoseconds', 'cpu/nanoseconds']);
  assert.equal(d.sum(0), trace.samples.length);
  const busy = d.p.sample.filter((s) => d.names(s).includes('convertedBusyWork'));
  assert.equal(busy.length, samplesIn(trace, 'convertedBusyWork').length);
  // Sample by sample, the labels the trace gave (one pprof sample per trace sample, in order).
  assert.deepEqual(
    d.p.sample.map((s) => d.labels(s)),
    trace.samples.map((s) => (s.contextId === undefined ? {} : trace.contexts[s.contextId].labels)),
  );
  // And each its request's, judged against when the request's work ran (a trace object
  // carries no Unix time: the pprof made from it keeps the trace's own times).
  assertRequestLabels(pprofWork(d, ['convertedBusyWork'], { timeOrigin: 0 }), realCalls.calls, { what: 'convertedBusyWork', min: 10, exact: true });
  assert.deepEqual(d.join, trace.metadata, "the pprof's comment carries the trace's join counts");
  const fn = busy[0] && d.frames(busy[0]).find((f) => d.str(f.name) === 'convertedBusyWork');
  const frame = trace.frames.find((f) => f.name === 'convertedBusyWork');
  assert.equal(Number(fn.startLine), frame.line);
  assert.equal(d.str(fn.filename), trace.resources[frame.resourceId]);
});

test("pprof input: a recording's pprof converts like its trace", async () => {
  // One recording, as both formats (what service mode's file exporter writes).
  const p = new Profiler({ sampleInterval: 2, maxBufferSize: 10_000 });
  await withLabels({ endpoint: 'GET /y' }, async () => {
    convertedBusyWork(60);
    await new Promise((r) => setTimeout(r, 10));
  });
  const { pprof, trace: gz } = await p[stopForExport](true, true);
  const trace = JSON.parse(zlib.gunzipSync(gz));
  for (const input of [pprof, zlib.gunzipSync(pprof)]) {
    assert.equal(convert(input, { to: 'folded' }), convert(trace, { to: 'folded' }));
    const back = assertValidTrace(readProfile(input));
    assert.equal(back.samples.length, trace.samples.length);
    assert.equal(samplesIn(back, 'convertedBusyWork').length, samplesIn(trace, 'convertedBusyWork').length);
    const labeled = (t) => t.samples.filter((s) => s.contextId !== undefined && t.contexts[s.contextId].labels.endpoint === 'GET /y').length;
    assert.equal(labeled(back), labeled(trace));
    assert.deepEqual(back.metadata, trace.metadata, 'the join counts survive (a pprof comment)');
    const cpu = (t) => t.samples.reduce((n, s) => n + (s.cpuTime ?? 0), 0);
    assert.ok(Math.abs(cpu(back) - cpu(trace)) < 0.01, 'cpu time survives');
    const cp = JSON.parse(convert(input, { to: 'cpuprofile' }));
    assert.equal(cp.samples.length, trace.samples.length);
    assert.equal(foldedTotal(convert(input, { to: 'folded' })), trace.samples.length);
  }
});

test('pprof input: an empty label value reads back empty, not as the number 0', async () => {
  const p = new Profiler({ sampleInterval: 2, maxBufferSize: 10_000 });
  withLabels({ endpoint: '', tenant: 'acme' }, () => sampledCall(20, 10_000, convertedBusyWork, 60));
  const pprof = await p.stop({ format: 'pprof' });
  const back = assertValidTrace(readProfile(pprof));
  const labeled = back.samples.filter((s) => s.contextId !== undefined).map((s) => back.contexts[s.contextId].labels);
  assert.ok(labeled.length > 0, 'samples in withLabels kept their labels');
  for (const labels of labeled) assert.deepEqual(labels, { endpoint: '', tenant: 'acme' });
  // pprof-format, an independent reader, sees the same: the empty string (id 0).
  const { p: decoded, str } = decodePprof(pprof);
  const endpoint = decoded.sample.flatMap((s) => s.label).filter((l) => str(l.key) === 'endpoint');
  assert.ok(endpoint.length > 0 && endpoint.every((l) => str(l.str) === '' && Number(l.num) === 0));
});

test('pprof from another producer (@datadog/pprof) reads in: samples, functions, labels', async () => {
  // Its wall profiler installs its own SIGPROF handler: run it in a child process.
  const script = `
    const { time, encodeSync } = require('@datadog/pprof');
    const { spin } = require(${JSON.stringify(require.resolve('./helpers'))});
    function datadogBusy(ms) { return spin(ms); }
    time.start({ intervalMicros: 2000, durationMillis: 60000, withContexts: true, lineNumbers: false });
    time.setContext({ endpoint: 'GET /dd' });
    datadogBusy(150);
    process.stdout.write(encodeSync(time.stop(false, ({ context }) => context?.context ?? {})));`;
  const r = require('node:child_process').spawnSync(process.execPath, ['-e', script], { cwd: require('node:path').join(__dirname, '..'), maxBuffer: 1 << 26 });
  assert.equal(r.status, 0, String(r.stderr));
  const d = decodePprof(r.stdout);
  const trace = assertValidTrace(readProfile(r.stdout));
  // Its samples aggregate (sample/count values); the trace has one sample per count.
  assert.equal(trace.samples.length, d.sum(0));
  assert.ok(trace.samples.length >= 20, `${trace.samples.length} samples`);
  const busy = d.p.sample.filter((s) => d.names(s).includes('spin') || d.names(s).includes('datadogBusy'));
  const count = busy.reduce((n, s) => n + Number(s.value[0]), 0);
  const inTrace = trace.samples.filter((s) => stackFrames(trace, s).some((f) => f.name === 'spin' || f.name === 'datadogBusy'));
  assert.equal(inTrace.length, count);
  const ddLabeled = busy.filter((s) => d.labels(s).endpoint === 'GET /dd').reduce((n, s) => n + Number(s.value[0]), 0);
  assert.ok(ddLabeled > 0);
  assert.equal(inTrace.filter((s) => trace.contexts[s.contextId]?.labels.endpoint === 'GET /dd').length, ddLabeled);
  // Wall time laid end to end: the trace spans the profile's wall time.
  assert.ok(Math.abs(trace.samples.at(-1).timestamp - d.sum(1) / 1e6) < 1, 'timestamps follow wall time');
  assert.equal(foldedTotal(convert(r.stdout, { to: 'folded' })), d.sum(0));
});

test('bad input: clear errors', () => {
  assert.throws(() => convert({}, { to: 'folded' }), /not a selfprof trace/);
  assert.throws(() => convert('{"resources":[],"frames":[],"stacks":[{"frameId":3}],"samples":[]}', { to: 'folded' }), /stack 0 is out of range/);
  assert.throws(() => convert({ resources: [], frames: [], stacks: [], samples: [] }, { to: 'svg' }), /to must be one of cpuprofile, folded, pprof, trace/);
  assert.throws(() => convert(42, { to: 'folded' }), TypeError);
  assert.throws(() => convert(Buffer.alloc(0), { to: 'folded' }), /empty input/);
  assert.throws(() => convert(Buffer.from('not a profile'), { to: 'folded' }), /not a selfprof trace or pprof profile/);
  assert.throws(() => convert(zlib.gzipSync('{"resources":[]}').subarray(0, 12), { to: 'trace' }), /truncated or corrupt gzip/);
});
