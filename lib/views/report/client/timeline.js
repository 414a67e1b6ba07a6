// The timeline: every sample over time, as stacked bars per time bin colored by kind (JS,
// idle, GC, ...) or by the values of a label; samples outside the label filter are grey.
// Dragging across it selects a time range, which filters every other view; a click
// without a drag clears it. Times on it are in one unit, seconds from a 10 s recording on
// (timeFormat); event-loop blocks are marked along its top.

const PALETTE = ['#4e79a7', '#f28e2b', '#e15759', '#76b7b2', '#59a14f', '#edc948', '#b07aa1', '#ff9da7', '#9c755f'];
const KIND_COLORS = ['hsl(24,85%,58%)', '#e6e6e6', '#8d8d8d', '#b9a6d6', '#cfcfcf'];
const OUTSIDE = '#d6dbe0';

/**
 * How times in a recording spanning `span` ms are written: one unit for all of them (s from
 * 10 s on, else ms), with `decimals` (default: 2 in s, 1 in ms).
 */
function timeFormat(span) {
  const seconds = span >= 10000;
  return (t, decimals) => (seconds ? `${(t / 1000).toFixed(decimals ?? 2)} s` : `${t.toFixed(decimals ?? 1)} ms`);
}

/**
 * @param {any} m
 * @param {{ onRange: (r: number[] | null) => void, marks?: { from: number, to: number, title: string }[] }} options
 */
