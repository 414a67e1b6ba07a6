#!/usr/bin/env node
'use strict';
// (One file over 600 lines: CI runs it as one script, seeds, mutators and checks together.)
// Mutation fuzzing of everything selfprof reads from outside: trace JSON, json-gzip,
// pprof, pprof.gz and V8's .cpuprofile, through convert() (every target), readProfile()
// and fromCpuProfile(); and source maps (`sourcemap`), through a trace build that maps a
// profile's frames with them, as Node's map of a script (JSON handed over) and as a file
// beside it or inline in it, with the hot lines' text. Seeds are real recordings and
// esbuild's and hand-made maps (an index map) made at start; mutations are byte-level
// (flips, interesting bytes, inserts, deletes, duplicated ranges, truncation),
// structure-aware (JSON values and arrays; pprof fields decoded by pprof-format), and for
// maps adversarial in what a map expands to (sourceRoot × sources, millions of mappings,
// names or lines, nested and repeated sections, long sourcesContent, wrong types). No JSON
// input is over 32 MiB (measured before it is made): selfprof refuses larger by size alone.
//
//   node scripts/fuzz.js [--cases N] [--seconds S] [--seed N|commit] [--formats trace,pprof,...]
//                        [--max-case-rss-mib 384] [--max-case-ms 2000]
//
// --max-case-ms bounds each operation (one conversion of one input) in the CPU time the
// process spent on it (every thread's: selfprof's async work runs off the main thread), so
// the bound holds on a machine busy with other work, as CI's is (it runs this beside the
// sanitizers); the table shows each case's wall time in all (every target, readProfile and, for .cpuprofile, fromCpuProfile; for a
// source map, its two builds). A source map must never fail a build: any exception is one.
//
// CI runs it bounded (`npm run test:fuzz`: a few thousand cases per format); run it with
// --seconds for as long as you like. The cases run in a child process under a data-size
// rlimit, so a runaway allocation aborts that process instead of the machine: the driver
// then names the case and keeps its input in out/fuzz/. Fails (exit 1) if any case
// crashes, throws something that is not an Error with a message, takes longer than
// --max-case-ms, or takes the RSS more than --max-case-rss-mib above what the process held
// when selfprof began on the case (VmHWM, reset once the case's input is made). The
// process's own peak is not the measure: it is mostly what earlier cases left behind
// (freed memory the allocators keep) plus the harness's pprof-format encoding of ~30 MB
// inputs, and the same cases from the same seeds took it to 311 MiB in one run and 539
// MiB in another.

const fs = require('node:fs');
const path = require('node:path');
const zlib = require('node:zlib');
const { spawn, spawnSync } = require('node:child_process');
const { peakRssMiB } = require('../__test__/helpers');

const FORMATS = ['trace', 'json-gzip', 'pprof', 'pprof.gz', 'cpuprofile', 'sourcemap'];
const TARGETS = ['trace', 'folded', 'pprof', 'cpuprofile'];
const root = path.resolve(__dirname, '..');
const outDir = path.join(root, 'out', 'fuzz');

function arg(name, fallback) {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? process.argv[i + 1] : fallback;
}

/** --seed: an integer, or `commit` for one from the checkout's HEAD (each commit fuzzes
 * cases of its own, and a rerun of it the same ones; 1 without git); 1 by default. */
function seedOption() {
  const v = arg('seed', '1');
  if (v === 'commit') {
    const head = spawnSync('git', ['rev-parse', 'HEAD'], { cwd: root, encoding: 'utf8' });
    return head.status === 0 && /^[0-9a-f]{8}/.test(head.stdout) ? parseInt(head.stdout.slice(0, 8), 16) : 1;
  }
  const n = Number(v);
  if (!Number.isSafeInteger(n)) throw new RangeError(`--seed must be an integer or "commit", got ${JSON.stringify(v)}`);
  return n;
}

/** A size option (MiB): a positive number, else one error naming the option. */
function mib(name, fallback) {
  const v = Number(arg(name, fallback));
  if (!(v > 0 && Number.isFinite(v))) throw new RangeError(`--${name} must be a positive number of MiB, got ${JSON.stringify(arg(name))}`);
  return v;
}

// --- a seeded PRNG (mulberry32) ---------------------------------------------------------

function prng(seed) {
  let a = seed >>> 0;
  const next = () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  const int = (n) => Math.floor(next() * n);
  return { next, int, pick: (xs) => xs[int(xs.length)] };
}

