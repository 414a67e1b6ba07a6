'use strict';
// Installs selfprof as a user gets it, from the `npm pack` tarballs (no registry), into
// scratch projects where cargo and rustc are not on PATH, and runs apps there:
//
// 1. main package + the host's platform package, installed with no npm warning:
//    __test__/fixtures/installed-app.js records labeled requests with a Profiler and
//    service mode; the addon must come from the platform package, and every busy sample
//    carry its own endpoint. The README's quick start runs there as written, and its
//    TypeScript form compiles with tsc --strict against the installed types, and runs.
// 2. main package alone (a platform without a prebuilt binary, or npm leaving the
//    optional dependency out): the app using withLabels and start() runs, with one
//    warning naming the platform, and `new Profiler` throws.
//
// The host's binary is npm/<platform>/'s (npm run build:all), else the source build of
// `npm install` in the root, as `node scripts/pack.js` takes it: right after `npm install`
// in a fresh clone this is the README's install path. With --checkout it also installs a
// fresh clone of this repository's HEAD with `npm install /path/to/clone` (Rust on PATH,
// the registry reachable: a source build of a few minutes) and runs the quick start from
// there. Prints its duration.

const { spawnSync } = require('node:child_process');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { packMain, packPlatform, binaryOf, elfSymbolTable, platforms, INSTALLED_FIELDS } = require('./pack');
const { quickStart, checkQuickStart, TSCONFIG } = require('../__test__/readme');
const { hostPlatform } = require('../lib/native');

const root = path.resolve(__dirname, '..');
const started = Date.now();
const host = hostPlatform();
let failures = 0;
let passes = 0;

function check(ok, what) {
  console.log(`  ${ok ? 'ok  ' : 'FAIL'} ${what}`);
  if (ok) passes++;
  else failures++;
}

if (!platforms.includes(host)) {
  console.error(`pack-test: no prebuilt package for this host (${host})`);
  process.exit(1);
}

// PATH without cargo/rustc: only the directories that hold node, npm and a shell, and
// none that holds cargo.
const hasRust = (dir) => ['cargo', 'rustc', 'rustup'].some((b) => fs.existsSync(path.join(dir, b)));
const noRustDirs = [path.dirname(process.execPath), '/usr/local/bin', '/usr/bin', '/bin'].filter((d) => fs.existsSync(d));
const rustDirs = noRustDirs.filter(hasRust);
const binDir = fs.mkdtempSync(path.join(os.tmpdir(), 'selfprof-bin-'));
if (rustDirs.length) {
  // cargo lives next to node (a system-wide Rust): give node and npm a directory of their own.
  for (const b of ['node', 'npm', 'npx']) {
    const from = spawnSync('which', [b], { encoding: 'utf8' }).stdout.trim();
    if (from) fs.symlinkSync(fs.realpathSync(from), path.join(binDir, b));
  }
}
const PATH = [binDir, ...noRustDirs.filter((d) => !hasRust(d))].join(path.delimiter);
const env = { ...process.env, PATH, NODE_OPTIONS: '', npm_config_yes: 'true' };
for (const k of Object.keys(env)) if (/^(CARGO|RUSTUP|RUSTC)/.test(k)) delete env[k];
check(spawnSync('cargo', ['--version'], { env }).error?.code === 'ENOENT', `cargo is not on the scratch PATH (${PATH})`);

// A source install (npm's prepare: a checkout, or an install from git) without Rust: one
// line saying what is needed and where the prebuilt packages are, and a failed build.
{
  const r = spawnSync(process.execPath, [path.join(root, 'scripts', 'build-native.js')], { env, encoding: 'utf8' });
  const lines = r.stderr.trim().split('\n');
  check(
    r.status === 1 && lines.length === 1 && /^selfprof: building from source needs Rust ≥ 1\.\d+ .*cargo was not found.*npm install selfprof/.test(lines[0]),
    `without cargo the source build stops with one line: ${lines[0]}`,
  );
}

const work = fs.mkdtempSync(path.join(os.tmpdir(), 'selfprof-pack-test-'));
const tarballs = path.join(work, 'tarballs');
fs.mkdirSync(tarballs);
const main = packMain(tarballs);
const platform = packPlatform(host, tarballs);
console.log(`pack-test: ${path.basename(main.file)} (${(main.size / 1024).toFixed(0)} KiB, ${main.files.length} files, no binary), ${path.basename(platform.file)} (${(platform.size / 1024).toFixed(0)} KiB, binary from ${platform.from})`);
check(!main.files.some((f) => f.endsWith('.node')), 'the main package ships no binary');
check(platform.files.includes(`selfprof.${host}.node`), `the platform package ships selfprof.${host}.node`);
if (host.startsWith('linux-')) check(elfSymbolTable(binaryOf(host).file) === false, `its binary is stripped (no symbol table): ${(fs.statSync(binaryOf(host).file).size / 1024).toFixed(0)} KiB`);
{
  const manifest = JSON.parse(spawnSync('tar', ['-xzOf', main.file, 'package/package.json'], { encoding: 'utf8' }).stdout || '{}');
  const extra = Object.keys(manifest).filter((k) => !INSTALLED_FIELDS.includes(k));
  check(manifest.name === 'selfprof' && extra.length === 0 && !manifest.scripts, `the packed package.json has only what an installed package reads: ${Object.keys(manifest).join(', ')}`);
}

