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
const { firstInOrder } = require('./top');

const PSEUDO = { gc: '(garbage collector)', other: '(program)' };

function location(trace, frame) {
  if (frame.resourceId === undefined && frame.name === '(selfprof)') return '(profiler)';
  if (frame.resourceId === undefined) return '(native)';
  const r = trace.resources[frame.resourceId];
  return frame.line === undefined ? r : `${r}:${frame.line}:${frame.column}`;
}

/** The pseudo-functions' numbers past a side's own functions: `n + PSEUDO_SLOT[kind]`. */
const PSEUDO_SLOT = { gc: 0, other: 1, root: 2 };
const PSEUDO_KINDS = ['gc', 'other', 'root'];

/**
 * A trace's functions: its frames grouped by name, file, line and column (`ignoreLines`:
 * name and file). `fnOfFrame[i]`: frame i's function; `frameOf[k]`: a frame of function k;
 * `find(trace, i)`: the function of another trace's frame i here, or -1. Looked up by
 * name first (names are mostly unique: no key string is made per frame).
 */
function functionsOf(trace, ignoreLines) {
  const { frames } = trace;
  const byName = new Map();
  const frameOf = [];
  const fnOfFrame = new Int32Array(frames.length);
  const urlOf = (t, f) => (f.resourceId === undefined ? '' : t.resources[f.resourceId]);
  const same = (k, t, f) => {
    const g = frames[frameOf[k]];
    return urlOf(trace, g) === urlOf(t, f) && (ignoreLines || (g.line === f.line && g.column === f.column));
  };
  const lookup = (t, f) => {
    const entry = byName.get(f.name);
    if (entry === undefined) return -1;
    if (typeof entry === 'number') return same(entry, t, f) ? entry : -1;
    for (const k of entry) if (same(k, t, f)) return k;
    return -1;
  };
  for (let i = 0; i < frames.length; i++) {
    const f = frames[i];
    let k = lookup(trace, f);
    if (k < 0) {
      k = frameOf.length;
      frameOf.push(i);
      const entry = byName.get(f.name);
      if (entry === undefined) byName.set(f.name, k);
      else if (typeof entry === 'number') byName.set(f.name, [entry, k]);
      else entry.push(k);
    }
    fnOfFrame[i] = k;
  }
  return { frameOf, fnOfFrame, find: (t, i) => lookup(t, t.frames[i]) };
}

/**
 * A side's counts over the samples `keep` takes: each function's `self` and `total`
 * samples (the pseudo-functions' past its own: PSEUDO_SLOT), and the `busy` and kept
 * `samples` counts. In typed arrays: a profile naming a million functions takes tens of MB.
 */
function countSide(trace, fns, keep) {
  const { stacks, samples } = trace;
  const n = fns.frameOf.length;
  const self = new Uint32Array(n + PSEUDO_KINDS.length);
  const total = new Uint32Array(n + PSEUDO_KINDS.length);
  const seenAt = new Int32Array(n).fill(-1);
  const parent = Int32Array.from(stacks, (st) => (st.parentId === undefined ? -1 : st.parentId));
  const fnOfStack = Int32Array.from(stacks, (st) => fns.fnOfFrame[st.frameId]);
  let busy = 0;
  let kept = 0;
  for (let i = 0; i < samples.length; i++) {
    const s = samples[i];
    if (!keep(s)) continue;
    kept++;
    if (s.marker === 'idle') continue;
    busy++;
    if (s.stackId === undefined) {
      const k = n + (PSEUDO_SLOT[s.marker] ?? PSEUDO_SLOT.root);
      self[k]++;
      total[k]++;
      continue;
    }
    // GC that V8 placed under a stack (as the report shows it): a GC sample on that stack.
    const gcUnder = s.marker === 'gc';
    if (gcUnder) {
      self[n + PSEUDO_SLOT.gc]++;
      total[n + PSEUDO_SLOT.gc]++;
    }
    for (let id = s.stackId; id !== -1; id = parent[id]) {
      const k = fnOfStack[id];
      if (id === s.stackId && !gcUnder) self[k]++;
      if (seenAt[k] !== i) {
        seenAt[k] = i;
        total[k]++;
      }
    }
  }
  return { trace, fns, self, total, busy, samples: kept };
}

/** Function k of a side (a pseudo-function past its own): its name and location. */
function described(side, k) {
  const n = side.fns.frameOf.length;
  if (k >= n) {
    const kind = PSEUDO_KINDS[k - n];
    return { name: PSEUDO[kind] ?? '(root)', location: '' };
  }
  const frame = side.trace.frames[side.fns.frameOf[k]];
  return { name: frame.name || '(anonymous)', location: location(side.trace, frame) };
}