// --- seeds: real recordings -------------------------------------------------------------

async function makeSeeds() {
  const selfprof = require('..');
  const { setTimeout: sleep } = require('node:timers/promises');
  const work = (ms) => {
    const end = performance.now() + ms;
    let x = 0;
    while (performance.now() < end) x += Math.sqrt(x + 1);
    return x;
  };
  function fuzzSeedHandler(i) {
    return work(2 + (i % 3));
  }
  const run = async () => {
    for (let i = 0; i < 40; i++) {
      await selfprof.withLabels({ endpoint: `GET /seed/${i % 4}`, span_id: (0x5eedn + BigInt(i)).toString(16).padStart(16, '0') }, async () => {
        fuzzSeedHandler(i);
        await sleep(1);
      });
    }
  };
  const p = new selfprof.Profiler({ sampleInterval: 1, maxBufferSize: 100_000 });
  await run();
  const trace = await p.stop();
  const q = new selfprof.Profiler({ sampleInterval: 1, maxBufferSize: 100_000 });
  await run();
  const pprofGz = await q.stop({ format: 'pprof' });
  // A V8 CPU profile as DevTools saves it, straight from the inspector.
  const inspector = require('node:inspector');
  const session = new inspector.Session();
  session.connect();
  const post = (m, params) => new Promise((res, rej) => session.post(m, params, (e, r) => (e ? rej(e) : res(r))));
  await post('Profiler.enable');
  await post('Profiler.setSamplingInterval', { interval: 1000 });
  await post('Profiler.start');
  await run();
  const { profile } = await post('Profiler.stop');
  session.disconnect();
  return {
    trace: Buffer.from(JSON.stringify(trace)),
    pprof: zlib.gunzipSync(pprofGz),
    cpuprofile: Buffer.from(JSON.stringify(profile)),
    ...sourceMapSeeds(),
  };
}

/** Source maps to start from: esbuild's of minified TypeScript (names, sourcesContent), a
 * hand-made one with sourceRoot, and an index map of both (one nested). */
function sourceMapSeeds() {
  const ts = [
    'export function hotLoop(n: number) { let t = 0; for (let i = 0; i < n; i++) t += Math.sqrt(i); return t; }',
    'export const arrow = (a: string) => a.repeat(2);',
    'export class K { method(x: number) { return hotLoop(x); } }',
    '',
  ].join('\n');
  const out = require('esbuild').buildSync({
    stdin: { contents: ts, loader: 'ts', sourcefile: 'app.ts' },
    minify: true,
    sourcemap: 'external',
    write: false,
    outfile: 'out.js',
    format: 'cjs',
    logLevel: 'silent',
  }).outputFiles;
  const esbuildMap = JSON.parse(out.find((f) => f.path.endsWith('.map')).text);
  const plain = {
    version: 3,
    sourceRoot: '../src/',
    sources: ['a.ts', 'b.ts', null, 'webpack://x/c.ts'],
    sourcesContent: ['line 1\nline 2\r\nline 3\u2028line 4', null, 'x'],
    names: ['hot', 'arrow', 7],
    mappings: 'AAAA,IAAIA,CAAC;AACA,GAAGC;;EAEE,CAAC,KAAKA;AAClB,AAAA',
  };
  const index = {
    version: 3,
    sections: [
      { offset: { line: 0, column: 0 }, map: esbuildMap },
      { offset: { line: 2, column: 10 }, map: { version: 3, sections: [{ offset: { line: 1, column: 0 }, map: plain }] } },
    ],
  };
  return { sourcemaps: [esbuildMap, plain, index], script: out.find((f) => f.path.endsWith('.js')).text };
}

// --- mutations ----------------------------------------------------------------------------

const INTERESTING_BYTES = [0x00, 0x01, 0x7f, 0x80, 0xff, 0x0a, 0x12, 0x22, 0x7b, 0x7d, 0x5b, 0x5d, 0x22, 0x2c];
const INTERESTING_NUMBERS = [0, -1, 1, 2 ** 31, 2 ** 32, 2 ** 53, -(2 ** 53), 1e308, -1e308, 0.5, 19_999_999, 1e6, 65535];

