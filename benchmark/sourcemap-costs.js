'use strict';
// What source mapping costs when a recording ends, side by side: a large minified bundle
// (TypeScript's compiler, 9 MB, bundled and minified by esbuild with an external map that
// has names) runs under a Profiler, then stop() with source maps off, on with a cold cache
// (the map read and parsed in this stop), and on with a warm one (a second recording).
//
//   node benchmark/sourcemap-costs.js [--rounds 5] [--ms 1000]
//
// Per mode and round, in a fresh process (modes shuffled per round):
//  - block: the longest event-loop block from stop() to the trace object, in the main
//    thread's CPU time between 1 ms ticks (preemption on a shared machine does not count);
//  - ready: wall time from stop() to the trace object;
//  - frames: frames of the bundle mapped; cache: what the map cache holds after.
// Then, on the event loop, what handing Node's own maps over costs (scripts compiled in
// memory, as tsx's): JSON.stringify of a map of that bundle's size, once per script.
//
//   node benchmark/sourcemap-costs.js --large [--rounds 3] [--root DIR]
//
// Large maps, near the bounds: stop() with a cold cache, then a warm one, in a fresh
// process per map and round, for `realistic` (TypeScript's compiler bundled twice by
// esbuild: a 27.5 MiB map, 8.6 MiB of it mappings, 18 MiB sourcesContent) and `dense` (a
// 31 MiB map: 3.9 million one-segment mappings and 12 MiB of sourcesContent) and `over`
// (a 31 MiB map of 6.4 million mappings, past the bound: not used). Per stop:
// how far it took the RSS above what the process held before (VmHWM, reset first), wall
// time to the trace; and the cache after (maps, MiB, maps parsed). --root: the selfprof
// checkout to measure (another commit's, for a before and after).

const { spawnSync } = require('node:child_process');
const fs = require('node:fs');
const path = require('node:path');

const OUT = path.join(__dirname, '..', 'out', 'bench-sourcemaps');
const arg = (name, fallback) => {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? process.argv[i + 1] : fallback;
};
const ROOT = path.resolve(arg('root', path.join(__dirname, '..')));
const TYPESCRIPT = () => require.resolve('typescript', { paths: [path.join(__dirname, '..', 'node_modules', '@napi-rs', 'cli')] });

/** `entry` bundled and minified by esbuild into `outfile`, with its source map, as a service ships it. */
function esbuildBundle(entry, outfile) {
  require('esbuild').buildSync({
    entryPoints: [entry],
    bundle: true,
    minify: true,
    sourcemap: true,
    platform: 'node',
    format: 'cjs',
    outfile,
    logLevel: 'silent',
  });
}

/** The two large maps' scripts: `realistic` (bundle-2.js) and `dense` (dense.js). */
function largeMaps() {
  const dir = path.join(OUT, 'large');
  fs.mkdirSync(dir, { recursive: true });
  for (const copy of ['ts1.js', 'ts2.js']) fs.copyFileSync(TYPESCRIPT(), path.join(dir, copy));
  const entry = path.join(dir, 'entry.js');
  fs.writeFileSync(
    entry,
    `const a = require('./ts1.js');
const b = require('./ts2.js');
const src = 'export function f(a: number, b: string): string { return b.repeat(a) + String(a * 2); }\\n'.repeat(40);
const t = (ts) => ts.transpileModule(src, { compilerOptions: { target: 99 } }).outputText.length;
exports.work = (ms) => { const end = Date.now() + ms; let n = 0; while (Date.now() < end) n += t(a) + t(b); return n; };
`,
  );
  esbuildBundle(entry, path.join(dir, 'bundle-2.js'));
  // dense.js: a loop on each of 4,000 lines; its map gives each line 975 one-segment
  // mappings into one source, whose text is 12 MiB.
  const lines = ['function denseHot(ms) {', '  const end = Date.now() + ms;', '  let x = 0;', '  while (Date.now() < end) {'];
  for (let i = 0; i < 40; i++) lines.push(`    x += Math.sqrt(x + ${i});`);
  lines.push('  }', '  return x;', '}', 'exports.work = denseHot;');
  fs.writeFileSync(path.join(dir, 'dense.js'), `${lines.join('\n')}\n//# sourceMappingURL=dense.js.map\n`);
  const line = `AAAA${',CAAA'.repeat(974)};`;
  const map = { version: 3, sources: ['dense.ts'], sourcesContent: ['// dense\n'.repeat(1_250_000)], names: [], mappings: line.repeat(4000) };
  fs.writeFileSync(path.join(dir, 'dense.js.map'), JSON.stringify(map));
  // over.js: the same lines, with 6.4 million mappings (31 MiB of them): past the bound.
  fs.writeFileSync(path.join(dir, 'over.js'), `${lines.join('\n')}\n//# sourceMappingURL=over.js.map\n`);
  const over = { version: 3, sources: ['over.ts'], names: [], mappings: `AAAA${',CAAA'.repeat(1599)};`.repeat(4000) };
  fs.writeFileSync(path.join(dir, 'over.js.map'), JSON.stringify(over));
  return { realistic: path.join(dir, 'bundle-2.js'), dense: path.join(dir, 'dense.js'), over: path.join(dir, 'over.js') };
}

