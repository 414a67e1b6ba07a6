// The event-loop blocks: the stretches where the loop did not turn for longer than the
// threshold, found in Node (src/trace/blocks.rs) and embedded as `data.blocks`. A list
// above the timeline (its longest LISTED, in a box of bounded height), longest first; a
// row opens the flame graph of its stretch (the time range of its samples, on its thread).
// Each block is marked on the timeline too.

const LISTED = 100;

/** A block's requests in a few words: each one's endpoint (else its labels) and samples. */
function describeRequests(b) {
  const shown = b.requests.map((r) => {
    const l = r.labels;
    const name = l.endpoint ?? Object.entries(l).map(([k, v]) => `${k}=${v}`).join(' ');
    const id = l.span_id ?? l['span id'] ?? l['local root span id'];
    return `${name}${id && l.endpoint !== undefined ? ` (${id})` : ''}: ${r.samples}`;
  });
  if (b.otherRequests) shown.push(`${b.otherRequests} more`);
  if (b.unlabeled) shown.push(`no request: ${b.unlabeled}`);
  return shown.join(', ');
}

/** A stack, leaf first, as `leaf ← caller ← …` (`long`: every frame, with its place). */
function describeStack(st, long) {
  const at = (f) => (f.url === undefined ? '' : ` (${f.url.replace(/^file:\/\//, '')}${f.line === undefined ? '' : `:${f.line}`})`);
  const frames = st.frames.map((f) => (long ? f.name + at(f) : f.name));
  if (st.more) frames.push(`${st.more} more`);
  return frames.join(long ? '\n  \u2190 ' : ' \u2190 ');
}

/**
 * @param {any} m the model
 * @param {any} found `data.blocks`: { from, thresholdMs, found, blocks, note? }, or undefined
 * @param {{ onOpen: (range: number[], thread: any) => void, format: (t: number) => string, t0: number }} options
 */
function createBlocksView(m, found, { onOpen, format, t0 }) {
  const section = $('blocks-section');
  const blocks = found ? [...found.blocks].sort((a, b) => b.duration - a.duration) : [];
  let active = null;
  if (!found || m.weighted) return { marks: [], setRange() {} };
  section.hidden = false;
  const fromSamples = found.from === 'samples';
  const notes = [
    `longer than ${found.thresholdMs} ms: ${found.found}`,
    fromSamples
      ? 'found from the samples\u2019 times, each duration \u00b1 the sampling gaps around it; click one for the flame graph of its stretch'
      : found.from === 'pprof'
        ? 'as the pprof\u2019s comments carry them (a pprof keeps no time line to open)'
        : '',
  ];
  if (found.note) notes.push(found.note);
  $('blocks-note').textContent = notes.filter(Boolean).join(' \u00b7 ');
  const rows = blocks.slice(0, LISTED).map((b) => {
    const when = b.start !== undefined ? format(b.start - t0) : `${(b.offset / 1000).toFixed(3)} s`;
    const dur = `${b.openStart || b.openEnd ? '\u2265 ' : ''}${b.duration.toFixed(1)} ms \u00b1${b.error.toFixed(1)}`;
    const extra = [];
    if (b.unsampled >= 1) extra.push(`the thread not running for ${b.unsampled.toFixed(0)} ms of it (a busy machine or a CPU limit)`);
    if (b.openStart) extra.push('running as the recording began');
    if (b.openEnd) extra.push('still running as it ended');
    if (b.gc) extra.push(`GC: ${b.gc} samples`);
    const heavy = b.stacks[0];
    const fn = b.function ? `${b.function.name} (${b.function.samples} of ${b.samples})` : '';
    const tr = el(
      'tr',
      { title: b.stacks.map((st) => `${st.samples} samples:\n  ${describeStack(st, true)}`).join('\n') },
      el('td', { textContent: `+${when}` }),
      el('td', { textContent: dur, title: extra.join('; ') }),
      el('td', { className: 'l req', textContent: describeRequests(b) + (b.thread && b.thread['thread name'] ? ` \u00b7 ${b.thread['thread name']}` : '') }),
      el(
        'td',
        { className: 'l stack' },
        el('b', { className: 'fn', textContent: fn }),
        el('div', { className: 'hint', textContent: heavy ? `heaviest: ${describeStack(heavy, false)} (${heavy.samples})` : '(no JS stack)' }),
      ),
      el('td', { textContent: String(b.samples) }),
    );
    tr.dataset.duration = b.duration.toFixed(3);
    if (b.firstSample === undefined) {
      tr.className = 'static';
      return tr;
    }
    tr.dataset.first = String(b.firstSample);
    tr.onclick = () => {
      active = tr.classList.contains('active') ? null : b;
      onOpen(active ? [m.time[b.firstSample], m.time[b.lastSample]] : null, active ? b.thread : null);
    };
    return tr;
  });
  if (blocks.length > LISTED) {
    rows.push(el('tr', { className: 'static' }, el('td', { colSpan: 5, className: 'l none', textContent: `and ${blocks.length - LISTED} shorter ones (marked on the timeline; selfprof report --blocks lists every one)` })));
  }
  $('blocks').tBodies[0].replaceChildren(...rows);
  if (!blocks.length) $('blocks').tBodies[0].append(el('tr', { className: 'static' }, el('td', { colSpan: 5, className: 'l none', textContent: 'none: the event loop never stayed busy that long' })));
  return {
    /** The blocks' stretches on the trace's clock, for the timeline's marks. */
    marks: blocks.filter((b) => b.start !== undefined).map((b) => ({ from: b.start, to: b.start + b.duration, title: `${b.duration.toFixed(1)} ms: ${describeRequests(b)}` })),
    /** Marks the row whose stretch is the selected range (none when it is another). */
    setRange(range) {
      for (const tr of $('blocks').tBodies[0].rows) {
        const b = tr.dataset.first === undefined ? null : blocks.find((x) => String(x.firstSample) === tr.dataset.first);
        tr.classList.toggle('active', !!(b && range && b === active && range[0] === m.time[b.firstSample] && range[1] === m.time[b.lastSample]));
      }
    },
  };
}
