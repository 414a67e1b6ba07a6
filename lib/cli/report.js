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
  // The file's bytes, read once: a pprof's event-loop blocks are in its comments. Let go
  // once the trace is read (at the input bound they are 252 MiB the page never needs).
  let bytes = readFile(file);
  const named = (fn) => {
    try {
      return fn();
    } catch (err) {
      if (err.code === 'ERR_SELFPROF_UNAVAILABLE') throw err;
      throw new Error(`${file}: ${err.message.replace(/^(convert|eventLoopBlocks|htmlReport): /, '')}`, { cause: err });
    }
  };
  const { convert } = require('../..');
  // The blocks, found once for the list and the report: before the trace is parsed, so that
  // what the native side reads them with is gone by then.
  const blocks = values.blocks || values.html ? named(() => eventLoopBlocks(bytes, { thresholdMs, sourceMaps, profilerFrames })) : [];
  let json = named(() => convert(bytes, { to: 'trace', sourceMaps, profilerFrames }));
  bytes = null;
  const trace = named(() => JSON.parse(json));
  json = null;
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
