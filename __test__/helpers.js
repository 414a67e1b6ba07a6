'use strict';
// Shared by the test files: workloads that V8 can sample, and a structural check of
// a trace against the spec's processing model.

const assert = require('node:assert/strict');
const fs = require('node:fs');
const { performance } = require('node:perf_hooks');

/**
 * Keeps the CPU busy in the caller's frame for `ms` milliseconds. One flat loop: V8's
 * Maglev (Node 22+) deoptimizes on every exit from an on-stack-replaced inner loop, and
 * records a sample (without a signal) for each deoptimization.
 */
function spin(ms) {
  const end = performance.now() + ms;
  let x = 0;
  let i = 0;
  while ((i & 1023) !== 0 || performance.now() < end) {
    x += Math.sqrt(i++ + x);
  }
  return x;
}

/** Busy work for `ms` milliseconds that allocates as it goes: collections run while it is
 * being sampled. */
function allocatingWork(ms) {
  const end = performance.now() + ms;
  let kept = [];
  while (performance.now() < end) {
    kept.push({ at: performance.now(), pad: new Array(16).fill(kept.length) });
    if (kept.length > 4096) kept = [];
  }
  return kept.length;
}

/**
 * Calls `fn()` until `n` more SIGPROF signals reached selfprof's handler (or `timeoutMs` went
 * by): work a running profiler samples about `n` times however loaded the machine is, where
 * a fixed time would give it fewer samples the busier the machine.
 */
function untilSignals(n, fn, timeoutMs = 30_000) {
  // The sampler's ticks: the handler's signals, or its intervals where no signal comes.
  const { group } = require('../lib/capture/group');
  const until = group.ticks() + n;
  const deadline = performance.now() + timeoutMs;
  while (group.ticks() < until && performance.now() < deadline) fn();
}

/**
 * Calls `fn(...args)` (a busy `fn(ms)`), then `fn(1)` until the handler has had `signals`
 * signals since the first call began (or `timeoutMs` more went by): a call that gets samples
 * however loaded the machine is. Returns what the first call returned.
 */
function sampledCall(signals, timeoutMs, fn, ...args) {
  const { group } = require('../lib/capture/group');
  const before = group.ticks();
  const out = fn(...args);
  if (signals > 0) untilSignals(signals - (group.ticks() - before), () => fn(1), timeoutMs);
  return out;
}

/**
 * Runs `record()` (a fixture's recordings: `{ trace, calls }` or `{ traces, calls }`) again,
 * `attempts` times at most, until each of `works` has `min` samples in the traces of all
 * runs so far; returns them all, `{ traces, calls }`. On Windows the intervals counted are
 * time, and V8's sampler, starved, takes fewer samples than intervals passed (11 of 20 once
 * under wine; 17 of 20 in each of five runs of one fixture under CI's load, when only the
 * last run was kept).
 */
async function recordUntilSampled(record, works, { min = 20, attempts = 5 } = {}) {
  const traces = [];
  const calls = [];
  for (let attempt = 0; attempt < attempts; attempt++) {
    const run = await record();
    traces.push(...(run.traces ?? [run.trace]));
    calls.push(...run.calls);
    const samples = traces.flatMap((t) => traceWork(t, works));
    if (works.every((w) => samples.filter((s) => s.work === w).length >= min)) break;
  }
  return { traces, calls };
}

/**
 * Waits `ms` with the event loop idle, then on (in short timers) until the handler has had
 * `signals` signals since the wait began (or `timeoutMs` more went by): idle time a running
 * profiler samples however loaded the machine is, where a fixed wait gives it fewer samples
 * the busier the machine.
 */
async function sampledIdle(signals, timeoutMs, ms) {
  const { group } = require('../lib/capture/group');
  const until = group.ticks() + signals;
  await new Promise((r) => setTimeout(r, ms));
  const deadline = performance.now() + timeoutMs;
  while (group.ticks() < until && performance.now() < deadline) await new Promise((r) => setTimeout(r, Math.min(ms, 5)));
}

