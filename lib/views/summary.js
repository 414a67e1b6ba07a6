'use strict';
// Aggregates a ProfilerTrace into per-function sample counts, or, for a weighted trace
// (a heap profile: `trace.weight`), into the amounts its samples stand for (bytes); and the
// text summary the CLI prints of either.

const { formatBytes } = require('./format');
const { firstInOrder } = require('./top');

/** Sample i's weight: 1, or what it stands for in a weighted trace. */
function weightOf(trace) {
  const values = trace.weight?.values;
  return values ? (i) => values[i] ?? 0 : () => 1;
}

/** The labels a tracer gives a request's samples (OpenTelemetry, dd-trace: lib/integrations/). */
const TRACER_LABELS = ['endpoint', 'span_id', 'trace_id', 'local_root_span_id', 'http_route', 'otel_span_id', 'otel_trace_id'];

/**
 * Why no sample has label `key` (`keys`: the labels some sample has), and how samples get
 * it: from the tracer the app runs, or from withLabels in its code.
 */
function missingLabel(key, keys) {
  const has = keys.length ? ` (labels: ${keys.join(', ')})` : '';
  const how = TRACER_LABELS.includes(key)
    ? `endpoint, span_id and trace_id come from the tracer the app runs (OpenTelemetry or dd-trace) when it traces the requests, e.g. selfprof record -- node -r dd-trace/init app.js; any label from withLabels({ ${key}: ... }) in the app's code`
    : `samples get a label from withLabels({ ${/^[A-Za-z_$][\w$]*$/.test(key) ? key : JSON.stringify(key)}: ... }) or setLabels in the app's code`;
  return `no sample has the label ${JSON.stringify(key)}${has}: ${how} (docs/labels.md)`;
}

/**
 * Functions by the samples they were on (`self`: innermost frame; `total`: anywhere
 * on the stack, counted once per sample even when recursive), most `self` first. In a
 * weighted trace, by the samples' weights (bytes) instead.
 */
function topFunctions(trace, { limit = 10 } = {}) {
  const w = weightOf(trace);
  const self = new Float64Array(trace.frames.length);
  const total = new Float64Array(trace.frames.length);
  const seen = new Int32Array(trace.frames.length).fill(-1);
  let stackSamples = 0;
  trace.samples.forEach((sample, n) => {
    if (sample.stackId === undefined) return;
    const weight = w(n);
    stackSamples += weight;
    self[trace.stacks[sample.stackId].frameId] += weight;
    for (let id = sample.stackId; id !== undefined; id = trace.stacks[id].parentId) {
      const f = trace.stacks[id].frameId;
      if (seen[f] !== n) {
        seen[f] = n;
        total[f] += weight;
      }
    }
  });
  // Only the rows shown are made (a profile may name a million functions).
  return firstInOrder(trace.frames.length, limit, (a, b) => self[b] - self[a] || total[b] - total[a], (i) => total[i] > 0).map((i) => ({
    name: trace.frames[i].name || '(anonymous)',
    location: location(trace, trace.frames[i]),
    self: self[i],
    total: total[i],
    selfPercent: stackSamples ? (100 * self[i]) / stackSamples : 0,
    totalPercent: stackSamples ? (100 * total[i]) / stackSamples : 0,
  }));
}

function location(trace, frame) {
  // `(selfprof)`: the profiler's own work, its frames hidden (src/trace/profiler_frames.rs).
  if (frame.resourceId === undefined && frame.name === '(selfprof)') return '(profiler)';
  if (frame.resourceId === undefined) return '(native)';
  const resource = trace.resources[frame.resourceId];
  if (frame.line === undefined) return resource;
  return frame.column === undefined ? `${resource}:${frame.line}` : `${resource}:${frame.line}:${frame.column}`;
}

const MARKER_NAME = { idle: '(idle)', gc: '(garbage collector)', other: '(program)' };

/**
 * Samples per value of label `key`, most first: `{ value, samples, percent, top }` where
 * `top` is the function (or V8 pseudo-frame) with the most self samples under it. Every
 * sample counts, as the HTML report counts them: GC and `(program)` samples during a
 * request carry its labels, and idle samples none (`(none)`). In a weighted trace, the
 * weights (bytes) instead of samples.
 */
