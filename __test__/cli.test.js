'use strict';
// The command line: conversions, and one clear line with exit code 1 on bad files.
const { test } = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { spawnSync } = require('node:child_process');
const zlib = require('node:zlib');
const { Profiler, withLabels } = require('..');
const { spin, sampledCall, decodePprof, assertValidTrace, traceWork, pprofWork, assertRequestLabels } = require('./helpers');

const cli = path.join(__dirname, '..', 'bin', 'selfprof.js');
const fixture = path.join(__dirname, 'fixtures', 'labeled-app.js');
const run = (...args) => spawnSync(process.execPath, [cli, ...args], { encoding: 'utf8', timeout: 60_000 });
/** `selfprof record -o dir ...args` of the labeled fixture, and the calls of its busy functions (from LABELED_APP_CALLS). */
function recordFixture(dir, args, env = {}) {
  const callsFile = path.join(os.tmpdir(), `selfprof-calls-${process.pid}-${Math.random().toString(36).slice(2)}.jsonl`);
  const r = spawnSync(process.execPath, [cli, 'record', '-o', dir, ...args], { encoding: 'utf8', timeout: 60_000, env: { ...process.env, ...env, LABELED_APP_CALLS: callsFile } });
  const calls = fs.existsSync(callsFile) ? fs.readFileSync(callsFile, 'utf8').trim().split('\n').filter(Boolean).map((l) => JSON.parse(l)) : [];
  fs.rmSync(callsFile, { force: true });
  return { ...r, calls };
}
const RECORDED = ['recordedPrimes', 'recordedOrders'];
const tmp = (name) => fs.mkdtempSync(path.join(os.tmpdir(), `selfprof-${name}-`));
const readTrace = (file) => JSON.parse(zlib.gunzipSync(fs.readFileSync(file)));
const endpointOf = (trace, s) => (s.contextId === undefined ? undefined : trace.contexts[s.contextId].labels.endpoint);

function cliBusyWork(ms) {
  return spin(ms);
}

test('selfprof convert: trace files to folded stacks and .cpuprofile', async () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'selfprof-cli-'));
  const p = new Profiler({ sampleInterval: 2, maxBufferSize: 10_000 });
  sampledCall(20, 30_000, cliBusyWork, 60);
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
  fs.writeFileSync(path.join(dir, 'garbage.pb'), 'this is not a profile\n');
  fs.writeFileSync(path.join(dir, 'truncated.pb.gz'), zlib.gzipSync(Buffer.alloc(64, 7)).subarray(0, 20));
  for (const name of [...cases, 'garbage.pb', 'truncated.pb.gz']) {
    for (const args of [['report', path.join(dir, name)], ['convert', path.join(dir, name), '--to', 'pprof', '-o', path.join(dir, 'x.pb.gz')]]) {
      const r = run(...args);
      assert.equal(r.status, 1, `${args[0]} ${name}: exit code`);
      assert.equal(r.stderr.trim().split('\n').length, 1, `${args[0]} ${name}: one line, got ${r.stderr}`);
      assert.doesNotMatch(r.stderr, /\n\s+at /);
    }
  }
  const usage = run('convert', path.join(dir, 'empty.json'));
  assert.equal(usage.status, 1);
  assert.match(usage.stderr, /needs --to/);
  for (const args of [['report'], ['report', 'a', '--top', '0'], ['report', 'a', '--nope'], ['frobnicate'], ['record', 'node']]) {
    const r = run(...args);
    assert.equal(r.status, 1, args.join(' '));
    assert.equal(r.stderr.trim().split('\n').length, 1, `${args.join(' ')}: ${r.stderr}`);
  }
  fs.rmSync(dir, { recursive: true });
});

