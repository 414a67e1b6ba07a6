'use strict';
// Diffs in Node: diffProfiles / diffLabelValues and `selfprof diff`, on real recordings.
// Expected shares are computed here from the traces' samples.
const { test, before } = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { spawnSync } = require('node:child_process');
const { Profiler, withLabels, diffProfiles, diffLabelValues, convert } = require('..');
const { spin, sampledCall, stackFrames, assertValidTrace } = require('./helpers');

const cli = path.join(__dirname, '..', 'bin', 'selfprof.js');
const run = (...args) => spawnSync(process.execPath, [cli, ...args], { encoding: 'utf8', timeout: 60_000 });

function cliSteady(ms) {
  return spin(ms);
}
function cliSlowed(ms) {
  return spin(ms);
}

/** % of the busy samples (all but idle) of `keep`'s samples with `name` on the stack. */
function totalShare(trace, name, keep = () => true) {
  const busy = trace.samples.filter((s) => keep(s) && s.marker !== 'idle');
  const on = busy.filter((s) => s.stackId !== undefined && stackFrames(trace, s).some((f) => f.name === name));
  return (100 * on.length) / busy.length;
}

let a;
let b;
let labeled;
let dir;
/** Calls `fn(ms)` on until the sampler signalled `ms` times in it (1 ms sampling): as many
 * samples as `ms` at no load, and a loaded machine's share as large. */
const sampled = (fn, ms) => sampledCall(ms, 10_000, fn, ms);

before(async () => {
  const record = async (slowMs) => {
    const p = new Profiler({ sampleInterval: 1, maxBufferSize: 100_000 });
    for (let i = 0; i < 5; i++) {
      sampled(cliSteady, 10);
      sampled(cliSlowed, slowMs);
      await new Promise((r) => setTimeout(r, 2)); // a little idle: not in the shares
    }
    return assertValidTrace(await p.stop());
  };
  a = await record(10);
  b = await record(30);
  const p = new Profiler({ sampleInterval: 1, maxBufferSize: 100_000 });
  await withLabels({ endpoint: 'GET /orders' }, async () => sampled(cliSteady, 40));
  await withLabels({ endpoint: 'POST /orders' }, async () => {
    sampled(cliSteady, 20);
    sampled(cliSlowed, 40);
  });
  labeled = assertValidTrace(await p.stop());
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'selfprof-diff-'));
  fs.writeFileSync(path.join(dir, 'a.json'), JSON.stringify(a));
  fs.writeFileSync(path.join(dir, 'b.pb.gz'), convert(b, { to: 'pprof' }));
  fs.writeFileSync(path.join(dir, 'labeled.json'), JSON.stringify(labeled));
});

test('diffProfiles: a profile against itself is 0; a slowed function gains the share computed from the samples', () => {
  const same = diffProfiles(a, a);
  assert.ok(same.functions.length > 3);
  assert.ok(same.functions.every((f) => f.self.delta === 0 && f.total.delta === 0));
  const d = diffProfiles(a, b);
  const row = (name) => d.functions.find((f) => f.name === name);
  const want = totalShare(b, 'cliSlowed') - totalShare(a, 'cliSlowed');
  assert.ok(Math.abs(row('cliSlowed').total.delta - want) < 1e-9, `${row('cliSlowed').total.delta} vs ${want}`);
  assert.ok(want > 10, `cliSlowed gained ${want.toFixed(1)} pp`);
  assert.ok(row('cliSteady').total.delta < 0);
  assert.equal(d.a.busy, a.samples.filter((s) => s.marker !== 'idle').length);
  assert.ok(d.a.busy < d.a.samples, 'idle samples are not busy');
  // Functions that moved match with ignoreLines only: a frame renamed to another line.
  const moved = { ...b, frames: b.frames.map((f) => (f.name === 'cliSlowed' ? { ...f, line: f.line + 100 } : f)) };
  assert.equal(diffProfiles(a, moved).functions.filter((f) => f.name === 'cliSlowed').length, 2);
  assert.equal(diffProfiles(a, moved, { ignoreLines: true }).functions.filter((f) => f.name === 'cliSlowed').length, 1);
});

test('diffLabelValues: POST /orders against GET /orders', () => {
  const d = diffLabelValues(labeled, 'endpoint', 'GET /orders', 'POST /orders');
  const endpoint = (v) => (s) => s.contextId !== undefined && labeled.contexts[s.contextId].labels.endpoint === v;
  const want = totalShare(labeled, 'cliSlowed', endpoint('POST /orders')) - totalShare(labeled, 'cliSlowed', endpoint('GET /orders'));
  assert.ok(Math.abs(d.functions.find((f) => f.name === 'cliSlowed').total.delta - want) < 1e-9);
  assert.ok(want > 0);
  // A value no sample has: an empty side, all shares 0.
  const none = diffLabelValues(labeled, 'endpoint', 'GET /nothing', 'POST /orders');
  assert.equal(none.a.busy, 0);
  assert.ok(none.functions.every((f) => f.self.a === 0 && f.total.a === 0));
});

