#!/usr/bin/env node
'use strict';
// The selfprof command line. Errors are one line on stderr and exit code 1; progress
// goes to stderr, results to stdout or files.

const fs = require('node:fs');
const path = require('node:path');
const { parseArgs } = require('node:util');

const USAGE = `usage:
  selfprof --version
  selfprof record [-o DIR] [--interval MS] [--duration S] [--by KEY] [--heap [--heap-interval BYTES]] [--no-source-maps] [--no-sources] [--profiler-frames] -- COMMAND [ARGS...]
      profiles the Node.js processes COMMAND starts, every thread; writes DIR/profile.trace.json.gz,
      profile.pb.gz and profile.html for the process that ran the most JS (the app, behind a
      wrapper such as npx, tsx or npm run), profile-<pid>-<script>.* for the others
      (default DIR: selfprof-out); --heap: the heap in use at exit too, profile.heap.pb.gz
      and profile.heap.html; frames of scripts with a source map are mapped to the original
      files (--no-source-maps: as V8 ran them); the trace and report carry the text of the
      hot lines of the scripts the program loaded (--no-sources: none)
  selfprof report FILE [--html OUT] [--by KEY] [--top N] [--source-maps] [--no-sources] [--profiler-frames]
      top functions and samples per label value of a profile file
  selfprof convert FILE --to cpuprofile|folded|pprof|trace [-o OUT] [--lines] [--source-maps] [--profiler-frames]
      (--lines: pprof samples at line-level locations, from the profile's line ticks)
      (--source-maps: map frames through the source maps found on this machine; a file is
      otherwise taken as it was recorded)
  selfprof diff A B [--html OUT] [--top N] [--ignore-lines] [--source-maps] [--no-sources] [--profiler-frames]
      what changed from profile A (the baseline) to B: each function's share of the busy
      samples (all but idle) in B minus in A, in percentage points
  selfprof diff FILE --by KEY VALUE_A VALUE_B [--html OUT] [--top N] [--ignore-lines] [--no-sources] [--profiler-frames]
      the same between two values of a label in one profile ("(none)": without the label)
  FILE, A, B: a selfprof trace (.json, .json.gz), a V8 CPU profile (.cpuprofile, from
      DevTools or node --cpu-prof) or a pprof profile (.pb, .pb.gz)
  --html OUT: the HTML report, with the hot lines' text that the profile carries (a trace
      recorded by selfprof; no local file is read); --no-sources: without it
  --profiler-frames: show selfprof's own frames (withLabels, its hooks, its preload) as
      recorded; by default they are hidden, selfprof's own work at a sample's leaf shown
      as one frame (selfprof) (default from SELFPROF_PROFILER_FRAMES=1)`;

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

/** What a stat says a file is, when it is not a regular file. */
function kindOf(stat) {
  if (stat.isDirectory()) return 'a directory';
  if (stat.isFIFO()) return 'a FIFO';
  if (stat.isCharacterDevice()) return 'a character device';
  if (stat.isBlockDevice()) return 'a block device';
  if (stat.isSocket()) return 'a socket';
  return 'not a file';
}

/**
 * A file's bytes, or one clear error naming the file. Only a regular file is read (a
 * device or FIFO may never end, or block), and never past the limit: a file's size can
 * be 0 (/proc) or grow while it is read.
 */
