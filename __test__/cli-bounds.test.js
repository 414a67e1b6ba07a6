'use strict';
// The command line at its input bound (docs/cli.md): a trace of just under 256 MiB of JSON
// (its converted text, the other bound, just under 256 MiB too)
// naming 1.76 million functions, every one sampled (the shape that costs the views most),
// through `report --html` and `diff`. Their peak memory (VmHWM) must stay under what
// docs/cli.md states, their outputs right.
const { test } = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { spawnSync } = require('node:child_process');

const cli = path.join(__dirname, '..', 'bin', 'selfprof.js');
const FUNCTIONS = 1_760_000;
/** docs/cli.md's bounds, in MiB of peak resident memory. */
const REPORT_HTML_MIB = 1100;
const DIFF_MIB = 2048;

/** Writes the trace: FUNCTIONS frames, stacks ten deep, one sample on each stack. */
function writeTrace(file) {
  const fd = fs.openSync(file, 'w');
  const each = (open, n, item) => {
    fs.writeSync(fd, open);
    for (let i = 0; i < n; i += 10_000) {
      const part = [];
      for (let j = i; j < Math.min(n, i + 10_000); j++) part.push(item(j));
      fs.writeSync(fd, (i ? ',' : '') + part.join(','));
    }
  };
  each('{"resources":["file:///app/src/generated/module.js"],"frames":[', FUNCTIONS, (i) => `{"name":"generatedFunction${i}","resourceId":0,"line":${(i % 50000) + 1},"column":${(i % 80) + 1}}`);
  each('],"stacks":[', FUNCTIONS, (i) => `{"frameId":${i}${i % 10 ? `,"parentId":${i - 1}` : ''}}`);
  each('],"samples":[', FUNCTIONS, (i) => `{"timestamp":${i},"stackId":${i}}`);
  fs.writeSync(fd, ']}');
  fs.closeSync(fd);
}

/** Runs the CLI; returns its result with `peakMiB`, its peak resident memory (VmHWM). */
function runMeasured(dir, args) {
  const peak = path.join(dir, `peak-${args[0]}`);
  const probe = path.join(dir, 'peak.js');
  fs.writeFileSync(probe, `process.on('exit', () => require('node:fs').writeFileSync(${JSON.stringify(peak)}, /VmHWM:\\s*(\\d+)/.exec(require('node:fs').readFileSync('/proc/self/status', 'utf8'))[1]));`);
  const r = spawnSync(process.execPath, ['--require', probe, cli, ...args], { encoding: 'utf8', timeout: 600_000, maxBuffer: 1 << 24 });
  return { ...r, peakMiB: Number(fs.readFileSync(peak, 'utf8')) / 1024 };
}

test('report --html and diff of a trace at the 256 MiB input bound stay within docs/cli.md\'s memory', (t) => {
  if (!fs.existsSync('/proc/self/status')) return t.skip('no /proc/self/status to read peak memory from');
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'selfprof-bound-'));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  const trace = path.join(dir, 'bound.json');
  writeTrace(trace);
  const size = fs.statSync(trace).size;
  assert.ok(size > 248 * 2 ** 20 && size <= 256 * 2 ** 20, `the trace is ${size} bytes: just under the bound`);

  const report = runMeasured(dir, ['report', trace, '--html', path.join(dir, 'r.html'), '--top', '3']);
  assert.equal(report.status, 0, report.stderr);
  assert.match(report.stdout, new RegExp(`^${FUNCTIONS} samples \\(${FUNCTIONS} in JS\\)`));
  const html = fs.statSync(path.join(dir, 'r.html')).size;
  t.diagnostic(`report --html: ${report.peakMiB.toFixed(0)} MiB peak, a report of ${(html / 2 ** 20).toFixed(0)} MiB`);
  assert.ok(html > size * 0.9, 'the report holds the trace');
  assert.ok(report.peakMiB <= REPORT_HTML_MIB, `report --html peaked at ${report.peakMiB.toFixed(0)} MiB (docs/cli.md: ${REPORT_HTML_MIB})`);

  const diff = runMeasured(dir, ['diff', trace, trace, '--top', '3']);
  assert.equal(diff.status, 0, diff.stderr);
  assert.match(diff.stdout, /no change: every function has the same share in A and B/);
  t.diagnostic(`diff: ${diff.peakMiB.toFixed(0)} MiB peak`);
  assert.ok(diff.peakMiB <= DIFF_MIB, `diff peaked at ${diff.peakMiB.toFixed(0)} MiB (docs/cli.md: ${DIFF_MIB})`);
});
