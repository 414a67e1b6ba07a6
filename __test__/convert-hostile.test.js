'use strict';
// Converters against small files that used to cost gigabytes (issue 12): counts that
// expanded into samples, stacks walked once per sample, a gzip bomb of empty samples, a
// valid trace just over the input limit. Each conversion runs in its own process so its
// peak RSS is its own; a limit that is hit is one clear error naming it.
const { test } = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const zlib = require('node:zlib');
const { spawnSync } = require('node:child_process');
const { convert, readProfile } = require('..');
const { pprofBytes } = require('./protobuf');

const root = path.join(__dirname, '..');
const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'selfprof-hostile-'));
test.after(() => fs.rmSync(dir, { recursive: true, force: true }));

/** A pprof of one sample: `refs` references to one location, standing for `count` samples. */
const onePprof = (refs, count) =>
  pprofBytes({
    strings: ['', 'sample', 'count', 'hot', 'a.js'],
    sampleTypes: [[1, 2]],
    samples: [{ locations: Array(refs).fill(1), values: [count] }],
    locations: [{ id: 1, lines: [[1, 3]] }],
    functions: [{ id: 1, name: 3, file: 4 }],
  });

/** Converts `file` to `to` in a child process: { ms, rssMiB, ok, bytes, error, signal }. */
function convertIn(file, to, via = 'convert') {
  const script = `
    const fs = require('node:fs');
    const selfprof = require(${JSON.stringify(root)});
    const t0 = performance.now();
    const r = {};
    try {
      const out = process.argv[3] === 'readProfile' ? selfprof.readProfile(fs.readFileSync(process.argv[1])) : selfprof.convert(fs.readFileSync(process.argv[1]), { to: process.argv[2] });
      r.ok = true; r.bytes = out.length ?? out.samples.length;
    } catch (e) { r.error = e.message; r.type = e.constructor.name; }
    r.ms = performance.now() - t0;
    r.rssMiB = require(${JSON.stringify(path.join(__dirname, 'helpers.js'))}).peakRssMiB();
    console.log(JSON.stringify(r));
  `;
  const p = spawnSync(process.execPath, ['-e', script, file, to, via], { encoding: 'utf8', timeout: 120_000 });
  if (p.status !== 0) return { signal: p.signal, status: p.status, stderr: p.stderr.slice(-500) };
  return JSON.parse(p.stdout);
}

function write(name, bytes) {
  const file = path.join(dir, name);
  fs.writeFileSync(file, bytes);
  return file;
}

test('a 61-byte pprof standing for 19,999,999 samples: pprof and folded keep the count, listing it is one clear error', (t) => {
  const file = write('count.pb', onePprof(1, 19_999_999));
  for (const to of ['folded', 'pprof']) {
    const r = convertIn(file, to);
    t.diagnostic(`to ${to}: ${JSON.stringify(r)}`);
    assert.equal(r.ok, true, JSON.stringify(r));
    assert.ok(r.rssMiB < 256, `${to}: peak RSS ${r.rssMiB} MiB`);
  }
  assert.equal(convert(fs.readFileSync(file), { to: 'folded' }), 'hot 19999999\n');
  const again = convert(convert(fs.readFileSync(file), { to: 'pprof' }), { to: 'folded' });
  assert.equal(again, 'hot 19999999\n', 'pprof to pprof keeps the count');
  for (const [to, via] of [['trace', 'convert'], ['cpuprofile', 'convert'], ['trace', 'readProfile']]) {
    const r = convertIn(file, to, via);
    assert.equal(r.ok, undefined, `${via} ${to}`);
    assert.match(r.error, /stands for 19999999 samples; listing them is limited to 500000/);
    assert.ok(r.rssMiB < 256, `${via} ${to}: peak RSS ${r.rssMiB} MiB`);
  }
});

test('a pprof sample 20,000 frames deep standing for 400,000: every target, no abort, bounded', (t) => {
  const file = write('deep.pb', onePprof(20_000, 400_000));
  for (const to of ['pprof', 'folded', 'trace', 'cpuprofile']) {
    const r = convertIn(file, to);
    t.diagnostic(`to ${to}: ${JSON.stringify(r)}`);
    assert.equal(r.signal, undefined, `${to}: the process died`);
    assert.equal(r.ok, true, JSON.stringify(r));
    assert.ok(r.rssMiB < 512, `${to}: peak RSS ${r.rssMiB} MiB`);
  }
});

