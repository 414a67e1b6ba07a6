// Diff: two sets of samples, A (the baseline) and B, compared by share. A set's busy
// samples are all of its samples but idle ones; a function's (or call path's) share is the
// samples it is on (each sample once) over the set's busy samples. The change is
//   Δ = share in B − share in A, in percentage points,
// so sets of different lengths compare, a profile against itself is 0 everywhere, and a
// function that takes a larger part of the work in B is positive (red).
// Functions match across profiles by name, file, line and column (or by name and file).
// The view (createDiffView) shows it as a flame graph colored by Δ and a table.

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

/** The values of label `key` in model m, most samples first, null (no such label) last. */
function labelValues(m, key) {
  const counts = new Map();
  let none = 0;
  for (let i = 0; i < m.n; i++) {
    const v = labelAt(m, i, key);
    if (v === undefined) none++;
    else counts.set(v, (counts.get(v) || 0) + 1);
  }
  return [...[...counts].sort((a, b) => b[1] - a[1]).map((e) => e[0]), ...(none ? [null] : [])];
}

/**
 * The diff view of model m: A → B as a flame graph colored by Δ and a table of functions,
 * A and B being the baseline profile (model `baseline`, or one picked in the page) and this
 * one, or two values of a label. `d` is the page's diff state ({ mode, key, a, b,
 * ignoreLines, limit, sort }); `kept()` the page's filter ({ label, range, sel, gc });
 * `onBaseline()` runs when a baseline was picked.
 */