// The largest JSON input the harness makes. Duplicated array elements are shared, so
// duplications nest and multiply (2,000 copies of a section holding 2,000 copies of a
// long string): unchecked, one map in ~10,000 came to 150-400 MB or past what a JS string
// holds, and the case process ran out of heap making it. selfprof refuses such inputs by
// their size alone (32 MiB for a map, 256 MiB for a profile): larger ones test only the harness.
const MAX_JSON_INPUT = 32 << 20;

/** The length of `value`'s JSON, without making it: a shared object or string is
 * measured once, however many times it is referred to. */
function jsonLength(value, memo = new Map()) {
  if (value === null || (typeof value !== 'object' && typeof value !== 'string')) return (JSON.stringify(value) ?? 'null').length;
  let n = memo.get(value);
  if (n !== undefined) return n;
  if (typeof value === 'string') n = JSON.stringify(value).length;
  else if (Array.isArray(value)) {
    n = 1 + Math.max(1, value.length);
    for (const v of value) n += jsonLength(v, memo);
  } else {
    const entries = Object.entries(value).filter(([, v]) => v !== undefined);
    n = 1 + Math.max(1, entries.length);
    for (const [k, v] of entries) n += JSON.stringify(k).length + 1 + jsonLength(v, memo);
  }
  memo.set(value, n);
  return n;
}

function mutateBytes(r, bytes) {
  let b = Buffer.from(bytes);
  const rounds = 1 + r.int(6);
  for (let k = 0; k < rounds && b.length > 0; k++) {
    const at = r.int(b.length);
    switch (r.int(7)) {
      case 0:
        b[at] ^= 1 << r.int(8);
        break;
      case 1:
        b[at] = r.pick(INTERESTING_BYTES);
        break;
      case 2:
        b = Buffer.concat([b.subarray(0, at), Buffer.from([r.int(256), r.int(256)]), b.subarray(at)]);
        break;
      case 3:
        b = Buffer.concat([b.subarray(0, at), b.subarray(Math.min(b.length, at + 1 + r.int(64)))]);
        break;
      case 4: {
        // Duplicate a range many times: what turns small files into big work.
        const len = 1 + r.int(Math.min(64, b.length - at));
        const range = b.subarray(at, at + len);
        b = Buffer.concat([b.subarray(0, at), ...Array(1 + r.int(200)).fill(range), b.subarray(at)]);
        break;
      }
      case 5:
        b = b.subarray(0, at);
        break;
      default: {
        const other = r.int(b.length);
        const len = 1 + r.int(32);
        b = Buffer.concat([b.subarray(0, at), b.subarray(other, other + len), b.subarray(at)]);
      }
    }
  }
  return b;
}

/** Values and arrays of a parsed JSON document, changed in place at random paths. */
function mutateJsonValue(r, doc) {
  const paths = [];
  (function walk(v, depth) {
    if (depth > 6 || paths.length > 4000) return;
    if (Array.isArray(v)) {
      paths.push(v);
      for (let i = 0; i < v.length && i < 50; i++) if (v[i] && typeof v[i] === 'object') walk(v[i], depth + 1);
    } else if (v && typeof v === 'object') {
      paths.push(v);
      for (const k of Object.keys(v)) if (v[k] && typeof v[k] === 'object') walk(v[k], depth + 1);
    }
  })(doc, 0);
  const rounds = 1 + r.int(4);
  for (let k = 0; k < rounds && paths.length; k++) {
    const target = r.pick(paths);
    if (Array.isArray(target)) {
      if (target.length === 0) continue;
      switch (r.int(4)) {
        case 0: {
          const i = r.int(target.length);
          for (let n = r.int(2000); n > 0; n--) target.splice(i, 0, target[i]);
          break;
        }
        case 1:
          target.length = r.int(target.length);
          break;
        case 2:
          target.reverse();
          break;
        default:
          target[r.int(target.length)] = r.pick([null, 'x', -1, 1e308, {}, [], true]);
      }
    } else {
      const keys = Object.keys(target);
      const key = keys.length && r.int(5) ? r.pick(keys) : r.pick(['stackId', 'parentId', 'frameId', 'resourceId', 'contextId', 'marker', 'line', '__proto__', 'constructor']);
      switch (r.int(6)) {
        case 0:
          delete target[key];
          break;
        case 1:
          target[key] = r.pick(INTERESTING_NUMBERS);
          break;
        case 2:
          target[key] = r.pick(['', '\ud800', 'x'.repeat(5000), '</script>', 'gc', 'idle', '(root)']);
          break;
        case 3:
          target[key] = r.pick([null, true, [], {}]);
          break;
        default:
          if (typeof target[key] === 'number') target[key] = target[key] + r.pick([-1, 1, 1000, 1e9]);
          else target[key] = r.pick(INTERESTING_NUMBERS);
      }
    }
  }
  return doc;
}

