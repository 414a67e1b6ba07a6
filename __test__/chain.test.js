'use strict';
// Another SIGPROF user in the process (@datadog/pprof's wall profiler, a second copy of
// selfprof): whichever starts first, and however often selfprof reinstalls (each
// restart of V8's sampler), the chain never loops and every profiler keeps its samples
// and labels. Each scenario runs in its own process: signal handlers are process-wide.
const { test } = require('node:test');
const assert = require('node:assert/strict');
const path = require('node:path');
const { spawnSync } = require('node:child_process');
const { assertRequestLabels } = require('./helpers');

const fixture = path.join(__dirname, 'fixtures', 'chain.js');

function scenario(name) {
  const r = spawnSync(process.execPath, [fixture, name], { encoding: 'utf8', timeout: 60_000 });
  assert.equal(r.signal, null, `${name}: died of ${r.signal} (a chain that loops overflows the stack)`);
  assert.equal(r.status, 0, `${name}: ${r.stderr}`);
  return JSON.parse(r.stdout.trim().split('\n').at(-1));
}

// Sample and call lists shown as counts.
const summary = (out) => JSON.stringify(out, (k, v) => (k === 'samples' || k === 'calls' ? v.length : v));

/** Every sample of the busy work carries the labels its profiler's copy set. */
const ownLabels = ({ samples, calls }, what) => assertRequestLabels(samples, calls, { what, exact: true });

// @datadog/pprof labels by its own rules; all its busy samples have carried them.
const mostlyLabeled = ({ busy, labeled }, what) => {
  assert.ok(busy >= 20, `${what}: ${busy} samples in the busy function`);
  assert.ok(labeled >= 0.9 * busy, `${what}: ${labeled} of ${busy} labeled`);
};

for (const name of ['selfprof-first', 'datadog-first']) {
  test(`@datadog/pprof with contexts, ${name}: both keep their samples and labels`, (t) => {
    const out = scenario(name);
    t.diagnostic(`${summary(out)}; ${ownLabels(out.selfprof, 'selfprof')}`);
    // selfprof first: @datadog/pprof chained in front of ours, so ours stays behind it.
    assert.equal(out.install, name === 'selfprof-first' ? 'behind-another' : 'already-installed');
    mostlyLabeled(out.datadog, '@datadog/pprof');
    assert.equal(out.reentries, 0);
  });
}

test('two copies of selfprof (two addon instances): both label their own samples', (t) => {
  const out = scenario('two-copies');
  assert.deepEqual(out.installs, ['behind-another', 'already-installed']);
  t.diagnostic(`${summary(out)}; copy a: ${ownLabels(out.a, 'copy a')}; copy b: ${ownLabels(out.b, 'copy b')}`);
  assert.equal(out.reentries, 0);
});
