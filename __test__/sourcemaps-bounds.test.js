'use strict';
// Source maps that expand: what a map turns into when parsed (sourceRoot × sources, names,
// index maps' sections, decoded mappings) is bounded, not only its file size. A map over
// a bound is skipped with one warning and `trace.sourceMaps.scripts` saying why; the
// recording is never lost, the process never killed. Each case runs in a child process
// under a data-size rlimit (a runaway allocation aborts the child, not the machine), whose
// RSS is measured around stop().

const { test } = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { spawnSync } = require('node:child_process');
const { pathToFileURL } = require('node:url');

const ROOT = path.join(__dirname, '..');
/** The child's data-size limit: far above what a bounded map takes, far below an unbounded one. */
const DATA_LIMIT = 1 << 30;

const VENDOR = `'use strict';
function vendorHot(ms) {
  const end = Date.now() + ms;
  let x = 0;
  while (Date.now() < end) x += Math.sqrt(x + 1);
  return x;
}
exports.spin = vendorHot;
//# sourceMappingURL=vendor.js.map
`;

/** A directory with vendor.js and `map` (an object, or JSON text) as vendor.js.map. */
function withMap(map) {
  const dir = fs.realpathSync(fs.mkdtempSync(path.join(os.tmpdir(), 'selfprof-smbounds-')));
  fs.writeFileSync(path.join(dir, 'vendor.js'), VENDOR);
  fs.writeFileSync(path.join(dir, 'vendor.js.map'), typeof map === 'string' ? map : JSON.stringify(map));
  return dir;
}

/**
 * Runs vendor.js's hot function under a Profiler in a child, stops twice (the second from
 * the cache), and returns what the child saw: vendor.js's entry in `sourceMaps.scripts`,
 * its warnings, the RSS that each stop took the process to above what it held before
 * (MiB), the map cache's stats, and how it exited.
 */
function run(dir) {
  const code = `
const fs = require('node:fs');
const { Profiler } = require(${JSON.stringify(ROOT)});
const { native } = require(${JSON.stringify(path.join(ROOT, 'lib', 'native'))});
const vendor = require(${JSON.stringify(path.join(dir, 'vendor.js'))});
const warnings = [];
process.on('warning', (w) => warnings.push(w.code + ': ' + w.message));
const status = (k) => Number(new RegExp('^' + k + ':\\\\s+(\\\\d+) kB', 'm').exec(fs.readFileSync('/proc/self/status', 'utf8'))[1]) / 1024;
async function once() {
  const p = new Profiler({ sampleInterval: 1, maxBufferSize: 100000 });
  vendor.spin(120);
  fs.writeFileSync('/proc/self/clear_refs', '5');
  const held = status('VmRSS');
  const trace = await p.stop();
  const url = ${JSON.stringify(pathToFileURL(path.join(dir, 'vendor.js')).href)};
  return { script: trace.sourceMaps?.scripts.find((s) => s.url === url), grewMiB: status('VmHWM') - held, samples: trace.samples.length };
}
(async () => {
  const first = await once();
  const second = await once();
  await new Promise((r) => setImmediate(r));
  console.log(JSON.stringify({ first, second, warnings, cache: native.sourceMapCacheStats() }));
})();
`;
  // --no-opt --no-maglev: code V8 optimized on stack (OSR) in one recording is not in the
  // next one's code map (V8 logs only optimized code attached to a function when a profiler
  // starts), so its samples lose their frames; each recording here needs vendor.js's.
  const r = spawnSync('prlimit', [`--data=${DATA_LIMIT}`, process.execPath, '--no-opt', '--no-maglev', '-e', code], { encoding: 'utf8', timeout: 60_000 });
  fs.rmSync(dir, { recursive: true, force: true });
  const line = r.stdout.trim().split('\n').pop();
  if (process.env.SMDEBUG) console.error(line);
  return { status: r.status, signal: r.signal, stderr: r.stderr, out: line ? JSON.parse(line) : undefined };
}