function createTimeline(m, { onRange, marks = [] }) {
  const wrap = $('timeline');
  const canvas = $('timeline-canvas');
  const brush = $('brush');
  const t0 = m.n ? m.time[0] : 0;
  const span = m.n ? Math.max(m.time[m.n - 1] - t0, 1e-3) : 1;
  const format = timeFormat(span);
  let colorBy = 'kind';
  let label = null;
  let range = null;
  let cats = [];
  let catOf = new Uint8Array(m.n);
  let bins = null; // { nb, counts }

  /** Categories: { name, color }, and each sample's. */
  function categorize() {
    cats = [];
    catOf = new Uint8Array(m.n);
    if (colorBy === 'kind') {
      cats = KIND_NAME.map((name, k) => ({ name, color: KIND_COLORS[k] }));
      for (let i = 0; i < m.n; i++) catOf[i] = m.kind[i];
    } else {
      const counts = new Map();
      for (let i = 0; i < m.n; i++) {
        const v = labelAt(m, i, colorBy);
        if (v !== undefined) counts.set(v, (counts.get(v) || 0) + 1);
      }
      const values = [...counts].sort((a, b) => b[1] - a[1]).map((e) => e[0]);
      const shown = values.slice(0, values.length > PALETTE.length ? PALETTE.length - 1 : PALETTE.length);
      const index = new Map(shown.map((v, j) => [v, j]));
      cats = shown.map((v, j) => ({ name: v, color: PALETTE[j] }));
      const other = cats.length;
      if (values.length > shown.length) cats.push({ name: `${values.length - shown.length} other values`, color: '#6f6f6f' });
      const none = cats.length;
      cats.push({ name: `(no ${colorBy})`, color: '#c5ccd3' });
      const idle = cats.length;
      cats.push({ name: '(idle)', color: KIND_COLORS[IDLE] });
      for (let i = 0; i < m.n; i++) {
        const v = labelAt(m, i, colorBy);
        catOf[i] = m.kind[i] === IDLE ? idle : v === undefined ? none : index.has(v) ? index.get(v) : other;
      }
    }
    cats.push({ name: 'outside the label filter', color: OUTSIDE });
  }

  function draw() {
    const W = wrap.clientWidth;
    const H = 88;
    const dpr = window.devicePixelRatio || 1;
    canvas.width = Math.max(1, Math.round(W * dpr));
    canvas.height = Math.round(H * dpr);
    const g = canvas.getContext('2d');
    g.setTransform(dpr, 0, 0, dpr, 0, 0);
    g.clearRect(0, 0, W, H);
    // Bins of a few samples each (at most one per 2 px): each bar shows what the samples
    // in it were; a bin with fewer samples than usual (V8 sampled less) is shorter.
    const nb = Math.max(1, Math.min(Math.floor(W / 2), Math.ceil(m.n / 4)));
    const nc = cats.length;
    const outside = nc - 1;
    const counts = new Uint32Array(nb * nc);
    for (let i = 0; i < m.n; i++) {
      const b = Math.min(nb - 1, Math.floor(((m.time[i] - t0) / span) * nb));
      const c = label && !labelMatches(m, i, label) ? outside : catOf[i];
      counts[b * nc + c]++;
    }
    const sums = new Float64Array(nb);
    for (let b = 0; b < nb; b++) for (let c = 0; c < nc; c++) sums[b] += counts[b * nc + c];
    const nonEmpty = Array.from(sums).filter((x) => x > 0).sort((a, b) => a - b);
    const full = nonEmpty.length ? nonEmpty[nonEmpty.length >> 1] : 1;
    const bw = W / nb;
    for (let b = 0; b < nb; b++) {
      let y = H;
      const height = Math.min(1, sums[b] / full) * (H - 4);
      for (let c = 0; c < nc; c++) {
        const k = counts[b * nc + c];
        if (!k) continue;
        const h = (k / sums[b]) * height;
        g.fillStyle = cats[c].color;
        g.fillRect(b * bw, y - h, Math.max(bw - 0.3, 0.7), h);
        y -= h;
      }
    }
    bins = { nb, nc, counts, bw };
    drawAxis(W);
    drawBrush();
    $('timeline-legend').replaceChildren(
      ...cats.filter((c, j) => j < outside || label).map((c) => el('span', {}, el('i', { style: `background:${c.color}` }), c.name)),
    );
  }

  function drawAxis(W) {
    const raw = span / Math.max(2, Math.floor(W / 110));
    const p = 10 ** Math.floor(Math.log10(raw));
    const step = [1, 2, 5, 10].map((k) => k * p).find((s) => s >= raw);
    // Every tick in the recording's unit, with the decimals its step needs.
    const inUnit = span >= 10000 ? step / 1000 : step;
    const decimals = Math.max(0, -Math.floor(Math.log10(inUnit) + 1e-9));
    const ticks = [];
    for (let k = 0; k * step <= span + 1e-9; k++) {
      const t = k * step;
      ticks.push(el('span', { style: `left:${(t / span) * W}px`, textContent: t === 0 ? '0' : `+${format(t, decimals)}` }));
    }
    $('timeline-axis').replaceChildren(...ticks);
    $('block-marks').replaceChildren(
      ...marks.map((b) => el('div', { title: b.title, style: `left:${((b.from - t0) / span) * W}px;width:${Math.max(2, ((b.to - b.from) / span) * W)}px` })),
    );
  }

  function drawBrush(x0, x1) {
    const W = wrap.clientWidth;
    if (x0 === undefined && range) {
      x0 = ((range[0] - t0) / span) * W;
      x1 = ((range[1] - t0) / span) * W;
    }
    brush.hidden = x0 === undefined;
    if (x0 !== undefined) brush.style.cssText = `left:${Math.min(x0, x1)}px;width:${Math.max(Math.abs(x1 - x0), 2)}px`;
    wrap.dataset.from = range ? range[0] : '';
    wrap.dataset.to = range ? range[1] : '';
  }

  const xOf = (e) => Math.max(0, Math.min(wrap.clientWidth, e.clientX - wrap.getBoundingClientRect().left));
  const tAt = (x) => t0 + (x / wrap.clientWidth) * span;
  let dragFrom = null;
  wrap.addEventListener('pointerdown', (e) => {
    if (e.button !== 0 || !m.n) return;
    dragFrom = xOf(e);
    wrap.setPointerCapture(e.pointerId);
    e.preventDefault();
  });
  wrap.addEventListener('pointermove', (e) => {
    const x = xOf(e);
    if (dragFrom !== null) drawBrush(dragFrom, x);
    else if (bins) hover(x);
  });
  wrap.addEventListener('pointerup', (e) => {
    if (dragFrom === null) return;
    const x = xOf(e);
    const [a, b] = [Math.min(dragFrom, x), Math.max(dragFrom, x)];
    dragFrom = null;
    onRange(b - a < 3 ? null : [tAt(a), tAt(b)]);
  });

  function hover(x) {
    const b = Math.min(bins.nb - 1, Math.floor(x / bins.bw));
    const parts = [];
    let sum = 0;
    for (let c = 0; c < bins.nc; c++) {
      const k = bins.counts[b * bins.nc + c];
      if (k) parts.push(`${cats[c].name} ${k}`);
      sum += k;
    }
    const from = (b / bins.nb) * span;
    $('timeline-details').textContent = `+${format(from)} … +${format(from + span / bins.nb)}: ${sum} samples${parts.length ? ' — ' + parts.join(', ') : ''}`;
  }

  return {
    t0,
    span,
    format,
    setColorBy(key) {
      colorBy = key;
      categorize();
      draw();
    },
    setLabel(l) {
      label = l;
      draw();
    },
    setRange(r) {
      range = r;
      drawBrush();
    },
    draw,
    init() {
      categorize();
      draw();
    },
  };
}