function mutateJson(r, bytes) {
  if (r.int(2)) return mutateBytes(r, bytes);
  const doc = mutateJsonValue(r, JSON.parse(bytes));
  return jsonLength(doc) > MAX_JSON_INPUT ? mutateBytes(r, bytes) : Buffer.from(JSON.stringify(doc));
}

/** pprof fields changed through an independent decoder (pprof-format), else bytes. */
function mutatePprof(r, bytes) {
  if (r.int(2)) return mutateBytes(r, bytes);
  const { Profile } = require('pprof-format');
  try {
    const p = Profile.decode(bytes);
    const rounds = 1 + r.int(3);
    for (let k = 0; k < rounds; k++) {
      const s = p.sample.length ? r.pick(p.sample) : null;
      switch (r.int(8)) {
        case 0:
          if (s) s.value = s.value.map(() => r.pick(INTERESTING_NUMBERS));
          break;
        case 1:
          if (s && s.locationId.length) s.locationId = Array(1 + r.int(20000)).fill(r.pick(s.locationId));
          break;
        case 2:
          if (s) s.locationId.push(r.pick([0, 999999, 2 ** 40]));
          break;
        case 3:
          if (p.function.length) r.pick(p.function).name = r.pick([0, 999999, -1]);
          break;
        case 4:
          if (p.location.length) {
            const l = r.pick(p.location);
            l.line = Array(1 + r.int(5000)).fill(l.line[0] ?? { functionId: 1 });
          }
          break;
        case 5:
          p.period = r.pick(INTERESTING_NUMBERS);
          break;
        case 6:
          for (let n = r.int(2000); n > 0 && s; n--) p.sample.push(s);
          break;
        default:
          if (s && s.label.length) r.pick(s.label).str = r.pick([0, 999999, -5]);
      }
    }
    return Buffer.from(p.encode());
  } catch {
    return mutateBytes(r, bytes);
  }
}

const B64 = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/';

/** A `mappings` string made to cost: long, many lines or segments, odd values. `n`: its scale. */
function adversarialMappings(r, n) {
  const segment = () => Array.from({ length: r.pick([1, 4, 5, 6, 2]) }, () => B64[r.int(64)]).join('');
  switch (r.int(7)) {
    case 0:
      return `${segment()},`.repeat(1 + r.int(n));
    case 1:
      return ';'.repeat(1 + r.int(2 * n));
    case 2:
      return `${'g'.repeat(1 + r.int(20))}A`.repeat(1 + r.int(1000));
    case 3:
      return Array.from({ length: 1 + r.int(5000) }, () => (r.int(8) ? segment() : r.pick([';', ',', '', '!', '+/+/+', 'AAAAAAAAAA']))).join(r.pick([',', ';']));
    case 4:
      // Deltas that run negative, and source and name indexes past the end.
      return Array.from({ length: 1 + r.int(200) }, () => r.pick(['AAAA', 'ADAA', 'AAAD', 'ACAAC', 'AAAAD', 'D', 'AAAAAA'])).join(',');
    case 5:
      return `${'AAAA,'.repeat(49)}AAAA;`.repeat(1 + r.int(n / 25));
    default:
      return Array.from({ length: 1 + r.int(3000) }, segment).join(r.pick([',', ';', ',;']));
  }
}

/**
 * A source map, mutated for what it expands to, or as JSON (bytes and structure). One case
 * in 50 is at the scale of the bounds (a 1 MiB sourceRoot × 30,000 sources, a million
 * mappings or names, thousands of sections); the others are small, so that the step's
 * time stays what it was.
 */
