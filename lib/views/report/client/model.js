// Shared by every view: the embedded data, small helpers, a profile as typed arrays, the
// samples the filters keep, and the counts every view aggregates from.
// (Browser code: the report's generator inlines every client file into one function, after
// the functions it shares with Node: formatBytes, from lib/views/format.js.)

const started = performance.now();
/** @type {(id: string) => any} The page's element by id: inputs, tables and canvases alike. */
const $ = (id) => document.getElementById(id);
const data = JSON.parse($('trace-data').textContent);
const PSEUDO = { idle: '(idle)', gc: '(garbage collector)', other: '(program)', root: '(root)' };
// A sample's kind: JS (a stack and no marker), or what V8 said instead.
const JS = 0;
const IDLE = 1;
const GC = 2;
const OTHER = 3;
const ROOT = 4;
const KIND_OF_MARKER = { idle: IDLE, gc: GC, other: OTHER };
const KIND_NAME = ['JS', '(idle)', '(garbage collector)', '(program)', '(root)'];

function el(tag, props, ...children) {
  const e = document.createElement(tag);
  Object.assign(e, props);
  e.append(...children);
  return e;
}
const pct = (n, d) => (d ? ((100 * n) / d).toFixed(1) : '0.0');
const nameOf = (f) => f.name || '(anonymous)';
const ms = (t) => (Math.abs(t) >= 10000 ? `${(t / 1000).toFixed(2)} s` : `${t.toFixed(1)} ms`);
/** An amount of model m: samples, or a weighted trace's bytes. */
const amount = (m, v) => (m.weighted ? (m.weighted.unit === 'bytes' ? formatBytes(v) : `${Math.round(v)} ${m.weighted.unit}`) : `${v} samples`);
const amountCell = (m, v) => (m.weighted ? amount(m, v) : String(v));

