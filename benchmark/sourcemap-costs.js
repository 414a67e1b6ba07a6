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

const { spawnSync } = require('node:child_process');
const fs = require('node:fs');
const path = require('node:path');

const OUT = path.join(__dirname, '..', 'out', 'bench-sourcemaps');
const arg = (name, fallback) => {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? process.argv[i + 1] : fallback;
};

function bundle() {
  const ts = require.resolve('typescript', { paths: [path.join(__dirname, '..', 'node_modules', '@napi-rs', 'cli')] });
  fs.mkdirSync(OUT, { recursive: true });
  const entry = path.join(OUT, 'entry.js');
  fs.writeFileSync(
    entry,
    `const ts = require(${JSON.stringify(ts)});
const src = 'export function f(a: number, b: string): string { return b.repeat(a) + String(a * 2); }\\n'.repeat(40);
exports.work = (ms) => { const end = Date.now() + ms; let n = 0; while (Date.now() < end) n += ts.transpileModule(src, { compilerOptions: { target: 99 } }).outputText.length; return n; };
`,
  );
  require('esbuild').buildSync({
    entryPoints: [entry],
    bundle: true,
    minify: true,
    sourcemap: true,
    platform: 'node',
    format: 'cjs',
    outfile: path.join(OUT, 'bundle.js'),
    logLevel: 'silent',
  });
  return path.join(OUT, 'bundle.js');
}

async function measure(mode, file, ms) {
  const { Profiler } = require('..');
  const native = require('../lib/native').native;
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
      const child = spawnSync(process.execPath, [__filename, '--child', mode, file, String(ms)], { encoding: 'utf8' });
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