function assertSkipped(r, reason) {
  assert.equal(r.signal, null, `the child was not killed (${r.signal}): ${r.stderr.slice(-400)}`);
  assert.equal(r.status, 0, r.stderr.slice(-400));
  const { first, second, warnings } = r.out;
  assert.ok(first.samples > 0 && second.samples > 0, 'both recordings are whole');
  assert.ok(first.script, 'vendor.js is named in sourceMaps.scripts');
  assert.equal(first.script.map, undefined);
  assert.match(first.script.error, reason);
  assert.deepEqual(second.script, first.script, 'the second stop says the same (from the cache)');
  const ours = warnings.filter((w) => w.startsWith('SELFPROF_SOURCE_MAP'));
  assert.equal(ours.length, 1, `one warning: ${JSON.stringify(warnings)}`);
  assert.ok(ours[0].includes('vendor.js.map'), ours[0]);
}

test('sourceRoot × sources: a 1 MiB root and 30,000 sources is skipped with a reason, not an abort', () => {
  const dir = withMap({ version: 3, sourceRoot: 'r'.repeat(1 << 20), sources: Array(30_000).fill('a'), names: [], mappings: 'AAAA' });
  const r = run(dir);
  assertSkipped(r, /sources expand to more than \d+ MiB/);
  assert.ok(r.out.first.grewMiB < 64, `stop() took the RSS ${r.out.first.grewMiB.toFixed(0)} MiB up`);
});

test('an index map whose sections each repeat sourceRoot × sources is bounded over all of them', () => {
  const section = { version: 3, sourceRoot: 'r'.repeat(16 << 10), sources: Array(2_000).fill('a'), names: [], mappings: 'AAAA' };
  // 64 sections of 16 KiB × 2,000 sources: 2 GiB resolved, from a 130 KiB file.
  const sections = Array.from({ length: 64 }, (_, i) => ({ offset: { line: i, column: 0 }, map: section }));
  const r = run(withMap({ version: 3, sections }));
  assertSkipped(r, /sources expand to more than \d+ MiB/);
  assert.ok(r.out.first.grewMiB < 64, `stop() took the RSS ${r.out.first.grewMiB.toFixed(0)} MiB up`);
});

test('names: a map of 8 million empty names is skipped with a reason', () => {
  const names = `[${Array(8_000_000).fill('""').join(',')}]`;
  const r = run(withMap(`{"version":3,"sources":["a.ts"],"names":${names},"mappings":"AAAAA"}`));
  assertSkipped(r, /names expand to more than \d+ MiB/);
  assert.ok(r.out.first.grewMiB < 64, `stop() took the RSS ${r.out.first.grewMiB.toFixed(0)} MiB up`);
});

test('decoded mappings: a 24 MiB map of 5 million mappings is skipped, before they are decoded', () => {
  const mappings = 'AAAA,'.repeat(5_000_000);
  const r = run(withMap({ version: 3, sources: ['a.ts'], names: [], mappings }));
  assertSkipped(r, /5,000,000 mappings; maps are used up to 4,000,000/);
  assert.ok(r.out.first.grewMiB < 64, `stop() took the RSS ${r.out.first.grewMiB.toFixed(0)} MiB up`);
});

test('a large map within the bounds is parsed once, kept, and its parse takes the RSS up by about its parsed size', () => {
  // 3.5 million mappings on 70,000 lines: 17 MiB of JSON, 80 MiB parsed.
  const line = `${'AAAA,'.repeat(49)}AAAA;`;
  const mappings = line.repeat(70_000);
  const r = run(withMap({ version: 3, sources: ['a.ts'], names: [], mappings }));
  assert.equal(r.signal, null, r.stderr.slice(-400));
  assert.equal(r.status, 0, r.stderr.slice(-400));
  const { first, second, cache, warnings } = r.out;
  assert.equal(first.script.error, undefined, first.script.error);
  assert.match(first.script.map, /vendor\.js\.map$/);
  assert.deepEqual(warnings.filter((w) => w.startsWith('SELFPROF_SOURCE_MAP')), []);
  assert.equal(cache.maps, 1, 'the parsed map is cached');
  assert.equal(cache.parsed, 1, 'parsed once for both stops');
  assert.ok(cache.bytes > 70 * 2 ** 20 && cache.bytes < 100 * 2 ** 20, `${cache.bytes} bytes cached`);
  // The parsed form (80 MiB) plus the JSON read (17 MiB): no copy of either on top.
  assert.ok(first.grewMiB < 120, `the first stop took the RSS ${first.grewMiB.toFixed(0)} MiB up`);
  assert.ok(second.grewMiB < 16, `the second stop took the RSS ${second.grewMiB.toFixed(0)} MiB up`);
});
