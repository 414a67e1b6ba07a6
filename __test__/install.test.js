'use strict';
// The README's install path, as a user on a machine with only Node and Rust takes it: the
// tarballs of `node scripts/pack.js` (this machine's platform package from the source
// build of `npm install` when `npm run build:all` has not run), installed offline into
// new projects where cargo is not on PATH, with no npm warning and a packed package.json
// that has only what an installed package reads; the binary stripped; the README's quick
// start (JS, and TypeScript compiled with --strict) run from there. scripts/pack-test.js
// does it; CI runs it again after the cross builds, and with --checkout.
const { test } = require('node:test');
const assert = require('node:assert/strict');
const path = require('node:path');
const { spawnSync } = require('node:child_process');

test('the tarballs install into a new project with no warning, and the quick start runs there (scripts/pack-test.js)', (t) => {
  if (process.env.SELFPROF_TEST_NO_CHILD_PROCESS) return t.skip('no child processes here');
  const r = spawnSync(process.execPath, [path.join(__dirname, '..', 'scripts', 'pack-test.js')], { encoding: 'utf8', timeout: 300_000 });
  assert.equal(r.status, 0, r.stdout + r.stderr);
  assert.match(r.stdout, /pack-test: \d+ passed, 0 failed/);
  for (const what of ['npm printed no warning', 'the packed package.json has only what', "the README's quick start runs", "TypeScript quick start compiles with tsc --strict", 'is stripped']) {
    assert.ok(r.stdout.includes(what), `${what}:\n${r.stdout}`);
  }
});
