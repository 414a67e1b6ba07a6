// Time order (a flame chart, as DevTools' and speedscope's): the stacks of the kept
// samples over time, root at the top; x is time over the selected range (or the whole
// recording), each sample lasting until the next one. Consecutive samples sharing a call
// path share its boxes, so a long-running call is one wide box: a stall stands out.

function createTimeOrder(m, { onPick }) {
  const wrap = $('timeorder');
  const canvas = $('timeorder-canvas');
  const ROWH = 16;
  let rows = []; // per depth: boxes { x0, x1, stack (or -1 - kind for markers) }
  let shown = null;

  function render(sel, range, gc) {
    const W = wrap.clientWidth;
    rows = [];
    let first = -1;
    let last = -1;
    for (let i = 0; i < m.n; i++) {
      if (!sel[i]) continue;
      if (first < 0) first = i;
      last = i;
    }
    const from = range ? range[0] : first >= 0 ? m.time[first] : 0;
    let to = range ? range[1] : last >= 0 ? m.time[last] : 1;
    // The last sample lasts a typical gap.
    const gap = first >= 0 && last > first ? (m.time[last] - m.time[first]) / (last - first) : 1;
    if (!range) to += gap;
    const scale = W / Math.max(to - from, 1e-6);
    const open = []; // per depth: the box being extended
    const path = [];
    let prevEnd = -1;
    for (let i = 0; i < m.n; i++) {
      if (!sel[i]) continue;
      const x0 = (m.time[i] - from) * scale;
      const next = i + 1 < m.n ? m.time[i + 1] : m.time[i] + gap;
      const x1 = Math.min(W, (Math.min(next, to) - from) * scale);
      // The sample's path, root first: stack ids, then a marker box.
      path.length = 0;
      const k = m.kind[i];
      let s = m.stack[i];
      let marker = k === JS ? 0 : -1 - k;
      if (k === GC && s < 0 && gc && m.gcStack[i] >= 0) {
        s = m.gcStack[i];
        marker = -10; // attributed GC
      }
      for (let id = s; id >= 0; id = m.parent[id]) path.push(id);
      path.reverse();
      if (marker) path.push(marker);
      const contiguous = Math.abs(x0 - prevEnd) < 1e-6;
      for (let d = 0; d < path.length; d++) {
        const box = open[d];
        if (contiguous && box && box.id === path[d] && (d === 0 || open[d - 1] === box.under)) {
          box.x1 = x1;
        } else {
          const b = { id: path[d], x0, x1, under: d ? open[d - 1] : null };
          (rows[d] || (rows[d] = [])).push(b);
          open[d] = b;
          for (let e = d + 1; e < open.length; e++) open[e] = null;
        }
      }
      for (let e = path.length; e < open.length; e++) open[e] = null;
      prevEnd = x1;
    }
    const H = Math.max(1, rows.length) * ROWH;
    const dpr = window.devicePixelRatio || 1;
    canvas.width = Math.max(1, Math.round(W * dpr));
    canvas.height = Math.round(H * dpr);
    canvas.style.height = H + 'px';
    const g = canvas.getContext('2d');
    g.setTransform(dpr, 0, 0, dpr, 0, 0);
    g.clearRect(0, 0, W, H);
    g.font = '11px ui-monospace,Menlo,Consolas,monospace';
    g.textBaseline = 'middle';
    rows.forEach((boxes, d) => {
      for (const b of boxes) {
        const w = b.x1 - b.x0;
        if (w <= 0) continue;
        g.fillStyle = colorOf(b.id);
        g.fillRect(b.x0, d * ROWH, Math.max(w - (w > 3 ? 1 : 0), 0.4), ROWH - 1);
        if (w > 30) {
          g.fillStyle = '#1a1a1a';
          g.save();
          g.beginPath();
          g.rect(b.x0, d * ROWH, w - 2, ROWH);
          g.clip();
          g.fillText(nameOfBox(b.id), b.x0 + 3, d * ROWH + ROWH / 2);
          g.restore();
        }
      }
    });
    shown = { from, to, scale, width: W, count: rows.reduce((n, r) => n + r.length, 0) };
    wrap.dataset.boxes = shown.count;
  }

  const nameOfBox = (id) => (id >= 0 ? nameOf(m.frames[m.frameOf[id]]) : id === -10 ? PSEUDO.gc : KIND_NAME[-1 - id]);
  const colorOf = (id) => (id >= 0 ? colorOfFrame(m, m.frames[m.frameOf[id]], nameOfBox(id)) : id === -10 ? '#a9a9a9' : '#cfcfcf');

  function boxAt(e) {
    const r = canvas.getBoundingClientRect();
    // In the coordinates it was drawn in (the page may have changed width since).
    const x = shown && r.width ? ((e.clientX - r.left) * shown.width) / r.width : 0;
    const d = Math.floor((e.clientY - r.top) / ROWH);
    const boxes = rows[d] || [];
    let lo = 0;
    let hi = boxes.length - 1;
    while (lo <= hi) {
      const mid = (lo + hi) >> 1;
      if (boxes[mid].x1 < x) lo = mid + 1;
      else if (boxes[mid].x0 > x) hi = mid - 1;
      else return boxes[mid];
    }
    return null;
  }
  canvas.addEventListener('mousemove', (e) => {
    const b = boxAt(e);
    if (!b || !shown) return;
    const t = (x) => `+${ms(x / shown.scale + shown.from - (m.n ? m.time[0] : 0))}`;
    const where = b.id >= 0 ? ` — ${m.locationOf(m.frames[m.frameOf[b.id]])}` : b.id === -10 ? ' — attributed: the JS sample before it' : '';
    $('timeorder-details').textContent = `${nameOfBox(b.id)}${where} — ${t(b.x0)} to ${t(b.x1)} (${ms((b.x1 - b.x0) / shown.scale)})`;
  });
  canvas.addEventListener('click', (e) => {
    const b = boxAt(e);
    if (b && b.id >= 0) onPick(m.frameOf[b.id]);
  });

  return { render };
}
