// The page: state (label filter, time range, GC attribution, the open view and each view's
// choices), rendering on every change, and the controls' wiring. Every view reads the same
// kept samples: those in the time range with the label filter's value.

const main = makeModel(data.trace);
let base = data.baseline ? makeModel(data.baseline) : null;
const state = {
  label: null, // { key, value, none }
  range: null, // [from, to] in the trace's ms
  gc: false,
  view: data.view || 'flame',
  search: '',
  limit: 25,
  sandwich: null, // frame id
  diff: { mode: base ? 'profile' : 'label', key: null, a: null, b: null, ignoreLines: false, limit: 25, sort: 'self' },
};
let sel; // { sel, n }: the kept samples
let rangeSel; // the samples in the time range (the label panel counts these)
let counts;
let view; // callTree of the kept samples

const describeNode = (node, n) =>
  [
    node.name,
    node.frame ? main.locationOf(node.frame) : node.attributed ? 'attributed: V8 gives GC no stack; shown under the JS sample just before it' : node.pseudo ? 'not JS' : '',
    `${amount(main, node.total)} (${pct(node.total, n)}%)`,
  ]
    .filter(Boolean)
    .join(' — ');
const colorOfNode = (node) => (node.parent === null ? '#d6d6d6' : node.attributed ? '#a9a9a9' : node.pseudo ? '#bdbdbd' : colorOfFrame(main, node.frame, node.name));

const flame = createFlame($('flamegraph'), {
  color: colorOfNode,
  describe: (node) => describeNode(node, view.n),
  onHover: (node) => ($('details').textContent = describeNode(node, view.n)),
  onZoom: (node) => ($('to-sandwich').disabled = !node.frame),
});
const callersFlame = createFlame($('sandwich-callers'), {
  inverted: true,
  color: colorOfNode,
  describe: (node) => describeNode(node, view.n),
  onHover: (node) => ($('sandwich-details').textContent = 'caller: ' + describeNode(node, view.n)),
});
const calleesFlame = createFlame($('sandwich-callees'), {
  color: colorOfNode,
  describe: (node) => describeNode(node, view.n),
  onHover: (node) => ($('sandwich-details').textContent = 'callee: ' + describeNode(node, view.n)),
});
let diffResult = null;
const describeDiff = (node) => {
  const side = (k) => `${node[k]} samples (${(100 * node['s' + k]).toFixed(2)}%)`;
  const where = node.frame ? ` — ${node.m.locationOf(node.frame)}` : node.attributed ? ' — attributed GC' : '';
  return `${node.name}${where} — A: ${side('a')}, B: ${side('b')}, \u0394 ${signed(node.delta)} pp`;
};
const diffFlame = createFlame($('diff-flame'), {
  color: (node) => (node.parent === null ? '#d6d6d6' : diffColor(node.delta, diffResult.maxAbs)),
  describe: describeDiff,
  decorate: (div, node) => {
    div.dataset.delta = node.delta;
    div.dataset.a = node.a;
    div.dataset.b = node.b;
  },
  onHover: (node) => ($('diff-details').textContent = describeDiff(node)),
});
const timeline = createTimeline(main, {
  onRange: (r) => {
    const t = performance.now();
    setRange(r);
    handled(t);
  },
});
const timeOrder = createTimeOrder(main, { onPick: (f) => openSandwich(f) });

function renderAll() {
  rangeSel = selectSamples(main, { range: state.range });
  sel = state.label ? selectSamples(main, { label: state.label, range: state.range }) : rangeSel;
  counts = stackCounts(main, sel.sel, { gc: state.gc });
  view = callTree(main, counts);
  $('total-samples').textContent = main.weighted ? amount(main, view.n) : view.n;
  const f = state.label;
  $('active-filter').textContent = f ? `${f.key} = ${f.none ? '(none)' : f.value}` : 'all samples';
  const r = state.range;
  const rangeText = r ? `+${ms(r[0] - timeline.t0)} \u2026 +${ms(r[1] - timeline.t0)} (${ms(r[1] - r[0])})` : 'whole recording';
  $('active-range').textContent = rangeText;
  $('range-text').textContent = r ? `selected ${rangeText}: ${rangeSel.n} samples` : 'drag across the timeline to select a time range; it filters every view';
  $('clear-range').disabled = !r;
  timeline.setRange(r);
  renderFlame();
  renderTop(view, state.limit, { onSandwich: openSandwich, onSearch: findInFlame });
  renderLabels(main, rangeSel.sel, $('label-key').value, state.label, setFilter);
  renderView();
}

