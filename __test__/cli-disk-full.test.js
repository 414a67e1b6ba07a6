'use strict';
// `selfprof record` on a full disk: a small tmpfs, mounted here (as root; CI runs as root).
// Full at start: one line and exit 1, before the program runs. Filled mid-run: the right
// line naming the process and ENOSPC, exit 1, and never a truncated file under a result's
// name (an earlier recording there is left as it was). Where no tmpfs can be mounted the
// tests skip saying why; under CI that is a failure.
const { test } = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const zlib = require('node:zlib');
const { spawnSync } = require('node:child_process');

const cli = path.join(__dirname, '..', 'bin', 'selfprof.js');
const run = (args, opts = {}) => spawnSync(process.execPath, [cli, ...args], { encoding: 'utf8', timeout: 120_000, ...opts });

/** A tmpfs of `size` (mount's size=), unmounted after the test; null if it cannot be had (the test skipped). */
function tmpfs(t, size) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'selfprof-full-'));
  const r = spawnSync('mount', ['-t', 'tmpfs', '-o', `size=${size}`, 'tmpfs', dir], { encoding: 'utf8' });
  if (r.status !== 0) {
    fs.rmSync(dir, { recursive: true, force: true });
    const why = `cannot mount a tmpfs to fill (${process.getuid?.() === 0 ? (r.error?.message ?? r.stderr.trim()) : 'not root'})`;
    if (process.env.CI) throw new Error(`${why} (CI must not skip this test)`);
    t.skip(why);
    return null;
  }
  t.after(() => {
    spawnSync('umount', [dir]);
    fs.rmSync(dir, { recursive: true, force: true });
  });
  return dir;
}

/** Fills the file system holding `dir` (a file of zeros until ENOSPC). */
const FILL = `
  function fillDisk(dir) {
    const fs = require('node:fs');
    const fd = fs.openSync(require('node:path').join(dir, 'filler-' + process.pid), 'w');
    const chunk = Buffer.alloc(4096, 1);
    try { for (;;) fs.writeSync(fd, chunk); } catch (err) { if (err.code !== 'ENOSPC') throw err; }
    fs.closeSync(fd);
  }
`;
const BUSY = 'function busy() { let x = 0; for (let i = 0; i < 2e6; i++) x += Math.sqrt(i); return x } const t = Date.now(); while (Date.now() - t < 300) busy();';

/** Every file under `dir` but the fillers: name -> bytes. */
function filesIn(dir) {
  return Object.fromEntries(
    fs
      .readdirSync(dir, { recursive: true })
      .filter((f) => !path.basename(f).startsWith('filler-') && fs.statSync(path.join(dir, f)).isFile())
      .map((f) => [f, fs.readFileSync(path.join(dir, f))]),
  );
}

test('record on a disk full at start: one line, exit 1, and the program is not run', (t) => {
  const disk = tmpfs(t, '256k');
  if (!disk) return;
  spawnSync(process.execPath, ['-e', `${FILL} fillDisk(${JSON.stringify(disk)})`]);
  const out = path.join(disk, 'out');
  const r = run(['record', '-o', out, '--', process.execPath, '-e', `console.log('the program ran'); ${BUSY}`]);
  assert.equal(r.status, 1, r.stderr);
  assert.equal(r.stdout, '', 'the program did not run');
  assert.match(r.stderr, new RegExp(`^selfprof: cannot record to ${out.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}: ENOSPC \\(no space left on its device\\)\n$`));
  assert.deepEqual(filesIn(disk), {}, 'nothing left behind');
});

test('the disk fills while the program runs: it could not write its profile, said in one line, exit 1', (t) => {
  const disk = tmpfs(t, '1m');
  if (!disk) return;
  const out = path.join(disk, 'out');
  // No checkpoint to fall back on: the profile at exit is all there would be.
  const r = run(['record', '-o', out, '--', process.execPath, '-e', `${FILL} ${BUSY} fillDisk(${JSON.stringify(disk)}); console.log('filled')`], {
    env: { ...process.env, SELFPROF_RECORD_CHECKPOINT_MS: '0' },
  });
  assert.equal(r.status, 1, r.stderr);
  assert.equal(r.stdout, 'filled\n');
  const lines = r.stderr.split('\n').filter((l) => l.startsWith('selfprof: ') && !/^selfprof: (recording |.* exited with code )/.test(l));
  assert.deepEqual(lines.length, 1, r.stderr);
  assert.match(lines[0], /^selfprof: no profile was recorded: pid \d+ could not write its profile: ENOSPC \(no space left on its device\)$/);
  assert.match(r.stderr, /\[SELFPROF_RECORD\] Warning: selfprof record: the profile could not be written: ENOSPC/, 'the program said so too');
  assert.deepEqual(Object.keys(filesIn(disk)), [], 'nothing left behind');
});

test('the disk fills before the recorder writes its outputs: no truncated file under a result\'s name, the earlier recording kept', (t) => {
  const disk = tmpfs(t, '1m');
  if (!disk) return;
  const out = path.join(disk, 'out');
  // An earlier recording, complete, where this one would go.
  const first = run(['record', '-o', out, '--', process.execPath, '-e', BUSY]);
  assert.equal(first.status, 0, first.stderr);
  const earlier = filesIn(out);
  assert.deepEqual(Object.keys(earlier).sort(), ['profile.html', 'profile.pb.gz', 'profile.trace.json.gz']);
  // The program fills the disk after its profile is written (its exit handler runs after the
  // record hook's): the recorder has only the room its raw files leave, less than its report.
  const r = run(['record', '-o', out, '--', process.execPath, '-e', `${FILL} ${BUSY} process.on('exit', () => fillDisk(${JSON.stringify(disk)}))`]);
  assert.equal(r.status, 1, r.stderr);
  assert.match(r.stderr, /\nselfprof: cannot write .*profile\.html: ENOSPC \(no space left on its device\); nothing of this recording was written\n$/);
  const after = filesIn(out);
  assert.deepEqual(Object.keys(after).sort(), Object.keys(earlier).sort(), 'no other file (no temporary one, no raw recording)');
  for (const [name, bytes] of Object.entries(earlier)) assert.ok(after[name].equals(bytes), `${name} is the earlier recording's`);
  zlib.gunzipSync(after['profile.trace.json.gz']);
});
