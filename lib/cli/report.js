'use strict';
// `selfprof report FILE`: a profile's text summary, and with --html its HTML report;
// --blocks: its event-loop blocks (longer than --threshold ms) first.

const path = require('node:path');
const { UsageError, progress, options, number, showProfilerFrames } = require('./args');
const { readFile, writeOut, outDir } = require('./files');
const { summarize } = require('../views/summary');
const { eventLoopBlocks, formatBlocks } = require('../views/blocks');

/** The command's options (node:util parseArgs); docs/cli.md has a row for each (__test__/docs.test.js). */
const OPTIONS = {
  html: { type: 'string' },
  by: { type: 'string' },
  top: { type: 'string' },
  blocks: { type: 'boolean' },
  threshold: { type: 'string' },
  'source-maps': { type: 'boolean' },
  'no-sources': { type: 'boolean' },
  'profiler-frames': { type: 'boolean' },
};

function reportCommand(argv) {
  const { values, positionals } = options(argv, OPTIONS);
  if (positionals.length !== 1) throw new UsageError('report takes one FILE');
  const top = number(values.top, '--top', { min: 1, integer: true }) ?? 15;
  const thresholdMs = number(values.threshold, '--threshold', { min: 0 });
  if (thresholdMs !== undefined && !values.blocks && !values.html) throw new UsageError('--threshold goes with --blocks or --html');
  outDir(values.html);
  const [file] = positionals;
  const profilerFrames = showProfilerFrames(values);
  const sourceMaps = values['source-maps'] ?? false;
  const root = `file://${process.cwd()}/`;
  // The file's bytes, read once: a pprof's event-loop blocks are in its comments.
  const bytes = readFile(file);
  const named = (fn) => {
    try {
      return fn();
    } catch (err) {
      if (err.code === 'ERR_SELFPROF_UNAVAILABLE') throw err;
      throw new Error(`${file}: ${err.message.replace(/^(convert|eventLoopBlocks|htmlReport): /, '')}`, { cause: err });
    }
  };
  const { convert } = require('../..');
  const trace = named(() => JSON.parse(convert(bytes, { to: 'trace', sourceMaps, profilerFrames })));
  // The blocks, found once for the list and the report.
  const blocks = values.blocks || values.html ? named(() => eventLoopBlocks(bytes, { thresholdMs, sourceMaps, profilerFrames })) : [];
  if (values.blocks) process.stdout.write(`${formatBlocks(blocks, { root })}\n\n`);
  process.stdout.write(`${summarize(trace, { by: values.by, top, root })}\n`);
  if (values.html) {
    // The trace as read: not read again as the page is made.
    const { reportChunks } = require('../views/report');
    writeOut(values.html, reportChunks(trace, undefined, { title: `selfprof: ${path.basename(file)}`, sources: !values['no-sources'], blocks }));
    progress(`wrote ${values.html}`);
  }
}

module.exports = { reportCommand, OPTIONS };
