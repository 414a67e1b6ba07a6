'use strict';
// A self-contained HTML report of a trace: flame graph, top functions and samples per label
// value, with filtering by label. One file: the trace is embedded as JSON and read by the
// inline script below; nothing is fetched (a Content-Security-Policy forbids it).

const { readProfile } = require('./convert');

/**
 * The trace object from a trace (object, JSON text, json-gzip bytes) or pprof bytes,
 * read and checked by the Rust reader: every id in range, so the page never meets a
 * dangling one.
 */
function traceObject(input) {
  try {
    return readProfile(input);
  } catch (err) {
    if (err.code === 'ERR_SELFPROF_UNAVAILABLE') throw err;
    throw new TypeError(`htmlReport: ${err.message.replace(/^convert: /, '')}`);
  }
}

function escapeHtml(s) {
  return String(s).replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
}

/** JSON that is safe inside a <script> element: no `<` (so no `</script>` or `<!--`). */
function scriptJson(value) {
  return JSON.stringify(value)
    .replace(/</g, '\\u003c')
    .replace(/\u2028/g, '\\u2028')
    .replace(/\u2029/g, '\\u2029');
}

/**
 * A complete HTML document (one file, no network) showing `trace`: an interactive flame
 * graph (click to zoom, search), the top functions, and samples per label value, where
 * clicking a value filters everything to its samples. `sampleInterval` (ms), if given, is
 * shown; otherwise the median gap between samples is.
 */
function htmlReport(trace, { title = 'selfprof report', sampleInterval } = {}) {
  const data = {
    // As the Rust reader writes it: exactly the trace's fields, `contexts` always present.
    trace: traceObject(trace),
    sampleInterval: typeof sampleInterval === 'number' ? sampleInterval : undefined,
  };
  return `<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; img-src data:">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>${escapeHtml(title)}</title>
<link rel="icon" href="data:,">
<style>${CSS}</style>
</head>
<body>
<header>
  <h1>${escapeHtml(title)}</h1>
  <div class="totals">showing <b id="total-samples">0</b> samples &middot; filter: <b id="active-filter">all samples</b>
  <button id="reset" type="button" title="Clear the label filter and the zoom">reset</button></div>
  <div id="summary"></div>
</header>
<section>
  <div class="toolbar">
    <input id="search" type="search" placeholder="search functions (substring)" autocomplete="off">
    <span id="search-result"></span>
    <button id="reset-zoom" type="button">reset zoom</button>
    <span class="legend"><i class="c-user"></i>your code <i class="c-node"></i>node: <i class="c-native"></i>native <i class="c-pseudo"></i>not JS</span>
  </div>
  <div id="flamegraph"></div>
  <div id="details">&nbsp;</div>
</section>
<div class="columns">
<section class="top">
  <h2>Top functions <select id="top-limit"><option>25</option><option>50</option><option>100</option><option value="0">all</option></select></h2>
  <table id="top-functions"><thead><tr><th>self</th><th>self %</th><th>total</th><th>total %</th><th class="l">function</th><th class="l">location</th></tr></thead><tbody></tbody></table>
</section>
<section class="labels">
  <h2>Samples by label <select id="label-key"></select></h2>
  <button id="all-samples" type="button">all samples</button>
  <table id="label-values"><thead><tr><th class="l">value</th><th>samples</th><th>%</th></tr></thead><tbody></tbody></table>
</section>
</div>
<script type="application/json" id="trace-data">${scriptJson(data)}</script>
<script>(${client.toString().replace(/<\/(script)/gi, '<\\/$1')})();</script>
</body>
</html>
`;
}