function samplesByLabel(trace, key) {
  const w = weightOf(trace);
  const groups = new Map();
  let total = 0;
  trace.samples.forEach((s, i) => {
    const weight = w(i);
    total += weight;
    const labels = s.contextId === undefined ? undefined : trace.contexts[s.contextId].labels;
    // Own properties only: a label key such as `constructor` must not find Object's.
    const value = labels !== undefined && Object.hasOwn(labels, key) ? labels[key] : undefined;
    const name = value ?? '(none)';
    let g = groups.get(name);
    if (!g) groups.set(name, (g = { value: name, samples: 0, self: new Map() }));
    g.samples += weight;
    const leaf =
      s.stackId !== undefined ? trace.frames[trace.stacks[s.stackId].frameId].name || '(anonymous)' : (MARKER_NAME[s.marker] ?? '(root)');
    g.self.set(leaf, (g.self.get(leaf) ?? 0) + weight);
  });
  return [...groups.values()]
    .map((g) => ({
      value: g.value,
      samples: g.samples,
      percent: total ? (100 * g.samples) / total : 0,
      top: [...g.self].sort((a, b) => b[1] - a[1])[0][0],
    }))
    .sort((a, b) => b.samples - a.samples);
}

/**
 * A plain-text table of `topFunctions` rows (`unit: 'bytes'` for a heap profile's).
 * @param {any[]} rows
 * @param {{ unit?: string }} [options]
 */
function formatTable(rows, { unit } = {}) {
  const amount = unit === 'bytes' ? formatBytes : String;
  const head = unit === 'bytes' ? ['self', 'self %', 'total', 'total %', 'function', 'location'] : ['self', 'self %', 'total %', 'function', 'location'];
  const numeric = unit === 'bytes' ? 4 : 3;
  const body = rows.map((r) =>
    unit === 'bytes'
      ? [amount(r.self), r.selfPercent.toFixed(1), amount(r.total), r.totalPercent.toFixed(1), r.name, r.location]
      : [amount(r.self), r.selfPercent.toFixed(1), r.totalPercent.toFixed(1), r.name, r.location],
  );
  const widths = head.map((h, i) => Math.max(h.length, ...body.map((row) => row[i].length)));
  const line = (cells) =>
    cells.map((c, i) => (i < numeric ? c.padStart(widths[i]) : c.padEnd(widths[i]))).join('  ').trimEnd();
  return [line(head), ...body.map(line)].join('\n');
}

/**
 * The text summary of a trace: its totals, top functions, and samples (a heap profile's
 * bytes) per value of label `by`; locations under `root` are shown relative to it.
 * @param {any} trace
 * @param {{ by?: string, top?: number, root?: string }} [options]
 */
function summarize(trace, { by, top = 15, root } = {}) {
  const w = trace.weight;
  const lines = [];
  let empty;
  if (w) {
    const bytes = w.values.reduce((a, b) => a + b, 0);
    const objects = w.counts ? w.counts.reduce((a, b) => a + b, 0) : undefined;
    const what = w.unit === 'bytes' ? formatBytes(bytes) : `${bytes} ${w.unit}`;
    lines.push(`heap profile (${w.type}): ${what}${objects !== undefined ? ` in ${Math.round(objects)} objects` : ''} at ${trace.samples.length} allocating stacks (sampled: estimates, a snapshot of the heap in use)`);
    empty = !trace.samples.length;
  } else {
    const js = trace.samples.filter((s) => s.stackId !== undefined).length;
    const first = trace.samples[0]?.timestamp ?? 0;
    const last = trace.samples.at(-1)?.timestamp ?? 0;
    lines.push(`${trace.samples.length} samples (${js} in JS) over ${(last - first).toFixed(0)} ms`);
    empty = js === 0;
  }
  if (empty) return lines.join('\n');
  const shorten = (loc) => (root && loc.startsWith(root) ? loc.slice(root.length) : loc);
  const rows = topFunctions(trace, { limit: top }).map((r) => ({ ...r, location: shorten(r.location) }));
  lines.push('', formatTable(rows, { unit: w?.unit }));
  // What a label value's amount is: samples, or (a heap profile) its bytes.
  const per = w ? w.unit : 'samples';
  const keys = [...new Set((trace.contexts ?? []).flatMap((c) => Object.keys(c.labels)))].sort();
  if (by) {
    if (!keys.includes(by)) {
      lines.push('', missingLabel(by, keys));
    } else {
      lines.push('', w ? `${per} by ${by}:` : `samples by ${by} (all samples, as the HTML report counts them):`);
      const groups = samplesByLabel(trace, by);
      const width = Math.max(...groups.map((g) => g.value.length));
      const amount = w ? (n) => formatBytes(n).padStart(10) : (n) => String(n).padStart(7);
      for (const g of groups) {
        lines.push(`  ${g.value.padEnd(width)}  ${amount(g.samples)}  ${g.percent.toFixed(1).padStart(5)}%  mostly in ${g.top}`);
      }
    }
  } else if (keys.length) {
    lines.push('', `labels: ${keys.join(', ')} (--by KEY for ${per} per value)`);
  }
  return lines.join('\n');
}

module.exports = { topFunctions, samplesByLabel, formatTable, formatBytes, summarize, missingLabel };