function createDiffView(m, baseline, d, { kept, onBaseline }) {
  let base = baseline;
  let result = null;
  const describe = (node) => {
    const side = (k) => `${node[k]} samples (${(100 * node['s' + k]).toFixed(2)}%)`;
    const where = node.frame ? ` — ${node.m.locationOf(node.frame)}` : node.attributed ? ' — attributed GC' : '';
    return `${node.name}${where} — A: ${side('a')}, B: ${side('b')}, \u0394 ${signed(node.delta)} pp`;
  };
  const flame = createFlame($('diff-flame'), {
    color: (node) => (node.parent === null ? '#d6d6d6' : diffColor(node.delta, result.maxAbs)),
    describe,
    decorate: (div, node) => {
      div.dataset.delta = node.delta;
      div.dataset.a = node.a;
      div.dataset.b = node.b;
    },
    onHover: (node) => ($('diff-details').textContent = describe(node)),
  });

  /** The modes there is something for, the label keys, and the values the report opens on. */
  function setup() {
    const modes = [];
    if (base) modes.push(['profile', `baseline profile (A: ${data.baselineName || 'baseline'}) \u2192 this one (B)`]);
    if (m.labelKeys.length) modes.push(['label', 'two values of a label (A \u2192 B)']);
    $('diff-mode').replaceChildren(...modes.map(([v, t]) => el('option', { value: v, textContent: t })));
    if (!modes.some((x) => x[0] === d.mode)) d.mode = modes.length ? modes[0][0] : 'none';
    const want = data.labelDiff;
    d.key = want && m.labelKeys.includes(want.key) ? want.key : m.labelKeys.includes('endpoint') ? 'endpoint' : m.labelKeys[0] || null;
    $('diff-key').replaceChildren(...m.labelKeys.map((k) => el('option', { value: k, textContent: k })));
    fillValues(want && want.key === d.key ? want : null);
  }

  /** The A and B pickers for the values of d.key; `want` ({ a, b }) picks them if present. */
  function fillValues(want) {
    if (d.key === null) return;
    $('diff-key').value = d.key;
    const values = labelValues(m, d.key);
    const opt = (v) => el('option', { value: v === null ? '\u0000none' : v, textContent: v === null ? '(none)' : v });
    $('diff-a').replaceChildren(...values.map(opt));
    $('diff-b').replaceChildren(...values.map(opt));
    const has = (v) => values.includes(v);
    d.a = want && has(want.a) ? want.a : values[0] === undefined ? null : values[0];
    d.b = want && has(want.b) ? want.b : values[1] === undefined ? d.a : values[1];
    $('diff-a').value = d.a === null ? '\u0000none' : d.a;
    $('diff-b').value = d.b === null ? '\u0000none' : d.b;
  }

  function sides() {
    const { label, range, sel } = kept();
    if (d.mode === 'profile') {
      // The label filter applies to the baseline too (same key and value), the time range
      // only to this profile (its own time line).
      return {
        a: { m: base, sel: selectSamples(base, { label }).sel, name: `${data.baselineName || 'baseline'}${label ? `, ${$('active-filter').textContent}` : ''}` },
        b: { m, sel, name: `${data.name || 'this profile'}${label || range ? ' (as filtered)' : ''}` },
      };
    }
    const side = (v) => ({
      m,
      sel: selectSamples(m, { label: { key: d.key, value: v, none: v === null }, range }).sel,
      name: `${d.key} = ${v === null ? '(none)' : v}`,
    });
    return { a: side(d.a), b: side(d.b) };
  }

  /** A baseline picked in the page: a trace file (JSON or json-gzip), checked, then diffed. */
  async function pickBaseline(file) {
    const say = (text) => {
      $('diff-file-status').textContent = text;
    };
    try {
      let bytes = new Uint8Array(await file.arrayBuffer());
      if (bytes[0] === 0x1f && bytes[1] === 0x8b) {
        const stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream('gzip'));
        bytes = new Uint8Array(await new Response(stream).arrayBuffer());
      }
      const first = bytes.find((b) => b > 0x20);
      if (first !== 0x7b) throw new Error('not JSON: a pprof file is read by selfprof diff A B --html OUT');
      const trace = checkTrace(JSON.parse(new TextDecoder().decode(bytes)));
      base = makeModel(trace);
      data.baselineName = file.name;
      d.mode = 'profile';
      setup();
      render();
      onBaseline();
      say(`${file.name}: ${trace.samples.length} samples`);
    } catch (err) {
      say(`${file.name}: ${err.message}`);
    }
  }

  function render() {
    $('diff-mode').value = d.mode;
    $('diff-label-pick').hidden = d.mode !== 'label';
    if (d.mode === 'none') {
      $('diff-summary').textContent = 'Nothing to compare: this trace has no labels and the report has no baseline (htmlReport(trace, { baseline }) or selfprof diff A B).';
      $('diff-legend').replaceChildren();
      result = { maxAbs: 0 };
      flame.show(null);
      $('diff-table').tBodies[0].replaceChildren();
      return;
    }
    const s = sides();
    result = diffSets(s, { gc: kept().gc, ignoreLines: d.ignoreLines });
    const { busy, maxAbs } = result;
    $('diff-legend').replaceChildren(
      el('span', { textContent: `\u2212${maxAbs.toFixed(2)} pp` }),
      el('span', { className: 'bar' }),
      el('span', { textContent: `+${maxAbs.toFixed(2)} pp` }),
      el('span', {
        className: 'text',
        textContent:
          '\u0394 = share in B \u2212 share in A, in percentage points. A share is the samples a function (or call path) is on, each sample once, ' +
          'over the busy samples of its side (all but idle). Red: a larger part of the work in B; blue: smaller. Box width: the mean of the two shares.',
      }),
    );
    const sideText = (k) => `${k.toUpperCase()}: ${s[k].name}: ${busy[k]} busy samples${busy[k] ? '' : ' (nothing to compare: its shares are all 0)'}`;
    $('diff-summary').textContent = `${sideText('a')} \u00b7 ${sideText('b')}`;
    $('diff-summary').dataset.busyA = busy.a;
    $('diff-summary').dataset.busyB = busy.b;
    flame.show(result.root, result.nodes);
    const sorted = d.sort === 'total' ? result.rows.slice().sort((x, y) => Math.abs(y.dTotal) - Math.abs(x.dTotal) || Math.abs(y.dSelf) - Math.abs(x.dSelf)) : result.rows;
    const rows = d.limit ? sorted.slice(0, d.limit) : sorted;
    const cell = (delta, which) => {
      const td = el('td', { className: delta > 0 ? 'up' : delta < 0 ? 'down' : '', textContent: signed(delta) });
      td.dataset[which] = delta;
      return td;
    };
    const p = (x) => el('td', { textContent: x.toFixed(2) });
    $('diff-table').tBodies[0].replaceChildren(
      ...rows.map((r) => {
        const tr = el(
          'tr',
          {},
          cell(r.dSelf, 'deltaSelf'),
          p(r.aSelfPct),
          p(r.bSelfPct),
          cell(r.dTotal, 'deltaTotal'),
          p(r.aTotalPct),
          p(r.bTotalPct),
          el('td', { className: 'l fn' + (r.pseudo ? ' none' : ''), textContent: r.name }),
          el('td', { className: 'l loc', textContent: r.location, title: r.location }),
        );
        tr.dataset.name = r.name;
        return tr;
      }),
    );
  }

  return {
    setup,
    fillValues,
    render,
    pickBaseline,
    /** The baseline's model, or null. */
    get base() {
      return base;
    },
  };
}
