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
 * Per sample of `trace`: undefined if it has no labels, else whether `isRight(labels)`.
 * What `assertOwnLabels` takes.
 */
function labelVerdicts(trace, samples, isRight) {
  return samples.map((s) => (s.contextId === undefined ? undefined : isRight(trace.contexts[s.contextId].labels)));
}

/**
 * The labeling contract for samples of work done under known labels. No sample carries
 * wrong labels, and a sample has none only if V8 took it without a signal (at start, on
 * deoptimization) at a moment whose context is uncertain: so there are at most
 * `unmatched` of them, the trace's `metadata.unmatchedSamples` (labels are never guessed).
 * `verdicts`: per sample, true (right labels), false (wrong ones) or undefined (none).
 */
function assertOwnLabels(verdicts, unmatched, what) {
  const assert = require('node:assert/strict');
  assert.equal(verdicts.filter((v) => v === false).length, 0, `${what}: samples with wrong labels`);
  const right = verdicts.filter((v) => v === true).length;
  const missing = verdicts.length - right;
  assert.ok(Number.isInteger(unmatched), `${what}: the trace says how many samples had no signal`);
  assert.ok(
    missing <= unmatched,
    `${what}: ${missing} of ${verdicts.length} samples unlabeled, but V8 took only ${unmatched} without a signal`,
  );
  return `${right}/${verdicts.length} labeled (${unmatched} without a signal in the trace)`;
}

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

module.exports = { peakRssMiB, spin, definitionOf, assertValidTrace, stackFrames, samplesIn, decodePprof, labelVerdicts, assertOwnLabels };