function renderFlame() {
  flame.show(view.root, view.nodes);
  $('to-sandwich').disabled = !flame.zoomed.frame;
  $('search-result').textContent = state.search ? `matched: ${amount(main, flame.matched())} (${pct(flame.matched(), view.n)}%)` : '';
}

function renderView() {
  for (const b of $('tabs').querySelectorAll('button')) b.classList.toggle('active', b.dataset.view === state.view);
  for (const v of ['flame', 'timeorder', 'sandwich', 'diff']) $('view-' + v).hidden = v !== state.view;
  if (state.view === 'flame') flame.render();
  if (state.view === 'timeorder') timeOrder.render(sel.sel, state.range, state.gc);
  if (state.view === 'sandwich') renderSandwich();
  if (state.view === 'diff') renderDiff();
}

function setFilter(filter) {
  state.label = filter;
  timeline.setLabel(filter);
  renderAll();
}
function setRange(range) {
  state.range = range;
  renderAll();
}
function setSearch(text) {
  $('search').value = text;
  state.search = text.trim().toLowerCase();
  flame.setSearch(state.search);
  renderFlame();
}
function findInFlame(name) {
  state.view = 'flame';
  renderView();
  setSearch(name);
}
function openSandwich(frameId) {
  state.sandwich = frameId;
  state.view = 'sandwich';
  renderView();
}

// ---- sandwich

function renderSandwich() {
  const pick = $('sandwich-fn');
  const fns = view.top.filter((r) => !r.pseudo).sort((a, b) => b.total - a.total);
  if (state.sandwich !== null && !fns.some((r) => r.frameId === state.sandwich)) {
    fns.push({ frameId: state.sandwich, name: nameOf(main.frames[state.sandwich]), location: main.locationOf(main.frames[state.sandwich]), total: 0 });
  }
  pick.replaceChildren(
    el('option', { value: '', textContent: '(pick a function)' }),
    ...fns.map((r) => el('option', { value: r.frameId, textContent: `${r.name} — ${amount(main, r.total)} — ${r.location}` })),
  );
  pick.value = state.sandwich === null ? '' : String(state.sandwich);
  $('sandwich-empty').hidden = state.sandwich !== null;
  $('sandwich-body').hidden = state.sandwich === null;
  if (state.sandwich === null) {
    $('sandwich-stats').textContent = '';
    return;
  }
  const F = state.sandwich;
  const s = sandwichTrees(main, counts, F);
  const f = main.frames[F];
  $('sandwich-stats').replaceChildren(
    el('b', { textContent: nameOf(f) }),
    ` ${main.locationOf(f)} — on `,
    el('b', { id: 'sandwich-total', textContent: amountCell(main, s.total) }),
    `${main.weighted ? '' : ' samples'} (${pct(s.total, view.n)}%), innermost in `,
    el('b', { id: 'sandwich-self', textContent: amountCell(main, s.self) }),
    ` (${pct(s.self, view.n)}%)`,
  );
  callersFlame.show(s.callers);
  calleesFlame.show(s.callees);
  renderLines(F, s.self);
}

function renderLines(F, self) {
  const f = main.frames[F];
  const lines = hotLines(main, sel.sel, counts, F);
  const source = (f.resourceId !== undefined && data.sources[main.resources[f.resourceId]]) || null;
  const note = !lines.rows.length
    ? 'V8 recorded no lines for this function'
    : `V8 counts lines per call path, not per sample${lines.scaled ? '; under the filter each path\u2019s counts are scaled to its kept samples (\u2248)' : ''}${source ? '' : '; source not readable here'}`;
  $('lines-note').textContent = `(${note})`;
  const fmt = (x) => (lines.scaled ? x.toFixed(1) : String(x));
  const rows = lines.rows.map((r) => {
    const tr = el(
      'tr',
      {},
      el('td', { textContent: r.line }),
      el('td', { textContent: fmt(r.samples) }),
      el('td', { textContent: pct(r.samples, self) }),
      el('td', { className: 'l src', textContent: source && source[r.line] !== undefined ? source[r.line] : '' }),
    );
    tr.dataset.line = r.line;
    tr.dataset.samples = r.samples;
    return tr;
  });
  if (lines.rows.length && self - lines.lined > 0.05) {
    rows.push(el('tr', {}, el('td', { className: 'none', textContent: '(no line)' }), el('td', { textContent: fmt(self - lines.lined) }), el('td', { textContent: pct(self - lines.lined, self) }), el('td', {})));
  }
  $('lines-table').tBodies[0].replaceChildren(...rows);
}

