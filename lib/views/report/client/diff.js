// Diff: two sets of samples, A (the baseline) and B, compared by share. A set's busy
// samples are all of its samples but idle ones; a function's (or call path's) share is the
// samples it is on (each sample once) over the set's busy samples. The change is
//   Δ = share in B − share in A, in percentage points,
// so sets of different lengths compare, a profile against itself is 0 everywhere, and a
// function that takes a larger part of the work in B is positive (red).
// Functions match across profiles by name, file, line and column (or by name and file).

function matchKey(m, frameId, ignoreLines) {
  const f = m.frames[frameId];
  return ignoreLines ? `${f.name}\u0000${m.url(f)}` : `${f.name}\u0000${m.url(f)}\u0000${f.line}\u0000${f.column}`;
}

function diffSets(sides, { gc = false, ignoreLines = false } = {}) {
  const root = { key: 'root', name: 'busy samples', frame: null, a: 0, b: 0, aSelf: 0, bSelf: 0, children: [], childOf: new Map(), parent: null };
  const child = (node, key, make) => {
    let ch = node.childOf.get(key);
    if (!ch) {
      ch = { key: `${node.key}/${node.childOf.size}`, a: 0, b: 0, aSelf: 0, bSelf: 0, children: [], childOf: new Map(), parent: node, ...make() };
      node.childOf.set(key, ch);
      node.children.push(ch);
    }
    return ch;
  };
  const fns = new Map(); // match key -> row
  const busy = {};
  for (const [side, { m, sel }] of Object.entries(sides)) {
    const c = stackCounts(m, sel, { gc });
    busy[side] = c.n - c.pseudo.idle;
    root[side] = busy[side];
    const S = m.stacks.length;
    const own = new Float64Array(S);
    const total = new Float64Array(S);
    for (let i = 0; i < S; i++) own[i] = total[i] = c.js[i] + c.gcAt[i] + c.gcAttr[i];
    for (let i = S - 1; i >= 0; i--) if (m.parent[i] >= 0) total[m.parent[i]] += total[i];
    const keys = m.frames.map((_, f) => matchKey(m, f, ignoreLines));
    const nodeOf = new Array(S);
    for (let i = 0; i < S; i++) {
      if (!total[i]) continue;
      const f = m.frames[m.frameOf[i]];
      const node = (nodeOf[i] = child(m.parent[i] < 0 ? root : nodeOf[m.parent[i]], keys[m.frameOf[i]], () => ({ name: nameOf(f), frame: f, m })));
      node[side] += total[i];
      node[side + 'Self'] += c.js[i];
      for (const [count, attributed] of [[c.gcAt[i], false], [c.gcAttr[i], true]]) {
        if (!count) continue;
        const g = child(node, attributed ? '\u0000gc-attributed' : '\u0000gc', () => ({ name: PSEUDO.gc, pseudo: true, attributed }));
        g[side] += count;
        g[side + 'Self'] += count;
      }
    }
    for (const kind of ['gc', 'other', 'root']) {
      const count = c.pseudo[kind];
      if (!count) continue;
      const g = child(root, '\u0000' + kind, () => ({ name: PSEUDO[kind], pseudo: true }));
      g[side] += count;
      g[side + 'Self'] += count;
    }
    // Functions: self on the innermost frame, total once per sample.
    const row = (key, make) => fns.get(key) || fns.set(key, { key, aSelf: 0, bSelf: 0, aTotal: 0, bTotal: 0, ...make() }).get(key);
    const fnRow = (f) => row(keys[f], () => ({ name: nameOf(m.frames[f]), location: m.locationOf(m.frames[f]) }));
    const seen = new Map();
    for (let i = 0; i < S; i++) {
      if (!own[i]) continue;
      fnRow(m.frameOf[i])[side + 'Self'] += c.js[i];
      for (let id = i; id >= 0; id = m.parent[id]) {
        const r = fnRow(m.frameOf[id]);
        if (seen.get(r) === i) continue;
        seen.set(r, i);
        r[side + 'Total'] += own[i];
      }
    }
    let gcAll = c.pseudo.gc;
    for (let i = 0; i < S; i++) gcAll += c.gcAt[i] + c.gcAttr[i];
    for (const [kind, count] of [['gc', gcAll], ['other', c.pseudo.other], ['root', c.pseudo.root]]) {
      if (!count) continue;
      const r = row('\u0000' + kind, () => ({ name: PSEUDO[kind], location: '', pseudo: true }));
      r[side + 'Self'] += count;
      r[side + 'Total'] += count;
    }
  }
  const share = (n, side) => (busy[side] ? n / busy[side] : 0);
  const sidesWithSamples = (busy.a ? 1 : 0) + (busy.b ? 1 : 0);
  let maxAbs = 0;
  const nodes = new Map();
  (function finish(node) {
    nodes.set(node.key, node);
    node.sa = share(node.a, 'a');
    node.sb = share(node.b, 'b');
    node.delta = 100 * (node.sb - node.sa);
    node.total = sidesWithSamples ? (node.sa + node.sb) / sidesWithSamples : 0;
    if (node !== root) maxAbs = Math.max(maxAbs, Math.abs(node.delta));
    node.children.sort((x, y) => y.total - x.total || (x.name < y.name ? -1 : 1));
    node.children.forEach(finish);
  })(root);
  const rows = [...fns.values()].map((r) => ({
    ...r,
    dSelf: 100 * (share(r.bSelf, 'b') - share(r.aSelf, 'a')),
    dTotal: 100 * (share(r.bTotal, 'b') - share(r.aTotal, 'a')),
    aSelfPct: 100 * share(r.aSelf, 'a'),
    bSelfPct: 100 * share(r.bSelf, 'b'),
    aTotalPct: 100 * share(r.aTotal, 'a'),
    bTotalPct: 100 * share(r.bTotal, 'b'),
  }));
  rows.sort((x, y) => Math.abs(y.dSelf) - Math.abs(x.dSelf) || Math.abs(y.dTotal) - Math.abs(x.dTotal) || (x.name < y.name ? -1 : 1));
  return { root, nodes, rows, busy, maxAbs };
}

/** Red for more in B, blue for less, grey for no change; deeper as |Δ| nears `maxAbs`. */
function diffColor(delta, maxAbs) {
  if (delta === 0 || !maxAbs) return '#e9e9e9';
  const k = Math.min(1, Math.abs(delta) / maxAbs);
  const light = 92 - 42 * Math.sqrt(k);
  return delta > 0 ? `hsl(0,${40 + 35 * k}%,${light}%)` : `hsl(215,${40 + 35 * k}%,${light}%)`;
}

const signed = (d) => (d > 0 ? '+' : d < 0 ? '\u2212' : '') + Math.abs(d).toFixed(2);