function mutateSourceMap(r, seeds) {
  let m = structuredClone(r.pick(seeds.sourcemaps));
  const regular = m.sections ? m.sections[0].map : m;
  const big = r.int(50) === 0;
  const scale = (small, large) => r.pick(big ? large : small);
  for (let k = 1 + r.int(2); k > 0; k--) {
    switch (r.int(8)) {
      case 0:
        // sourceRoot × sources.
        regular.sourceRoot = r.pick(['r', 'a/../', '%20']).repeat(scale([1, 1000], [64 << 10, 1 << 20]));
        regular.sources = Array(scale([1, 100], [3000, 30_000])).fill(r.pick(['a', '../b', '/abs', '', 'https://x/y']));
        break;
      case 1:
        regular.mappings = adversarialMappings(r, scale([2000], [1_000_000]));
        break;
      case 2: {
        // Index maps: many sections, far offsets, nested deep (up to ~16 MB of JSON).
        const size = jsonLength(m);
        const count = Math.max(1, Math.min(scale([1, 2, 50], [2000]), Math.floor((16 << 20) / size)));
        m = {
          version: 3,
          sections: Array.from({ length: count }, (_, i) => ({
            offset: { line: r.pick([i, 0, 2 ** 32 - 1, 2 ** 31, -1]), column: r.pick([0, 5, 2 ** 31]) },
            ...(r.int(20) ? { map: m } : { url: 'other.js.map' }),
          })),
        };
        for (let d = r.int(7); d > 0; d--) m = { version: 3, sections: [{ offset: { line: 0, column: 0 }, map: m }] };
        // The last change: the sections share the map, which must not grow after.
        k = 0;
        break;
      }
      case 3:
      {
        const name = r.pick(['', 'x', 'name'.repeat(100), 1, null, {}]);
        const count = Math.min(scale([1, 1000], [200_000, 1_500_000]), Math.floor((16 << 20) / (JSON.stringify(name).length + 1)));
        regular.names = Array(count).fill(name);
      }
        break;
      case 4:
        regular.sourcesContent = r.pick([
          Array(Math.min(regular.sources?.length ?? 1, 16)).fill('line\n'.repeat(1 + r.int(scale([1000], [200_000])))),
          ['\r\n\u2028\u2029\r'.repeat(1000)],
          [null, 5, {}],
          'not an array',
          Array(5000).fill(''),
        ]);
        break;
      case 5: {
        const key = r.pick(['mappings', 'sources', 'names', 'sourceRoot', 'sections', 'sourcesContent', 'version']);
        regular[key] = r.pick([5, 'x', null, {}, [], [[]], true, -1]);
        break;
      }
      default: {
        // Structure-aware mutation of a large document would cost the harness more than the case.
        const json = Buffer.from(JSON.stringify(m));
        // (Its array duplications nest: on a map of sections they multiply.)
        return json.length > 16 << 10 ? mutateBytes(r, json) : mutateJson(r, json);
      }
    }
  }
  // selfprof reads or takes no map over 32 MiB (lib/symbolize, src/symbolize/locate.rs).
  return jsonLength(m) > MAX_JSON_INPUT ? mutateBytes(r, Buffer.from(JSON.stringify(seeds.sourcemaps[1]))) : Buffer.from(JSON.stringify(m));
}

function caseInput(r, format, seeds) {
  const gz = (b) => zlib.gzipSync(b, { level: 1 });
  switch (format) {
    case 'sourcemap':
      return mutateSourceMap(r, seeds);
    case 'trace':
      return mutateJson(r, seeds.trace);
    case 'json-gzip':
      return r.int(5) ? gz(mutateJson(r, seeds.trace)) : mutateBytes(r, gz(seeds.trace));
    case 'pprof':
      return mutatePprof(r, seeds.pprof);
    case 'pprof.gz':
      return r.int(5) ? gz(mutatePprof(r, seeds.pprof)) : mutateBytes(r, gz(seeds.pprof));
    default:
      return mutateJson(r, seeds.cpuprofile);
  }
}

// --- the cases (child process) -----------------------------------------------------------

/** Resets the process's peak RSS (VmHWM) to its RSS now; false where Linux cannot. */
function resetPeakRss() {
  try {
    fs.writeFileSync('/proc/self/clear_refs', '5');
    return true;
  } catch {
    return false;
  }
}

/** The process's RSS now, MiB (VmRSS). */
function rssMiB() {
  try {
    const m = /^VmRSS:\s+(\d+) kB/m.exec(fs.readFileSync('/proc/self/status', 'utf8'));
    if (m) return Number(m[1]) / 1024;
  } catch {
    // no /proc
  }
  return process.memoryUsage().rss / 2 ** 20;
}

/** The CPU time this process has spent, every thread's, in ms. */
function cpuMs() {
  const { user, system } = process.cpuUsage();
  return (user + system) / 1000;
}

