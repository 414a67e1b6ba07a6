'use strict';
// Comparing two sets of samples by share: two profiles (A = the baseline, B), or two
// values of a label in one profile. What the report's diff view shows, as numbers.
//
// A set's busy samples are its samples but the idle ones. A function's share is the samples
// it is on (self: as the innermost frame; total: anywhere on the stack, each sample once)
// over its set's busy samples; the change is Δ = share in B − share in A, in percentage
// points. So a profile compared with itself is 0 everywhere, sets of different lengths
// compare, and a function that took a larger part of the work in B is positive. Functions
// match by name, file, line and column (`ignoreLines`: by name and file).

const { readProfile } = require('./convert');

const PSEUDO = { gc: '(garbage collector)', other: '(program)' };

function location(trace, frame) {
  if (frame.resourceId === undefined && frame.name === '(selfprof)') return '(profiler)';
  if (frame.resourceId === undefined) return '(native)';
  const r = trace.resources[frame.resourceId];
  return frame.line === undefined ? r : `${r}:${frame.line}:${frame.column}`;
}

/** Per function key: { name, location, self, total } over the kept samples; and the busy count. */
function countSide(trace, keep, ignoreLines) {
  const keyOf = trace.frames.map((f) => {
    const url = f.resourceId === undefined ? '' : trace.resources[f.resourceId];
    return ignoreLines ? `${f.name}\0${url}` : `${f.name}\0${url}\0${f.line}\0${f.column}`;
  });
  const fns = new Map();
  const fn = (key, name, loc) => fns.get(key) ?? fns.set(key, { key, name, location: loc, self: 0, total: 0 }).get(key);
  let busy = 0;
  let samples = 0;
  const seen = new Map();
  trace.samples.forEach((s, n) => {
    if (!keep(s)) return;
    samples++;
    if (s.marker === 'idle') return;
    busy++;
    if (s.stackId === undefined) {
      const kind = s.marker ?? 'root';
      const r = fn(`\0${kind}`, PSEUDO[kind] ?? '(root)', '');
      r.self++;
      r.total++;
      return;
    }
    // GC that V8 placed under a stack (as the report shows it): a GC sample on that stack.
    const gcUnder = s.marker === 'gc';
    if (gcUnder) {
      const r = fn('\0gc', PSEUDO.gc, '');
      r.self++;
      r.total++;
    }
    for (let id = s.stackId; id !== undefined; id = trace.stacks[id].parentId) {
      const f = trace.stacks[id].frameId;
      const r = fn(keyOf[f], trace.frames[f].name || '(anonymous)', location(trace, trace.frames[f]));
      if (id === s.stackId && !gcUnder) r.self++;
      if (seen.get(r) !== n) {
        seen.set(r, n);
        r.total++;
      }
    }
  });
  return { fns, busy, samples };
}

function compare(a, b) {
  const share = (x, side) => (side.busy ? (100 * x) / side.busy : 0);
  const keys = new Set([...a.fns.keys(), ...b.fns.keys()]);
  const functions = [...keys].map((key) => {
    const fa = a.fns.get(key);
    const fb = b.fns.get(key);
    const any = fb ?? fa;
    const self = { a: share(fa?.self ?? 0, a), b: share(fb?.self ?? 0, b) };
    const total = { a: share(fa?.total ?? 0, a), b: share(fb?.total ?? 0, b) };
    return {
      name: any.name,
      location: any.location,
      samples: { aSelf: fa?.self ?? 0, bSelf: fb?.self ?? 0, aTotal: fa?.total ?? 0, bTotal: fb?.total ?? 0 },
      self: { ...self, delta: self.b - self.a },
      total: { ...total, delta: total.b - total.a },
    };
  });
  functions.sort(
    (x, y) =>
      Math.abs(y.self.delta) - Math.abs(x.self.delta) ||
      Math.abs(y.total.delta) - Math.abs(x.total.delta) ||
      (x.name < y.name ? -1 : x.name > y.name ? 1 : 0),
  );
  return { a: { samples: a.samples, busy: a.busy }, b: { samples: b.samples, busy: b.busy }, functions };
}

/**
 * The change from profile `a` (baseline) to profile `b`: `{ a: { samples, busy }, b,
 * functions: [{ name, location, samples, self: { a, b, delta }, total: { a, b, delta } }] }`,
 * shares in % of each side's busy samples, delta in percentage points, biggest |Δ self|
 * first. Inputs as `readProfile` takes them (trace, V8 CPU profile, pprof), selfprof's own
 * frames hidden unless `profilerFrames: true`.
 * @param {any} a
 * @param {any} b
 * @param {{ ignoreLines?: boolean, profilerFrames?: boolean }} [options]
 */
function diffProfiles(a, b, { ignoreLines = false, profilerFrames } = {}) {
  const ta = readProfile(a, { profilerFrames });
  const tb = readProfile(b, { profilerFrames });
  const all = () => true;
  return compare(countSide(ta, all, ignoreLines), countSide(tb, all, ignoreLines));
}

/**
 * The change from samples with label `key` = `a` to those with `key` = `b` (null: without the label).
 * @param {any} trace
 * @param {string} key
 * @param {string | null} a
 * @param {string | null} b
 * @param {{ ignoreLines?: boolean, profilerFrames?: boolean }} [options]
 */
function diffLabelValues(trace, key, a, b, { ignoreLines = false, profilerFrames } = {}) {
  const t = readProfile(trace, { profilerFrames });
  const has = (value) => (s) => {
    const labels = s.contextId === undefined ? undefined : t.contexts[s.contextId].labels;
    // Own properties only: a label key such as `constructor` must not find Object's.
    const v = labels !== undefined && Object.hasOwn(labels, key) ? labels[key] : undefined;
    return value === null ? v === undefined : v === value;
  };
  return compare(countSide(t, has(a), ignoreLines), countSide(t, has(b), ignoreLines));
}

/** A plain-text table of the `top` biggest changes. */
function formatDiff(result, { top = 20, shorten = (loc) => loc } = {}) {
  const sign = (d) => (d > 0 ? '+' : d < 0 ? '-' : ' ') + Math.abs(d).toFixed(2);
  const head = ['Δ self', 'self A %', 'self B %', 'Δ total', 'total A %', 'total B %', 'function', 'location'];
  const body = result.functions
    .filter((f) => f.self.delta !== 0 || f.total.delta !== 0)
    .slice(0, top)
    .map((f) => [sign(f.self.delta), f.self.a.toFixed(2), f.self.b.toFixed(2), sign(f.total.delta), f.total.a.toFixed(2), f.total.b.toFixed(2), f.name, shorten(f.location)]);
  if (!body.length) return 'no change: every function has the same share in A and B';
  const widths = head.map((h, i) => Math.max(h.length, ...body.map((row) => row[i].length)));
  const line = (cells) => cells.map((c, i) => (i < 6 ? c.padStart(widths[i]) : c.padEnd(widths[i]))).join('  ').trimEnd();
  return [line(head), ...body.map(line)].join('\n');
}

module.exports = { diffProfiles, diffLabelValues, formatDiff };
