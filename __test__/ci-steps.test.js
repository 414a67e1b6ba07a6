'use strict';
// CI's two ways of running steps (scripts/ci-steps.sh, sourced by .ci/run under set -e):
// a failing step fails CI wherever it stands, first in a lane or last, alone or beside
// others, and the steps after it in its lane do not run.
const { test } = require('node:test');
const assert = require('node:assert/strict');
const path = require('node:path');
const { spawnSync } = require('node:child_process');

const steps = path.join(__dirname, '..', 'scripts', 'ci-steps.sh');

/** Runs `script` in bash as .ci/run runs its steps; returns its status and output. */
function ci(script) {
  const r = spawnSync('bash', ['-c', `set -euo pipefail\nsource ${JSON.stringify(steps)}\n${script}\necho ci: done`], { encoding: 'utf8' });
  return { status: r.status, out: r.stdout + r.stderr };
}

test('a failing step fails CI, first in its lane, last, or alone', () => {
  for (const lane of ['step false && step echo after', 'step true && step false', 'step false']) {
    const r = ci(`a() { ${lane}; }\nb() { step true; }\ntogether a b`);
    assert.notEqual(r.status, 0, `${lane}: ${r.out}`);
    assert.doesNotMatch(r.out, /^after$|ci: done/m, `${lane}: nothing after it runs`);
    assert.match(r.out, /a step run beside others failed/, lane);
  }
  const alone = ci('step false\necho after');
  assert.notEqual(alone.status, 0, alone.out);
  assert.doesNotMatch(alone.out, /^after$/m);
});

test("steps that pass pass, each with its time, and a lane's output is printed whole", () => {
  const r = ci(`a() { step echo one && step echo two; }\nb() { step echo three; }\ntogether a b`);
  assert.equal(r.status, 0, r.out);
  assert.match(r.out, /::: echo one\none\n::: echo one took \d+ s\n::: echo two\ntwo\n::: echo two took \d+ s\n::: echo three\nthree\n/);
  assert.match(r.out, /::: together: a b took \d+ s\nci: done/);
});