/**
 * Runs `fn`, timed in CPU time; an exception must be an Error with a message. Returns 'ok'
 * | 'error' and adds its time to `clock` (`slowest`: the longest single operation).
 */
async function expectCleanly(fn, problems, what, clock) {
  const t0 = cpuMs();
  try {
    await fn();
    return 'ok';
  } catch (err) {
    if (!(err instanceof Error) || typeof err.message !== 'string' || err.message === '') {
      problems.push(`${what}: threw ${Object.prototype.toString.call(err)} ${String(err).slice(0, 200)}`);
    }
    return 'error';
  } finally {
    const ms = cpuMs() - t0;
    if (ms > clock.slowest.ms) clock.slowest = { ms, what };
  }
}

/**
 * Builds a trace of a V8 profile of one script (functions at several places of it, with
 * line ticks) whose source map is `map`: handed over as Node's map of the script
 * (`runtime`), or in a file beside it (`file`) or inline in it (`inline`), with the hot
 * lines' text. A map must never fail the build: it is used or named with why. Returns
 * 'ok' (used) or 'error' (named with why); anything else is a problem.
 */
let mapCase = 0;
async function expectMapped(native, map, how, script, problems, what, clock) {
  const dir = path.join(outDir, 'maps');
  fs.mkdirSync(dir, { recursive: true });
  const file = path.join(dir, `s${++mapCase}.js`);
  const url = require('node:url').pathToFileURL(file).href;
  const comment = how === 'inline' ? `data:application/json;base64,${map.toString('base64')}` : `s${mapCase}.js.map`;
  fs.writeFileSync(file, `${script}\n//# sourceMappingURL=${comment}\n`);
  if (how === 'file') fs.writeFileSync(`${file}.map`, map);
  const places = [[0, 0], [0, 9], [0, 40], [0, 120], [1, 4], [2, 10], [5, 1], [2 ** 31, 2 ** 31]];
  const nodes = [{ id: 1, callFrame: { functionName: '(root)', scriptId: '0', url: '', lineNumber: -1, columnNumber: -1 }, hitCount: 0, children: places.map((_, i) => i + 2) }];
  places.forEach(([lineNumber, columnNumber], i) => {
    nodes.push({
      id: i + 2,
      callFrame: { functionName: ['i', 'a.b', '', 'hotLoop'][i % 4], scriptId: '1', url, lineNumber, columnNumber },
      hitCount: 2,
      positionTicks: [{ line: lineNumber + 1, ticks: 1 }, { line: lineNumber + 2, ticks: 1 }],
    });
  });
  const samples = nodes.slice(1).flatMap((n) => [n.id, n.id]);
  const profile = { nodes, startTime: 0, endTime: samples.length * 1000, samples, timeDeltas: samples.map(() => 1000) };
  const build = { originUs: 0, format: 'json', sourceMaps: true, sourceText: how === 'runtime' ? 'maps' : 'scripts', scriptMaps: how === 'runtime' ? [{ url, map: map.toString('utf8') }] : [] };
  let result = 'error';
  const t0 = cpuMs();
  try {
    const [json] = native.buildTraceSync([{ profile: JSON.stringify(profile) }], build);
    const trace = JSON.parse(json);
    const entry = trace.sourceMaps?.scripts?.find((s) => s.url === url);
    if (!entry || (entry.map === undefined) === (entry.error === undefined)) {
      problems.push(`${what}: the script is not named with its map or why (${JSON.stringify(entry)})`);
    } else if (entry.map !== undefined) {
      result = 'ok';
    }
  } catch (err) {
    problems.push(`${what}: the build failed: ${String(err?.message ?? err).slice(0, 200)}`);
    fs.copyFileSync(path.join(outDir, 'current.bin'), path.join(outDir, `failed-sourcemap-${mapCase}.bin`));
  } finally {
    const ms = cpuMs() - t0;
    if (ms > clock.slowest.ms) clock.slowest = { ms, what };
    fs.rmSync(file, { force: true });
    fs.rmSync(`${file}.map`, { force: true });
  }
  return result;
}

