// The page: state (label filter, time range, GC attribution, the open view and each view's
// choices), rendering on every change, and the controls' wiring. Every view reads the same
// kept samples: those in the time range with the label filter's value.

const main = makeModel(data.trace);
const state = {
  label: null, // { key, value, none }
  range: null, // [from, to] in the trace's ms
  gc: false,
  idle: false, // idle samples in the flame graph, sandwich and top functions
  view: data.view || 'flame',
  search: '',
  limit: 25,
  sandwich: null, // frame id
  diff: { mode: data.baseline ? 'profile' : 'label', key: null, a: null, b: null, ignoreLines: false, limit: 25, sort: 'self' },
};
let sel; // { sel, n }: the kept samples
let rangeSel; // the samples in the time range (the label panel counts these)
let counts;
let view; // callTree of the kept samples

const flame = createFlameView(main);
const sandwich = createSandwichView(main, data.sources);
const diff = createDiffView(main, data.baseline ? makeModel(data.baseline) : null, state.diff, {
  kept: () => ({ label: state.label, range: state.range, sel: sel.sel, gc: state.gc }),
  onBaseline: () => renderSummary(),
});
// The event-loop blocks, listed first; a block opens the flame graph of its stretch.
const blocks = createBlocksView(main, data.blocks, {
  onOpen: (range, thread) => openStretch(range, thread),
  format: timeFormat(main.n ? main.time[main.n - 1] - main.time[0] : 0),
  t0: main.n ? main.time[0] : 0,
});
const timeline = createTimeline(main, {
  onRange: (r) => {
    const t = performance.now();
    setRange(r);
    handled(t);
  },
  marks: blocks.marks,
});
const timeOrder = createTimeOrder(main, { onPick: (f) => openSandwich(f) });

function renderAll() {
  rangeSel = selectSamples(main, { range: state.range });
  sel = state.label ? selectSamples(main, { label: state.label, range: state.range }) : rangeSel;
  counts = stackCounts(main, sel.sel, { gc: state.gc, idle: state.idle || !!main.weighted });
  view = callTree(main, counts);
  $('total-samples').textContent = main.weighted ? amount(main, view.n) : sel.n;
  // The idle share, said whether or not the graph shows it.
  const idle = counts.idleLeft + counts.pseudo.idle;
  $('idle-share').textContent = sel.n && !main.weighted ? `(idle): ${pct(idle, sel.n)}% of the samples${state.idle ? '' : ', not shown'}` : '';
  const f = state.label;
  $('active-filter').textContent = f ? `${f.key} = ${f.none ? '(none)' : f.value}` : 'all samples';
  const r = state.range;
  const rangeText = r ? `+${timeline.format(r[0] - timeline.t0)} \u2026 +${timeline.format(r[1] - timeline.t0)} (${ms(r[1] - r[0])})` : 'whole recording';
  $('active-range').textContent = rangeText;
  $('range-text').textContent = r ? `selected ${rangeText}: ${rangeSel.n} samples` : 'drag across the timeline to select a time range; it filters every view';
  $('clear-range').disabled = !r;
  timeline.setRange(r);
  blocks.setRange(r);
  flame.show(view);
  renderTop(main, view, state.limit, { onSandwich: openSandwich, onSearch: findInFlame });
  renderLabels(main, rangeSel.sel, $('label-key').value, state.label, setFilter);
  renderView();
}

function renderView() {
  for (const b of $('tabs').querySelectorAll('button')) b.classList.toggle('active', b.dataset.view === state.view);
  for (const v of ['flame', 'timeorder', 'sandwich', 'diff']) $('view-' + v).hidden = v !== state.view;
  if (state.view === 'flame') flame.render();
  if (state.view === 'timeorder') timeOrder.render(sel.sel, state.range, state.gc);
  if (state.view === 'sandwich') renderSandwich();
  if (state.view === 'diff') diff.render();
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
/** A block's stretch (`range`, and its thread's samples in a trace of several), in the flame graph. */
function openStretch(range, thread) {
  const t = performance.now();
  const id = thread && thread['thread id'];
  state.label = range && id !== undefined ? { key: 'thread id', value: id, none: false } : null;
  timeline.setLabel(state.label);
  state.range = range;
  state.view = 'flame';
  flame.resetZoom();
  renderAll();
  handled(t);
}
function setSearch(text) {
  $('search').value = text;
  state.search = text.trim().toLowerCase();
  flame.setSearch(state.search);
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

function renderSandwich() {
  sandwich.render(view, counts, sel.sel, state.sandwich);
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
  if (diff.base) parts.push(`baseline: ${data.baselineName || 'baseline'}, ${diff.base.n} samples`);
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
  renderTop(main, view, state.limit, { onSandwich: openSandwich, onSearch: findInFlame });
};
$('show-idle').onchange = (e) => {
  state.idle = e.target.checked;
  renderAll();
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
  diff.render();
};
$('diff-key').onchange = (e) => {
  state.diff.key = e.target.value;
  diff.fillValues(null);
  diff.render();
};
for (const side of ['a', 'b']) {
  $('diff-' + side).onchange = (e) => {
    state.diff[side] = e.target.value === '\u0000none' ? null : e.target.value;
    diff.render();
  };
}
$('diff-file').onchange = (e) => {
  const file = e.target.files && e.target.files[0];
  if (file) diff.pickBaseline(file).finally(() => (document.body.dataset.baselinePicked = file.name));
};
$('diff-ignore-lines').onchange = (e) => {
  state.diff.ignoreLines = e.target.checked;
  diff.render();
};
$('diff-sort').onchange = (e) => {
  state.diff.sort = e.target.value;
  diff.render();
};
$('diff-limit').onchange = (e) => {
  state.diff.limit = Number(e.target.value);
  diff.render();
};
// How long the page took to handle the last input (for the browser test's timings): the
// script (lastMs), and until the frame after it was drawn (frameMs: style, layout, paint).
let inputStarted = 0;
function handled(started) {
  const b = document.body.dataset;
  b.lastMs = (performance.now() - started).toFixed(1);
  requestAnimationFrame(() => setTimeout(() => (b.frameMs = (performance.now() - started).toFixed(1))));
}
for (const id of ['tabs', 'blocks', 'show-idle', 'label-values', 'all-samples', 'reset', 'clear-range', 'gc-attribute', 'sandwich-fn', 'diff-mode', 'diff-key', 'diff-a', 'diff-b', 'diff-ignore-lines', 'diff-sort', 'diff-limit', 'top-functions', 'flamegraph']) {
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
  $('show-idle').parentElement.hidden = true;
  for (const b of $('tabs').querySelectorAll('button')) if (b.dataset.view === 'timeorder' || b.dataset.view === 'diff') b.hidden = true;
  if (state.view === 'timeorder' || state.view === 'diff') state.view = 'flame';
  $('all-samples').textContent = 'everything';
  $('total-unit').textContent = ' in use';
}
renderSummary();
diff.setup();
timeline.setColorBy(colorSelect.value);
renderAll();
document.body.dataset.loadMs = (performance.now() - started).toFixed(1);
document.body.dataset.ready = 'true';
requestAnimationFrame(() => setTimeout(() => (document.body.dataset.firstFrameMs = (performance.now() - started).toFixed(1))));