/** A scratch project with these tarballs installed, offline: npm may use no registry. */
function scratch(name, files) {
  const dir = path.join(work, name);
  fs.mkdirSync(dir);
  fs.writeFileSync(path.join(dir, 'package.json'), JSON.stringify({ name: `scratch-${name}`, version: '1.0.0', private: true }));
  const t0 = Date.now();
  const r = spawnSync('npm', ['install', '--offline', '--no-audit', '--no-fund', '--cache', path.join(work, 'npm-cache'), ...files], {
    cwd: dir,
    env,
    encoding: 'utf8',
  });
  check(r.status === 0, `${name}: npm install --offline ${files.map((f) => path.basename(f)).join(' ')} (${((Date.now() - t0) / 1000).toFixed(1)} s)${r.status === 0 ? '' : `\n${r.stdout}${r.stderr}`}`);
  const warnings = `${r.stdout}\n${r.stderr}`.split('\n').filter((l) => /\bwarn/i.test(l));
  check(warnings.length === 0, `${name}: npm printed no warning${warnings.length ? `:\n${warnings.join('\n')}` : ''}`);
  return dir;
}

// 1. The main package and the host's platform package.
{
  const dir = scratch('with-binary', [main.file, platform.file]);
  const installed = fs.readdirSync(path.join(dir, 'node_modules')).sort();
  check(
    installed.includes('selfprof') && installed.includes(`selfprof-${host}`) && !installed.some((n) => n.startsWith('selfprof-') && n !== `selfprof-${host}`),
    `installed: ${installed.filter((n) => n.startsWith('selfprof')).join(', ')}`,
  );
  fs.copyFileSync(path.join(root, '__test__', 'fixtures', 'installed-app.js'), path.join(dir, 'app.js'));
  const r = spawnSync(process.execPath, ['app.js', '1.5'], { cwd: dir, env, encoding: 'utf8', timeout: 60_000 });
  let out = {};
  try {
    out = JSON.parse(r.stdout.trim().split('\n').pop());
  } catch {
    // Not JSON: the checks below fail, and print what the app wrote.
  }
  console.log(`  app: ${r.stdout.trim()}`);
  if (r.stderr.trim()) console.log(`  app stderr: ${r.stderr.trim()}`);
  check(r.status === 0 && out.ok === true, `a labeled recording from the installed packages: ${out.inEndpoints} busy samples, ${out.wrong} mislabeled, ${out.unlabeled} unlabeled (${out.metadata?.unmatchedSamples} without a signal)`);
  check(out.addon?.[0] === path.join('node_modules', `selfprof-${host}`, `selfprof.${host}.node`), `the addon came from the platform package: ${out.addon}`);
  check(!/Warning/.test(r.stderr), 'no warning');
  runQuickStarts(dir, 'with-binary');
}

// 2. The main package alone.
{
  const dir = scratch('without-binary', [main.file]);
  fs.writeFileSync(
    path.join(dir, 'app.js'),
    `const selfprof = require('selfprof');
const session = selfprof.start({ service: 'app' });
let profiler;
try { new selfprof.Profiler({ sampleInterval: 10, maxBufferSize: 10 }); } catch (err) { profiler = err.message; }
selfprof.withLabels({ endpoint: 'GET /x' }, async () => {
  await new Promise((r) => setTimeout(r, 5));
  const labels = selfprof.getLabels();
  await session.stop();
  console.log(JSON.stringify({ labels, profiler }));
});
`,
  );
  const r = spawnSync(process.execPath, ['app.js'], { cwd: dir, env, encoding: 'utf8', timeout: 30_000 });
  let out = {};
  try {
    out = JSON.parse(r.stdout.trim());
  } catch {
    // Not JSON: the checks below fail, and print what the app wrote.
  }
  const warnings = r.stderr.split('\n').filter((l) => /Warning/.test(l));
  check(r.status === 0 && out.labels?.endpoint === 'GET /x', `without the platform package the app runs and labels work: ${r.stdout.trim()}`);
  check(warnings.length === 1 && warnings[0].includes(`not available on ${host}`), `one warning: ${warnings.join(' | ')}`);
  check(/^selfprof: the Profiler is not available on /.test(out.profiler ?? ''), 'new Profiler throws a clear Error');
}