const CSS = `
*{box-sizing:border-box}
body{margin:0;padding:12px 16px;font:13px/1.4 system-ui,-apple-system,"Segoe UI",sans-serif;color:#1d1d1f;background:#fafafa}
h1{font-size:18px;margin:0 0 4px}
h2{font-size:14px;margin:16px 0 6px}
header{border-bottom:1px solid #ddd;padding-bottom:8px;margin-bottom:8px}
.totals b{font-variant-numeric:tabular-nums}
#summary{color:#555;margin-top:4px}
button{font:inherit;padding:1px 8px;cursor:pointer}
.toolbar{display:flex;gap:10px;align-items:center;margin-bottom:6px;flex-wrap:wrap}
#search{width:260px;font:inherit;padding:2px 6px}
#search-result{color:#7a1f8a;min-width:12em}
.legend{margin-left:auto;color:#555}
.legend i{display:inline-block;width:10px;height:10px;margin:0 3px 0 8px;vertical-align:-1px;border-radius:2px}
.c-user{background:hsl(24,85%,62%)}.c-node{background:hsl(190,50%,65%)}.c-native{background:hsl(270,40%,72%)}.c-pseudo{background:#bdbdbd}
#flamegraph{position:relative;width:100%;overflow:hidden;background:#fff;border:1px solid #ddd;min-height:40px}
.frame{position:absolute;height:17px;overflow:hidden;white-space:nowrap;text-overflow:ellipsis;font:11.5px/17px ui-monospace,Menlo,Consolas,monospace;color:#1a1a1a;padding:0 3px;border-right:1px solid #fff;border-bottom:1px solid #fff;cursor:pointer}
.frame:hover{filter:brightness(1.12);outline:1px solid #333;z-index:1}
.frame.ancestor{opacity:.55}
#flamegraph.searching .frame:not(.match){opacity:.35}
.frame.match{background:#e35ef0 !important;color:#000}
#details{color:#333;font-family:ui-monospace,Menlo,Consolas,monospace;font-size:12px;margin-top:4px;white-space:nowrap;overflow:hidden;text-overflow:ellipsis}
.columns{display:flex;gap:24px;align-items:flex-start;flex-wrap:wrap}
.top{flex:3 1 560px;min-width:0}.labels{flex:1 1 320px}
table{border-collapse:collapse;width:100%;background:#fff;border:1px solid #ddd}
th,td{padding:2px 8px;text-align:right;font-variant-numeric:tabular-nums;border-bottom:1px solid #eee;white-space:nowrap}
th{background:#f0f0f0;font-weight:600}
.l{text-align:left}
td.l{max-width:420px;overflow:hidden;text-overflow:ellipsis}
#top-functions td.fn{cursor:pointer;font-family:ui-monospace,Menlo,Consolas,monospace;color:#0b57d0}
#top-functions td.loc{color:#666;font-size:12px}
#label-values tbody tr{cursor:pointer}
#label-values tbody tr:hover{background:#f3f0ff}
#label-values tr.active{background:#e4dcff;font-weight:600}
#label-values td.l{font-family:ui-monospace,Menlo,Consolas,monospace}
.none{color:#777;font-style:italic}
#all-samples{margin-bottom:6px}
`;

