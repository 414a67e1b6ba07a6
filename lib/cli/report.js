'use strict';
// `selfprof report FILE`: a profile's text summary, and with --html its HTML report.

const path = require('node:path');
const { UsageError, progress, options, number, showProfilerFrames } = require('./args');
const { convertFile, writeOut, outDir } = require('./files');
const { summarize } = require('../views/summary');

/** The command's options (node:util parseArgs); docs/cli.md has a row for each (__test__/docs.test.js). */
const OPTIONS = {
  html: { type: 'string' },
  by: { type: 'string' },
  top: { type: 'string' },
  'source-maps': { type: 'boolean' },
  'no-sources': { type: 'boolean' },
  'profiler-frames': { type: 'boolean' },
};

function reportCommand(argv) {
  const { values, positionals } = options(argv, OPTIONS);
  if (positionals.length !== 1) throw new UsageError('report takes one FILE');
  const top = number(values.top, '--top', { min: 1, integer: true }) ?? 15;
  outDir(values.html);
  const [file] = positionals;
  const profilerFrames = showProfilerFrames(values);
  const trace = JSON.parse(convertFile(file, 'trace', { sourceMaps: values['source-maps'], profilerFrames }));
  process.stdout.write(`${summarize(trace, { by: values.by, top, root: `file://${process.cwd()}/` })}\n`);
  if (values.html) {
    // The trace as read: not read again (a file of 250 MB is read once).
    const { reportChunks } = require('../views/report');
    writeOut(values.html, reportChunks(trace, undefined, { title: `selfprof: ${path.basename(file)}`, sources: !values['no-sources'] }));
    progress(`wrote ${values.html}`);
  }
}

module.exports = { reportCommand, OPTIONS };