/** A trace as arrays indexed by sample and by stack, and what the views look up. */
function makeModel(trace) {
  const { resources, frames, stacks, samples, contexts } = trace;
  const n = samples.length;
  const time = new Float64Array(n);
  const stack = new Int32Array(n);
  const kind = new Uint8Array(n);
  const ctx = new Int32Array(n);
  for (let i = 0; i < n; i++) {
    const s = samples[i];
    time[i] = s.timestamp;
    stack[i] = s.stackId === undefined ? -1 : s.stackId;
    kind[i] = s.marker !== undefined ? KIND_OF_MARKER[s.marker] : s.stackId !== undefined ? JS : ROOT;
    ctx[i] = s.contextId === undefined ? -1 : s.contextId;
  }
  // GC attribution: V8 gives (garbage collector) samples no stack. The stack of the JS
  // sample just before a run of them is what was running when the collection began; a
  // GC after idle or (program) time is attributed to nothing.
  const gcStack = new Int32Array(n).fill(-1);
  let before = -1;
  for (let i = 0; i < n; i++) {
    if (kind[i] === GC) gcStack[i] = stack[i] >= 0 ? -1 : before;
    else before = kind[i] === JS ? stack[i] : -1;
  }
  const S = stacks.length;
  const parent = new Int32Array(S);
  const frameOf = new Int32Array(S);
  const depth = new Int32Array(S);
  for (let i = 0; i < S; i++) {
    parent[i] = stacks[i].parentId === undefined ? -1 : stacks[i].parentId;
    frameOf[i] = stacks[i].frameId;
    depth[i] = parent[i] < 0 ? 0 : depth[parent[i]] + 1;
  }
  const url = (f) => (f.resourceId === undefined ? '' : resources[f.resourceId]);
  const locationOf = (f) => {
    // `(selfprof)`: the profiler's own work, its frames hidden (src/trace/profiler_frames.rs).
    if (f && f.resourceId === undefined && f.name === '(selfprof)') return '(profiler)';
    if (!f || f.resourceId === undefined) return f ? '(native)' : '';
    const r = resources[f.resourceId].replace(/^file:\/\//, '');
    return f.line === undefined ? r : `${r}:${f.line}:${f.column}`;
  };
  // A weighted trace (a heap profile): each sample stands for its weight (bytes), and
  // every count below is a sum of weights; otherwise each sample weighs 1.
  const weighted = trace.weight ? { type: trace.weight.type, unit: trace.weight.unit, counts: trace.weight.counts } : null;
  const w = new Float64Array(n).fill(1);
  if (weighted) for (let i = 0; i < n; i++) w[i] = trace.weight.values[i] || 0;
  const labelKeys = [...new Set(contexts.flatMap((c) => Object.keys(c.labels)))].sort();
  // Line ticks by frame: [{ stackId, line, ticks }].
  const linesOf = new Map();
  for (const l of trace.lineTicks || []) {
    const f = frameOf[l.stackId];
    if (!linesOf.has(f)) linesOf.set(f, []);
    linesOf.get(f).push(l);
  }
  return { trace, resources, frames, stacks, samples, contexts, n, time, stack, kind, ctx, gcStack, parent, frameOf, depth, url, locationOf, labelKeys, linesOf, weighted, w };
}

/**
 * A trace read in the page (a baseline picked from a file) checked as the Rust reader
 * checks one: the arrays, every id in range, parents before children, finite timestamps,
 * known markers, labels as strings. Returns it (with `contexts` defaulted); throws an
 * Error naming the first problem.
 */
function checkTrace(t) {
  const fail = (what) => {
    throw new Error(`not a valid trace: ${what}`);
  };
  if (t === null || typeof t !== 'object' || Array.isArray(t)) fail('not a JSON object');
  if (Array.isArray(t.nodes) && t.startTime !== undefined) fail('a V8 CPU profile: selfprof convert FILE --to trace first');
  for (const k of ['resources', 'frames', 'stacks', 'samples']) if (!Array.isArray(t[k])) fail(`no ${k} array`);
  const contexts = t.contexts === undefined ? [] : t.contexts;
  if (!Array.isArray(contexts)) fail('contexts is not an array');
  const index = (v, n) => Number.isInteger(v) && v >= 0 && v < n;
  t.resources.forEach((r, i) => typeof r !== 'string' && fail(`resource ${i} is not a string`));
  t.frames.forEach((f, i) => {
    if (!f || typeof f.name !== 'string') fail(`frame ${i} has no name`);
    if (f.resourceId !== undefined && !index(f.resourceId, t.resources.length)) fail(`the resource of frame ${i} is out of range`);
  });
  t.stacks.forEach((st, i) => {
    if (!st || !index(st.frameId, t.frames.length) || (st.parentId !== undefined && !index(st.parentId, i))) fail(`stack ${i} is out of range`);
  });
  contexts.forEach((c, i) => {
    if (!c || typeof c.labels !== 'object' || c.labels === null || Object.values(c.labels).some((v) => typeof v !== 'string')) fail(`context ${i} has no labels`);
  });
  t.samples.forEach((x, i) => {
    if (!x || typeof x.timestamp !== 'number' || !Number.isFinite(x.timestamp)) fail(`sample ${i} has no finite timestamp`);
    if (x.stackId !== undefined && !index(x.stackId, t.stacks.length)) fail(`the stack of sample ${i} is out of range`);
    if (x.contextId !== undefined && !index(x.contextId, contexts.length)) fail(`the context of sample ${i} is out of range`);
    if (x.marker !== undefined && !Object.hasOwn(KIND_OF_MARKER, x.marker)) fail(`sample ${i} has an unknown marker`);
  });
  (t.lineTicks || []).forEach((l, i) => {
    if (!l || !index(l.stackId, t.stacks.length) || !(l.line >= 1) || !(l.ticks >= 0)) fail(`line tick ${i} is out of range`);
  });
  return { ...t, contexts };
}

/** The label `key` of sample i, or undefined. Own properties only: a label key such as
 * `constructor` must not find Object's. */
function labelAt(m, i, key) {
  const c = m.ctx[i];
  if (c < 0) return undefined;
  const labels = m.contexts[c].labels;
  return Object.hasOwn(labels, key) ? labels[key] : undefined;
}

/** Whether sample i has label `key` = `value` (`none`: has no such label). */
function labelMatches(m, i, { key, value, none }) {
  const v = labelAt(m, i, key);
  return none ? v === undefined : v === value;
}

/**
 * The samples a filter keeps: `label` ({ key, value, none }) and `range` ([from, to] in
 * the trace's ms, inclusive). Returns { sel: Uint8Array (1 = kept), n }.
 */
function selectSamples(m, { label = null, range = null } = {}) {
  const sel = new Uint8Array(m.n);
  let n = 0;
  const from = range ? range[0] : -Infinity;
  const to = range ? range[1] : Infinity;
  for (let i = 0; i < m.n; i++) {
    const t = m.time[i];
    if (t < from || t > to) continue;
    if (label && !labelMatches(m, i, label)) continue;
    sel[i] = 1;
    n++;
  }
  return { sel, n };
}

/**
 * Per stack, the kept samples on it: `js` (its innermost frame running), `gcAt` (GC
 * samples V8 placed under it, never seen so far), `gcAttr` (GC samples attributed to it,
 * when `gc` is on); `pseudo` counts samples on no stack by kind; `n` all kept samples.
 * With `idle` false, idle samples are left out of all of it and counted in `idleLeft`.
 */
function stackCounts(m, sel, { gc = false, idle = true } = {}) {
  const S = m.stacks.length;
  const js = new Float64Array(S);
  const gcAt = new Float64Array(S);
  const gcAttr = new Float64Array(S);
  const pseudo = { idle: 0, gc: 0, other: 0, root: 0 };
  let n = 0;
  let idleLeft = 0;
  for (let i = 0; i < m.n; i++) {
    if (!sel[i]) continue;
    const w = m.w[i];
    const k = m.kind[i];
    if (k === IDLE && !idle) {
      idleLeft += w;
      continue;
    }
    n += w;
    const s = m.stack[i];
    if (k === JS) js[s] += w;
    else if (k === GC && s >= 0) gcAt[s] += w;
    else if (k === GC && gc && m.gcStack[i] >= 0) gcAttr[m.gcStack[i]] += w;
    else if (s >= 0) js[s] += w; // a marker V8 put under a stack: counted on it, as before
    else pseudo[k === IDLE ? 'idle' : k === GC ? 'gc' : k === OTHER ? 'other' : 'root'] += w;
  }
  return { js, gcAt, gcAttr, pseudo, n, idleLeft };
}

/**
 * The call tree of the counts: nodes { key, name, frame, frameId, total, self, children,
 * parent, pseudo?, attributed? }; GC under a stack is a `(garbage collector)` child.
 * Also the top functions (self: innermost; total: anywhere on the stack, once per sample).
 */
function callTree(m, c) {
  const S = m.stacks.length;
  const total = new Float64Array(S);
  for (let i = 0; i < S; i++) total[i] = c.js[i] + c.gcAt[i] + c.gcAttr[i];
  const own = Float64Array.from(total);
  for (let i = S - 1; i >= 0; i--) if (m.parent[i] >= 0) total[m.parent[i]] += total[i];
  const root = { key: 'root', name: 'all samples', frame: null, frameId: -1, total: c.n, self: 0, children: [], parent: null };
  const nodes = new Map([['root', root]]);
  const byStack = new Array(S);
  for (let i = 0; i < S; i++) {
    if (!total[i]) continue;
    const parent = m.parent[i] < 0 ? root : byStack[m.parent[i]];
    const f = m.frames[m.frameOf[i]];
    const node = { key: 's' + i, name: nameOf(f), frame: f, frameId: m.frameOf[i], total: total[i], self: c.js[i], children: [], parent };
    parent.children.push(node);
    nodes.set(node.key, (byStack[i] = node));
    for (const [count, attributed, key] of [[c.gcAt[i], false, 'g'], [c.gcAttr[i], true, 'a']]) {
      if (!count) continue;
      const g = { key: key + i, name: PSEUDO.gc, frame: null, frameId: -1, pseudo: true, attributed, total: count, self: count, children: [], parent: node };
      node.children.push(g);
      nodes.set(g.key, g);
    }
  }
  for (const [kind, count] of Object.entries(c.pseudo)) {
    if (!count) continue;
    const node = { key: kind, name: PSEUDO[kind], frame: null, frameId: -1, pseudo: true, total: count, self: count, children: [], parent: root };
    root.children.push(node);
    nodes.set(kind, node);
  }
  for (const node of nodes.values()) node.children.sort((a, b) => b.total - a.total || (a.name < b.name ? -1 : 1));

  const F = m.frames.length;
  const fSelf = new Float64Array(F);
  const fTotal = new Float64Array(F);
  const seen = new Int32Array(F).fill(-1);
  for (let i = 0; i < S; i++) {
    if (!own[i]) continue;
    fSelf[m.frameOf[i]] += c.js[i];
    for (let id = i; id >= 0; id = m.parent[id]) {
      const f = m.frameOf[id];
      if (seen[f] !== i) {
        seen[f] = i;
        fTotal[f] += own[i];
      }
    }
  }
  const top = [];
  for (let f = 0; f < F; f++) {
    if (fTotal[f] > 0) top.push({ frameId: f, name: nameOf(m.frames[f]), location: m.locationOf(m.frames[f]), self: fSelf[f], total: fTotal[f] });
  }
  const gcAll = c.pseudo.gc + c.gcAt.reduce((a, b) => a + b, 0) + c.gcAttr.reduce((a, b) => a + b, 0);
  for (const [kind, count] of Object.entries({ ...c.pseudo, gc: gcAll })) {
    if (count) top.push({ frameId: -1, name: PSEUDO[kind], location: '', self: count, total: count, pseudo: true });
  }
  top.sort((a, b) => b.self - a.self || b.total - a.total);
  return { n: c.n, root, nodes, top, fSelf, fTotal };
}

/**
 * Whose code a frame is: `app` (your code), `dependency` (a package under node_modules),
 * `node` (Node's own, `node:` URLs) or `native` (no script: V8 builtins, native functions).
 */
function originOfFrame(m, f) {
  const url = f.resourceId === undefined ? null : m.resources[f.resourceId];
  if (url === null) return 'native';
  if (url.startsWith('node:')) return 'node';
  if (/[\\/]node_modules[\\/]/.test(url)) return 'dependency';
  return 'app';
}

/** A frame's color by whose code it is (the legend's): your code warm, dependencies blue,
 * Node's own green, native violet; the shade varies with the name. */
function colorOfFrame(m, f, name) {
  let h = 0;
  for (let i = 0; i < name.length; i++) h = (h * 31 + name.charCodeAt(i)) >>> 0;
  switch (originOfFrame(m, f)) {
    case 'native':
      return `hsl(${265 + (h % 25)},38%,${72 + (h % 7)}%)`;
    case 'node':
      return `hsl(${140 + (h % 25)},38%,${60 + (h % 9)}%)`;
    case 'dependency':
      return `hsl(${205 + (h % 25)},55%,${66 + (h % 9)}%)`;
    default:
      return `hsl(${8 + (h % 40)},${72 + (h % 18)}%,${58 + (h % 10)}%)`;
  }
}