// ---- diff

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

function setupDiff() {
  const d = state.diff;
  const modes = [];
  if (base) modes.push(['profile', `baseline profile (A: ${data.baselineName || 'baseline'}) \u2192 this one (B)`]);
  if (main.labelKeys.length) modes.push(['label', 'two values of a label (A \u2192 B)']);
  $('diff-mode').replaceChildren(...modes.map(([v, t]) => el('option', { value: v, textContent: t })));
  if (!modes.some((x) => x[0] === d.mode)) d.mode = modes.length ? modes[0][0] : 'none';
  const want = data.labelDiff;
  d.key = want && main.labelKeys.includes(want.key) ? want.key : main.labelKeys.includes('endpoint') ? 'endpoint' : main.labelKeys[0] || null;
  $('diff-key').replaceChildren(...main.labelKeys.map((k) => el('option', { value: k, textContent: k })));
  fillDiffValues(want && want.key === d.key ? want : null);
}

function fillDiffValues(want) {
  const d = state.diff;
  if (d.key === null) return;
  $('diff-key').value = d.key;
  const values = labelValues(main, d.key);
  const opt = (v) => el('option', { value: v === null ? '\u0000none' : v, textContent: v === null ? '(none)' : v });
  $('diff-a').replaceChildren(...values.map(opt));
  $('diff-b').replaceChildren(...values.map(opt));
  const has = (v) => values.includes(v);
  d.a = want && has(want.a) ? want.a : values[0] === undefined ? null : values[0];
  d.b = want && has(want.b) ? want.b : values[1] === undefined ? d.a : values[1];
  $('diff-a').value = d.a === null ? '\u0000none' : d.a;
  $('diff-b').value = d.b === null ? '\u0000none' : d.b;
}

