'use strict';
// `npm run demo`: profiles a small bundled workload with labeled requests, writes the
// trace and the HTML report, and prints the functions that took the most samples.

const fs = require('node:fs');
const path = require('node:path');
const { Profiler, htmlReport } = require('..');
const { topFunctions, samplesByLabel, formatTable } = require('../lib/views/summary');
const workload = require('./workload');

async function main() {
  const outDir = path.resolve(process.argv[2] || path.join(__dirname, '..', 'out'));
  fs.mkdirSync(outDir, { recursive: true });

  const profiler = new Profiler({ sampleInterval: 1, maxBufferSize: 100_000 });
  const served = await workload.run({ durationMs: 1500 });
  const trace = await profiler.stop();

  const file = path.join(outDir, 'demo-trace.json');
  fs.writeFileSync(file, JSON.stringify(trace));
  const report = path.join(outDir, 'demo-report.html');
  fs.writeFileSync(report, htmlReport(trace, { title: 'selfprof demo: examples/workload.js', sampleInterval: profiler.sampleInterval }));
  const withStack = trace.samples.filter((s) => s.stackId !== undefined).length;
  console.log(`served ${served} requests; profiled every ${profiler.sampleInterval} ms`);
  console.log(
    `trace: ${trace.samples.length} samples (${withStack} in JS), ${trace.stacks.length} stacks, ` +
      `${trace.frames.length} frames, ${trace.resources.length} resources -> ${path.relative(process.cwd(), file)}`,
  );
  console.log(`report: ${path.relative(process.cwd(), report)} (open it in a browser; pick a label to slice by)`);
  console.log();
  console.log(formatTable(topFunctions(trace, { limit: 10 }).map((r) => ({ ...r, location: shorten(r.location) }))));
  console.log();
  console.log('samples by endpoint label:');
  for (const g of samplesByLabel(trace, 'endpoint')) {
    console.log(`  ${g.value.padEnd(20)} ${String(g.samples).padStart(6)}  ${g.percent.toFixed(1).padStart(5)}%  mostly in ${g.top}`);
  }
}

function shorten(location) {
  const root = `file://${path.resolve(__dirname, '..')}/`;
  return location.startsWith(root) ? location.slice(root.length) : location;
}

main().catch((err) => {
  console.error(err);
  process.exitCode = 1;
});
