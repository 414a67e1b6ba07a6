'use strict';
// The command line's edges: --version, output directories made before any work (or one
// error before it), a reader that goes away (| head) ending the output quietly, record
// saying when it replaces an earlier recording, and diff naming its sides when both files
// have one name.
const { test } = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { spawnSync } = require('node:child_process');

const cli = path.join(__dirname, '..', 'bin', 'selfprof.js');
const run = (args, opts = {}) => spawnSync(process.execPath, [cli, ...args], { encoding: 'utf8', timeout: 120_000, ...opts });

function tmp(t) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'selfprof-cli-edges-'));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  return dir;
}

/** The recorder's sampler, as the recorded program reads it (the copy record preloads). */
const GROUP = JSON.stringify(path.join(__dirname, '..', 'lib', 'capture', 'group.js'));

/** A recording to read back; `many`: of many distinct stacks (a trace of over 64 KiB, more
 * than a pipe holds). Each program runs until the sampler signalled enough times (2,000 and
 * 300: 2 s and 0.3 s at no load), not for a fixed time, which gave a loaded machine too few
 * samples for the trace to outgrow a pipe. */
function record(t, cwd, many = false) {
  const until = `const { group } = require(${GROUP}); const until = group.ticks() + ${many ? 2000 : 300}; const end = Date.now() + 60000; const more = () => group.ticks() < until && Date.now() < end;`;
  const code = many
    ? `${until} const fns=[]; for (let k=0;k<400;k++) fns.push(new Function('n','f','return n ? f[(n*7+'+k+')%400](n-1,f) : 0')); let i=0; while (more()) fns[i%400](i++%60, fns);`
    : `${until} function busy(){let x=0;for(let i=0;i<2e5;i++)x+=Math.sqrt(i);return x} while (more()) busy();`;
  const r = run(['record', '--', process.execPath, '-e', code], { cwd });
  assert.equal(r.status, 0, r.stderr);
  return r;
}

test('--version prints the package version', () => {
  const r = run(['--version']);
  assert.equal(r.status, 0);
  assert.equal(r.stdout.trim(), `selfprof ${require('../package.json').version}`);
});

test('output directories are made before any work, or one error names them before any profile is read', (t) => {
  const dir = tmp(t);
  record(t, dir);
  const trace = path.join(dir, 'selfprof-out', 'profile.trace.json.gz');
  const r = run(['report', trace, '--html', path.join(dir, 'out', 'deep', 'r.html')]);
  assert.equal(r.status, 0, r.stderr);
  assert.ok(fs.existsSync(path.join(dir, 'out', 'deep', 'r.html')));
  // A directory that cannot be made (a file is in the way): the error comes first, alone.
  fs.writeFileSync(path.join(dir, 'blocker'), '');
  const bad = run(['report', trace, '--html', path.join(dir, 'blocker', 'r.html')]);
  assert.equal(bad.status, 1);
  assert.equal(bad.stdout, '', 'nothing printed before the error');
  assert.match(bad.stderr, /^selfprof: cannot create .*blocker for .*r\.html: (ENOTDIR|EEXIST)\n$/);
});

test('an output path under /proc fails at once: one line, exit 1 (Node\'s recursive mkdir loops there)', (t) => {
  if (!fs.existsSync('/proc/self')) return t.skip('no /proc here');
  const dir = tmp(t);
  record(t, dir);
  const trace = path.join(dir, 'selfprof-out', 'profile.trace.json.gz');
  const cases = [
    [['record', '-o', '/proc/x/y', '--', process.execPath, '-e', '0'], /^selfprof: cannot create \/proc\/x\/y: ENOENT\n$/],
    [['report', trace, '--html', '/proc/x/y/r.html'], /^selfprof: cannot create \/proc\/x\/y for \/proc\/x\/y\/r\.html: ENOENT\n$/],
    [['convert', trace, '--to', 'pprof', '-o', '/proc/x/p.pb.gz'], /^selfprof: cannot create \/proc\/x for \/proc\/x\/p\.pb\.gz: ENOENT\n$/],
    [['diff', trace, trace, '--html', '/proc/x/d.html'], /^selfprof: cannot create \/proc\/x for \/proc\/x\/d\.html: ENOENT\n$/],
  ];
  for (const [args, message] of cases) {
    // Today's bound is the test's (a hang is the defect): 20 s for a one-line error.
    const r = run(args, { timeout: 20_000 });
    assert.equal(r.error?.code, undefined, `${args[0]} ended on its own`);
    assert.equal(r.status, 1, `${args[0]}: ${r.stderr}`);
    assert.equal(r.stdout, '', `${args[0]}: nothing before the error`);
    assert.match(r.stderr, message, args[0]);
  }
});

test('a reader that goes away ends the output quietly (convert | head)', (t) => {
  const dir = tmp(t);
  record(t, dir, true);
  // As a shell runs it: head reads 10 bytes and exits while convert still writes.
  const size = run(['convert', path.join(dir, 'selfprof-out', 'profile.trace.json.gz'), '--to', 'trace']).stdout.length;
  assert.ok(size > 65536, `the trace is more than a pipe holds: ${size} bytes`);
  const script = `"$0" "$1" convert "$2" --to trace 2> "$3" | head -c 10 > /dev/null; echo \${PIPESTATUS[0]}`;
  const err = path.join(dir, 'stderr.txt');
  const r = spawnSync('bash', ['-c', script, process.execPath, cli, path.join(dir, 'selfprof-out', 'profile.trace.json.gz'), err], { encoding: 'utf8' });
  const stderr = fs.readFileSync(err, 'utf8');
  assert.equal(r.stdout.trim(), '0', `convert's exit status; stderr: ${stderr}`);
  assert.equal(stderr, '');
});

test('record says when it replaces an earlier recording; diff names two files of one name by their paths', (t) => {
  const dir = tmp(t);
  const first = record(t, dir);
  assert.doesNotMatch(first.stderr, /earlier recording/);
  const second = record(t, dir);
  assert.match(second.stderr, /selfprof-out holds an earlier recording \(profile\.html, profile\.pb\.gz, profile\.trace\.json\.gz\): this one replaces it/);
  for (const side of ['run1', 'run2']) {
    fs.mkdirSync(path.join(dir, side));
    fs.copyFileSync(path.join(dir, 'selfprof-out', 'profile.trace.json.gz'), path.join(dir, side, 'profile.trace.json.gz'));
  }
  const d = run(['diff', 'run1/profile.trace.json.gz', 'run2/profile.trace.json.gz', '--html', 'd.html'], { cwd: dir });
  assert.equal(d.status, 0, d.stderr);
  assert.match(d.stdout, /^A run1\/profile\.trace\.json\.gz: .*\nB run2\/profile\.trace\.json\.gz: /);
  const html = fs.readFileSync(path.join(dir, 'd.html'), 'utf8');
  assert.match(html, /<title>selfprof diff: A run1\/profile\.trace\.json\.gz → B run2\/profile\.trace\.json\.gz<\/title>/);
});
