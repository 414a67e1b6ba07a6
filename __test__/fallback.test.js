'use strict';
// Without its native binding selfprof must not break the app: a copy of the package with
// the addon hidden (no .node file, no platform package to find) still loads; labels
// still run the function and follow its continuations; start() warns once and its
// stop() resolves; new Profiler throws one clear Error naming the platform and the
// supported list. The copy is what an install on an unsupported platform looks like.
const { test } = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { spawnSync } = require('node:child_process');

const root = path.join(__dirname, '..');

/** The package's runtime files in a fresh directory, without any native addon. */
function copyWithoutBinding(t) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'selfprof-nobinding-'));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  const pkg = path.join(dir, 'node_modules', 'selfprof');
  fs.mkdirSync(pkg, { recursive: true });
  for (const f of ['package.json', 'index.js', 'binding.js', 'start.js']) fs.copyFileSync(path.join(root, f), path.join(pkg, f));
  fs.cpSync(path.join(root, 'lib'), path.join(pkg, 'lib'), { recursive: true });
  assert.equal(fs.readdirSync(pkg).filter((f) => f.endsWith('.node')).length, 0);
  return { dir, pkg };
}

// The app: labeled requests through await and timers, then start(), Profiler, convert.
const APP = String.raw`
const { setTimeout: sleep } = require('node:timers/promises');
const selfprof = require('selfprof');
const out = {};
(async () => {
  const session = selfprof.start({ service: 'app', exporters: [{ type: 'file', dir: process.argv[2] }] });
  const seen = await Promise.all(['GET /a', 'GET /b'].map((endpoint, i) =>
    selfprof.withLabels({ endpoint, n: i }, async () => {
      await sleep(5);
      await new Promise((r) => setImmediate(r));
      return selfprof.withLabels({ span_id: 'f' + i }, () => ({ ...selfprof.getLabels() }));
    })));
  out.labels = seen;
  selfprof.setLabels({ tenant: 't1' });
  out.afterSet = { ...selfprof.getLabels() };
  try {
    new selfprof.Profiler({ sampleInterval: 10, maxBufferSize: 100 });
    out.profiler = 'constructed';
  } catch (err) {
    out.profiler = { name: err.name, message: err.message, code: err.code };
  }
  try {
    selfprof.convert('{}', { to: 'folded' });
  } catch (err) {
    out.convert = err.message;
  }
  await session.flush();
  await session.stop();
  const again = selfprof.start({ service: 'app2' });
  await again.stop();
  out.stopped = true;
  console.log(JSON.stringify(out));
})();
`;

function runApp(t, { breakBinding = false, env = {} } = {}) {
  const { dir, pkg } = copyWithoutBinding(t);
  if (breakBinding) {
    // A platform file that is there but is no shared object: dlopen fails.
    fs.writeFileSync(path.join(pkg, `selfprof.${require('../lib/native').hostPlatform()}.node`), 'not an ELF file\n');
  }
  fs.writeFileSync(path.join(dir, 'app.js'), APP);
  const profiles = path.join(dir, 'profiles');
  const r = spawnSync(process.execPath, ['app.js', profiles], {
    cwd: dir,
    encoding: 'utf8',
    timeout: 30_000,
    env: { ...process.env, NODE_OPTIONS: '', ...env },
  });
  assert.equal(r.status, 0, `the app exited ${r.status}: ${r.stderr}`);
  const out = JSON.parse(r.stdout.trim().split('\n').pop());
  const warnings = r.stderr.split('\n').filter((l) => /Warning/.test(l));
  return { out, warnings, stderr: r.stderr, profiles };
}

test('binding hidden: the app runs, labels work, start() warns once, Profiler throws a clear Error', (t) => {
  const { out, warnings, stderr, profiles } = runApp(t);
  assert.deepEqual(out.labels, [
    { endpoint: 'GET /a', n: '0', span_id: 'f0' },
    { endpoint: 'GET /b', n: '1', span_id: 'f1' },
  ]);
  assert.deepEqual(out.afterSet, { tenant: 't1' });
  assert.equal(out.stopped, true, 'session.stop() resolved');
  assert.equal(warnings.length, 1, `one warning, got:\n${stderr}`);
  const platform = require('../lib/native').hostPlatform();
  assert.match(warnings[0], new RegExp(`selfprof: profiling is not available on ${platform}: the package selfprof-${platform} is not installed`));
  assert.match(warnings[0], /Prebuilt for linux-x64-gnu, linux-arm64-gnu, linux-x64-musl, linux-arm64-musl, darwin-x64, darwin-arm64, win32-x64\. Labels/);
  assert.doesNotMatch(stderr, /npm has a bug/, 'not the generated loader\'s message');
  assert.equal(out.profiler.name, 'Error');
  assert.equal(out.profiler.code, 'ERR_SELFPROF_UNAVAILABLE');
  assert.match(out.profiler.message, new RegExp(`^selfprof: the Profiler is not available on ${platform}: .*Prebuilt for linux-x64-gnu, .*darwin-arm64, win32-x64\\. Labels`));
  assert.doesNotMatch(out.profiler.message, /\n/, 'one line');
  assert.match(out.convert, /^selfprof: convert is not available on /);
  assert.equal(fs.existsSync(profiles), false, 'nothing was profiled or written');
});

test('binding present but broken: the load error is in the one warning', (t) => {
  const { out, warnings } = runApp(t, { breakBinding: true });
  assert.equal(warnings.length, 1);
  assert.match(warnings[0], /the native addon did not load: .*(invalid ELF header|too short|file too short)/);
  assert.match(out.profiler.message, /the native addon did not load/);
  assert.deepEqual(out.labels[1], { endpoint: 'GET /b', n: '1', span_id: 'f1' });
});

test('binding hidden: node -r selfprof/start keeps the app running with one warning', (t) => {
  const { dir } = copyWithoutBinding(t);
  fs.writeFileSync(
    path.join(dir, 'app.js'),
    "require('selfprof').withLabels({ endpoint: 'x' }, () => setTimeout(() => console.log('done', require('selfprof').getLabels().endpoint), 10));\n",
  );
  const r = spawnSync(process.execPath, ['-r', 'selfprof/start', 'app.js'], {
    cwd: dir,
    encoding: 'utf8',
    timeout: 30_000,
    env: { ...process.env, NODE_OPTIONS: '', SELFPROF_SERVICE: 'svc', SELFPROF_DIR: path.join(dir, 'p') },
  });
  assert.equal(r.status, 0, r.stderr);
  assert.equal(r.stdout.trim(), 'done x');
  assert.equal(r.stderr.split('\n').filter((l) => /Warning/.test(l)).length, 1, r.stderr);
});