// Runs in the browser (embedded with Function.prototype.toString): reads the embedded trace
// and renders the page. State: a label filter, the zoomed flame-graph node, the search text.
function client() {
  'use strict';
  const $ = (id) => document.getElementById(id);
  const data = JSON.parse($('trace-data').textContent);
  const { resources, frames, stacks, samples, contexts, metadata } = data.trace;
  const PSEUDO = { idle: '(idle)', gc: '(garbage collector)', other: '(program)', root: '(root)' };
  const ROW = 18;
  const state = { filter: null, zoom: 'root', search: '', limit: 25 };
  let view; // the aggregation of the samples the filter selects

  const pct = (n, d) => (d ? ((100 * n) / d).toFixed(1) : '0.0');
  const nameOf = (f) => f.name || '(anonymous)';
  function locationOf(f) {
    if (!f || f.resourceId === undefined) return f ? '(native)' : '';
    const r = resources[f.resourceId].replace(/^file:\/\//, '');
    return f.line === undefined ? r : `${r}:${f.line}:${f.column}`;
  }
  const labelOf = (s, key) => (s.contextId === undefined ? undefined : contexts[s.contextId].labels[key]);
  function selected(s) {
    if (!state.filter) return true;
    const v = labelOf(s, state.filter.key);
    return state.filter.none ? v === undefined : v === state.filter.value;
  }
  function el(tag, props, ...children) {
    const e = document.createElement(tag);
    Object.assign(e, props);
    e.append(...children);
    return e;
  }

  // Counts per stack, pseudo-frames for samples without a stack, and the call tree.
  function aggregate() {
    const self = new Float64Array(stacks.length);
    const pseudo = { idle: 0, gc: 0, other: 0, root: 0 };
    let n = 0;
    for (const s of samples) {
      if (!selected(s)) continue;
      n++;
      if (s.stackId !== undefined) self[s.stackId]++;
      else pseudo[s.marker || 'root']++;
    }
    const total = Float64Array.from(self);
    for (let i = stacks.length - 1; i >= 0; i--) {
      if (stacks[i].parentId !== undefined) total[stacks[i].parentId] += total[i];
    }
    const root = { key: 'root', name: 'all samples', frame: null, total: n, self: 0, children: [], parent: null };
    const nodes = new Map([['root', root]]);
    const byStack = [];
    stacks.forEach((st, i) => {
      if (!total[i]) return;
      const parent = st.parentId === undefined ? root : byStack[st.parentId];
      const f = frames[st.frameId];
      const node = { key: 's' + i, name: nameOf(f), frame: f, total: total[i], self: self[i], children: [], parent };
      parent.children.push(node);
      nodes.set(node.key, (byStack[i] = node));
    });
    for (const [kind, count] of Object.entries(pseudo)) {
      if (!count) continue;
      const node = { key: kind, name: PSEUDO[kind], frame: null, pseudo: true, total: count, self: count, children: [], parent: root };
      root.children.push(node);
      nodes.set(kind, node);
    }
    for (const node of nodes.values()) node.children.sort((a, b) => b.total - a.total || (a.name < b.name ? -1 : 1));

    // Top functions: self = innermost frame; total counts a frame once per sample.
    const fSelf = new Float64Array(frames.length);
    const fTotal = new Float64Array(frames.length);
    const seen = new Int32Array(frames.length).fill(-1);
    self.forEach((count, i) => {
      if (!count) return;
      fSelf[stacks[i].frameId] += count;
      for (let id = i; id !== undefined; id = stacks[id].parentId) {
        const f = stacks[id].frameId;
        if (seen[f] !== i) {
          seen[f] = i;
          fTotal[f] += count;
        }
      }
    });
    const top = frames
      .map((f, i) => ({ name: nameOf(f), location: locationOf(f), self: fSelf[i], total: fTotal[i] }))
      .filter((r) => r.total > 0);
    for (const [kind, count] of Object.entries(pseudo)) {
      if (count) top.push({ name: PSEUDO[kind], location: '', self: count, total: count, pseudo: true });
    }
    top.sort((a, b) => b.self - a.self || b.total - a.total);
    return { n, root, nodes, top };
  }

  function colorOf(node) {
    if (node === view.root) return '#d6d6d6';
    if (node.pseudo) return '#bdbdbd';
    let h = 0;
    for (let i = 0; i < node.name.length; i++) h = (h * 31 + node.name.charCodeAt(i)) >>> 0;
    const f = node.frame;
    const url = f.resourceId === undefined ? null : resources[f.resourceId];
    if (url === null) return `hsl(${255 + (h % 30)},40%,${70 + (h % 7)}%)`;
    if (url.startsWith('node:')) return `hsl(${175 + (h % 30)},45%,${62 + (h % 9)}%)`;
    return `hsl(${8 + (h % 45)},${72 + (h % 18)}%,${58 + (h % 10)}%)`;
  }
  const matches = (node) => state.search !== '' && node !== view.root && node.name.toLowerCase().includes(state.search);
  const describe = (node) =>
    [node.name, node.frame ? locationOf(node.frame) : node.pseudo ? 'not JS' : '', `${node.total} samples (${pct(node.total, view.n)}%)`]
      .filter(Boolean)
      .join(' — ');

  function renderFlame() {
    const box = $('flamegraph');
    const width = box.clientWidth;
    const zoom = view.nodes.get(state.zoom) || view.root;
    const chain = [];
    for (let n = zoom; n; n = n.parent) chain.unshift(n);
    const frag = document.createDocumentFragment();
    let depth = 0;
    function add(node, x, w, d, ancestor) {
      const div = el('div', { className: 'frame', title: describe(node) });
      if (ancestor) div.classList.add('ancestor');
      if (matches(node)) div.classList.add('match');
      div.dataset.name = node.name;
      div.dataset.samples = node.total;
      div.dataset.key = node.key;
      div.style.cssText = `left:${x}px;top:${d * ROW}px;width:${w}px;background:${colorOf(node)}`;
      if (w > 28) div.textContent = node.name;
      frag.append(div);
      depth = Math.max(depth, d);
    }
    chain.forEach((node, d) => add(node, 0, width, d, node !== zoom));
    const scale = zoom.total ? width / zoom.total : 0;
    (function layout(node, x, d) {
      for (const child of node.children) {
        const w = child.total * scale;
        if (w >= 0.5) {
          add(child, x, w, d, false);
          layout(child, x, d + 1);
        }
        x += w;
      }
    })(zoom, 0, chain.length);
    box.replaceChildren(frag);
    box.style.height = (depth + 1) * ROW + 2 + 'px';
    box.classList.toggle('searching', state.search !== '');

    let matched = 0;
    (function count(node) {
      if (matches(node)) matched += node.total;
      else node.children.forEach(count);
    })(view.root);
    $('search-result').textContent = state.search ? `matched: ${matched} samples (${pct(matched, view.n)}%)` : '';
  }

  function renderTop() {
    const rows = state.limit ? view.top.slice(0, state.limit) : view.top;
    $('top-functions').tBodies[0].replaceChildren(
      ...rows.map((r) => {
        const fn = el('td', { className: 'l fn' + (r.pseudo ? ' none' : ''), textContent: r.name, title: 'search for ' + r.name });
        fn.onclick = () => setSearch(r.name);
        return el('tr', {}, ...[r.self, pct(r.self, view.n), r.total, pct(r.total, view.n)].map((v) => el('td', { textContent: v })),
          fn, el('td', { className: 'l loc', textContent: r.location, title: r.location }));
      }),
    );
  }

  const labelKeys = [...new Set(contexts.flatMap((c) => Object.keys(c.labels)))].sort();
  function renderLabels() {
    const key = $('label-key').value;
    const groups = new Map();
    for (const s of samples) {
      const v = labelOf(s, key);
      const id = v === undefined ? '\u0000none' : v;
      groups.set(id, (groups.get(id) || 0) + 1);
    }
    const rows = [...groups].sort((a, b) => b[1] - a[1]).map(([id, count]) => {
      const none = id === '\u0000none';
      const tr = el('tr', {},
        el('td', { className: 'l' + (none ? ' none' : ''), textContent: none ? '(none)' : id, title: none ? 'samples without this label' : id }),
        el('td', { textContent: count }), el('td', { textContent: pct(count, samples.length) }));
      tr.dataset.value = none ? '' : id;
      if (none) tr.dataset.none = 'true';
      const f = state.filter;
      if (f && f.key === key && f.none === none && (none || f.value === id)) tr.className = 'active';
      tr.onclick = () => setFilter(tr.className === 'active' ? null : { key, value: none ? null : id, none });
      return tr;
    });
    $('label-values').tBodies[0].replaceChildren(...rows);
  }

  function renderAll() {
    view = aggregate();
    if (!view.nodes.has(state.zoom)) state.zoom = 'root';
    $('total-samples').textContent = view.n;
    const f = state.filter;
    $('active-filter').textContent = f ? `${f.key} = ${f.none ? '(none)' : f.value}` : 'all samples';
    renderFlame();
    renderTop();
    renderLabels();
  }
  function setFilter(filter) {
    state.filter = filter;
    renderAll();
  }
  function setSearch(text) {
    $('search').value = text;
    state.search = text.trim().toLowerCase();
    renderFlame();
  }

  function renderSummary() {
    const parts = [`${samples.length} samples`];
    if (samples.length) {
      parts.push(`duration ${(samples[samples.length - 1].timestamp - samples[0].timestamp).toFixed(1)} ms`);
    }
    if (data.sampleInterval !== undefined) parts.push(`sampling interval ${data.sampleInterval} ms`);
    else if (samples.length > 2) {
      const gaps = samples.slice(1).map((s, i) => s.timestamp - samples[i].timestamp).filter((g) => g > 0).sort((a, b) => a - b);
      if (gaps.length) parts.push(`sampling interval ≈ ${gaps[gaps.length >> 1].toFixed(2)} ms (median gap)`);
    }
    const js = samples.filter((s) => s.stackId !== undefined).length;
    parts.push(`${js} in JS`, `${frames.length} frames, ${stacks.length} stacks, ${resources.length} resources`);
    if (labelKeys.length) parts.push(`labels: ${labelKeys.join(', ')}`);
    if (metadata) parts.push('metadata: ' + Object.entries(metadata).map(([k, v]) => `${k} ${v}`).join(', '));
    $('summary').textContent = parts.join(' · ');
  }

  const keySelect = $('label-key');
  keySelect.append(...labelKeys.map((k) => el('option', { value: k, textContent: k })));
  if (labelKeys.includes('endpoint')) keySelect.value = 'endpoint';
  keySelect.disabled = !labelKeys.length;
  keySelect.onchange = renderLabels;
  $('all-samples').onclick = () => setFilter(null);
  $('reset').onclick = () => {
    state.zoom = 'root';
    setFilter(null);
  };
  $('reset-zoom').onclick = () => {
    state.zoom = 'root';
    renderFlame();
  };
  $('search').oninput = (e) => setSearch(e.target.value);
  $('top-limit').onchange = (e) => {
    state.limit = Number(e.target.value);
    renderTop();
  };
  const flame = $('flamegraph');
  flame.onclick = (e) => {
    const key = e.target.dataset && e.target.dataset.key;
    if (!key) return;
    state.zoom = key === state.zoom ? (view.nodes.get(key).parent || view.root).key : key;
    renderFlame();
  };
  flame.onmouseover = (e) => {
    const key = e.target.dataset && e.target.dataset.key;
    if (key) $('details').textContent = describe(view.nodes.get(key));
  };
  let pending = false;
  window.addEventListener('resize', () => {
    if (pending) return;
    pending = true;
    requestAnimationFrame(() => {
      pending = false;
      renderFlame();
    });
  });
  document.addEventListener('keydown', (e) => {
    if (e.key === 'Escape' && e.target === document.body) $('reset-zoom').click();
  });
  renderSummary();
  renderAll();
}

module.exports = { htmlReport };