/**
 * The two sides compared: every function of either, biggest |Δ self| first (then |Δ
 * total|, then name, then location); `limit`: only the first that many (the command
 * line's --top).
 */
function compare(a, b, limit = Infinity) {
  const share = (x, side) => (side.busy ? (100 * x) / side.busy : 0);
  const na = a.fns.frameOf.length;
  const nb = b.fns.frameOf.length;
  // Every function of A (with its match in B, or -1), then B's own, then the pseudo-functions.
  const ia = [];
  const ib = [];
  const matched = new Uint8Array(nb);
  for (let k = 0; k < na; k++) {
    const m = a.fns === b.fns ? k : b.fns.find(a.trace, a.fns.frameOf[k]);
    ia.push(k);
    ib.push(m);
    if (m >= 0) matched[m] = 1;
  }
  for (let k = 0; k < nb; k++) {
    if (matched[k]) continue;
    ia.push(-1);
    ib.push(k);
  }
  for (let p = 0; p < PSEUDO_KINDS.length; p++) {
    if (a.total[na + p] === 0 && b.total[nb + p] === 0) continue;
    ia.push(na + p);
    ib.push(nb + p);
  }
  const n = ia.length;
  const at = (side, k, what) => (k < 0 ? 0 : side[what][k]);
  const dSelf = Float64Array.from({ length: n }, (_, j) => share(at(b, ib[j], 'self'), b) - share(at(a, ia[j], 'self'), a));
  const dTotal = Float64Array.from({ length: n }, (_, j) => share(at(b, ib[j], 'total'), b) - share(at(a, ia[j], 'total'), a));
  const describe = (j) => (ib[j] >= 0 ? described(b, ib[j]) : described(a, ia[j]));
  const before = (x, y) => {
    const d = Math.abs(dSelf[y]) - Math.abs(dSelf[x]) || Math.abs(dTotal[y]) - Math.abs(dTotal[x]);
    if (d) return d;
    const [fx, fy] = [describe(x), describe(y)];
    if (fx.name !== fy.name) return fx.name < fy.name ? -1 : 1;
    return fx.location < fy.location ? -1 : fx.location > fy.location ? 1 : 0;
  };
  const functions = firstInOrder(n, Math.min(n, limit), before).map((j) => {
    const samples = { aSelf: at(a, ia[j], 'self'), bSelf: at(b, ib[j], 'self'), aTotal: at(a, ia[j], 'total'), bTotal: at(b, ib[j], 'total') };
    const self = { a: share(samples.aSelf, a), b: share(samples.bSelf, b) };
    const total = { a: share(samples.aTotal, a), b: share(samples.bTotal, b) };
    return {
      ...(ib[j] >= 0 ? described(b, ib[j]) : described(a, ia[j])),
      samples,
      self: { ...self, delta: self.b - self.a },
      total: { ...total, delta: total.b - total.a },
    };
  });
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
  return diffTraces(readProfile(a, { profilerFrames }), readProfile(b, { profilerFrames }), { ignoreLines });
}

/**
 * diffProfiles of two trace objects `readProfile` made (the command line's: each file read
 * once); `limit`: only that many functions described.
 * @param {any} ta
 * @param {any} tb
 * @param {{ ignoreLines?: boolean, limit?: number }} [options]
 */
function diffTraces(ta, tb, { ignoreLines = false, limit } = {}) {
  const all = () => true;
  const fa = functionsOf(ta, ignoreLines);
  const fb = ta === tb ? fa : functionsOf(tb, ignoreLines);
  return compare(countSide(ta, fa, all), countSide(tb, fb, all), limit);
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
  return diffTraceLabels(readProfile(trace, { profilerFrames }), key, a, b, { ignoreLines });
}

/**
 * diffLabelValues of a trace object `readProfile` made; `limit` as diffTraces'.
 * @param {any} t
 * @param {string} key
 * @param {string | null} a
 * @param {string | null} b
 * @param {{ ignoreLines?: boolean, limit?: number }} [options]
 */
function diffTraceLabels(t, key, a, b, { ignoreLines = false, limit } = {}) {
  const has = (value) => (s) => {
    const labels = s.contextId === undefined ? undefined : t.contexts[s.contextId].labels;
    // Own properties only: a label key such as `constructor` must not find Object's.
    const v = labels !== undefined && Object.hasOwn(labels, key) ? labels[key] : undefined;
    return value === null ? v === undefined : v === value;
  };
  const fns = functionsOf(t, ignoreLines);
  return compare(countSide(t, fns, has(a)), countSide(t, fns, has(b)), limit);
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

module.exports = { diffProfiles, diffLabelValues, diffTraces, diffTraceLabels, formatDiff };