function readFile(file) {
  let fd;
  try {
    // Non-blocking: opening a FIFO without a writer would otherwise wait for one.
    fd = fs.openSync(file, fs.constants.O_RDONLY | fs.constants.O_NONBLOCK);
    const stat = fs.fstatSync(fd);
    if (!stat.isFile()) throw new Error(`it is ${kindOf(stat)}, not a regular file`);
    if (stat.size > MAX_FILE_BYTES) throw new Error(`is ${Math.round(stat.size / 2 ** 20)} MiB; input is limited to 256 MiB`);
    const chunks = [];
    let total = 0;
    for (;;) {
      const chunk = Buffer.allocUnsafe(Math.min(Math.max(stat.size + 1 - total, 64 << 10), MAX_FILE_BYTES + 1 - total));
      const n = fs.readSync(fd, chunk, 0, chunk.length, null);
      if (n === 0) break;
      chunks.push(n === chunk.length ? chunk : chunk.subarray(0, n));
      total += n;
      if (total > MAX_FILE_BYTES) throw new Error('is over 256 MiB; input is limited to 256 MiB');
    }
    if (total === 0) throw Object.assign(new Error('empty'), { empty: true });
    return chunks.length === 1 ? chunks[0] : Buffer.concat(chunks, total);
  } catch (err) {
    if (err.empty) throw new Error(`${file} is empty`);
    throw new Error(`cannot read ${file}: ${err.code ?? err.message}`);
  } finally {
    if (fd !== undefined) fs.closeSync(fd);
  }
}

/** `--profiler-frames`, whose default is SELFPROF_PROFILER_FRAMES. */
const showProfilerFrames = (values) => require('../lib/profiler-frames').shown(values['profiler-frames'] || undefined, process.env);