async function child() {
  const selfprof = require('..');
  const { native } = require('../lib/native');
  const cases = Number(arg('cases', 2000));
  const seconds = Number(arg('seconds', 0));
  const seed = Number(arg('seed', 1));
  const formats = arg('formats', FORMATS.join(',')).split(',');
  const maxCaseMs = Number(arg('max-case-ms', 2000));
  const maxCaseRss = mib('max-case-rss-mib', 384);
  fs.mkdirSync(outDir, { recursive: true });
  const seeds = await makeSeeds();
  for (const [name, bytes] of Object.entries(seeds)) if (Buffer.isBuffer(bytes)) fs.writeFileSync(path.join(outDir, `seed.${name}`), bytes);
  const current = path.join(outDir, 'current.bin');
  const started = performance.now();
  const deadline = seconds > 0 ? started + seconds * 1000 : Infinity;
  const stats = Object.fromEntries(formats.map((f) => [f, { cases: 0, ok: 0, errors: 0, ms: [] }]));
  const problems = [];
  const r = prng(seed);
  let slowest = { ms: 0 };
  let peakRss = 0;
  let maxCaseRssSeen = 0;
  for (let n = 0; seconds > 0 ? performance.now() < deadline : n < cases; n++) {
    for (const format of formats) {
      // Announced before it is made: a crash making it is the harness's, not selfprof's.
      process.stdout.write(`${JSON.stringify({ case: n, format, making: true })}\n`);
      const input = caseInput(r, format, seeds);
      fs.writeFileSync(current, input);
      // From here the peak is what selfprof's operations on this input take the process to.
      const held = resetPeakRss() ? rssMiB() : 0;
      process.stdout.write(`${JSON.stringify({ case: n, format })}\n`);
      const t0 = performance.now();
      const clock = { slowest: { ms: 0 } };
      let outcome = format === 'sourcemap' ? 'error' : await expectCleanly(() => selfprof.readProfile(input), problems, `${format} #${n} readProfile`, clock);
      for (const to of format === 'sourcemap' ? [] : TARGETS) {
        const o = await expectCleanly(() => selfprof.convert(input, { to }), problems, `${format} #${n} to ${to}`, clock);
        if (o === 'ok') outcome = 'ok';
      }
      if (format === 'sourcemap') {
        for (const how of ['runtime', r.pick(['file', 'inline'])]) {
          const o = await expectMapped(native, input, how, seeds.script, problems, `${format} #${n} as ${how === 'runtime' ? "Node's map" : `a map ${how}`}`, clock);
          if (o === 'ok') outcome = 'ok';
        }
      }
      if (format === 'cpuprofile') {
        let parsed;
        try {
          parsed = JSON.parse(input);
        } catch {
          parsed = undefined;
        }
        if (parsed !== undefined) {
          const o = await expectCleanly(() => selfprof.fromCpuProfile(parsed), problems, `${format} #${n} fromCpuProfile`, clock);
          if (o === 'ok') outcome = 'ok';
        }
      }
      const ms = performance.now() - t0;
      const s = stats[format];
      s.cases++;
      s[outcome === 'ok' ? 'ok' : 'errors']++;
      s.ms.push(ms);
      if (clock.slowest.ms > slowest.ms) slowest = clock.slowest;
      if (clock.slowest.ms > maxCaseMs) {
        problems.push(`${clock.slowest.what} took ${clock.slowest.ms.toFixed(0)} ms of CPU (limit ${maxCaseMs})`);
        fs.copyFileSync(current, path.join(outDir, `slow-${format}-${n}.bin`));
      }
      const rss = peakRssMiB();
      peakRss = Math.max(peakRss, rss);
      maxCaseRssSeen = Math.max(maxCaseRssSeen, rss - held);
      if (rss - held > maxCaseRss) {
        problems.push(`${format} #${n} took the RSS from ${held.toFixed(0)} to ${rss.toFixed(0)} MiB (limit: ${maxCaseRss} MiB more)`);
        fs.copyFileSync(current, path.join(outDir, `rss-${format}-${n}.bin`));
      }
      if (problems.length >= 20) break;
    }
    if (problems.length >= 20) break;
  }
  const summary = {
    done: true,
    seconds: (performance.now() - started) / 1000,
    stats: Object.fromEntries(
      Object.entries(stats).map(([f, s]) => {
        const sorted = s.ms.sort((a, b) => a - b);
        const q = (p) => sorted[Math.min(sorted.length - 1, Math.floor(p * sorted.length))] ?? 0;
        return [f, { cases: s.cases, ok: s.ok, errors: s.errors, median: q(0.5), p99: q(0.99), max: sorted.at(-1) ?? 0 }];
      }),
    ),
    peakRssMiB: peakRss,
    caseRssMiB: maxCaseRssSeen,
    slowest,
    problems,
  };
  process.stdout.write(`${JSON.stringify(summary)}\n`);
}

