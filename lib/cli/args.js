'use strict';
// The command line's shared parts: its usage text, option parsing, numbers checked as
// options, and progress lines on stderr.

const { parseArgs } = require('node:util');

const USAGE = `usage:
  selfprof --version
  selfprof record [-o DIR] [--interval MS] [--duration S] [--by KEY] [--heap [--heap-interval BYTES]] [--no-source-maps] [--no-sources] [--profiler-frames] -- COMMAND [ARGS...]
      profiles the Node.js processes COMMAND starts, every thread; writes DIR/profile.trace.json.gz,
      profile.pb.gz and profile.html for the process that ran the most JS (the app, behind a
      wrapper such as npx, tsx or npm run), profile-<pid>-<script>.* for the others
      (default DIR: selfprof-out); --heap: the heap in use at exit too, profile.heap.pb.gz
      and profile.heap.html; frames of scripts with a source map are mapped to the original
      files (--no-source-maps: as V8 ran them); the trace and report carry the text of the
      hot lines of the scripts the program loaded (--no-sources: none)
  selfprof report FILE [--html OUT] [--by KEY] [--top N] [--blocks] [--threshold MS] [--source-maps] [--no-sources] [--profiler-frames]
      top functions and samples per label value of a profile file; --blocks first lists its
      event-loop blocks: the stretches where the loop did not turn for longer than
      --threshold MS (default 50; the HTML report lists them too), each with its duration,
      the requests that ran in it and its heaviest stacks
  selfprof convert FILE --to cpuprofile|folded|pprof|trace [-o OUT] [--lines] [--source-maps] [--profiler-frames]
      (--lines: pprof samples at line-level locations, from the profile's line ticks)
      (--source-maps: map frames through the source maps found on this machine; a file is
      otherwise taken as it was recorded)
  selfprof diff A B [--html OUT] [--top N] [--ignore-lines] [--source-maps] [--no-sources] [--profiler-frames]
      what changed from profile A (the baseline) to B: each function's share of the busy
      samples (all but idle) in B minus in A, in percentage points
  selfprof diff FILE --by KEY VALUE_A VALUE_B [--html OUT] [--top N] [--ignore-lines] [--source-maps] [--no-sources] [--profiler-frames]
      the same between two values of a label in one profile ("(none)": without the label)
  FILE, A, B: a selfprof trace (.json, .json.gz), a V8 CPU profile (.cpuprofile, from
      DevTools or node --cpu-prof) or a pprof profile (.pb, .pb.gz)
  --html OUT: the HTML report, with the hot lines' text that the profile carries (a trace
      recorded by selfprof; no local file is read); --no-sources: without it
  --profiler-frames: show selfprof's own frames (withLabels, its hooks, its preload) as
      recorded; by default they are hidden, selfprof's own work at a sample's leaf shown
      as one frame (selfprof) (default from SELFPROF_PROFILER_FRAMES=1)`;

class UsageError extends Error {}

/** Where each command's output goes: stderr for progress, as lines. */
const progress = (msg) => process.stderr.write(`selfprof: ${msg}\n`);

/**
 * `args` parsed by `spec` (node:util's parseArgs, strict); a mistake is a UsageError.
 * @returns {{ values: Record<string, any>, positionals: string[] }}
 */
function options(args, spec) {
  try {
    return parseArgs({ args, options: spec, allowPositionals: true, strict: true });
  } catch (err) {
    throw new UsageError(err.message.split('\n')[0], { cause: err });
  }
}

/** Option `name`'s value as a number in its range, undefined when not given; else a UsageError. */
function number(value, name, { min = 0, max = Infinity, integer = false } = {}) {
  if (value === undefined) return undefined;
  const n = Number(value);
  if (value === '' || !Number.isFinite(n) || n < min || n > max || (integer && !Number.isInteger(n))) {
    const range = max === Infinity ? `≥ ${min}` : `from ${min} to ${max}`;
    throw new UsageError(`${name} must be ${integer ? 'a whole number' : 'a number'} ${range}, got ${JSON.stringify(value)}`);
  }
  return n;
}

/** `--profiler-frames`, whose default is SELFPROF_PROFILER_FRAMES. */
const showProfilerFrames = (values) => require('../profiler-frames').shown(values['profiler-frames'] || undefined, process.env);

module.exports = { USAGE, UsageError, progress, options, number, showProfilerFrames };