// 3. (--checkout) npm install /path/to/a-fresh-clone.
if (process.argv.includes('--checkout')) checkoutInstall();

fs.rmSync(work, { recursive: true, force: true });
fs.rmSync(binDir, { recursive: true, force: true });
console.log(`pack-test: ${((Date.now() - started) / 1000).toFixed(1)} s`);
console.log(`pack-test: ${passes} passed, ${failures} failed`);
process.exitCode = failures ? 1 : 0;

/**
 * The README's quick start in project `dir` (selfprof installed there): the JS block run as
 * written, the TypeScript block compiled by tsc --strict against the installed index.d.ts
 * (this repository's TypeScript; the project has no @types/node) and run.
 */
function runQuickStarts(dir, name) {
  const js = path.join(dir, 'quick-start.js');
  fs.writeFileSync(js, quickStart('js'));
  const r = spawnSync(process.execPath, [js], { cwd: dir, env, encoding: 'utf8', timeout: 60_000 });
  check(r.status === 0 && quietly(() => checkQuickStart(r.stdout)), `${name}: the README's quick start runs: ${r.stdout.trim()}${r.stderr.trim() ? ` (stderr: ${r.stderr.trim()})` : ''}`);
  const tsDir = path.join(dir, 'ts');
  fs.mkdirSync(tsDir);
  fs.writeFileSync(path.join(tsDir, 'quick-start.ts'), quickStart('ts'));
  fs.writeFileSync(path.join(tsDir, 'tsconfig.json'), JSON.stringify({ ...TSCONFIG, files: ['quick-start.ts'] }));
  const tsc = spawnSync(process.execPath, [path.join(root, 'node_modules', 'typescript', 'bin', 'tsc'), '-p', tsDir], { cwd: tsDir, env, encoding: 'utf8', timeout: 120_000 });
  check(tsc.status === 0, `${name}: the README's TypeScript quick start compiles with tsc --strict${tsc.status === 0 ? '' : `:\n${tsc.stdout}${tsc.stderr}`}`);
  if (tsc.status !== 0) return;
  const ts = spawnSync(process.execPath, [path.join('dist', 'quick-start.js')], { cwd: tsDir, env, encoding: 'utf8', timeout: 60_000 });
  check(ts.status === 0 && quietly(() => checkQuickStart(ts.stdout)), `${name}: ... and runs: ${ts.stdout.trim()}${ts.stderr.trim() ? ` (stderr: ${ts.stderr.trim()})` : ''}`);
}

/** true if fn() does not throw. */
function quietly(fn) {
  try {
    fn();
    return true;
  } catch {
    return false;
  }
}

/**
 * `npm install /path/to/checkout` as the README says it works: a fresh clone of HEAD (no
 * node_modules, no build), installed into a scratch project with Rust on PATH and the
 * registry reachable (npm fetches the napi CLI); the build's dependencies come from this
 * checkout's target/ (CARGO_TARGET_DIR) so that only selfprof itself compiles.
 */
function checkoutInstall() {
  const clone = path.join(work, 'clone');
  const git = spawnSync('git', ['clone', '--quiet', root, clone], { encoding: 'utf8' });
  check(git.status === 0, `git clone of this checkout${git.status === 0 ? '' : `: ${git.stderr}`}`);
  if (git.status !== 0) return;
  const dir = path.join(work, 'from-checkout');
  fs.mkdirSync(dir);
  fs.writeFileSync(path.join(dir, 'package.json'), JSON.stringify({ name: 'scratch-from-checkout', version: '1.0.0', private: true }));
  const t0 = Date.now();
  const r = spawnSync('npm', ['install', '--no-audit', '--no-fund', clone], {
    cwd: dir,
    env: { ...process.env, NODE_OPTIONS: '', CARGO_TARGET_DIR: process.env.CARGO_TARGET_DIR ?? path.join(root, 'target') },
    encoding: 'utf8',
  });
  const took = ((Date.now() - t0) / 1000).toFixed(0);
  check(r.status === 0 && fs.existsSync(path.join(dir, 'node_modules', 'selfprof', `selfprof.${host}.node`)), `npm install /path/to/a-fresh-clone builds the addon (${took} s)${r.status === 0 ? '' : `\n${r.stdout}${r.stderr}`}`);
  if (r.status !== 0) return;
  const js = path.join(dir, 'quick-start.js');
  fs.writeFileSync(js, quickStart('js'));
  const q = spawnSync(process.execPath, [js], { cwd: dir, env, encoding: 'utf8', timeout: 60_000 });
  check(q.status === 0 && quietly(() => checkQuickStart(q.stdout)), `from the checkout: the README's quick start runs: ${q.stdout.trim()}${q.stderr.trim() ? ` (stderr: ${q.stderr.trim()})` : ''}`);
}
