#!/usr/bin/env node
'use strict';
// The selfprof command line. Errors are one line on stderr and exit code 1; progress
// goes to stderr, results to stdout or files.

const fs = require('node:fs');
const path = require('node:path');
const { parseArgs } = require('node:util');

const USAGE = `usage:
  selfprof record [-o DIR] [--interval MS] [--duration S] [--by KEY] [--no-source-maps] -- COMMAND [ARGS...]
      profiles the Node.js processes COMMAND starts; writes DIR/profile.trace.json.gz,
      profile.pb.gz and profile.html (default DIR: selfprof-out); frames of scripts with
      a source map are mapped to the original files (--no-source-maps: as V8 ran them)
  selfprof report FILE [--html OUT] [--by KEY] [--top N] [--source-maps]
      top functions and samples per label value of a profile file
  selfprof convert FILE --to cpuprofile|folded|pprof|trace [-o OUT] [--lines] [--source-maps]
      (--lines: pprof samples at line-level locations, from the profile's line ticks)
      (--source-maps: map frames through the source maps found on this machine; a file is
      otherwise taken as it was recorded)
  selfprof diff A B [--html OUT] [--top N] [--ignore-lines] [--source-maps]
      what changed from profile A (the baseline) to B: each function's share of the busy
      samples (all but idle) in B minus in A, in percentage points
  selfprof diff FILE --by KEY VALUE_A VALUE_B [--html OUT] [--top N] [--ignore-lines]
      the same between two values of a label in one profile ("(none)": without the label)
  FILE, A, B: a selfprof trace (.json, .json.gz), a V8 CPU profile (.cpuprofile, from
      DevTools or node --cpu-prof) or a pprof profile (.pb, .pb.gz)`;

class UsageError extends Error {}

/** Where each command's output goes: stderr for progress, as lines. */
const progress = (msg) => process.stderr.write(`selfprof: ${msg}\n`);

function options(args, spec) {
  try {
    return parseArgs({ args, options: spec, allowPositionals: true, strict: true });
  } catch (err) {
    throw new UsageError(err.message.split('\n')[0]);
  }
}

function number(value, name, { min = 0, max = Infinity, integer = false } = {}) {
  if (value === undefined) return undefined;
  const n = Number(value);
  if (value === '' || !Number.isFinite(n) || n < min || n > max || (integer && !Number.isInteger(n))) {
    const range = max === Infinity ? `≥ ${min}` : `from ${min} to ${max}`;
    throw new UsageError(`${name} must be ${integer ? 'a whole number' : 'a number'} ${range}, got ${JSON.stringify(value)}`);
  }
  return n;
}

/** Input files are read whole: past this (the converters' own input limit, plus room for
 * gzip's framing) a file is refused before it is read. */
const MAX_FILE_BYTES = (256 << 20) + (1 << 20);

/** A file's bytes, or one clear error naming the file. */
function readFile(file) {
  let bytes;
  try {
    const { size } = fs.statSync(file);
    if (size > MAX_FILE_BYTES) throw new Error(`is ${Math.round(size / 2 ** 20)} MiB; input is limited to 256 MiB`);
    bytes = fs.readFileSync(file);
  } catch (err) {
    throw new Error(`cannot read ${file}: ${err.code ?? err.message}`);
  }
  if (bytes.length === 0) throw new Error(`${file} is empty`);
  return bytes;
}

/** A trace or pprof file converted to `to`; a bad file is one error naming it. */
function convertFile(file, to, { lines = false, sourceMaps = false } = {}) {
  const bytes = readFile(file);
  const { convert } = require('..');
  try {
    return convert(bytes, { to, lines, sourceMaps });
  } catch (err) {
    throw new Error(`${file}: ${err.message.replace(/^convert: /, '')}`);
  }
}

function writeOut(out, data) {
  try {
    fs.writeFileSync(out, data);
  } catch (err) {
    throw new Error(`cannot write ${out}: ${err.code ?? err.message}`);
  }
}