/**
 * A test's `finally`: stops each of `running` (Profilers, service sessions) that still
 * runs, so that a failed assertion is the failure reported, and leaves nothing recording
 * into the next tests (a 0.1 ms profiler left running would also make their
 * `setBaseInterval` throw). Their own errors here are not the test's.
 */
async function stopAll(...running) {
  for (const r of running) {
    if (r && !r.stopped) await Promise.resolve(r.stop()).catch(() => {});
  }
}

/**
 * How many checkpoints `selfprof record` has written of thread `threadId` of process `pid`
 * into its recording directory `dir` (lib/cli/record-hook.js names them).
 */
function recordCheckpoints(dir, pid, threadId) {
  const prefix = `selfprof-${pid}-${threadId}.part-`;
  return fs.readdirSync(dir).filter((f) => f.startsWith(prefix) && f.endsWith('.trace.json.gz')).length;
}

/**
 * Where V8 places a function's definition, 1-based: the line of its name and the
 * column of the `(` that opens its parameter list, read from the source text.
 */
function definitionOf(file, name) {
  const src = fs.readFileSync(file, 'utf8');
  const at = src.indexOf(`function ${name}(`);
  assert.ok(at >= 0, `function ${name} is defined in ${file}`);
  const paren = at + `function ${name}`.length;
  const before = src.slice(0, paren);
  const line = before.split('\n').length;
  const column = paren - before.lastIndexOf('\n');
  return { line, column };
}

/** The 1-based line of the first line of `text` that includes `needle`, which must be there. */
function lineIn(text, needle) {
  const at = text.split('\n').findIndex((l) => l.includes(needle));
  assert.ok(at >= 0, `${JSON.stringify(needle)} is in the text`);
  return at + 1;
}

/** The same of `file`'s text. */
function lineOf(file, needle) {
  return lineIn(fs.readFileSync(file, 'utf8'), needle);
}

/** Asserts the invariants every ProfilerTrace must hold, and returns it. */
function assertValidTrace(trace) {
  assert.deepEqual(Object.keys(trace).slice(0, 4), ['resources', 'frames', 'stacks', 'samples']);
  const { resources, frames, stacks, samples } = trace;
  const inRange = (id, list, what) =>
    assert.ok(Number.isInteger(id) && id >= 0 && id < list.length, `${what} ${id} is in range (${list.length})`);

  assert.equal(new Set(resources).size, resources.length, 'resources are deduplicated');
  resources.forEach((r) => assert.equal(typeof r, 'string'));

  const frameKeys = new Set();
  for (const f of frames) {
    assert.equal(typeof f.name, 'string');
    if (f.resourceId !== undefined) inRange(f.resourceId, resources, 'resourceId');
    for (const k of ['line', 'column']) {
      if (f[k] !== undefined) assert.ok(Number.isInteger(f[k]) && f[k] >= 1, `${k} is 1-based`);
    }
    frameKeys.add(JSON.stringify([f.name, f.resourceId, f.line, f.column]));
  }
  assert.equal(frameKeys.size, frames.length, 'frames are deduplicated');

  const stackKeys = new Set();
  stacks.forEach((s, i) => {
    inRange(s.frameId, frames, 'frameId');
    if (s.parentId !== undefined) {
      inRange(s.parentId, stacks, 'parentId');
      // Parents come before children, so the parent links cannot form a cycle: a tree.
      assert.ok(s.parentId < i, `stack ${i}'s parent ${s.parentId} comes before it`);
    }
    stackKeys.add(`${s.frameId}/${s.parentId}`);
  });
  assert.equal(stackKeys.size, stacks.length, 'stacks are deduplicated');

  let last = -Infinity;
  for (const s of samples) {
    assert.equal(typeof s.timestamp, 'number');
    assert.ok(s.timestamp >= last, 'timestamps never go backwards');
    last = s.timestamp;
    if (s.stackId !== undefined) inRange(s.stackId, stacks, 'stackId');
    if (s.marker !== undefined) assert.ok(['gc', 'idle', 'other'].includes(s.marker), `marker ${s.marker}`);
  }
  return trace;
}

