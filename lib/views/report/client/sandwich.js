// Sandwich: one function's callers and callees, each merged over every place it was
// called from (speedscope's sandwich view), and its hot source lines.
//
// For each kept sample with the function on its stack (its outermost call, when it is
// recursive), the callers tree follows the stack up from that call and the callees tree
// down from it; both roots are the function and total the samples it was on (each sample
// once). GC attributed to a stack counts as under its innermost frame. The view
// (createSandwichView) shows them as two flame graphs, and the function's hot lines.

function sandwichTrees(m, c, target) {
  const S = m.stacks.length;
  const own = new Float64Array(S);
  for (let i = 0; i < S; i++) own[i] = c.js[i] + c.gcAt[i] + c.gcAttr[i];
  // The outermost stack (a prefix of stack i) whose frame is the target, or -1.
  const outer = new Int32Array(S);
  for (let i = 0; i < S; i++) {
    const up = m.parent[i] < 0 ? -1 : outer[m.parent[i]];
    outer[i] = up >= 0 ? up : m.frameOf[i] === target ? i : -1;
  }
  const f = m.frames[target];
  const mk = (key, name, frame, frameId, parent) => ({ key, name, frame, frameId, total: 0, self: 0, children: [], parent, childOf: new Map() });
  const callees = mk('root', nameOf(f), f, target, null);
  const callers = mk('root', nameOf(f), f, target, null);
  const child = (node, frameId) => {
    let ch = node.childOf.get(frameId);
    if (!ch) {
      const fr = frameId >= 0 ? m.frames[frameId] : null;
      ch = mk(`${node.key}/${frameId}`, fr ? nameOf(fr) : PSEUDO.gc, fr, frameId, node);
      if (!fr) ch.pseudo = true;
      node.childOf.set(frameId, ch);
      node.children.push(ch);
    }
    return ch;
  };
  // Callees: stack i's node under the target's outermost call.
  const calleeNode = new Array(S);
  const weight = new Float64Array(S); // per outermost call: samples under it
  let self = 0;
  for (let i = 0; i < S; i++) {
    const o = outer[i];
    if (o < 0) continue;
    calleeNode[i] = i === o ? callees : child(calleeNode[m.parent[i]], m.frameOf[i]);
    if (!own[i]) continue;
    weight[o] += own[i];
    if (m.frameOf[i] === target) self += c.js[i];
    let node = calleeNode[i];
    node.self += c.js[i];
    for (const [count, attributed] of [[c.gcAt[i], false], [c.gcAttr[i], true]]) {
      if (!count) continue;
      const g = child(node, attributed ? -2 : -1);
      g.attributed = attributed;
      g.self += count;
      g.total += count;
    }
    for (; node; node = node.parent) node.total += own[i];
  }
  // Callers: up from each outermost call.
  for (let o = 0; o < S; o++) {
    if (!weight[o]) continue;
    callers.total += weight[o];
    let node = callers;
    for (let q = m.parent[o]; q >= 0; q = m.parent[q]) {
      node = child(node, m.frameOf[q]);
      node.total += weight[o];
    }
  }
  const sort = (node) => {
    node.children = node.children.filter((ch) => ch.total > 0);
    node.children.sort((a, b) => b.total - a.total || (a.name < b.name ? -1 : 1));
    node.children.forEach(sort);
  };
  sort(callers);
  sort(callees);
  return { callers, callees, total: callees.total, self };
}

/**
 * The function's hot lines: V8's line ticks of its stacks. They are totals per stack over
 * the recording; under a filter each stack's are scaled by the share of its samples kept
 * (an apportionment, shown as such).
 */
function hotLines(m, sel, c, target) {
  const entries = m.linesOf.get(target) || [];
  if (!entries.length) return { rows: [], scaled: false, lined: 0 };
  const all = new Float64Array(m.stacks.length);
  for (let i = 0; i < m.n; i++) if (m.kind[i] === JS) all[m.stack[i]]++;
  let scaled = false;
  const byLine = new Map();
  for (const { stackId, line, ticks } of entries) {
    const k = all[stackId] ? c.js[stackId] / all[stackId] : 0;
    if (k !== 1) scaled = true;
    byLine.set(line, (byLine.get(line) || 0) + ticks * k);
  }
  const rows = [...byLine].filter((e) => e[1] > 0).map(([line, samples]) => ({ line, samples })).sort((a, b) => b.samples - a.samples || a.line - b.line);
  return { rows, scaled, lined: rows.reduce((n, r) => n + r.samples, 0) };
}

/**
 * The sandwich view of model m: a picker of functions, the picked one's callers and callees
 * flames and its hot lines (with their text from `sources`, { url: { line: text } }).
 */
function createSandwichView(m, sources) {
  let n = 0; // the kept samples: each box's share is of these
  const describe = (node) => describeNode(m, node, n);
  const color = (node) => colorOfNode(m, node);
  const callersFlame = createFlame($('sandwich-callers'), {
    inverted: true,
    color,
    describe,
    onHover: (node) => ($('sandwich-details').textContent = 'caller: ' + describe(node)),
  });
  const calleesFlame = createFlame($('sandwich-callees'), {
    color,
    describe,
    onHover: (node) => ($('sandwich-details').textContent = 'callee: ' + describe(node)),
  });

  /** Shows function F (a frame id, or null: none picked) over the kept samples `sel` of call tree `view` and its `counts`. */
  function render(view, counts, sel, F) {
    n = view.n;
    const pick = $('sandwich-fn');
    const fns = view.top.filter((r) => !r.pseudo).sort((a, b) => b.total - a.total);
    if (F !== null && !fns.some((r) => r.frameId === F)) {
      fns.push({ frameId: F, name: nameOf(m.frames[F]), location: m.locationOf(m.frames[F]), total: 0 });
    }
    pick.replaceChildren(
      el('option', { value: '', textContent: '(pick a function)' }),
      ...fns.map((r) => el('option', { value: r.frameId, textContent: `${r.name} — ${amount(m, r.total)} — ${r.location}` })),
    );
    pick.value = F === null ? '' : String(F);
    $('sandwich-empty').hidden = F !== null;
    $('sandwich-body').hidden = F === null;
    if (F === null) {
      $('sandwich-stats').textContent = '';
      return;
    }
    const s = sandwichTrees(m, counts, F);
    const f = m.frames[F];
    $('sandwich-stats').replaceChildren(
      el('b', { textContent: nameOf(f) }),
      ` ${m.locationOf(f)} — on `,
      el('b', { id: 'sandwich-total', textContent: amountCell(m, s.total) }),
      `${m.weighted ? '' : ' samples'} (${pct(s.total, view.n)}%), innermost in `,
      el('b', { id: 'sandwich-self', textContent: amountCell(m, s.self) }),
      ` (${pct(s.self, view.n)}%)`,
    );
    callersFlame.show(s.callers);
    calleesFlame.show(s.callees);
    renderLines(F, s.self, counts, sel);
  }

  function renderLines(F, self, counts, sel) {
    const f = m.frames[F];
    const lines = hotLines(m, sel, counts, F);
    const source = (f.resourceId !== undefined && sources[m.resources[f.resourceId]]) || null;
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

  return { render };
}