function convertCommand(argv) {
  const { values, positionals } = options(argv, {
    to: { type: 'string' },
    out: { type: 'string', short: 'o' },
    lines: { type: 'boolean' },
    'source-maps': { type: 'boolean' },
  });
  if (positionals.length !== 1) throw new UsageError('convert takes one FILE');
  const { TARGETS } = require('../lib/views/convert');
  if (!values.to) throw new UsageError(`convert needs --to ${TARGETS.join('|')}`);
  if (!TARGETS.includes(values.to)) throw new UsageError(`--to must be one of ${TARGETS.join(', ')}, got ${JSON.stringify(values.to)}`);
  if (values.lines && values.to !== 'pprof') throw new UsageError('--lines goes with --to pprof');
  const out = convertFile(positionals[0], values.to, { lines: values.lines, sourceMaps: values['source-maps'] });
  if (values.out) writeOut(values.out, out);
  else if (values.to === 'pprof' && process.stdout.isTTY) throw new UsageError('pprof is binary: give -o OUT');
  else process.stdout.write(out);
}

/** The text summary of a trace: totals, top functions, samples per label value. */
function summarize(trace, { by, top = 15, root }) {
  const { topFunctions, samplesByLabel, formatTable } = require('../lib/views/summary');
  const lines = [];
  const js = trace.samples.filter((s) => s.stackId !== undefined).length;
  const first = trace.samples[0]?.timestamp ?? 0;
  const last = trace.samples.at(-1)?.timestamp ?? 0;
  lines.push(`${trace.samples.length} samples (${js} in JS) over ${(last - first).toFixed(0)} ms`);
  if (js === 0) return lines.join('\n');
  const shorten = (loc) => (root && loc.startsWith(root) ? loc.slice(root.length) : loc);
  const rows = topFunctions(trace, { limit: top }).map((r) => ({ ...r, location: shorten(r.location) }));
  lines.push('', formatTable(rows));
  const keys = [...new Set((trace.contexts ?? []).flatMap((c) => Object.keys(c.labels)))].sort();
  if (by) {
    if (!keys.includes(by)) {
      lines.push('', `no sample has the label ${JSON.stringify(by)}${keys.length ? ` (labels: ${keys.join(', ')})` : ''}`);
    } else {
      lines.push('', `JS samples by ${by}:`);
      const groups = samplesByLabel(trace, by);
      const width = Math.max(...groups.map((g) => g.value.length));
      for (const g of groups) {
        lines.push(`  ${g.value.padEnd(width)}  ${String(g.samples).padStart(7)}  ${g.percent.toFixed(1).padStart(5)}%  mostly in ${g.top}`);
      }
    }
  } else if (keys.length) {
    lines.push('', `labels: ${keys.join(', ')} (--by KEY for samples per value)`);
  }
  return lines.join('\n');
}

