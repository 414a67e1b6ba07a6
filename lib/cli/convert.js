'use strict';
// `selfprof convert FILE --to FORMAT`: a profile file in another format, to a file or stdout.

const { UsageError, options, showProfilerFrames } = require('./args');
const { convertFile, writeOut, outDir } = require('./files');

/** The command's options (node:util parseArgs); docs/cli.md has a row for each (__test__/docs.test.js). */
const OPTIONS = {
  to: { type: 'string' },
  out: { type: 'string', short: 'o' },
  lines: { type: 'boolean' },
  'source-maps': { type: 'boolean' },
  'profiler-frames': { type: 'boolean' },
};

function convertCommand(argv) {
  const { values, positionals } = options(argv, OPTIONS);
  if (positionals.length !== 1) throw new UsageError('convert takes one FILE');
  const { TARGETS } = require('../views/convert');
  if (!values.to) throw new UsageError(`convert needs --to ${TARGETS.join('|')}`);
  if (!TARGETS.includes(values.to)) throw new UsageError(`--to must be one of ${TARGETS.join(', ')}, got ${JSON.stringify(values.to)}`);
  if (values.lines && values.to !== 'pprof') throw new UsageError('--lines goes with --to pprof');
  outDir(values.out);
  const out = convertFile(positionals[0], values.to, { lines: values.lines, sourceMaps: values['source-maps'], profilerFrames: showProfilerFrames(values) });
  if (values.out) writeOut(values.out, out);
  else if (values.to === 'pprof' && process.stdout.isTTY) throw new UsageError('pprof is binary: give -o OUT');
  else process.stdout.write(out);
}

module.exports = { convertCommand, OPTIONS };
