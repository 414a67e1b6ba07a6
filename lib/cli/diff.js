'use strict';
// `selfprof diff`: what changed from profile A to B, or between two values of a label in
// one profile, as a text table and with --html the report's diff view.

const path = require('node:path');
const { UsageError, progress, options, number, showProfilerFrames } = require('./args');
const { convertFile, writeOut, outDir } = require('./files');

/** `a` and `b` as told apart: their base names, or their paths when those are the same. */
function sideNames(a, b) {
  if (path.basename(a) !== path.basename(b)) return [path.basename(a), path.basename(b)];
  const rel = (f) => path.relative(process.cwd(), path.resolve(f)) || f;
  return [rel(a), rel(b)];
}

/** diff compares shares of samples: a heap profile (bytes in use) is not that. */
function noHeap(file, trace) {
  if (trace.weight) throw new Error(`${file} is a heap profile (${trace.weight.type}); diff compares CPU profiles (selfprof report shows a heap profile's bytes)`);
}

/** The command's options (node:util parseArgs); docs/cli.md has a row for each (__test__/docs.test.js). */
const OPTIONS = {
  html: { type: 'string' },
  top: { type: 'string' },
  by: { type: 'string' },
  'ignore-lines': { type: 'boolean' },
  'source-maps': { type: 'boolean' },
  'no-sources': { type: 'boolean' },
  'profiler-frames': { type: 'boolean' },
};

/** `selfprof diff`: a text table of the biggest share changes, and the report's diff view. */
function diffCommand(argv) {
  const { values, positionals } = options(argv, OPTIONS);
  const sources = !values['no-sources'];
  const profilerFrames = showProfilerFrames(values);
  const top = number(values.top, '--top', { min: 1, integer: true }) ?? 20;
  outDir(values.html);
  const ignoreLines = values['ignore-lines'] ?? false;
  // Each file read once: its trace serves the table and the report.
  const readTrace = (file) => JSON.parse(convertFile(file, 'trace', { sourceMaps: values['source-maps'], profilerFrames }));
  const { diffTraces, diffTraceLabels, formatDiff } = require('../views/diff');
  const root = `file://${process.cwd()}/`;
  const shorten = (loc) => (loc.startsWith(root) ? loc.slice(root.length) : loc);
  let result;
  let sides;
  let report;
  if (values.by !== undefined) {
    if (positionals.length !== 3) throw new UsageError('diff FILE --by KEY takes FILE VALUE_A VALUE_B');
    const [file, va, vb] = positionals;
    const value = (v) => (v === '(none)' ? null : v);
    const trace = readTrace(file);
    noHeap(file, trace);
    const keys = new Set(trace.contexts.flatMap((c) => Object.keys(c.labels)));
    if (!keys.has(values.by)) {
      throw new Error(`${file}: ${require('../views/summary').missingLabel(values.by, [...keys].sort())}`);
    }
    result = diffTraceLabels(trace, values.by, value(va), value(vb), { ignoreLines, limit: top });
    sides = [`${values.by} = ${va}`, `${values.by} = ${vb}`];
    report = () =>
      require('../views/report').reportChunks(trace, undefined, {
        title: `selfprof diff: ${path.basename(file)}, ${values.by}: ${va} → ${vb}`,
        labelDiff: { key: values.by, a: value(va), b: value(vb) },
        sources,
      });
  } else {
    if (positionals.length !== 2) throw new UsageError('diff takes two files, A (the baseline) and B, or FILE --by KEY VALUE_A VALUE_B');
    const [fa, fb] = positionals;
    const ta = readTrace(fa);
    const tb = readTrace(fb);
    noHeap(fa, ta);
    noHeap(fb, tb);
    result = diffTraces(ta, tb, { ignoreLines, limit: top });
    sides = [fa, fb];
    // Two files of one name (run1/profile.json, run2/profile.json) named by their paths.
    const [na, nb] = sideNames(fa, fb);
    report = () =>
      require('../views/report').reportChunks(tb, ta, {
        title: `selfprof diff: A ${na} → B ${nb}`,
        baselineName: na,
        name: nb,
        sources,
      });
  }
  const side = (name, s) => `${name}: ${s.samples} samples, ${s.busy} busy${s.busy ? '' : ' (no busy samples: every share is 0)'}`;
  const lines = [
    side(`A ${sides[0]}`, result.a),
    side(`B ${sides[1]}`, result.b),
    'shares are % of each side\'s busy samples (all but idle); Δ = B − A in percentage points',
    '',
    formatDiff(result, { top, shorten }),
  ];
  process.stdout.write(`${lines.join('\n')}\n`);
  if (values.html) {
    writeOut(values.html, report());
    progress(`wrote ${values.html}`);
  }
}

module.exports = { diffCommand, OPTIONS };