/** The frames of a sample's stack, innermost first. */
function stackFrames(trace, sample) {
  const out = [];
  for (let id = sample.stackId; id !== undefined; id = trace.stacks[id].parentId) {
    out.push(trace.frames[trace.stacks[id].frameId]);
  }
  return out;
}

/** Samples whose stack contains a frame named `name`. */
function samplesIn(trace, name) {
  return trace.samples.filter((s) => stackFrames(trace, s).some((f) => f.name === name));
}

/**
 * The share of the samples in a request's work that must carry that request's labels,
 * unless a test sets its own (and says why). The rest may be unlabeled (V8 takes a few
 * samples without a signal, whose context is uncertain), never wrongly labeled.
 */
const LABEL_FLOOR = 0.99;

/**
 * A test's own record of its requests: the ground truth labels are judged against. Each
 * call of a named work function is recorded with the labels its request set (all of them:
 * an endpoint and a span id together) and when it ran, on performance.now()'s line. Work
 * functions run synchronously, so on one thread their calls never overlap.
 */
class WorkLog {
  calls = [];
  #signals;
  #timeoutMs;

  /**
   * With `signals`, each call of a busy `fn(ms)` goes on (`fn(1)`, up to `timeoutMs` more)
   * until the sampler has signalled that many times in it: every call gets samples however
   * loaded the machine is.
   */
  constructor({ signals = 0, timeoutMs = 2000 } = {}) {
    this.#signals = signals;
    this.#timeoutMs = timeoutMs;
  }