test('selfprof diff A B: a table of the biggest changes, and the HTML diff report', () => {
  const html = path.join(dir, 'diff.html');
  const r = run('diff', path.join(dir, 'a.json'), path.join(dir, 'b.pb.gz'), '--html', html, '--top', '100');
  assert.equal(r.status, 0, r.stderr);
  assert.match(r.stdout, /^A .*a\.json: \d+ samples, \d+ busy\nB .*b\.pb\.gz: \d+ samples, \d+ busy\n/);
  const line = r.stdout.split('\n').find((l) => /\bcliSlowed\b/.test(l));
  const [dSelf, , , dTotal] = line.trim().split(/\s+/);
  // b went through pprof and back: the same samples, so the same shares.
  const want = totalShare(b, 'cliSlowed') - totalShare(a, 'cliSlowed');
  assert.equal(dTotal, `+${want.toFixed(2)}`);
  assert.match(dSelf, /^[+-]?\d+\.\d\d$|^ ?0\.00$/);
  const top2 = run('diff', path.join(dir, 'a.json'), path.join(dir, 'b.pb.gz'), '--top', '2');
  assert.equal(top2.stdout.trim().split('\n').length, 4 + 1 + 2, '--top 2: the header lines, the table head, two rows');
  assert.match(r.stderr, /wrote .*diff\.html/);
  const page = fs.readFileSync(html, 'utf8');
  assert.match(page, /"view":"diff"/);
  assert.match(page, /"baselineName":"a\.json"/);

  const same = run('diff', path.join(dir, 'a.json'), path.join(dir, 'a.json'));
  assert.equal(same.status, 0);
  assert.match(same.stdout, /no change: every function has the same share in A and B/);

  const byLabel = run('diff', path.join(dir, 'labeled.json'), '--by', 'endpoint', 'GET /orders', 'POST /orders', '--html', path.join(dir, 'l.html'));
  assert.equal(byLabel.status, 0, byLabel.stderr);
  assert.match(byLabel.stdout, /^A endpoint = GET \/orders: \d+ samples/);
  assert.match(byLabel.stdout, /\+\d+\.\d\d\s.*\bcliSlowed\b/);
  assert.match(fs.readFileSync(path.join(dir, 'l.html'), 'utf8'), /"labelDiff":\{"key":"endpoint","a":"GET \/orders","b":"POST \/orders"\}/);
});

test('selfprof diff: bad input is one line and exit code 1; empty profiles are a valid diff', () => {
  fs.writeFileSync(path.join(dir, 'garbage.json'), '{"hello": ');
  fs.writeFileSync(path.join(dir, 'empty.json'), JSON.stringify({ resources: [], frames: [], stacks: [], samples: [] }));
  const cases = [
    [['diff', path.join(dir, 'a.json'), path.join(dir, 'garbage.json')], /garbage\.json: not a selfprof trace/],
    [['diff', path.join(dir, 'missing.json'), path.join(dir, 'a.json')], /cannot read .*missing\.json: ENOENT/],
    [['diff', path.join(dir, 'a.json')], /diff takes two files/],
    [['diff', path.join(dir, 'labeled.json'), '--by', 'nope', 'x', 'y'], /no sample has the label "nope" \(labels: endpoint\)/],
    [['diff', path.join(dir, 'labeled.json'), '--by', 'endpoint', 'x'], /takes FILE VALUE_A VALUE_B/],
    [['diff', path.join(dir, 'a.json'), path.join(dir, 'a.json'), '--top', '0'], /--top must be a whole number/],
  ];
  for (const [args, message] of cases) {
    const r = run(...args);
    assert.equal(r.status, 1, args.join(' '));
    assert.equal(r.stderr.trim().split('\n').length, 1, r.stderr);
    assert.match(r.stderr, message);
    assert.doesNotMatch(r.stderr, /\n\s+at /);
  }
  const empty = run('diff', path.join(dir, 'empty.json'), path.join(dir, 'a.json'), '--html', path.join(dir, 'e.html'));
  assert.equal(empty.status, 0, empty.stderr);
  assert.match(empty.stdout, /^A .*empty\.json: 0 samples, 0 busy \(no busy samples: every share is 0\)/);
  assert.ok(fs.existsSync(path.join(dir, 'e.html')));
});