/** In a fresh process: `file`'s work under a Profiler, stopped with a cold cache, then a warm one. */
async function measureLarge(file, ms) {
  const { Profiler } = require(ROOT);
  const { native } = require(path.join(ROOT, 'lib', 'native'));
  const { work } = require(file);
  const status = (k) => Number(new RegExp(`^${k}:\\s+(\\d+) kB`, 'm').exec(fs.readFileSync('/proc/self/status', 'utf8'))[1]) / 1024;
  const stop = async () => {
    const p = new Profiler({ sampleInterval: 1, maxBufferSize: 1e6 });
    work(ms);
    fs.writeFileSync('/proc/self/clear_refs', '5');
    const held = status('VmRSS');
    const t0 = performance.now();
    const trace = await p.stop();
    const readyMs = performance.now() - t0;
    const script = trace.sourceMaps?.scripts.find((s) => s.url === require('node:url').pathToFileURL(file).href);
    return { grewMiB: status('VmHWM') - held, readyMs, mapped: trace.sourceMaps?.mappedFrames ?? 0, error: script?.error };
  };
  const cold = await stop();
  const warm = await stop();
  return { cold, warm, cache: native.sourceMapCacheStats() };
}

async function large(rounds, ms) {
  const maps = largeMaps();
  for (const [name, file] of Object.entries(maps)) {
    const map = fs.statSync(`${file}.map`).size;
    console.log(`${name}: ${path.basename(file)}.map ${(map / 2 ** 20).toFixed(1)} MiB`);
  }
  console.log(`${rounds} rounds of ${ms} ms, Node ${process.version}, selfprof at ${ROOT}\n`);
  const results = Object.fromEntries(Object.keys(maps).map((k) => [k, []]));
  for (let r = 0; r < rounds; r++) {
    for (const name of Object.keys(maps).sort(() => Math.random() - 0.5)) {
      const child = spawnSync(process.execPath, ['--no-opt', __filename, '--child-large', maps[name], String(ms), '--root', ROOT], { encoding: 'utf8' });
      if (child.status !== 0) throw new Error(`${name}: ${child.signal ?? child.status} ${child.stderr.slice(-2000)}`);
      results[name].push(JSON.parse(child.stdout));
    }
  }
  const range = (xs, d = 0) => `${median(xs).toFixed(d)} (${Math.min(...xs).toFixed(d)}–${Math.max(...xs).toFixed(d)})`;
  console.log('map        stop  RSS grew MiB      ready ms            frames mapped   cache after');
  for (const [name, rs] of Object.entries(results)) {
    for (const when of ['cold', 'warm']) {
      const c = rs.at(-1).cache;
      const cache = when === 'warm' ? `${c.maps} maps, ${(c.bytes / 2 ** 20).toFixed(1)} MiB, parsed ${c.parsed ?? '?'}` : '';
      const error = rs.at(-1)[when].error;
      console.log(
        `${name.padEnd(10)} ${when}  ${range(rs.map((x) => x[when].grewMiB)).padEnd(16)}  ${range(rs.map((x) => x[when].readyMs)).padEnd(18)}  ` +
          `${String(median(rs.map((x) => x[when].mapped))).padStart(6)}          ${error ? `not used: ${error}` : cache}`,
      );
    }
  }
}

function bundle() {
  const ts = TYPESCRIPT();
  fs.mkdirSync(OUT, { recursive: true });
  const entry = path.join(OUT, 'entry.js');
  fs.writeFileSync(
    entry,
    `const ts = require(${JSON.stringify(ts)});
const src = 'export function f(a: number, b: string): string { return b.repeat(a) + String(a * 2); }\\n'.repeat(40);
exports.work = (ms) => { const end = Date.now() + ms; let n = 0; while (Date.now() < end) n += ts.transpileModule(src, { compilerOptions: { target: 99 } }).outputText.length; return n; };
`,
  );
  esbuildBundle(entry, path.join(OUT, 'bundle.js'));
  return path.join(OUT, 'bundle.js');
}

