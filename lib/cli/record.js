'use strict';
// `selfprof record -- COMMAND`: runs COMMAND with the record hook (./record-hook.js)
// preloaded into its Node processes, then joins what each thread wrote into each process's
// trace, pprof and report, the app's (the process that ran the most JS) as profile.*.

const fs = require('node:fs');
const path = require('node:path');
const { UsageError, progress, options, number, showProfilerFrames } = require('./args');
const { writeFiles, fsReason } = require('./files');
const { summarize } = require('../views/summary');

/** A thread's checkpoints as one trace (json-gzip); one that cannot be read is left out, saying so. */
function concatParts(files) {
  const { native } = require('../native');
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
  // Threads that could not write (the hook leaves an empty file naming the error's code).
  const failed = [];
  for (const f of fs.readdirSync(raw)) {
    const skipped = /^selfprof-(\d+)-(\d+)\.skipped$/.exec(f);
    if (skipped) entry(Number(skipped[1])).skipped++;
    const fail = /^selfprof-(\d+)-(\d+)\.failed-([A-Z0-9_]+)$/.exec(f);
    if (fail) failed.push({ pid: Number(fail[1]), tid: Number(fail[2]), code: fail[3] });
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
      meta = JSON.parse(String(read('.meta.json')));
    } catch {
      meta = { pid: t.pid, threadId: t.tid, name: t.tid === 0 ? 'Main Event Loop' : `Worker #${t.tid} Event Loop`, argv: [] };
    }
    if (t.whole) {
      entry(t.pid).threads.push({ meta, trace: read('.trace.json.gz'), pprof: read('.pb.gz'), heap: read('.heap.json') });
    } else {
      t.parts.sort((a, b) => a.n - b.n);
      const trace = concatParts(t.parts.map((p) => p.file));
      const failure = failed.find((x) => x.pid === t.pid && x.tid === t.tid)?.code;
      if (trace) entry(t.pid).threads.push({ meta, trace, cut: 0, failure });
    }
  }
  const processes = [...byPid.values()].filter((p) => p.threads.length);
  if (!processes.length && failed.length) {
    // Nothing to show, and why: a thread that could not write (a full disk).
    const who = ({ pid, tid }) => (tid === 0 ? `pid ${pid}` : `pid ${pid}'s worker ${tid}`);
    const more = failed.length > 1 ? ` (and ${failed.length - 1} other thread${failed.length > 2 ? 's' : ''})` : '';
    throw new Error(`no profile was recorded: ${who(failed[0])}${more} could not write its profile: ${fsReason({ code: failed[0].code })}`);
  }
  for (const p of processes) {
    p.threads.sort((a, b) => a.meta.threadId - b.meta.threadId);
    const main = p.threads[0].meta;
    p.command = (main.argv ?? []).map((a, i) => (i === 0 ? path.basename(a) : a)).join(' ');
    p.script = main.argv?.[1] ? path.basename(main.argv[1]).replace(/\.[cm]?[jt]sx?$/, '') : 'node';
    // Samples, and those in JS, over every thread.
    p.samples = 0;
    p.js = 0;
    for (const t of p.threads) {
      const trace = JSON.parse(zlib.gunzipSync(t.trace).toString());
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
  const { native } = require('../native');
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
    const frames = require('../profiler-frames').buildOptions(profilerFrames);
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
        ...require('../profiler-frames').buildOptions(profilerFrames),
      },
    );
    heap = { pprof: pb, trace: heapTrace };
  }
  return { trace, pprof, heap };
}

/** The event-loop blocks of a built trace (its gzipped JSON) for its report; none, and a
 * line saying why, if they cannot be found (the recording is written all the same). */
function blocksOf(traceBytes, profilerFrames) {
  try {
    return require('../views/blocks').eventLoopBlocks(traceBytes, { profilerFrames });
  } catch (err) {
    progress(`the report lists no event-loop blocks: ${err.message}`);
    return undefined;
  }
}

