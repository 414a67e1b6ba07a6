'use strict';
// Converters: a real trace to .cpuprofile and folded stacks, read back.
const { test } = require('node:test');
const assert = require('node:assert/strict');
const { Profiler, convert, fromCpuProfile, withLabels } = require('..');
const { spin, samplesIn } = require('./helpers');

function convertedBusyWork(ms) {
  return spin(ms);
}

async function realTrace(format) {
  const p = new Profiler({ sampleInterval: 2, maxBufferSize: 10_000 });
  await withLabels({ endpoint: 'GET /x' }, async () => {
    convertedBusyWork(80);
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

test('bad input: clear errors', () => {
  assert.throws(() => convert({}, { to: 'folded' }), /not a selfprof trace/);
  assert.throws(() => convert('{"resources":[],"frames":[],"stacks":[{"frameId":3}],"samples":[]}', { to: 'folded' }), /stack 0 is out of range/);
  assert.throws(() => convert({ resources: [], frames: [], stacks: [], samples: [] }, { to: 'svg' }), /to must be one of cpuprofile, folded/);
  assert.throws(() => convert(42, { to: 'folded' }), TypeError);
});