function diffSides() {
  const d = state.diff;
  if (d.mode === 'profile') {
    // The label filter applies to the baseline too (same key and value), the time range
    // only to this profile (its own time line).
    const l = state.label;
    return {
      a: { m: base, sel: selectSamples(base, { label: l }).sel, name: `${data.baselineName || 'baseline'}${l ? `, ${$('active-filter').textContent}` : ''}` },
      b: { m: main, sel: sel.sel, name: `${data.name || 'this profile'}${l || state.range ? ' (as filtered)' : ''}` },
    };
  }
  const side = (v) => ({
    m: main,
    sel: selectSamples(main, { label: { key: d.key, value: v, none: v === null }, range: state.range }).sel,
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
    state.diff.mode = 'profile';
    setupDiff();
    renderDiff();
    renderSummary();
    say(`${file.name}: ${trace.samples.length} samples`);
  } catch (err) {
    say(`${file.name}: ${err.message}`);
  }
}

function renderDiff() {
  const d = state.diff;
  $('diff-mode').value = d.mode;
  $('diff-label-pick').hidden = d.mode !== 'label';
  if (d.mode === 'none') {
    $('diff-summary').textContent = 'Nothing to compare: this trace has no labels and the report has no baseline (htmlReport(trace, { baseline }) or selfprof diff A B).';
    $('diff-legend').replaceChildren();
    diffResult = { maxAbs: 0 };
    diffFlame.show(null);
    $('diff-table').tBodies[0].replaceChildren();
    return;
  }
  const sides = diffSides();
  diffResult = diffSets(sides, { gc: state.gc, ignoreLines: d.ignoreLines });
  const { busy, maxAbs } = diffResult;
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
  const sideText = (k) => {
    const s = sides[k];
    return `${k.toUpperCase()}: ${s.name}: ${busy[k]} busy samples${busy[k] ? '' : ' (nothing to compare: its shares are all 0)'}`;
  };
  $('diff-summary').textContent = `${sideText('a')} \u00b7 ${sideText('b')}`;
  $('diff-summary').dataset.busyA = busy.a;
  $('diff-summary').dataset.busyB = busy.b;
  diffFlame.show(diffResult.root, diffResult.nodes);
  const sorted = d.sort === 'total' ? diffResult.rows.slice().sort((x, y) => Math.abs(y.dTotal) - Math.abs(x.dTotal) || Math.abs(y.dSelf) - Math.abs(x.dSelf)) : diffResult.rows;
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

// ---- summary and wiring

function renderSummary() {
  const samples = main.samples;
  if (main.weighted) {
    let total = 0;
    for (let i = 0; i < main.n; i++) total += main.w[i];
    const objects = main.weighted.counts ? main.weighted.counts.reduce((a, b) => a + b, 0) : null;
    const parts = [
      `heap profile (${main.weighted.type}): ${amount(main, total)}${objects === null ? '' : ` in ${Math.round(objects)} objects`} at ${samples.length} allocating stacks`,
      'a snapshot of the heap in use (sampled: estimates), not a rate; boxes are sized by bytes',
      `${main.frames.length} frames, ${main.resources.length} resources`,
    ];
    if (main.labelKeys.length) parts.push(`labels: ${main.labelKeys.join(', ')}`);
    $('summary').textContent = parts.join(' \u00b7 ');
    return;
  }
  const parts = [`${samples.length} samples`];
  if (samples.length) parts.push(`duration ${(samples[samples.length - 1].timestamp - samples[0].timestamp).toFixed(1)} ms`);
  if (data.sampleInterval !== undefined) parts.push(`sampling interval ${data.sampleInterval} ms`);
  else if (samples.length > 2) {
    const gaps = [];
    for (let i = 1; i < main.n; i++) if (main.time[i] > main.time[i - 1]) gaps.push(main.time[i] - main.time[i - 1]);
    gaps.sort((a, b) => a - b);
    if (gaps.length) parts.push(`sampling interval \u2248 ${gaps[gaps.length >> 1].toFixed(2)} ms (median gap)`);
  }
  let js = 0;
  for (let i = 0; i < main.n; i++) if (main.kind[i] === JS) js++;
  parts.push(`${js} in JS`, `${main.frames.length} frames, ${main.stacks.length} stacks, ${main.resources.length} resources`);
  if (main.labelKeys.length) parts.push(`labels: ${main.labelKeys.join(', ')}`);
  if (main.linesOf.size) parts.push(`line ticks for ${main.linesOf.size} functions`);
  const metadata = data.trace.metadata;
  if (metadata) parts.push('metadata: ' + Object.entries(metadata).map(([k, v]) => `${k} ${v}`).join(', '));
  if (base) parts.push(`baseline: ${data.baselineName || 'baseline'}, ${base.n} samples`);
  $('summary').textContent = parts.join(' \u00b7 ');
}

const keySelect = $('label-key');
keySelect.append(...main.labelKeys.map((k) => el('option', { value: k, textContent: k })));
if (main.labelKeys.includes('endpoint')) keySelect.value = 'endpoint';
else if (main.labelKeys.includes('thread name')) keySelect.value = 'thread name';
keySelect.disabled = !main.labelKeys.length;
keySelect.onchange = () => renderLabels(main, rangeSel.sel, keySelect.value, state.label, setFilter);
const colorSelect = $('timeline-color');
colorSelect.append(el('option', { value: 'kind', textContent: 'kind (JS, idle, GC)' }), ...main.labelKeys.map((k) => el('option', { value: k, textContent: `label: ${k}` })));
if (main.labelKeys.includes('endpoint')) colorSelect.value = 'endpoint';
colorSelect.onchange = () => timeline.setColorBy(colorSelect.value);
$('clear-range').onclick = () => setRange(null);
$('all-samples').onclick = () => setFilter(null);
$('reset').onclick = () => {
  state.range = null;
  flame.resetZoom();
  setFilter(null);
};
$('reset-zoom').onclick = () => flame.resetZoom();
$('to-sandwich').onclick = () => flame.zoomed.frame && openSandwich(flame.zoomed.frameId);
$('search').oninput = (e) => setSearch(e.target.value);
$('top-limit').onchange = (e) => {
  state.limit = Number(e.target.value);
  renderTop(view, state.limit, { onSandwich: openSandwich, onSearch: findInFlame });
};
$('gc-attribute').onchange = (e) => {
  state.gc = e.target.checked;
  renderAll();
};
$('tabs').onclick = (e) => {
  const v = e.target.dataset && e.target.dataset.view;
  if (!v) return;
  state.view = v;
  renderView();
};
$('sandwich-fn').onchange = (e) => {
  state.sandwich = e.target.value === '' ? null : Number(e.target.value);
  renderSandwich();
};
$('diff-mode').onchange = (e) => {
  state.diff.mode = e.target.value;
  renderDiff();
};
$('diff-key').onchange = (e) => {
  state.diff.key = e.target.value;
  fillDiffValues(null);
  renderDiff();
};
for (const side of ['a', 'b']) {
  $('diff-' + side).onchange = (e) => {
    state.diff[side] = e.target.value === '\u0000none' ? null : e.target.value;
    renderDiff();
  };
}
$('diff-file').onchange = (e) => {
  const file = e.target.files && e.target.files[0];
  if (file) pickBaseline(file).finally(() => (document.body.dataset.baselinePicked = file.name));
};
$('diff-ignore-lines').onchange = (e) => {
  state.diff.ignoreLines = e.target.checked;
  renderDiff();
};
$('diff-sort').onchange = (e) => {
  state.diff.sort = e.target.value;
  renderDiff();
};
$('diff-limit').onchange = (e) => {
  state.diff.limit = Number(e.target.value);
  renderDiff();
};
// How long the page took to handle the last input (for the browser test's timings): the
// script (lastMs), and until the frame after it was drawn (frameMs: style, layout, paint).
let inputStarted = 0;
function handled(started) {
  const b = document.body.dataset;
  b.lastMs = (performance.now() - started).toFixed(1);
  requestAnimationFrame(() => setTimeout(() => (b.frameMs = (performance.now() - started).toFixed(1))));
}
for (const id of ['tabs', 'label-values', 'all-samples', 'reset', 'clear-range', 'gc-attribute', 'sandwich-fn', 'diff-mode', 'diff-key', 'diff-a', 'diff-b', 'diff-ignore-lines', 'diff-sort', 'diff-limit', 'top-functions', 'flamegraph']) {
  for (const type of ['click', 'change']) {
    $(id).addEventListener(type, () => (inputStarted = performance.now()), { capture: true });
    $(id).addEventListener(type, () => handled(inputStarted));
  }
}

// Redraw at a new width: a window resize, or a scrollbar appearing as the page grows.
let pending = false;
let drawnWidth = document.documentElement.clientWidth;
new ResizeObserver(() => {
  if (pending || document.documentElement.clientWidth === drawnWidth) return;
  pending = true;
  requestAnimationFrame(() => {
    pending = false;
    drawnWidth = document.documentElement.clientWidth;
    timeline.draw();
    renderView();
  });
}).observe(document.documentElement);
document.addEventListener('keydown', (e) => {
  if (e.key === 'Escape' && e.target === document.body) $('reset-zoom').click();
});

// A weighted profile has no time line and no samples to diff: those views are hidden.
if (main.weighted) {
  document.body.dataset.weighted = main.weighted.unit;
  $('timeline-section').hidden = true;
  $('gc-attribute').parentElement.hidden = true;
  for (const b of $('tabs').querySelectorAll('button')) if (b.dataset.view === 'timeorder' || b.dataset.view === 'diff') b.hidden = true;
  if (state.view === 'timeorder' || state.view === 'diff') state.view = 'flame';
  $('all-samples').textContent = 'everything';
  $('total-unit').textContent = ' in use';
}
renderSummary();
setupDiff();
timeline.setColorBy(colorSelect.value);
renderAll();
document.body.dataset.loadMs = (performance.now() - started).toFixed(1);
document.body.dataset.ready = 'true';
requestAnimationFrame(() => setTimeout(() => (document.body.dataset.firstFrameMs = (performance.now() - started).toFixed(1))));
