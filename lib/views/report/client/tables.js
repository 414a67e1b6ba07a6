// The tables under the views: top functions of the kept samples, and samples per value of
// a label (click one to filter every view to it).

/** The top functions of call tree `view` (of model m), the first `limit` (0: all). */
function renderTop(m, view, limit, { onSandwich, onSearch }) {
  const rows = limit ? view.top.slice(0, limit) : view.top;
  $('top-functions').tBodies[0].replaceChildren(
    ...rows.map((r) => {
      const fn = el('td', { className: 'l fn' + (r.pseudo ? ' none' : ''), title: r.pseudo ? r.name : `callers and callees of ${r.name}` });
      fn.append(r.pseudo ? r.name : el('span', { textContent: r.name }));
      if (!r.pseudo) fn.querySelector('span').onclick = () => onSandwich(r.frameId);
      fn.dataset.frame = r.frameId;
      const find = el('button', { type: 'button', textContent: '\u2315', title: `find ${r.name} in the flame graph` });
      find.onclick = () => onSearch(r.name);
      return el(
        'tr',
        {},
        ...[amountCell(m, r.self), pct(r.self, view.n), amountCell(m, r.total), pct(r.total, view.n)].map((v) => el('td', { textContent: v })),
        fn,
        el('td', { className: 'l loc', title: r.location }, find, r.location),
      );
    }),
  );
}

/** Samples per value of `key` over `sel` (the time range), the filter's row marked. */
function renderLabels(m, sel, key, filter, onFilter) {
  const groups = new Map();
  let n = 0;
  for (let i = 0; i < m.n; i++) {
    if (!sel[i]) continue;
    n += m.w[i];
    const v = labelAt(m, i, key);
    const id = v === undefined ? '\u0000none' : v;
    groups.set(id, (groups.get(id) || 0) + m.w[i]);
  }
  const rows = [...groups].sort((a, b) => b[1] - a[1]).map(([id, count]) => {
    const none = id === '\u0000none';
    const tr = el(
      'tr',
      {},
      el('td', { className: 'l' + (none ? ' none' : ''), textContent: none ? '(none)' : id, title: none ? 'samples without this label' : id }),
      el('td', { textContent: amountCell(m, count) }),
      el('td', { textContent: pct(count, n) }),
    );
    tr.dataset.value = none ? '' : id;
    if (none) tr.dataset.none = 'true';
    if (filter && filter.key === key && filter.none === none && (none || filter.value === id)) tr.className = 'active';
    tr.onclick = () => onFilter(tr.className === 'active' ? null : { key, value: none ? null : id, none });
    return tr;
  });
  $('label-values').tBodies[0].replaceChildren(...rows);
}