/** Writes each process's files (the app's as profile.*) and prints which is which, then the app's summary. */
function writeRecordings(processes, { dir, command, interval, by, sourceMaps, sources, exit, heapOn, profilerFrames }) {
  const zlib = require('node:zlib');
  // The traces built here, not read again.
  const { reportChunks } = require('../views/report');
  const rel = (f) => path.relative(process.cwd(), f) || f;
  const safe = (s) => s.replace(/[^\w.-]+/g, '_').slice(0, 60) || 'node';
  const lead = processes[0];
  if (processes.length > 1) progress(`${processes.length} Node.js processes; the one with the most samples in JS is the app's (profile.*):`);
  const built = [];
  for (const p of processes) {
    p.name = p === lead ? 'profile' : `profile-${p.pid}-${safe(p.script)}`;
    const threads = p.threads.length > 1 ? `, ${p.threads.length} threads` : '';
    const skipped = p.skipped ? `, ${p.skipped} workers past the cap of ${require('./record-hook').MAX_RECORDED_THREADS} threads not recorded` : '';
    progress(`  pid ${p.pid}: ${p.samples} samples (${p.js} in JS${threads}${skipped}) -> ${p.name}.*  ${p.command}`);
    for (const t of p.threads.filter((t) => t.cut !== undefined)) {
      const who = t.meta.threadId === 0 ? `pid ${p.pid}` : `pid ${p.pid}'s ${t.meta.name}`;
      const how = t.failure
        ? `could not write its profile (${fsReason({ code: t.failure })})`
        : `${p.direct && t.meta.threadId === 0 && exit.signal ? `was ended by ${exit.signal}` : 'ended'} before it wrote its profile`;
      const heap = t.meta.threadId === 0 && heapOn ? ' (no heap profile: it is taken at exit)' : '';
      progress(`${who} ${how}: kept what it recorded until its last checkpoint, ${(t.cut / 1000).toFixed(1)} s in${heap}`);
    }
    const out = buildProcess(p, sourceMaps, profilerFrames);
    const to = path.join(dir, p.name);
    const trace = JSON.parse(zlib.gunzipSync(out.trace).toString());
    const files = [
      [`${to}.trace.json.gz`, out.trace],
      [`${to}.pb.gz`, out.pprof],
      [`${to}.html`, reportChunks(trace, undefined, { title: `selfprof: ${p.command || command.join(' ')}`, sampleInterval: interval, sources, blocks: blocksOf(out.trace, profilerFrames) })],
    ];
    let heapTrace;
    if (out.heap) {
      heapTrace = JSON.parse(zlib.gunzipSync(out.heap.trace).toString());
      files.push([`${to}.heap.pb.gz`, out.heap.pprof], [`${to}.heap.html`, reportChunks(heapTrace, undefined, { title: `selfprof heap: ${p.command || command.join(' ')}`, sources })]);
    }
    built.push({ p, trace, heapTrace, files });
  }
  // Every process's files, or none (a full disk): never a truncated file under a result's
  // name, and an earlier recording's files left whole.
  writeFiles(
    built.flatMap((b) => b.files),
    '; nothing of this recording was written',
  );
  for (const b of built) progress(`wrote ${b.files.map(([f]) => rel(f)).join(', ')}`);
  const { p, trace, heapTrace } = built[0];
  const root = `file://${process.cwd()}/`;
  if (processes.length > 1) process.stdout.write(`pid ${p.pid}: ${p.command}\n`);
  process.stdout.write(`${summarize(trace, { by, top: 10, root })}\n`);
  if (heapTrace) process.stdout.write(`\n${summarize(heapTrace, { by, top: 10, root })}\n`);
}

/** `, N Node.js processes, M threads` recording into `raw` so far ('' before the first). */
function recordingNow(raw) {
  let metas;
  try {
    metas = fs.readdirSync(raw).map((f) => /^selfprof-(\d+)-\d+\.meta\.json$/.exec(f)).filter(Boolean);
  } catch {
    return '';
  }
  if (!metas.length) return '';
  const pids = new Set(metas.map((m) => m[1])).size;
  const plural = (n, what) => `${n} ${what}${n === 1 ? '' : 's'}`;
  return ` (${plural(pids, 'Node.js process')}${metas.length > pids ? `, ${plural(metas.length, 'thread')}` : ''})`;
}

/**
 * One NODE_OPTIONS argument as Node splits them: in double quotes, inside which a backslash
 * takes the next character as it is (a newline or space stays, `"` and `\` are escaped).
 */
const nodeOptionsQuote = (arg) => `"${arg.replace(/["\\]/g, '\\$&')}"`;

/** The command's options (node:util parseArgs); docs/cli.md has a row for each (__test__/docs.test.js). */
const OPTIONS = {
  out: { type: 'string', short: 'o' },
  interval: { type: 'string' },
  duration: { type: 'string' },
  by: { type: 'string' },
  heap: { type: 'boolean' },
  'heap-interval': { type: 'string' },
  'no-source-maps': { type: 'boolean' },
  'no-sources': { type: 'boolean' },
  'profiler-frames': { type: 'boolean' },
};