// --- the driver --------------------------------------------------------------------------

function driver() {
  const seed = seedOption();
  const args = process.argv.slice(2).filter((a, i, all) => a !== '--seed' && all[i - 1] !== '--seed');
  args.push('--seed', String(seed));
  const maxCaseRss = mib('max-case-rss-mib', 384);
  const maxCaseMs = Number(arg('max-case-ms', 2000));
  // A data-size limit well above the RSS bound: a runaway allocation aborts the child.
  const limit = String(2048 * 2 ** 20);
  const hasPrlimit = spawnSync('prlimit', ['--version']).status === 0;
  const cmd = hasPrlimit ? 'prlimit' : process.execPath;
  const cmdArgs = hasPrlimit ? [`--data=${limit}`, process.execPath, __filename, '--child', ...args] : [__filename, '--child', ...args];
  const started = Date.now();
  const p = spawn(cmd, cmdArgs, { stdio: ['ignore', 'pipe', 'inherit'] });
  let buffered = '';
  let last = null;
  let summary = null;
  p.stdout.on('data', (d) => {
    buffered += d;
    const lines = buffered.split('\n');
    buffered = lines.pop();
    for (const line of lines) {
      const msg = JSON.parse(line);
      if (msg.done) summary = msg;
      else last = msg;
    }
  });
  p.on('exit', (code, signal) => {
    if (!summary) {
      const died = `fuzz: the case process died (${signal ?? `exit ${code}`})`;
      if (!last || last.making) {
        // Nothing of selfprof's ran on this case: the harness failed making its input.
        console.error(`${died} ${last ? `making the input of ${last.format} #${last.case}` : 'at start'} (seed ${seed}): a defect of the harness`);
        process.exitCode = 1;
        return;
      }
      const kept = path.join(outDir, `crash-${last.format}-${last.case}.bin`);
      try {
        fs.copyFileSync(path.join(outDir, 'current.bin'), kept);
      } catch {
        // nothing to keep
      }
      console.error(`${died} at ${last.format} #${last.case} (seed ${seed}); its input is in ${path.relative(root, kept)}`);
      process.exitCode = 1;
      return;
    }
    const rows = Object.entries(summary.stats).map(([f, s]) => [f, s.cases, s.ok, s.errors, s.median.toFixed(2), s.p99.toFixed(1), s.max.toFixed(1)]);
    const head = ['format', 'cases', 'read ok', 'errors', 'case median ms', 'p99 ms', 'max ms'];
    const widths = head.map((h, i) => Math.max(h.length, ...rows.map((r) => String(r[i]).length)));
    const line = (cells) => cells.map((c, i) => (i ? String(c).padStart(widths[i]) : String(c).padEnd(widths[i]))).join('  ');
    console.log(`fuzz: seed ${seed}, ${summary.seconds.toFixed(1)} s of cases (${((Date.now() - started) / 1000).toFixed(1)} s in all)`);
    console.log(line(head));
    for (const r of rows) console.log(line(r));
    console.log(`RSS: at most ${summary.caseRssMiB.toFixed(0)} MiB above what the process held as a case began (limit ${maxCaseRss}), peak ${summary.peakRssMiB.toFixed(0)} MiB; slowest operation: ${summary.slowest.what}, ${summary.slowest.ms.toFixed(0)} ms of CPU (limit ${maxCaseMs})`);
    for (const problem of summary.problems) console.log(`FAIL ${problem}`);
    console.log(`fuzz: ${summary.problems.length ? 'FAIL' : 'pass'}`);
    process.exitCode = summary.problems.length ? 1 : 0;
  });
}

if (require.main !== module) {
  // For __test__/fuzz-inputs.test.js: what the harness makes.
  module.exports = { sourceMapSeeds, mutateSourceMap, mutateJson, prng, jsonLength, MAX_JSON_INPUT };
} else if (process.argv.includes('--child')) {
  child().catch((err) => {
    console.error(err);
    process.exit(2);
  });
} else {
  try {
    driver();
  } catch (err) {
    console.error(`fuzz: ${err.message}`);
    process.exitCode = 2;
  }
}