  /** Runs `fn(...args)` as work done under `labels`, and records it. */
  run(labels, fn, ...args) {
    const t0 = performance.now();
    const out = sampledCall(this.#signals, this.#timeoutMs, fn, ...args);
    this.calls.push({ labels, work: fn.name, t0, t1: performance.now() });
    return out;
  }
}

/** The call of `calls` (sorted, not overlapping) whose work ran at time `t`, if any. */
function callAt(calls, t) {
  let lo = 0;
  let hi = calls.length - 1;
  while (lo <= hi) {
    const mid = (lo + hi) >> 1;
    if (calls[mid].t1 < t) lo = mid + 1;
    else if (calls[mid].t0 > t) hi = mid - 1;
    else return calls[mid];
  }
  return undefined;
}

/**
 * V8's own CPU profile (an inspector session of its own, sampling every 1 ms) of what
 * `work()` (may be async) does. With `sampledIn` (a function's name), the work is profiled
 * again, a new profile each time, until one has a sample in that function (or `timeoutMs`
 * went by): on a starved machine V8's sampler may not run while the work does.
 */
async function v8CpuProfile(work, { sampledIn, timeoutMs = 30_000 } = {}) {
  const inspector = require('node:inspector');
  const { post } = require('../lib/capture/inspector-post');
  const deadline = performance.now() + timeoutMs;
  for (;;) {
    const session = new inspector.Session();
    session.connect();
    let profile;
    try {
      post(session, 'Profiler.enable');
      post(session, 'Profiler.setSamplingInterval', { interval: 1000 });
      post(session, 'Profiler.start');
      await work();
      profile = post(session, 'Profiler.stop').profile;
    } finally {
      session.disconnect();
    }
    if (sampledIn === undefined || performance.now() > deadline) return profile;
    const ids = new Set(profile.nodes.filter((n) => n.callFrame.functionName === sampledIn).map((n) => n.id));
    if (profile.samples.some((id) => ids.has(id))) return profile;
  }
}

/**
 * A loopback HTTP receiver for the exporters' uploads: records every request as
 * `{ method, url, headers, body }` in `requests`; `respond(request, n)` (n: requests so
 * far) picks `{ status, headers, delayMs }`, by default 200 at once.
 */
async function receiver(respond = () => ({ status: 200 })) {
  const http = require('node:http');
  const { setTimeout: sleep } = require('node:timers/promises');
  const requests = [];
  const server = http.createServer((req, res) => {
    const chunks = [];
    req.on('data', (c) => chunks.push(c));
    req.on('end', async () => {
      const record = { method: req.method, url: req.url, headers: req.headers, body: Buffer.concat(chunks) };
      requests.push(record);
      const { status = 200, headers, delayMs = 0 } = respond(record, requests.length) ?? {};
      if (delayMs) await sleep(delayMs);
      res.writeHead(status, headers).end();
    });
  });
  await new Promise((r) => server.listen(0, '127.0.0.1', r));
  const url = `http://127.0.0.1:${server.address().port}`;
  return { url, requests, close: () => new Promise((r) => server.close(r)) };
}

/** The work function of `works` innermost in `frames` (names, leaf first), if any. */
const workIn = (names, works) => names.find((n) => works.includes(n));

/**
 * The samples of a trace object taken in the work functions `works`, as
 * `assertRequestLabels` takes them: `{ t, work, labels }` (labels undefined if none).
 */
function traceWork(trace, works) {
  const out = [];
  for (const s of trace.samples) {
    if (s.stackId === undefined) continue;
    const work = workIn(stackFrames(trace, s).map((f) => f.name), works);
    if (work) out.push({ t: s.timestamp, work, labels: s.contextId === undefined ? undefined : trace.contexts[s.contextId].labels });
  }
  return withUnvouched(out, trace);
}

/** `samples` of `trace`, saying how many of the trace's samples no signal vouched for
 * (`assertRequestLabels` excuses up to that many unlabeled ones by default). */
function withUnvouched(samples, trace) {
  samples.unvouched = unvouchedSamples(trace);
  return samples;
}

/** The samples `samplesOf(trace)` gives (`traceWork`'s, `callSamples'`) of each of
 * `traces`, in one list still saying how many of all their samples no signal vouched for. */
function samplesAcross(traces, samplesOf) {
  const samples = [];
  let unvouched = 0;
  for (const trace of traces) {
    const of = samplesOf(trace);
    samples.push(...of);
    unvouched += of.unvouched ?? 0;
  }
  samples.unvouched = unvouched;
  return samples;
}

/** Those of `samples` (`traceWork`'s, `callSamples'`) for which `keep` holds, still saying
 * how many of their trace's samples no signal vouched for: a plain `filter` drops that, and
 * `assertRequestLabels` then excuses none (the long request's 2 unlabeled samples of 86,
 * with 4 unvouched in its trace: context-frame.test on arm64 under qemu, 1 run in 8). */
function samplesWhere(samples, keep) {
  const kept = samples.filter(keep);
  kept.unvouched = samples.unvouched;
  return kept;
}

/**
 * The samples of a trace object taken inside the calls of `work` (from a `WorkLog`'s
 * `calls`), running JS or collecting garbage for the call, as `traceWork` gives samples.
 * By the log's record of when each call ran, not by the stack: code V8 optimized while no
 * profiler recorded keeps no positions of the functions it inlined, so a sample there
 * shows the caller (`sampledCall`, `untilSignals`' lambda) in place of the work function.
 */
function callSamples(trace, calls, work) {
  const samples = inCallsOf(trace, calls, work)
    .filter((s) => s.stackId !== undefined || s.marker === 'gc')
    .map((s) => ({ t: s.timestamp, work, labels: s.contextId === undefined ? undefined : trace.contexts[s.contextId].labels }));
  return withUnvouched(samples, trace);
}

/** Every sample of a trace object taken inside a call of `work` (from a `WorkLog`'s `calls`). */
function inCallsOf(trace, calls, work) {
  const sorted = [...calls].sort((a, b) => a.t0 - b.t0);
  return trace.samples.filter((s) => callAt(sorted, s.timestamp)?.work === work);
}

/**
 * The samples of a decoded pprof (`decodePprof`) taken in `works`, placed on
 * performance.now()'s line of the process that recorded it (its `timeOrigin`): by the
 * sample's `end_timestamp_ns` where the dialect has one (Datadog), else by its wall time,
 * which is the time since the previous sample (docs/api.md), from the profile's start.
 * `labels(s)`: the sample's labels to judge (default: its string labels).
 */
function pprofWork(pprof, works, { timeOrigin = performance.timeOrigin, labels = (s) => pprof.labels(s) } = {}) {
  const out = [];
  const wall = pprof.p.sampleType.findIndex((v) => pprof.str(v.type) === 'wall');
  assert.ok(wall >= 0, 'a CPU profile (with wall time)');
  let unixNs = BigInt(pprof.p.timeNanos);
  for (const s of pprof.p.sample) {
    unixNs += BigInt(s.value[wall]);
    const work = workIn(pprof.names(s), works);
    if (!work) continue;
    const end = pprof.numLabels(s).end_timestamp_ns;
    const at = end === undefined ? unixNs : BigInt(end);
    const l = labels(s);
    out.push({ t: Number(at / 1000n) / 1000 - timeOrigin, work, labels: l && Object.keys(l).length > 0 ? l : undefined });
  }
  return out;
}

/**
 * The labeling contract, judged against the test's own record of its requests (`calls`
 * from a `WorkLog`, or `{ labels, work, t0, t1 }` from a child): every labeled sample in a
 * work function carries the labels of the call that ran then, every key that request set
 * (`expected(call)` maps them to how the profile names them; `exact`: and no other key),
 * and of each work function's samples at least `min` were taken and at least `floor` are
 * labeled so (rounded down: of fewer than 100 samples, one may be V8's without a signal).
 * `unvouched`: how many of the trace's samples no signal vouched for (`unvouchedSamples`;
 * by default what `traceWork` or `callSamples` found in theirs):
 * that many unlabeled samples are excused on top of the floor, as V8 takes such samples at
 * fresh code's deoptimizations and their labels are not certain (docs/labels.md). Returns
 * a summary per work function (`work right/all`).
 */
function assertRequestLabels(samples, calls, { what = 'labels', floor = LABEL_FLOOR, min = 20, expected = (c) => c.labels, exact = false, unvouched = samples.unvouched ?? 0 } = {}) {
  const sorted = [...calls].sort((a, b) => a.t0 - b.t0);
  const counts = Object.fromEntries([...new Set(calls.map((c) => c.work))].map((w) => [w, { right: 0, unlabeled: 0, all: 0 }]));
  const wrong = [];
  const unlabeled = [];
  for (const s of samples) {
    const c = (counts[s.work] ??= { right: 0, unlabeled: 0, all: 0 });
    c.all++;
    if (!s.labels) {
      c.unlabeled++;
      unlabeled.push(s);
      continue;
    }
    const call = callAt(sorted, s.t);
    const want = call && call.work === s.work ? expected(call) : undefined;
    const keys = want && Object.keys(want);
    const right = want && keys.every((k) => s.labels[k] === String(want[k])) && (!exact || Object.keys(s.labels).length === keys.length);
    if (right) c.right++;
    else wrong.push({ t: s.t, work: s.work, labels: s.labels, expected: want ?? `no call of ${s.work} then` });
  }
  assert.deepEqual(wrong.slice(0, 3), [], `${what}: samples with labels not their request's (${wrong.length} in all)`);
  for (const [work, c] of Object.entries(counts)) {
    assert.ok(c.all >= min, `${what}: ${c.all} samples in ${work}, fewer than ${min}`);
    const excused = Math.min(c.unlabeled, unvouched);
    unvouched -= excused;
    if (c.right + excused < Math.floor(floor * c.all)) {
      // Where in their calls the unlabeled ones fell: the first ms of a call, its last, a
      // call's middle, or between calls, tell a late switch from a lost one.
      const where = unlabeled.filter((u) => u.work === work).slice(0, 8).map((u) => {
        const call = callAt(sorted, u.t);
        if (!call) return `t=${u.t.toFixed(1)} outside any call`;
        return `call ${sorted.indexOf(call)} of ${sorted.length} at +${(u.t - call.t0).toFixed(1)} ms, ${(call.t1 - u.t).toFixed(1)} ms before its end`;
      });
      assert.fail(`${what}: ${c.right} of ${c.all} samples in ${work} carry their request's labels (${c.unlabeled} unlabeled, ${excused} of them excused as samples no signal vouched for; floor ${floor}): ${where.join('; ')}`);
    }
  }
  return Object.entries(counts)
    .map(([work, c]) => `${work} ${c.right}/${c.all}`)
    .join(', ');
}

/** How many of a trace object's samples no signal vouched for and no two signals around them
 * agreed on (V8's own, at deoptimizations): they are left unlabeled (docs/labels.md). */
const unvouchedSamples = (trace) => trace.metadata?.unmatchedSamples ?? 0;

/**
 * A gzip'd pprof profile decoded by an independent decoder (pprof-format), with readers:
 * `str(i)`, `frames(sample)` (functions, leaf first), `names(sample)`, `labels(sample)`
 * (string labels), `numLabels(sample)` (numeric ones, as decimal strings),
 * `sum(valueIndex)`, and `join`: the counts of selfprof's join comment, `{ matchedSamples, … }`.
 */
function decodePprof(bytes) {
  const { Profile } = require('pprof-format');
  const zlib = require('node:zlib');
  const p = Profile.decode(zlib.gunzipSync(Buffer.from(bytes)));
  const str = (i) => p.stringTable.strings[Number(i)];
  const fn = new Map(p.function.map((f) => [Number(f.id), f]));
  const loc = new Map(p.location.map((l) => [Number(l.id), l]));
  const frames = (s) => s.locationId.map((id) => fn.get(Number(loc.get(Number(id)).line[0].functionId)));
  const names = (s) => frames(s).map((f) => str(f.name));
  const labels = (s) => Object.fromEntries(s.label.filter((l) => Number(l.str) !== 0 || Number(l.num) === 0).map((l) => [str(l.key), str(l.str)]));
  // Numeric labels (Datadog's span ids, end_timestamp_ns) as decimal strings: int64 read as uint64.
  const numLabels = (s) =>
    Object.fromEntries(s.label.filter((l) => Number(l.str) === 0 && Number(l.num) !== 0).map((l) => [str(l.key), BigInt.asUintN(64, BigInt(l.num)).toString()]));
  const sum = (k) => p.sample.reduce((n, s) => n + Number(s.value[k]), 0);
  // selfprof's comment with the SIGPROF join's counts (see src/pprof.rs).
  const comment = p.comment.map(str).find((c) => c.startsWith('selfprof:')) ?? '';
  const join = Object.fromEntries([...comment.matchAll(/(\w+)=([\w-]+)/g)].map(([, k, v]) => [k, /^\d+$/.test(v) ? Number(v) : v]));
  return { p, str, frames, names, labels, numLabels, sum, join };
}

/**
 * This process's peak RSS in MiB. From /proc's VmHWM where there is one: unlike
 * getrusage's maxrss, which Linux carries across fork and exec, it is this program's own
 * (a child of a big test process would otherwise report its parent's peak).
 */
function peakRssMiB() {
  try {
    const m = /^VmHWM:\s+(\d+) kB/m.exec(fs.readFileSync('/proc/self/status', 'utf8'));
    if (m) return Number(m[1]) / 1024;
  } catch {
    // no /proc: fall back
  }
  return process.resourceUsage().maxRSS / 1024;
}

/**
 * Why tests that start a Node child process skip here, or false: where the suite runs under
 * an emulator that cannot start one (scripts/qemu-arm64.sh sets it).
 */
const noChildProcess = process.env.SELFPROF_TEST_NO_CHILD_PROCESS || false;

module.exports = {
  noChildProcess,
  peakRssMiB,
  spin,
  allocatingWork,
  untilSignals,
  sampledCall,
  sampledIdle,
  recordUntilSampled,
  samplesAcross,
  stopAll,
  recordCheckpoints,
  definitionOf,
  lineIn,
  lineOf,
  assertValidTrace,
  stackFrames,
  samplesIn,
  decodePprof,
  LABEL_FLOOR,
  unvouchedSamples,
  WorkLog,
  callAt,
  receiver,
  v8CpuProfile,
  traceWork,
  samplesWhere,
  callSamples,
  inCallsOf,
  pprofWork,
  assertRequestLabels,
};