/** Runs COMMAND with the record hook preloaded into its Node processes, then builds the outputs. */
async function recordCommand(argv) {
  const split = argv.indexOf('--');
  if (split < 0 || split === argv.length - 1) throw new UsageError('record needs -- COMMAND, e.g. selfprof record -- node app.js');
  const { values, positionals } = options(argv.slice(0, split), OPTIONS);
  if (positionals.length) throw new UsageError(`unexpected ${positionals[0]} before --`);
  const profilerFrames = showProfilerFrames(values);
  const { MIN_HEAP_INTERVAL, MAX_HEAP_INTERVAL, DEFAULT_HEAP_INTERVAL } = require('../capture/heap');
  if (values['heap-interval'] !== undefined && !values.heap) throw new UsageError('--heap-interval goes with --heap');
  const heapInterval = values.heap
    ? (number(values['heap-interval'], '--heap-interval', { min: MIN_HEAP_INTERVAL, max: MAX_HEAP_INTERVAL, integer: true }) ?? DEFAULT_HEAP_INTERVAL)
    : undefined;
  const requested = number(values.interval, '--interval', { min: 0 }) ?? 1;
  // As the Profiler will use it: rounded up to the base interval, clamped to what V8 takes.
  const interval = require('../capture/group').group.intervalFor(requested) / 1000;
  // A timer ends the program: it cannot wait longer than 2³¹−1 ms.
  const duration = number(values.duration, '--duration', { min: 0, max: 2147483 });
  const dir = path.resolve(values.out ?? 'selfprof-out');
  const command = argv.slice(split + 1);
  try {
    require('../make-dir').makeDirSync(dir);
  } catch (err) {
    throw new Error(`cannot create ${dir}: ${err.code ?? err.message}`, { cause: err });
  }
  // Never overwrite without saying so: the earlier run's files are named.
  const earlier = fs.readdirSync(dir).filter((f) => /^profile(-\d+-.*)?\.(trace\.json\.gz|pb\.gz|html|heap\.pb\.gz|heap\.html)$/.test(f));
  if (earlier.length) progress(`${path.relative(process.cwd(), dir) || dir} holds an earlier recording (${earlier.slice(0, 3).join(', ')}${earlier.length > 3 ? `, ${earlier.length - 3} more` : ''}): this one replaces it`);
  const raw = recordingDir(dir);
  const hook = path.join(__dirname, 'record-hook.js');
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
    // On a terminal, a line that counts the seconds and the Node.js processes and threads
    // recording while the program runs (each thread's hook writes its meta.json at start).
    if (process.stderr.isTTY) {
      const tick = setInterval(() => process.stderr.write(`\rselfprof: recording… ${Math.round((Date.now() - started) / 1000)} s${recordingNow(raw)}\x1b[K`), 1000);
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
  let processes;
  try {
    processes = collectRecordings(raw, child.pid);
  } finally {
    // Read whole: its room is the outputs' (on a disk that filled up meanwhile).
    fs.rmSync(raw, { recursive: true, force: true });
  }
  if (!processes.length) {
    if (!exit.signal) throw new Error(`no profile was recorded: ${command[0]} started no Node.js process that ran to its exit`);
    const every = Number(process.env.SELFPROF_RECORD_CHECKPOINT_MS ?? require('./record-hook').CHECKPOINT_MS) / 1000;
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
  return status;
}

/** Bytes written and removed to see that the recording's disk has room before the program runs. */
const ROOM_PROBE_BYTES = 64 << 10;

/**
 * The directory the recorded threads write into, inside `dir`, once it is known to take a
 * write: a disk full at start (or read-only) is one error before the program runs.
 */
function recordingDir(dir) {
  let raw;
  try {
    raw = fs.mkdtempSync(path.join(dir, '.recording-'));
    fs.writeFileSync(path.join(raw, 'room'), Buffer.alloc(ROOM_PROBE_BYTES));
    fs.rmSync(path.join(raw, 'room'));
    return raw;
  } catch (err) {
    if (raw) fs.rmSync(raw, { recursive: true, force: true });
    throw new Error(`cannot record to ${dir}: ${fsReason(err)}`, { cause: err });
  }
}

module.exports = { recordCommand, OPTIONS };