async function measure(mode, file, ms) {
  const { Profiler } = require(ROOT);
  const native = require(path.join(ROOT, 'lib', 'native')).native;
  const { work } = require(file);
  const record = async (options) => {
    const p = new Profiler({ sampleInterval: 1, maxBufferSize: 1e6 });
    work(ms);
    let lastCpu = native.threadCpuNs();
    let longest = 0;
    const ticker = setInterval(() => {
      const cpu = native.threadCpuNs();
      longest = Math.max(longest, cpu - lastCpu);
      lastCpu = cpu;
    }, 1);
    const t0 = performance.now();
    lastCpu = native.threadCpuNs();
    const trace = await p.stop(options);
    const ready = performance.now() - t0;
    longest = Math.max(longest, native.threadCpuNs() - lastCpu);
    clearInterval(ticker);
    return { trace, blockMs: longest / 1e6, readyMs: ready };
  };
  if (mode === 'warm') await record(); // fills the cache
  const { trace, blockMs, readyMs } = await record(mode === 'off' ? { sourceMaps: false } : undefined);
  const url = require('node:url').pathToFileURL(file).href;
  const bundleFrames = trace.frames.filter((f) => trace.resources[f.resourceId] === url).length;
  const mapped = trace.sourceMaps?.mappedFrames ?? 0;
  return { mode, blockMs, readyMs, frames: bundleFrames + mapped, mapped, samples: trace.samples.length, cache: native.sourceMapCacheStats() };
}

const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

async function main() {
  if (process.argv[2] === '--child') {
    const [mode, file, ms] = process.argv.slice(3);
    process.stdout.write(JSON.stringify(await measure(mode, file, Number(ms))));
    return;
  }
  if (process.argv[2] === '--child-large') {
    const [file, ms] = process.argv.slice(3);
    process.stdout.write(JSON.stringify(await measureLarge(file, Number(ms))));
    return;
  }
  if (process.argv.includes('--large')) return large(Number(arg('rounds', 3)), Number(arg('ms', 300)));
  const rounds = Number(arg('rounds', 5));
  const ms = Number(arg('ms', 1000));
  const file = bundle();
  const map = JSON.parse(fs.readFileSync(`${file}.map`, 'utf8'));
  console.log(
    `bundle ${(fs.statSync(file).size / 2 ** 20).toFixed(1)} MiB, map ${(fs.statSync(`${file}.map`).size / 2 ** 20).toFixed(1)} MiB ` +
      `(mappings ${(map.mappings.length / 2 ** 20).toFixed(1)} MiB, ${map.sources.length} sources, ${map.names.length} names); ` +
      `${rounds} rounds of ${ms} ms, Node ${process.version}`,
  );
  const results = { off: [], cold: [], warm: [] };
  for (let r = 0; r < rounds; r++) {
    const modes = Object.keys(results).sort(() => Math.random() - 0.5);
    for (const mode of modes) {
      const child = spawnSync(process.execPath, [__filename, '--child', mode, file, String(ms), '--root', ROOT], { encoding: 'utf8' });
      if (child.status !== 0) throw new Error(`${mode}: ${child.stderr}`);
      results[mode].push(JSON.parse(child.stdout));
    }
  }
  console.log('\nmode   block ms (median, range)   ready ms (median, range)   frames mapped   cache after');
  for (const [mode, rs] of Object.entries(results)) {
    const b = rs.map((x) => x.blockMs);
    const w = rs.map((x) => x.readyMs);
    const c = rs.at(-1).cache;
    console.log(
      `${mode.padEnd(5)}  ${median(b).toFixed(1).padStart(6)} (${Math.min(...b).toFixed(1)}–${Math.max(...b).toFixed(1)})` +
        `          ${median(w).toFixed(1).padStart(6)} (${Math.min(...w).toFixed(1)}–${Math.max(...w).toFixed(1)})` +
        `      ${String(median(rs.map((x) => x.mapped))).padStart(4)} of ${median(rs.map((x) => x.frames))}` +
        `      ${c.maps} maps, ${(c.bytes / 2 ** 20).toFixed(1)} MiB`,
    );
  }
  // Handing a map Node holds to the build (tsx's scripts): JSON.stringify on the event loop.
  const times = [];
  for (let i = 0; i < 5; i++) {
    const t0 = performance.now();
    JSON.stringify(map, (k, v) => (k === 'sourcesContent' ? undefined : v));
    times.push(performance.now() - t0);
  }
  const size = JSON.stringify({ ...map, sourcesContent: undefined }).length;
  console.log(`\nNode's map of that size handed over (JSON.stringify without sourcesContent, ${(size / 2 ** 20).toFixed(1)} MiB): ${median(times).toFixed(1)} ms, once per script per process`);
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