test('a trace with a 10,000-deep stack chain: folded refuses 381 MiB of text at once, pprof streams', (t) => {
  const n = 10_000;
  const trace = {
    resources: ['file:///a.js'],
    frames: [{ name: 'handler', resourceId: 0, line: 1, column: 1 }],
    stacks: Array.from({ length: n }, (_, i) => (i ? { frameId: 0, parentId: i - 1 } : { frameId: 0 })),
    samples: Array.from({ length: n }, (_, i) => ({ timestamp: i, stackId: i })),
    contexts: [],
  };
  const file = write('chain.json', JSON.stringify(trace));
  const folded = convertIn(file, 'folded');
  t.diagnostic(`folded: ${JSON.stringify(folded)}`);
  assert.match(folded.error, /folded output would be 381 MiB; text output is limited to 256 MiB/);
  assert.ok(folded.ms < 2000 && folded.rssMiB < 256, JSON.stringify(folded));
  for (const to of ['pprof', 'cpuprofile']) {
    const r = convertIn(file, to);
    t.diagnostic(`to ${to}: ${JSON.stringify(r)}`);
    assert.equal(r.ok, true, JSON.stringify(r));
    assert.ok(r.rssMiB < 256, `${to}: peak RSS ${r.rssMiB} MiB`);
  }
  // Shallower, the folded text is within the limit and linear in its size.
  const small = { ...trace, stacks: trace.stacks.slice(0, 2000), samples: trace.samples.slice(0, 2000) };
  const lines = convert(small, { to: 'folded' }).trim().split('\n');
  assert.equal(lines.length, 2000);
  assert.equal(lines.at(-1), `${Array(2000).fill('handler').join(';')} 1`);
});

test('a 200 KB gzip bomb of empty pprof samples is refused before decoding', (t) => {
  const bomb = Buffer.concat([Buffer.from([0x32, 0x00]), Buffer.alloc(200 << 20).fill(Buffer.from([0x12, 0x00]))]);
  const file = write('bomb.pb.gz', zlib.gzipSync(bomb, { level: 9 }));
  const r = convertIn(file, 'trace');
  t.diagnostic(`${fs.statSync(file).size} bytes: ${JSON.stringify(r)}`);
  assert.match(r.error, /would take \d+ MiB to decode; the limit is 256 MiB/);
  assert.ok(r.rssMiB < 512, `peak RSS ${r.rssMiB} MiB`);
});

test('a valid trace over the 256 MiB input limit: one clear error from convert and from selfprof report', (t) => {
  const head = '{"resources":[],"frames":[{"name":"a"}],"stacks":[{"frameId":0}],"samples":[';
  const chunk = Buffer.from('{"timestamp":1,"stackId":0},'.repeat(100_000));
  const parts = [Buffer.from(head)];
  for (let size = 0; size < 260 << 20; size += chunk.length) parts.push(chunk);
  parts.push(Buffer.from('{"timestamp":2}],"contexts":[]}'));
  const file = write('big.json.gz', zlib.gzipSync(Buffer.concat(parts), { level: 1 }));
  const r = convertIn(file, 'trace');
  t.diagnostic(`${(fs.statSync(file).size / 2 ** 20).toFixed(1)} MiB gzip: ${JSON.stringify(r)}`);
  assert.match(r.error, /input is over 256 MiB uncompressed; that is the limit/);
  assert.ok(r.rssMiB < 512, `peak RSS ${r.rssMiB} MiB`);
  const cli = spawnSync(process.execPath, [path.join(root, 'bin', 'selfprof.js'), 'report', file], { encoding: 'utf8', timeout: 60_000 });
  assert.equal(cli.status, 1);
  assert.match(cli.stderr, /^selfprof: .*input is over 256 MiB uncompressed/);
  assert.equal(cli.stderr.trim().split('\n').length, 1);
});

test('convert and readProfile name the input type they cannot read', () => {
  const bad = [
    [new ArrayBuffer(8), Error, /not a selfprof trace or pprof profile/], // bytes: read as such
    [new Map(), TypeError, /got a Map/],
    [[1, 2], TypeError, /got an array/],
    [new Date(0), TypeError, /got a Date/],
    [null, TypeError, /got null/],
    [42, TypeError, /got number/],
  ];
  for (const [input, type, message] of bad) {
    for (const f of [() => convert(input, { to: 'folded' }), () => readProfile(input)]) {
      assert.throws(f, (err) => err instanceof type && message.test(err.message), String(input));
    }
  }
  // ArrayBuffers and typed arrays of real profiles read like Buffers.
  const bytes = onePprof(2, 3);
  const ab = bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.length);
  assert.equal(convert(ab, { to: 'folded' }), 'hot;hot 3\n');
  assert.equal(convert(new DataView(ab), { to: 'folded' }), 'hot;hot 3\n');
});

test('the CLI refuses a file over the input limit before reading it', () => {
  const file = path.join(dir, 'huge.pb');
  fs.writeFileSync(file, Buffer.from([0x0a]));
  fs.truncateSync(file, 300 << 20); // sparse: no disk used
  for (const args of [['report', file], ['convert', file, '--to', 'folded']]) {
    const t0 = performance.now();
    const r = spawnSync(process.execPath, [path.join(root, 'bin', 'selfprof.js'), ...args], { encoding: 'utf8', timeout: 60_000 });
    assert.equal(r.status, 1);
    assert.match(r.stderr, /^selfprof: cannot read .*huge\.pb: is 300 MiB; input is limited to 256 MiB\n$/);
    assert.ok(performance.now() - t0 < 10_000);
  }
});