/** A trace or pprof file converted to `to`; a bad file is one error naming it. */
function convertFile(file, to, { lines = false, sourceMaps = false, profilerFrames = false } = {}) {
  const bytes = readFile(file);
  const { convert } = require('..');
  try {
    return convert(bytes, { to, lines, sourceMaps, profilerFrames });
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

/**
 * Makes an output file's directory before any work (`report --html out/r.html`): one line
 * naming it if it cannot be made, before a profile is read.
 */
function outDir(out) {
  if (out === undefined) return;
  const dir = path.dirname(path.resolve(out));
  try {
    fs.mkdirSync(dir, { recursive: true });
  } catch (err) {
    throw new Error(`cannot create ${dir} for ${out}: ${err.code ?? err.message}`);
  }
}

/** `a` and `b` as told apart: their base names, or their paths when those are the same. */
function sideNames(a, b) {
  if (path.basename(a) !== path.basename(b)) return [path.basename(a), path.basename(b)];
  const rel = (f) => path.relative(process.cwd(), path.resolve(f)) || f;
  return [rel(a), rel(b)];
}

function convertCommand(argv) {
  const { values, positionals } = options(argv, {
    to: { type: 'string' },
    out: { type: 'string', short: 'o' },
    lines: { type: 'boolean' },
    'source-maps': { type: 'boolean' },
    'profiler-frames': { type: 'boolean' },
  });
  if (positionals.length !== 1) throw new UsageError('convert takes one FILE');
  const { TARGETS } = require('../lib/views/convert');
  if (!values.to) throw new UsageError(`convert needs --to ${TARGETS.join('|')}`);
  if (!TARGETS.includes(values.to)) throw new UsageError(`--to must be one of ${TARGETS.join(', ')}, got ${JSON.stringify(values.to)}`);
  if (values.lines && values.to !== 'pprof') throw new UsageError('--lines goes with --to pprof');
  outDir(values.out);
  const out = convertFile(positionals[0], values.to, { lines: values.lines, sourceMaps: values['source-maps'], profilerFrames: showProfilerFrames(values) });
  if (values.out) writeOut(values.out, out);
  else if (values.to === 'pprof' && process.stdout.isTTY) throw new UsageError('pprof is binary: give -o OUT');
  else process.stdout.write(out);
}

/** The text summary of a trace: totals, top functions, samples per label value. */
function summarize(trace, { by, top = 15, root }) {
  if (trace.weight) return summarizeWeighted(trace, { by, top, root });
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
      lines.push('', `samples by ${by} (all samples, as the HTML report counts them):`);
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

/** The summary of a weighted trace (a heap profile): bytes per function and label value. */
function summarizeWeighted(trace, { by, top, root }) {
  const { topFunctions, samplesByLabel, formatTable, formatBytes } = require('../lib/views/summary');
  const w = trace.weight;
  const bytes = w.values.reduce((a, b) => a + b, 0);
  const objects = w.counts ? w.counts.reduce((a, b) => a + b, 0) : undefined;
  const what = w.unit === 'bytes' ? formatBytes(bytes) : `${bytes} ${w.unit}`;
  const lines = [
    `heap profile (${w.type}): ${what}${objects !== undefined ? ` in ${Math.round(objects)} objects` : ''} at ${trace.samples.length} allocating stacks (sampled: estimates, a snapshot of the heap in use)`,
  ];
  if (!trace.samples.length) return lines.join('\n');
  const shorten = (loc) => (root && loc.startsWith(root) ? loc.slice(root.length) : loc);
  const rows = topFunctions(trace, { limit: top }).map((r) => ({ ...r, location: shorten(r.location) }));
  lines.push('', formatTable(rows, { unit: w.unit }));
  const keys = [...new Set((trace.contexts ?? []).flatMap((c) => Object.keys(c.labels)))].sort();
  if (by) {
    if (!keys.includes(by)) {
      lines.push('', `no sample has the label ${JSON.stringify(by)}${keys.length ? ` (labels: ${keys.join(', ')})` : ''}`);
    } else {
      lines.push('', `${w.unit} by ${by}:`);
      const groups = samplesByLabel(trace, by);
      const width = Math.max(...groups.map((g) => g.value.length));
      for (const g of groups) {
        lines.push(`  ${g.value.padEnd(width)}  ${formatBytes(g.samples).padStart(10)}  ${g.percent.toFixed(1).padStart(5)}%  mostly in ${g.top}`);
      }
    }
  } else if (keys.length) {
    lines.push('', `labels: ${keys.join(', ')} (--by KEY for ${w.unit} per value)`);
  }
  return lines.join('\n');
}

function reportCommand(argv) {
  const { values, positionals } = options(argv, {
    html: { type: 'string' },
    by: { type: 'string' },
    top: { type: 'string' },
    'source-maps': { type: 'boolean' },
    'no-sources': { type: 'boolean' },
    'profiler-frames': { type: 'boolean' },
  });
  if (positionals.length !== 1) throw new UsageError('report takes one FILE');
  const top = number(values.top, '--top', { min: 1, integer: true }) ?? 15;
  outDir(values.html);
  const [file] = positionals;
  const profilerFrames = showProfilerFrames(values);
  const trace = JSON.parse(convertFile(file, 'trace', { sourceMaps: values['source-maps'], profilerFrames }));
  process.stdout.write(`${summarize(trace, { by: values.by, top, root: `file://${process.cwd()}/` })}\n`);
  if (values.html) {
    const { htmlReport } = require('..');
    writeOut(values.html, htmlReport(trace, { title: `selfprof: ${path.basename(file)}`, sources: !values['no-sources'], profilerFrames }));
    progress(`wrote ${values.html}`);
  }
}

/** diff compares shares of samples: a heap profile (bytes in use) is not that. */
function noHeap(file, trace) {
  if (trace.weight) throw new Error(`${file} is a heap profile (${trace.weight.type}); diff compares CPU profiles (selfprof report shows a heap profile's bytes)`);
}

/** `selfprof diff`: a text table of the biggest share changes, and the report's diff view. */
function diffCommand(argv) {
  const { values, positionals } = options(argv, {
    html: { type: 'string' },
    top: { type: 'string' },
    by: { type: 'string' },
    'ignore-lines': { type: 'boolean' },
    'source-maps': { type: 'boolean' },
    'no-sources': { type: 'boolean' },
    'profiler-frames': { type: 'boolean' },
  });
  const sources = !values['no-sources'];
  const profilerFrames = showProfilerFrames(values);
  const top = number(values.top, '--top', { min: 1, integer: true }) ?? 20;
  outDir(values.html);
  const ignoreLines = values['ignore-lines'] ?? false;
  const readTrace = (file) => JSON.parse(convertFile(file, 'trace', { sourceMaps: values['source-maps'], profilerFrames }));
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
    noHeap(file, trace);
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
        sources,
        profilerFrames,
      });
  } else {
    if (positionals.length !== 2) throw new UsageError('diff takes two files, A (the baseline) and B, or FILE --by KEY VALUE_A VALUE_B');
    const [fa, fb] = positionals;
    const ta = readTrace(fa);
    const tb = readTrace(fb);
    noHeap(fa, ta);
    noHeap(fb, tb);
    result = diffProfiles(ta, tb, { ignoreLines });
    sides = [fa, fb];
    // Two files of one name (run1/profile.json, run2/profile.json) named by their paths.
    const [na, nb] = sideNames(fa, fb);
    report = () =>
      require('..').htmlReport(tb, {
        title: `selfprof diff: A ${na} → B ${nb}`,
        baseline: ta,
        baselineName: na,
        name: nb,
        sources,
        profilerFrames,
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

/** A thread's checkpoints as one trace (json-gzip); one that cannot be read is left out, saying so. */
function concatParts(files) {
  const { native } = require('../lib/native');
  const parts = files.map((f) => fs.readFileSync(f));
  try {
    return native.concatTraces(parts);
  } catch {
    const readable = parts.filter((p, i) => {
      try {
        native.concatTraces([p]);
        return true;
      } catch (err) {
        progress(`a checkpoint could not be read, left out: ${path.basename(files[i])}: ${err.message}`);
        return false;
      }
    });
    return readable.length ? native.concatTraces(readable) : null;
  }
}

/**
 * The recorded processes, each `{ pid, threads: [{ meta, trace, pprof?, heap?, cut? }],
 * skipped, js, samples, command }` (threads: the main one first), the one that did the most
 * work in JS first: with a wrapper (npx, tsx, npm run) that is the app, not the wrapper. A
 * thread that ended without writing its trace (SIGKILL, a crash) is its checkpoints joined,
 * with `cut`: the ms it recorded until its last checkpoint.
 */
function collectRecordings(raw, childPid) {
  const zlib = require('node:zlib');
  const byPid = new Map();
  const entry = (pid) => {
    if (!byPid.has(pid)) byPid.set(pid, { pid, threads: [], skipped: 0 });
    return byPid.get(pid);
  };
  // Per thread ("pid-threadId"): whether it wrote its trace, and its checkpoints' files.
  const found = new Map();
  const thread = (pid, tid) => {
    const key = `${pid}-${tid}`;
    if (!found.has(key)) found.set(key, { pid: Number(pid), tid: Number(tid), whole: false, parts: [] });
    return found.get(key);
  };
  for (const f of fs.readdirSync(raw)) {
    const skipped = /^selfprof-(\d+)-(\d+)\.skipped$/.exec(f);
    if (skipped) entry(Number(skipped[1])).skipped++;
    const m = /^selfprof-(\d+)-(\d+)\.trace\.json\.gz$/.exec(f);
    if (m) thread(m[1], m[2]).whole = true;
    const part = /^selfprof-(\d+)-(\d+)\.part-(\d+)\.trace\.json\.gz$/.exec(f);
    if (part) thread(part[1], part[2]).parts.push({ n: Number(part[3]), file: path.join(raw, f) });
  }
  for (const t of found.values()) {
    if (!t.whole && !t.parts.length) continue;
    const base = path.join(raw, `selfprof-${t.pid}-${t.tid}`);
    const read = (ext) => (fs.existsSync(`${base}${ext}`) ? fs.readFileSync(`${base}${ext}`) : undefined);
    let meta;
    try {
      meta = JSON.parse(read('.meta.json'));
    } catch {
      meta = { pid: t.pid, threadId: t.tid, name: t.tid === 0 ? 'Main Event Loop' : `Worker #${t.tid} Event Loop`, argv: [] };
    }
    if (t.whole) {
      entry(t.pid).threads.push({ meta, trace: read('.trace.json.gz'), pprof: read('.pb.gz'), heap: read('.heap.json') });
    } else {
      t.parts.sort((a, b) => a.n - b.n);
      const trace = concatParts(t.parts.map((p) => p.file));
      if (trace) entry(t.pid).threads.push({ meta, trace, cut: 0 });
    }
  }
  const processes = [...byPid.values()].filter((p) => p.threads.length);
  for (const p of processes) {
    p.threads.sort((a, b) => a.meta.threadId - b.meta.threadId);
    const main = p.threads[0].meta;
    p.command = (main.argv ?? []).map((a, i) => (i === 0 ? path.basename(a) : a)).join(' ');
    p.script = main.argv?.[1] ? path.basename(main.argv[1]).replace(/\.[cm]?[jt]sx?$/, '') : 'node';
    // Samples, and those in JS, over every thread.
    p.samples = 0;
    p.js = 0;
    for (const t of p.threads) {
      const trace = JSON.parse(zlib.gunzipSync(t.trace));
      if (t.cut !== undefined) t.cut = trace.samples.at(-1)?.timestamp ?? 0;
      t.samples = trace.samples.length;
      t.js = trace.samples.filter((s) => s.stackId !== undefined).length;
      p.samples += t.samples;
      p.js += t.js;
    }
    p.direct = p.pid === childPid;
  }
  // The app: the most JS samples; ties go to the process the recorder started.
  return processes.sort((a, b) => b.js - a.js || Number(b.direct) - Number(a.direct) || a.pid - b.pid);
}

/** A process's trace (its threads merged, each sample labeled with its thread), pprof and heap pprof. */
function buildProcess(p, sourceMaps, profilerFrames) {
  const { native } = require('../lib/native');
  const main = p.threads[0].meta;
  const inputs = p.threads.map((t) => ({
    trace: t.trace,
    name: t.meta.name,
    id: String(t.meta.threadId),
    osId: t.meta.osThreadId === undefined ? undefined : String(t.meta.osThreadId),
    offsetMs: (t.meta.timeOrigin ?? main.timeOrigin ?? 0) - (main.timeOrigin ?? 0),
  }));
  const several = p.threads.length > 1;
  const trace = several ? native.mergeTraces(inputs, 'json-gzip') : p.threads[0].trace;
  let pprof = p.threads[0].pprof;
  if (several) pprof = native.mergeTraces(inputs, 'pprof');
  // A thread's checkpoints (it wrote no pprof): the pprof of their trace.
  else if (p.threads[0].cut !== undefined) {
    const frames = require('../lib/profiler-frames').buildOptions(profilerFrames);
    pprof = native.convertProfile(trace, 'pprof', false, false, frames.profilerFrames, frames.profilerRoots);
  }
  else if (!pprof) pprof = native.mergeTraces(inputs, 'pprof');
  let heap;
  const heaps = p.threads.filter((t) => t.heap);
  if (heaps.length) {
    const chunks = heaps.map((t) => {
      const h = JSON.parse(t.heap);
      const input = inputs[p.threads.indexOf(t)];
      const maps = Array.isArray(h.scriptMaps) ? h.scriptMaps.filter((m) => typeof m?.url === 'string' && typeof m?.map === 'string') : [];
      return { profile: h.profile, atMs: h.atMs, ...(several && { name: input.name, id: input.id, osId: input.osId, offsetMs: input.offsetMs }), interval: h.interval, maps };
    });
    const [pb, heapTrace] = native.buildHeapProfileSync(
      chunks.map(({ interval, maps, ...c }) => c),
      {
        startUnixMs: main.timeOrigin ?? Date.now(),
        durationMs: Math.max(...chunks.map((c) => c.atMs)),
        intervalBytes: chunks[0].interval,
        trace: true,
        // As the CPU profile was mapped in the app (--no-source-maps: not at all).
        sourceMaps: sourceMaps !== false,
        scriptMaps: chunks.flatMap((c) => c.maps.map((m) => ({ url: m.url, map: m.map }))),
        // The recorded program loaded selfprof from here (the hook is this package's).
        ...require('../lib/profiler-frames').buildOptions(profilerFrames),
      },
    );
    heap = { pprof: pb, trace: heapTrace };
  }
  return { trace, pprof, heap };
}

/** Writes each process's files (the app's as profile.*) and prints which is which, then the app's summary. */
function writeRecordings(processes, { dir, command, interval, by, sourceMaps, sources, exit, heapOn, profilerFrames }) {
  const zlib = require('node:zlib');
  const { htmlReport } = require('..');
  const rel = (f) => path.relative(process.cwd(), f) || f;
  const safe = (s) => s.replace(/[^\w.-]+/g, '_').slice(0, 60) || 'node';
  const lead = processes[0];
  if (processes.length > 1) progress(`${processes.length} Node.js processes; the one with the most samples in JS is the app's (profile.*):`);
  const built = [];
  for (const p of processes) {
    p.name = p === lead ? 'profile' : `profile-${p.pid}-${safe(p.script)}`;
    const threads = p.threads.length > 1 ? `, ${p.threads.length} threads` : '';
    const skipped = p.skipped ? `, ${p.skipped} workers past the cap of ${require('../lib/cli/record-hook').MAX_RECORDED_THREADS} threads not recorded` : '';
    progress(`  pid ${p.pid}: ${p.samples} samples (${p.js} in JS${threads}${skipped}) -> ${p.name}.*  ${p.command}`);
    for (const t of p.threads.filter((t) => t.cut !== undefined)) {
      const who = t.meta.threadId === 0 ? `pid ${p.pid}` : `pid ${p.pid}'s ${t.meta.name}`;
      const how = p.direct && t.meta.threadId === 0 && exit.signal ? `was ended by ${exit.signal}` : 'ended';
      const heap = t.meta.threadId === 0 && heapOn ? ' (no heap profile: it is taken at exit)' : '';
      progress(`${who} ${how} before it wrote its profile: kept what it recorded until its last checkpoint, ${(t.cut / 1000).toFixed(1)} s in${heap}`);
    }
    const out = buildProcess(p, sourceMaps, profilerFrames);
    const to = path.join(dir, p.name);
    writeOut(`${to}.trace.json.gz`, out.trace);
    writeOut(`${to}.pb.gz`, out.pprof);
    const trace = JSON.parse(zlib.gunzipSync(out.trace));
    writeOut(`${to}.html`, htmlReport(trace, { title: `selfprof: ${p.command || command.join(' ')}`, sampleInterval: interval, sources, profilerFrames }));
    const files = [`${to}.trace.json.gz`, `${to}.pb.gz`, `${to}.html`];
    let heapTrace;
    if (out.heap) {
      writeOut(`${to}.heap.pb.gz`, out.heap.pprof);
      heapTrace = JSON.parse(zlib.gunzipSync(out.heap.trace));
      writeOut(`${to}.heap.html`, htmlReport(heapTrace, { title: `selfprof heap: ${p.command || command.join(' ')}`, sources, profilerFrames }));
      files.push(`${to}.heap.pb.gz`, `${to}.heap.html`);
    }
    progress(`wrote ${files.map(rel).join(', ')}`);
    built.push({ p, trace, heapTrace });
  }
  const { p, trace, heapTrace } = built[0];
  const root = `file://${process.cwd()}/`;
  if (processes.length > 1) process.stdout.write(`pid ${p.pid}: ${p.command}\n`);
  process.stdout.write(`${summarize(trace, { by, top: 10, root })}\n`);
  if (heapTrace) process.stdout.write(`\n${summarize(heapTrace, { by, top: 10, root })}\n`);
}

/**
 * One NODE_OPTIONS argument as Node splits them: in double quotes, inside which a backslash
 * takes the next character as it is (a newline or space stays, `"` and `\` are escaped).
 */
const nodeOptionsQuote = (arg) => `"${arg.replace(/["\\]/g, '\\$&')}"`;

/** Runs COMMAND with the record hook preloaded into its Node processes, then builds the outputs. */
async function recordCommand(argv) {
  const split = argv.indexOf('--');
  if (split < 0 || split === argv.length - 1) throw new UsageError('record needs -- COMMAND, e.g. selfprof record -- node app.js');
  const { values, positionals } = options(argv.slice(0, split), {
    out: { type: 'string', short: 'o' },
    interval: { type: 'string' },
    duration: { type: 'string' },
    by: { type: 'string' },
    heap: { type: 'boolean' },
    'heap-interval': { type: 'string' },
    'no-source-maps': { type: 'boolean' },
    'no-sources': { type: 'boolean' },
    'profiler-frames': { type: 'boolean' },
  });
  if (positionals.length) throw new UsageError(`unexpected ${positionals[0]} before --`);
  const profilerFrames = showProfilerFrames(values);
  const { MIN_HEAP_INTERVAL, MAX_HEAP_INTERVAL, DEFAULT_HEAP_INTERVAL } = require('../lib/capture/heap');
  if (values['heap-interval'] !== undefined && !values.heap) throw new UsageError('--heap-interval goes with --heap');
  const heapInterval = values.heap
    ? (number(values['heap-interval'], '--heap-interval', { min: MIN_HEAP_INTERVAL, max: MAX_HEAP_INTERVAL, integer: true }) ?? DEFAULT_HEAP_INTERVAL)
    : undefined;
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
  // Never overwrite without saying so: the earlier run's files are named.
  const earlier = fs.readdirSync(dir).filter((f) => /^profile(-\d+-.*)?\.(trace\.json\.gz|pb\.gz|html|heap\.pb\.gz|heap\.html)$/.test(f));
  if (earlier.length) progress(`${path.relative(process.cwd(), dir) || dir} holds an earlier recording (${earlier.slice(0, 3).join(', ')}${earlier.length > 3 ? `, ${earlier.length - 3} more` : ''}): this one replaces it`);
  const raw = fs.mkdtempSync(path.join(dir, '.recording-'));
  const hook = path.join(__dirname, '..', 'lib', 'cli', 'record-hook.js');
  const env = {
    ...process.env,
    NODE_OPTIONS: `${process.env.NODE_OPTIONS ?? ''} --require=${nodeOptionsQuote(hook)}`.trim(),
    SELFPROF_RECORD_DIR: raw,
    SELFPROF_RECORD_INTERVAL_MS: String(interval),
    ...(heapInterval !== undefined && { SELFPROF_RECORD_HEAP: String(heapInterval) }),
    ...(values['no-source-maps'] ? { SELFPROF_SOURCE_MAPS: '0' } : {}),
    ...(values['no-sources'] ? { SELFPROF_RECORD_SOURCES: '0' } : {}),
    // Every build in the program (its traces, checkpoints, pprof) as the views here.
    SELFPROF_PROFILER_FRAMES: profilerFrames ? '1' : '0',
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

  // The recorder exits as the program did: a signal as a shell reports it, 128 + its number
  // (ending it after --duration is no failure).
  const status = !exit.signal ? exit.code : timedOut && exit.signal === 'SIGINT' ? 0 : 128 + (require('node:os').constants.signals[exit.signal] ?? 0);
  const processes = collectRecordings(raw, child.pid);
  if (!processes.length) {
    fs.rmSync(raw, { recursive: true, force: true });
    if (!exit.signal) throw new Error(`no profile was recorded: ${command[0]} started no Node.js process that ran to its exit`);
    const every = Number(process.env.SELFPROF_RECORD_CHECKPOINT_MS ?? require('../lib/cli/record-hook').CHECKPOINT_MS) / 1000;
    progress(`no profile was recorded: ${command[0]} was ended by ${exit.signal} before its first checkpoint (one every ${every} s) or its exit`);
    return status;
  }
  writeRecordings(processes, {
    dir,
    command,
    interval,
    by: values.by,
    sourceMaps: !values['no-source-maps'],
    sources: !values['no-sources'],
    exit,
    heapOn: heapInterval !== undefined,
    profilerFrames,
  });
  fs.rmSync(raw, { recursive: true, force: true });
  return status;
}

// A reader that went away (`selfprof convert ... | head`) ends the output quietly.
process.stdout.on('error', (err) => {
  if (err.code !== 'EPIPE') throw err;
  process.exit(process.exitCode ?? 0);
});

async function main(argv) {
  const [command, ...rest] = argv;
  if (command === '--version' || command === '-v' || command === 'version') {
    process.stdout.write(`selfprof ${require('../package.json').version}\n`);
    return 0;
  }
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
