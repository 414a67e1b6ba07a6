'use strict';
// Aggregates a ProfilerTrace into per-function sample counts.

/**
 * Functions by the samples they were on (`self`: innermost frame; `total`: anywhere
 * on the stack, counted once per sample even when recursive), most `self` first.
 */
function topFunctions(trace, { limit = 10 } = {}) {
  const self = new Float64Array(trace.frames.length);
  const total = new Float64Array(trace.frames.length);
  const seen = new Int32Array(trace.frames.length).fill(-1);
  let stackSamples = 0;
  trace.samples.forEach((sample, n) => {
    if (sample.stackId === undefined) return;
    stackSamples++;
    self[trace.stacks[sample.stackId].frameId]++;
    for (let id = sample.stackId; id !== undefined; id = trace.stacks[id].parentId) {
      const f = trace.stacks[id].frameId;
      if (seen[f] !== n) {
        seen[f] = n;
        total[f]++;
      }
    }
  });
  return trace.frames
    .map((frame, i) => ({
      name: frame.name || '(anonymous)',
      location: location(trace, frame),
      self: self[i],
      total: total[i],
      selfPercent: stackSamples ? (100 * self[i]) / stackSamples : 0,
      totalPercent: stackSamples ? (100 * total[i]) / stackSamples : 0,
    }))
    .filter((f) => f.total > 0)
    .sort((a, b) => b.self - a.self || b.total - a.total)
    .slice(0, limit);
}

function location(trace, frame) {
  if (frame.resourceId === undefined) return '(native)';
  const resource = trace.resources[frame.resourceId];
  if (frame.line === undefined) return resource;
  return frame.column === undefined ? `${resource}:${frame.line}` : `${resource}:${frame.line}:${frame.column}`;
}

/**
 * Samples per value of label `key` (JS samples only), most first: `{ value, samples,
 * percent, top }` where `top` is the function with the most self samples under it.
 */
function samplesByLabel(trace, key) {
  const groups = new Map();
  let total = 0;
  for (const s of trace.samples) {
    if (s.stackId === undefined) continue;
    total++;
    const labels = s.contextId === undefined ? undefined : trace.contexts[s.contextId].labels;
    // Own properties only: a label key such as `constructor` must not find Object's.
    const value = labels !== undefined && Object.hasOwn(labels, key) ? labels[key] : undefined;
    const name = value ?? '(none)';
    let g = groups.get(name);
    if (!g) groups.set(name, (g = { value: name, samples: 0, self: new Map() }));
    g.samples++;
    const leaf = trace.frames[trace.stacks[s.stackId].frameId].name || '(anonymous)';
    g.self.set(leaf, (g.self.get(leaf) ?? 0) + 1);
  }
  return [...groups.values()]
    .map((g) => ({
      value: g.value,
      samples: g.samples,
      percent: total ? (100 * g.samples) / total : 0,
      top: [...g.self].sort((a, b) => b[1] - a[1])[0][0],
    }))
    .sort((a, b) => b.samples - a.samples);
}

/** A plain-text table of `topFunctions` rows. */
function formatTable(rows) {
  const head = ['self', 'self %', 'total %', 'function', 'location'];
  const body = rows.map((r) => [
    String(r.self),
    r.selfPercent.toFixed(1),
    r.totalPercent.toFixed(1),
    r.name,
    r.location,
  ]);
  const widths = head.map((h, i) => Math.max(h.length, ...body.map((row) => row[i].length)));
  const line = (cells) =>
    cells.map((c, i) => (i < 3 ? c.padStart(widths[i]) : c.padEnd(widths[i]))).join('  ').trimEnd();
  return [line(head), ...body.map(line)].join('\n');
}

module.exports = { topFunctions, samplesByLabel, formatTable };
