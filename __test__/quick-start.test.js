'use strict';
// The README as a user meets it: its quick start, copied out of the README, runs in a fresh
// project with the package installed there (CommonJS, as an ES module, and its TypeScript
// form compiled with --strict against index.d.ts); and a user's TypeScript file using the
// whole API compiles with --strict, CommonJS and ESM, without @types/node.
const { test } = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { spawnSync } = require('node:child_process');
const { quickStart, checkQuickStart, TSCONFIG } = require('./readme');

const root = path.join(__dirname, '..');

/**
 * A fresh project with selfprof installed in its node_modules: the package's files (its
 * package.json `files`, as npm would install them), with this machine's built addon, and
 * nothing else (no @types/node, no devDependencies).
 */
function project(t, files) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'selfprof-user-'));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  const pkg = path.join(dir, 'node_modules', 'selfprof');
  fs.mkdirSync(pkg, { recursive: true });
  const manifest = JSON.parse(fs.readFileSync(path.join(root, 'package.json'), 'utf8'));
  for (const entry of ['package.json', ...manifest.files]) {
    const names = entry.includes('*') ? fs.readdirSync(root).filter((f) => new RegExp(`^${entry.replace(/\./g, '\\.').replace(/\*/g, '.*')}$`).test(f)) : [entry.replace(/\/$/, '')];
    for (const name of names) if (fs.existsSync(path.join(root, name))) fs.cpSync(path.join(root, name), path.join(pkg, name), { recursive: true });
  }
  for (const [name, text] of Object.entries(files)) fs.writeFileSync(path.join(dir, name), text);
  return dir;
}

const tsc = path.join(root, 'node_modules', 'typescript', 'bin', 'tsc');

test("the README's quick start runs as written, CommonJS and ES module", (t) => {
  const code = quickStart('js');
  const esm = code
    .replace("const { Profiler, withLabels } = require('selfprof');", "import { Profiler, withLabels } from 'selfprof';")
    .replace(/\(async \(\) => \{\n([\s\S]*)\n\}\)\(\);/, (_, body) => body.replace(/^ {2}/gm, ''));
  assert.notEqual(esm, code, 'the ES module form differs');
  const dir = project(t, { 'app.js': code, 'app.mjs': esm, 'package.json': '{"name":"user","private":true}' });
  for (const file of ['app.js', 'app.mjs']) {
    const r = spawnSync(process.execPath, [file], { cwd: dir, encoding: 'utf8', timeout: 60_000 });
    assert.equal(r.status, 0, `${file}: ${r.stderr}`);
    checkQuickStart(r.stdout);
  }
});

test("the README's TypeScript quick start compiles with tsc --strict against index.d.ts, and runs", (t) => {
  const dir = project(t, { 'app.ts': quickStart('ts'), 'package.json': '{"name":"user","private":true}', 'tsconfig.json': JSON.stringify({ ...TSCONFIG, files: ['app.ts'] }) });
  const built = spawnSync(process.execPath, [tsc, '-p', dir], { cwd: dir, encoding: 'utf8', timeout: 120_000 });
  assert.equal(built.status, 0, built.stdout + built.stderr);
  const r = spawnSync(process.execPath, [path.join('dist', 'app.js')], { cwd: dir, encoding: 'utf8', timeout: 60_000 });
  assert.equal(r.status, 0, r.stderr);
  checkQuickStart(r.stdout);
});

test("the README's JavaScript quick start, as a TypeScript user pastes it into a .ts file, compiles with --strict", (t) => {
  // Its require becomes an import; nothing else changes (its object literal gets a type).
  const code = quickStart('js')
    .replace("const { Profiler, withLabels } = require('selfprof');", "import { Profiler, withLabels } from 'selfprof';")
    .replace('function work(n) {', 'function work(n: number) {')
    .replace('const samples = {};', 'const samples: Record<string, number> = {};');
  const dir = project(t, { 'app.ts': code, 'package.json': '{"name":"user","private":true}', 'tsconfig.json': JSON.stringify({ ...TSCONFIG, files: ['app.ts'] }) });
  const built = spawnSync(process.execPath, [tsc, '-p', dir, '--noEmit'], { cwd: dir, encoding: 'utf8', timeout: 120_000 });
  assert.equal(built.status, 0, built.stdout + built.stderr);
});

test('a TypeScript user file using the whole API compiles with --strict, CommonJS and ESM, without @types/node', (t) => {
  const cjs = fs.readFileSync(path.join(__dirname, 'fixtures', 'user-types', 'app.cts'), 'utf8');
  // The same file as an ES module: only the import differs.
  const esm = cjs.replace("import selfprof = require('selfprof');", "import * as selfprof from 'selfprof';");
  assert.notEqual(esm, cjs);
  const dir = project(t, {
    'app.cts': cjs,
    'app.mts': esm,
    'package.json': '{"name":"user","private":true}',
    'tsconfig.json': JSON.stringify({
      compilerOptions: { strict: true, noEmit: true, module: 'nodenext', moduleResolution: 'nodenext', target: 'es2022', types: [], skipLibCheck: false },
      files: ['app.cts', 'app.mts'],
    }),
  });
  const r = spawnSync(process.execPath, [tsc, '-p', dir], { cwd: dir, encoding: 'utf8', timeout: 120_000 });
  assert.equal(r.status, 0, r.stdout + r.stderr);
  // And the declarations type what they must: a pprof is bytes, not a trace.
  fs.writeFileSync(path.join(dir, 'bad.mts'), "import { Profiler } from 'selfprof';\nconst t = await new Profiler({ sampleInterval: 1, maxBufferSize: 1 }).stop({ format: 'pprof' });\nt.samples;\n");
  fs.writeFileSync(path.join(dir, 'tsconfig.json'), JSON.stringify({ compilerOptions: { strict: true, noEmit: true, module: 'nodenext', target: 'es2022', types: [] }, files: ['bad.mts'] }));
  const bad = spawnSync(process.execPath, [tsc, '-p', dir], { cwd: dir, encoding: 'utf8', timeout: 120_000 });
  assert.notEqual(bad.status, 0, 'a pprof has no samples property');
  assert.match(bad.stdout, /samples/);
});
