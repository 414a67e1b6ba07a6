'use strict';
// The command line: conversions, and one clear line with exit code 1 on bad files.
const { test } = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { spawnSync } = require('node:child_process');
const { Profiler } = require('..');
const { spin } = require('./helpers');

const cli = path.join(__dirname, '..', 'bin', 'selfprof.js');
const run = (...args) => spawnSync(process.execPath, [cli, ...args], { encoding: 'utf8' });

function cliBusyWork(ms) {
  return spin(ms);
}

test('selfprof convert: trace files to folded stacks and .cpuprofile', async () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'selfprof-cli-'));
  const p = new Profiler({ sampleInterval: 2, maxBufferSize: 10_000 });
  cliBusyWork(60);
  const gz = await p.stop({ format: 'json-gzip' });
  const trace = JSON.parse(require('node:zlib').gunzipSync(gz));
  fs.writeFileSync(path.join(dir, 't.json.gz'), gz);
  fs.writeFileSync(path.join(dir, 't.json'), JSON.stringify(trace));

  const folded = run('convert', path.join(dir, 't.json.gz'), '--to', 'folded');
  assert.equal(folded.status, 0, folded.stderr);
  const total = folded.stdout.trim().split('\n').reduce((n, l) => n + Number(l.slice(l.lastIndexOf(' ') + 1)), 0);
  assert.equal(total, trace.samples.length);
  assert.match(folded.stdout, /cliBusyWork/);

  const out = path.join(dir, 't.cpuprofile');
  const cp = run('convert', path.join(dir, 't.json'), '--to', 'cpuprofile', '-o', out);
  assert.equal(cp.status, 0, cp.stderr);
  assert.equal(JSON.parse(fs.readFileSync(out, 'utf8')).samples.length, trace.samples.length);
  fs.rmSync(dir, { recursive: true });
});

test('selfprof convert: malformed, truncated, empty and missing files give one line and exit 1', async () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'selfprof-cli-bad-'));
  const p = new Profiler({ sampleInterval: 5, maxBufferSize: 100 });
  spin(20);
  const gz = await p.stop({ format: 'json-gzip' });
  const files = {
    'malformed.json': '{"resources": [}',
    'wrong-shape.json': '{"hello": "world"}',
    'truncated.json.gz': gz.subarray(0, Math.floor(gz.length / 2)),
    'empty.json': '',
  };
  for (const [name, content] of Object.entries(files)) fs.writeFileSync(path.join(dir, name), content);
  const cases = [...Object.keys(files), 'missing.json'];
  for (const name of cases) {
    const r = run('convert', path.join(dir, name), '--to', 'folded');
    assert.equal(r.status, 1, `${name}: exit code`);
    const lines = r.stderr.trim().split('\n');
    assert.equal(lines.length, 1, `${name}: one line, got ${r.stderr}`);
    assert.match(lines[0], /^selfprof: /);
    assert.doesNotMatch(r.stderr, /\n\s+at /, 'no stack trace');
    assert.equal(r.stdout, '');
  }
  const usage = run('convert', path.join(dir, 'empty.json'));
  assert.equal(usage.status, 1);
  assert.match(usage.stderr, /needs --to/);
  fs.rmSync(dir, { recursive: true });
});