test('selfprof record: a labeled program to trace, pprof and HTML; exit code passed through', () => {
  const dir = tmp('record');
  const r = recordFixture(dir, ['--by', 'endpoint', '--', process.execPath, fixture]);
  assert.equal(r.status, 0, r.stderr);
  assert.match(r.stderr, /recording .* every 1 ms/);
  assert.match(r.stderr, /wrote /);
  for (const f of ['profile.trace.json.gz', 'profile.pb.gz', 'profile.html']) assert.ok(fs.existsSync(path.join(dir, f)), f);
  assert.deepEqual(fs.readdirSync(dir).sort(), ['profile.html', 'profile.pb.gz', 'profile.trace.json.gz'], 'nothing else left behind');

  // The trace: real samples of both endpoints' functions, each under its own label.
  const trace = assertValidTrace(readTrace(path.join(dir, 'profile.trace.json.gz')));
  // Each sample under its own request's label.
  assertRequestLabels(traceWork(trace, RECORDED), r.calls, { what: 'trace', min: 10, exact: true });

  // The pprof of the same recording, read by an independent decoder.
  const pprof = decodePprof(fs.readFileSync(path.join(dir, 'profile.pb.gz')));
  assert.equal(pprof.sum(0), trace.samples.length);
  assert.deepEqual(pprof.join, trace.metadata, "the pprof's comment carries the trace's join counts");
  assertRequestLabels(pprofWork(pprof, RECORDED, { timeOrigin: r.calls[0].timeOrigin }), r.calls, { what: 'pprof', min: 10, exact: true });
  assert.ok(Number(pprof.p.timeNanos) > Date.now() * 1e6 - 120e9, 'pprof time is wall-clock time');

  // The summary on stdout: the busy functions and samples per endpoint.
  assert.match(r.stdout, /\b(spin|recordedPrimes|recordedOrders)\s+__test__\//, "the busy code tops the table (V8 may inline spin)");
  // A row per value, GET /primes among them (the unlabeled start-up, `(none)`, may outnumber
  // it on a loaded machine: the program is short).
  assert.match(r.stdout, /samples by endpoint \(all samples, as the HTML report counts them\):\n( +.*\n)* +GET \/primes +\d+ /);
  const html = fs.readFileSync(path.join(dir, 'profile.html'), 'utf8');
  assert.match(html, /^<!DOCTYPE html>/i);
  assert.ok(html.includes('recordedPrimes'));
  fs.rmSync(dir, { recursive: true });
});

test('selfprof record: process.exit, uncaught errors and --duration still write the profile', () => {
  for (const [mode, args, status] of [
    ['exit', [], 3],
    ['throw', [], 1],
    ['forever', ['--duration', '0.6'], 0],
  ]) {
    const dir = tmp(`record-${mode}`);
    let r = recordFixture(dir, [...args, '--', process.execPath, fixture, mode]);
    // --duration counts from the start: a machine too busy to start the program and run its
    // labeled rounds in 0.6 s gets a longer one (what is checked is what was run).
    for (let d = 1.2; mode === 'forever' && !/looping/.test(r.stdout) && d < 20; d *= 2) {
      r = recordFixture(dir, ['--duration', String(d), '--', process.execPath, fixture, mode]);
    }
    assert.equal(r.status, status, `${mode}: ${r.stderr}`);
    const trace = readTrace(path.join(dir, 'profile.trace.json.gz'));
    // Every call's samples, each with its labels, until the program ended: the profile
    // covers the last call that began.
    assertRequestLabels(traceWork(trace, RECORDED), r.calls, { what: mode, min: 5, exact: true });
    const lastCall = r.calls.at(-1);
    assert.ok(trace.samples.at(-1).timestamp >= lastCall.t0, `${mode}: the profile ends at ${trace.samples.at(-1).timestamp}, before the last call began (${lastCall.t0})`);
    if (mode === 'forever') assert.match(r.stderr, /ended by SIGINT/);
    fs.rmSync(dir, { recursive: true });
  }
  const dir = tmp('record-none');
  const r = run('record', '-o', dir, '--', '/bin/true');
  assert.equal(r.status, 1);
  assert.match(r.stderr, /no profile was recorded/);
  const missing = run('record', '-o', dir, '--', '/no/such/program');
  assert.equal(missing.status, 1);
  assert.match(missing.stderr, /cannot run \/no\/such\/program: ENOENT/);
  assert.equal(missing.stderr.trim().split('\n').length, 1, `one line: ${missing.stderr}`);
  assert.doesNotMatch(missing.stderr, /pid undefined/);
  // Killed by a signal: the exit code a shell would report, and the profile is written.
  const killed = run('record', '-o', dir, '--', process.execPath, fixture, 'sigterm');
  assert.equal(killed.status, 143, killed.stderr);
  assert.match(killed.stderr, /ended by SIGTERM/);
  assert.ok(fs.existsSync(path.join(dir, 'profile.pb.gz')));
  const long = run('record', '-o', dir, '--duration', '1e10', '--', process.execPath, fixture);
  assert.equal(long.status, 1);
  assert.match(long.stderr, /--duration must be a number from 0 to 2147483/);
  fs.rmSync(dir, { recursive: true });
});

test('selfprof report: top functions and samples per label, from a trace or its pprof; --html', async () => {
  const dir = tmp('report');
  const p = new Profiler({ sampleInterval: 1, maxBufferSize: 100_000 });
  for (let i = 0; i < 5; i++) {
    await withLabels({ endpoint: 'GET /a' }, async () => cliBusyWork(12));
    await withLabels({ endpoint: 'GET /b' }, async () => spin(6));
  }
  const gz = await p.stop({ format: 'json-gzip' });
  const trace = JSON.parse(zlib.gunzipSync(gz));
  fs.writeFileSync(path.join(dir, 't.json.gz'), gz);
  const conv = run('convert', path.join(dir, 't.json.gz'), '--to', 'pprof', '-o', path.join(dir, 't.pb.gz'));
  assert.equal(conv.status, 0, conv.stderr);
  // Every sample with the label, as the HTML report's label panel counts (GC during a request included).
  const expected = trace.samples.filter((s) => endpointOf(trace, s) === 'GET /a').length;
  for (const file of ['t.json.gz', 't.pb.gz']) {
    const r = run('report', path.join(dir, file), '--by', 'endpoint', '--top', '5', '--html', path.join(dir, `${file}.html`));
    assert.equal(r.status, 0, r.stderr);
    assert.match(r.stdout, new RegExp(`^${trace.samples.length} samples`), file);
    const table = r.stdout.split('\n').filter((l) => /^\s*\d+\s+[\d.]+\s+[\d.]+\s/.test(l));
    assert.equal(table.length, 5, `${file}: --top 5 rows`);
    assert.match(r.stdout, /\b(spin|cliBusyWork)\s+__test__\//, "the busy code tops the table (V8 may inline spin)");
    const a = new RegExp(`GET /a\\s+(\\d+)`).exec(r.stdout);
    assert.equal(Number(a?.[1]), expected, `${file}: samples of GET /a`);
    assert.ok(fs.readFileSync(path.join(dir, `${file}.html`), 'utf8').includes('GET /a'));
  }
  fs.rmSync(dir, { recursive: true });
});

test('selfprof record --interval and SELFPROF_SAMPLE_INTERVAL_MS past what V8 accepts: clamped, the program runs', () => {
  const dir = tmp('record-huge-interval');
  const r = run('record', '-o', dir, '--interval', '1e9', '--', process.execPath, fixture);
  assert.equal(r.status, 0, r.stderr);
  assert.match(r.stderr, /every 2147483 ms/, 'the interval in use is said');
  assert.ok(fs.existsSync(path.join(dir, 'profile.pb.gz')));
  fs.rmSync(dir, { recursive: true });
  const script = `
    const s = require(${JSON.stringify(path.join(__dirname, '..'))}).start({ period: 200, exporters: [{ type: 'file', dir: process.argv[1] }] });
    setTimeout(() => s.stop().then(() => console.log('stopped')), 500);
  `;
  const out = tmp('service-huge-interval');
  const s = spawnSync(process.execPath, ['-e', script, out], { encoding: 'utf8', timeout: 30_000, env: { ...process.env, SELFPROF_SAMPLE_INTERVAL_MS: '3000000' } });
  assert.equal(s.status, 0, s.stderr);
  assert.match(s.stdout, /stopped/);
  assert.doesNotMatch(s.stderr, /could not start|Invalid parameters/, s.stderr);
  assert.ok(fs.readdirSync(out).some((f) => f.endsWith('.pb.gz')), 'profiles were written');
  fs.rmSync(out, { recursive: true });
});

test('selfprof report, convert and diff refuse a device, a FIFO or a directory at once, in one line', () => {
  const dir = tmp('not-a-file');
  const fifo = path.join(dir, 'fifo');
  spawnSync('mkfifo', [fifo]);
  assert.ok(fs.statSync(fifo).isFIFO(), 'mkfifo made a FIFO');
  // /dev/zero never ends and has a size of 0; a FIFO without a writer blocks its reader.
  for (const [file, kind] of [['/dev/zero', 'a character device'], [fifo, 'a FIFO'], [dir, 'a directory']]) {
    for (const args of [['report', file], ['convert', file, '--to', 'folded'], ['diff', file, file]]) {
      const r = spawnSync(process.execPath, [cli, ...args], { encoding: 'utf8', timeout: 15_000 });
      assert.equal(r.status, 1, `${args.join(' ')}: exit code (${r.signal ?? r.stderr})`);
      assert.equal(r.stderr, `selfprof: cannot read ${file}: it is ${kind}, not a regular file\n`);
    }
  }
  fs.rmSync(dir, { recursive: true });
});

test('selfprof record from an install path with a newline, a space, quotes and a backslash', () => {
  // The package as npm would install it, under a directory named with every character
  // NODE_OPTIONS parsing treats specially.
  const root = path.join(tmp('record-path'), 'a\nb c"d\'e\\f');
  const pkg = path.join(__dirname, '..');
  const files = ['package.json', 'index.js', 'binding.js', 'start.js', 'worker.js', 'bin', 'lib'];
  files.push(...fs.readdirSync(pkg).filter((f) => /^selfprof\..*\.node$/.test(f)));
  for (const f of files) fs.cpSync(path.join(pkg, f), path.join(root, f), { recursive: true });
  const dir = tmp('record-path-out');
  const app = path.join(dir, 'app.js');
  // Busy until the sampler (the installed copy's, which record loaded) signalled 100 times:
  // a fixed 300 ms gave a loaded machine 39 samples.
  const group = JSON.stringify(path.join(root, 'lib', 'capture', 'group.js'));
  fs.writeFileSync(app, `const { group } = require(${group}); const until = group.ticks() + 100; const end = Date.now() + 30000; let x = 0; while (group.ticks() < until && Date.now() < end) x += Math.sqrt(x + 1);\n`);
  const r = spawnSync(process.execPath, [path.join(root, 'bin', 'selfprof.js'), 'record', '-o', dir, '--', process.execPath, app], {
    encoding: 'utf8',
    timeout: 60_000,
    env: { ...process.env, NODE_OPTIONS: '--max-old-space-size=512' },
  });
  assert.equal(r.status, 0, r.stderr);
  const trace = readTrace(path.join(dir, 'profile.trace.json.gz'));
  assert.ok(trace.samples.length > 50, `${trace.samples.length} samples`);
  fs.rmSync(path.dirname(root), { recursive: true });
  fs.rmSync(dir, { recursive: true });
});

test('selfprof record: a program killed by SIGKILL or SIGSEGV exits as a shell says, and what it recorded is kept', () => {
  const env = { ...process.env, SELFPROF_RECORD_CHECKPOINT_MS: '150' };
  for (const [mode, signal, status, heap] of [['sigkill', 'SIGKILL', 137, []], ['sigsegv', 'SIGSEGV', 139, ['--heap']]]) {
    const dir = tmp(`record-${mode}`);
    const r = recordFixture(dir, ['--by', 'endpoint', ...heap, '--', process.execPath, fixture, mode], env);
    assert.equal(r.status, status, `${mode}: ${r.stderr}`);
    assert.match(r.stderr, new RegExp(`ended by ${signal}`));
    assert.match(r.stderr, new RegExp(`pid \\d+ was ended by ${signal} before it wrote its profile: kept what it recorded until its last checkpoint, [\\d.]+ s in${heap.length ? ' \\(no heap profile: it is taken at exit\\)' : '\n'}`), r.stderr);
    assert.deepEqual(fs.readdirSync(dir).sort(), ['profile.html', 'profile.pb.gz', 'profile.trace.json.gz'], 'written as usual, nothing else left behind');
    const trace = assertValidTrace(readTrace(path.join(dir, 'profile.trace.json.gz')));
    // What it recorded until its last checkpoint (as much as the CPU it got allowed): every
    // call's samples with their labels.
    assertRequestLabels(traceWork(trace, RECORDED), r.calls, { what: mode, min: 1, exact: true });
    for (let i = 1; i < trace.samples.length; i++) assert.ok(trace.samples[i].timestamp > trace.samples[i - 1].timestamp, 'each sample once, in order');
    const pprof = decodePprof(fs.readFileSync(path.join(dir, 'profile.pb.gz')));
    assert.equal(pprof.sum(0), trace.samples.length);
    assert.match(r.stdout, /samples by endpoint/);
    fs.rmSync(dir, { recursive: true });
  }
  // Killed before any checkpoint: nothing to keep, and the exit status still says how it ended.
  const dir = tmp('record-sigkill-at-once');
  const r = run('record', '-o', dir, '--', process.execPath, '-e', "process.kill(process.pid, 'SIGKILL')");
  assert.equal(r.status, 137, r.stderr);
  assert.match(r.stderr, /no profile was recorded: .* was ended by SIGKILL before its first checkpoint/);
  assert.deepEqual(fs.readdirSync(dir), []);
  // Beside node --cpu-prof there are no checkpoints (the fixture gives up waiting after 3 s).
  const cpuProf = spawnSync(process.execPath, [cli, 'record', '-o', dir, '--', process.execPath, '--cpu-prof', `--cpu-prof-dir=${dir}`, fixture, 'sigkill'], { encoding: 'utf8', timeout: 60_000, env });
  assert.equal(cpuProf.status, 137, cpuProf.stderr);
  assert.match(cpuProf.stderr, /no profile was recorded: .* was ended by SIGKILL before its first checkpoint/);
  assert.doesNotMatch(cpuProf.stderr, /Cannot retrieve id/);
  fs.rmSync(dir, { recursive: true });
});

test('selfprof record: on a terminal, a progress line while the program runs; none when stderr is not one', (t) => {
  const dir = tmp('record-progress');
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  // Not a terminal (a pipe, as here): the start and end lines only.
  const piped = run('record', '-o', dir, '--duration', '1.5', '--', process.execPath, fixture, 'forever');
  assert.equal(piped.status, 0, piped.stderr);
  assert.doesNotMatch(piped.stderr, /recording…|\r/);
  // On a terminal: util-linux's script gives the recorder one (its stdout and stderr, merged).
  if (spawnSync('script', ['--version']).status !== 0) {
    if (process.env.CI) throw new Error('script (util-linux) is needed (CI must not skip this test)');
    return t.skip('needs script (util-linux)');
  }
  const tty = spawnSync('script', ['-qfec', 'exec "$NODE" "$CLI" record -o "$DIR" --duration 2.5 -- "$NODE" "$APP" forever', '/dev/null'], {
    encoding: 'utf8',
    timeout: 60_000,
    env: { ...process.env, NODE: process.execPath, CLI: cli, DIR: dir, APP: fixture },
  });
  assert.equal(tty.status, 0, tty.stdout);
  const ticks = tty.stdout.split('\r').filter((l) => l.startsWith('selfprof: recording…'));
  assert.ok(ticks.length >= 1, tty.stdout);
  const CLEAR = '\x1b[K'; // erase to the end of the line
  assert.match(ticks.at(-1), /^selfprof: recording… \d+ s \(1 Node\.js process\)/);
  assert.ok(ticks.at(-1).endsWith(CLEAR), JSON.stringify(ticks.at(-1)));
  // The line is cleared before the next one is written.
  assert.match(tty.stdout.replaceAll(CLEAR, '<clear>'), /\r<clear>selfprof: \S+ ended by SIGINT after/);
});