function reportCommand(argv) {
  const { values, positionals } = options(argv, {
    html: { type: 'string' },
    by: { type: 'string' },
    top: { type: 'string' },
    'source-maps': { type: 'boolean' },
  });
  if (positionals.length !== 1) throw new UsageError('report takes one FILE');
  const top = number(values.top, '--top', { min: 1, integer: true }) ?? 15;
  const [file] = positionals;
  const trace = JSON.parse(convertFile(file, 'trace', { sourceMaps: values['source-maps'] }));
  process.stdout.write(`${summarize(trace, { by: values.by, top, root: `file://${process.cwd()}/` })}\n`);
  if (values.html) {
    const { htmlReport } = require('..');
    writeOut(values.html, htmlReport(trace, { title: `selfprof: ${path.basename(file)}` }));
    progress(`wrote ${values.html}`);
  }
}

/** `selfprof diff`: a text table of the biggest share changes, and the report's diff view. */
function diffCommand(argv) {
  const { values, positionals } = options(argv, {
    html: { type: 'string' },
    top: { type: 'string' },
    by: { type: 'string' },
    'ignore-lines': { type: 'boolean' },
    'source-maps': { type: 'boolean' },
  });
  const top = number(values.top, '--top', { min: 1, integer: true }) ?? 20;
  const ignoreLines = values['ignore-lines'] ?? false;
  const readTrace = (file) => JSON.parse(convertFile(file, 'trace', { sourceMaps: values['source-maps'] }));
  const { diffProfiles, diffLabelValues, formatDiff } = require('../lib/views/diff');
  const root = `file://${process.cwd()}/`;
  const shorten = (loc) => (loc.startsWith(root) ? loc.slice(root.length) : loc);
  let result;
  let sides;
  let report;
  if (values.by !== undefined) {
    if (positionals.length !== 3) throw new UsageError('diff FILE --by KEY takes FILE VALUE_A VALUE_B');
    const [file, va, vb] = positionals;
    const value = (v) => (v === '(none)' ? null : v);
    const trace = readTrace(file);
    const keys = new Set(trace.contexts.flatMap((c) => Object.keys(c.labels)));
    if (!keys.has(values.by)) {
      throw new Error(`${file}: no sample has the label ${JSON.stringify(values.by)}${keys.size ? ` (labels: ${[...keys].sort().join(', ')})` : ''}`);
    }
    result = diffLabelValues(trace, values.by, value(va), value(vb), { ignoreLines });
    sides = [`${values.by} = ${va}`, `${values.by} = ${vb}`];
    report = () =>
      require('..').htmlReport(trace, {
        title: `selfprof diff: ${path.basename(file)}, ${values.by}: ${va} → ${vb}`,
        labelDiff: { key: values.by, a: value(va), b: value(vb) },
      });
  } else {
    if (positionals.length !== 2) throw new UsageError('diff takes two files, A (the baseline) and B, or FILE --by KEY VALUE_A VALUE_B');
    const [fa, fb] = positionals;
    const ta = readTrace(fa);
    const tb = readTrace(fb);
    result = diffProfiles(ta, tb, { ignoreLines });
    sides = [fa, fb];
    report = () =>
      require('..').htmlReport(tb, {
        title: `selfprof diff: ${path.basename(fa)} → ${path.basename(fb)}`,
        baseline: ta,
        baselineName: path.basename(fa),
        name: path.basename(fb),
      });
  }
  const side = (name, s) => `${name}: ${s.samples} samples, ${s.busy} busy${s.busy ? '' : ' (no busy samples: every share is 0)'}`;
  const lines = [
    side(`A ${sides[0]}`, result.a),
    side(`B ${sides[1]}`, result.b),
    'shares are % of each side\'s busy samples (all but idle); Δ = B − A in percentage points',
    '',
    formatDiff(result, { top, shorten }),
  ];
  process.stdout.write(`${lines.join('\n')}\n`);
  if (values.html) {
    writeOut(values.html, report());
    progress(`wrote ${values.html}`);
  }
}

/** Runs COMMAND with the record hook preloaded into its Node processes, then builds the outputs. */
async function recordCommand(argv) {
  const split = argv.indexOf('--');
  if (split < 0 || split === argv.length - 1) throw new UsageError('record needs -- COMMAND, e.g. selfprof record -- node app.js');
  const { values, positionals } = options(argv.slice(0, split), {
    out: { type: 'string', short: 'o' },
    interval: { type: 'string' },
    duration: { type: 'string' },
    by: { type: 'string' },
    'no-source-maps': { type: 'boolean' },
  });
  if (positionals.length) throw new UsageError(`unexpected ${positionals[0]} before --`);
  const requested = number(values.interval, '--interval', { min: 0 }) ?? 1;
  // As the Profiler will use it: rounded up to the base interval, clamped to what V8 takes.
  const interval = require('../lib/capture/group').group.intervalFor(requested) / 1000;
  // A timer ends the program: it cannot wait longer than 2³¹−1 ms.
  const duration = number(values.duration, '--duration', { min: 0, max: 2147483 });
  const dir = path.resolve(values.out ?? 'selfprof-out');
  const command = argv.slice(split + 1);
  try {
    fs.mkdirSync(dir, { recursive: true });
  } catch (err) {
    throw new Error(`cannot create ${dir}: ${err.code ?? err.message}`);
  }
  const raw = fs.mkdtempSync(path.join(dir, '.recording-'));
  const hook = path.join(__dirname, '..', 'lib', 'cli', 'record-hook.js');
  const env = {
    ...process.env,
    NODE_OPTIONS: `${process.env.NODE_OPTIONS ?? ''} --require=${JSON.stringify(hook)}`.trim(),
    SELFPROF_RECORD_DIR: raw,
    SELFPROF_RECORD_INTERVAL_MS: String(interval),
    ...(values['no-source-maps'] ? { SELFPROF_SOURCE_MAPS: '0' } : {}),
  };
  const { spawn } = require('node:child_process');
  const started = Date.now();
  let timedOut = false;
  const child = spawn(command[0], command.slice(1), { stdio: 'inherit', env });
  const exit = await new Promise((resolve) => {
    child.on('error', (err) => resolve({ error: err }));
    child.on('exit', (code, signal) => resolve({ code, signal }));
    child.on('spawn', () => onSpawn());
  });
  function onSpawn() {
    // Ctrl-C reaches the child too (same process group); the recorder waits for it.
    const relay = (signal) => child.kill(signal);
    process.on('SIGINT', () => {});
    process.on('SIGTERM', relay);
    if (duration !== undefined) {
      setTimeout(() => {
        timedOut = true;
        child.kill('SIGINT');
      }, duration * 1000).unref();
    }
    progress(`recording ${command.join(' ')} (pid ${child.pid}) every ${interval} ms${duration !== undefined ? ` for ${duration} s` : ''}; Ctrl-C stops it`);
    // On a terminal, a line that counts the seconds while the program runs.
    if (process.stderr.isTTY) {
      const tick = setInterval(() => process.stderr.write(`\rselfprof: recording… ${Math.round((Date.now() - started) / 1000)} s`), 1000);
      tick.unref();
      child.on('exit', () => {
        clearInterval(tick);
        process.stderr.write('\r\x1b[K');
      });
    }
  }
  if (exit.error) {
    fs.rmSync(raw, { recursive: true, force: true });
    throw new Error(`cannot run ${command[0]}: ${exit.error.code ?? exit.error.message}`);
  }
  const seconds = ((Date.now() - started) / 1000).toFixed(1);
  progress(`${command[0]} ${exit.signal ? `ended by ${exit.signal}` : `exited with code ${exit.code}`} after ${seconds} s`);

  const recorded = fs
    .readdirSync(raw)
    .map((f) => /^selfprof-(\d+)\.trace\.json\.gz$/.exec(f))
    .filter(Boolean)
    .map((m) => Number(m[1]))
    .sort((a, b) => (a === child.pid ? -1 : b === child.pid ? 1 : a - b));
  if (!recorded.length) {
    fs.rmSync(raw, { recursive: true, force: true });
    throw new Error(`no profile was recorded: ${command[0]} started no Node.js process that ran to its exit`);
  }
  const { htmlReport } = require('..');
  for (const pid of recorded) {
    const name = pid === child.pid ? 'profile' : `profile-${pid}`;
    const from = path.join(raw, `selfprof-${pid}`);
    const to = path.join(dir, name);
    fs.renameSync(`${from}.trace.json.gz`, `${to}.trace.json.gz`);
    fs.renameSync(`${from}.pb.gz`, `${to}.pb.gz`);
    const trace = JSON.parse(require('node:zlib').gunzipSync(fs.readFileSync(`${to}.trace.json.gz`)));
    progress(`pid ${pid}: ${trace.samples.length} samples; building the report`);
    writeOut(`${to}.html`, htmlReport(trace, { title: `selfprof: ${command.join(' ')}`, sampleInterval: interval }));
    const rel = (f) => path.relative(process.cwd(), f) || f;
    progress(`wrote ${rel(`${to}.trace.json.gz`)}, ${rel(`${to}.pb.gz`)}, ${rel(`${to}.html`)}`);
    if (pid === child.pid) {
      process.stdout.write(`${summarize(trace, { by: values.by, top: 10, root: `file://${process.cwd()}/` })}\n`);
    }
  }
  fs.rmSync(raw, { recursive: true, force: true });
  // The recorder exits as the program did: a signal as a shell reports it, 128 + its number
  // (ending it after --duration is no failure).
  if (exit.signal) return timedOut && exit.signal === 'SIGINT' ? 0 : 128 + (require('node:os').constants.signals[exit.signal] ?? 0);
  return exit.code;
}

async function main(argv) {
  const [command, ...rest] = argv;
  if (command === 'convert') return convertCommand(rest);
  if (command === 'report') return reportCommand(rest);
  if (command === 'record') return recordCommand(rest);
  if (command === 'diff') return diffCommand(rest);
  if (command === '--help' || command === '-h' || command === 'help') {
    process.stdout.write(`${USAGE}\n`);
    return 0;
  }
  throw new UsageError(command ? `unknown command ${command}` : 'no command');
}

main(process.argv.slice(2)).then(
  (code) => {
    if (typeof code === 'number') process.exitCode = code;
  },
  (err) => {
    // One line, whatever went wrong: usage mistakes point at --help.
    process.stderr.write(`selfprof: ${err.message}${err instanceof UsageError ? ' (selfprof --help shows usage)' : ''}\n`);
    process.exitCode = 1;
  },
);
