'use strict';
// Event-loop blocks: the stretches where the event loop did not turn for longer than a
// threshold, found from a trace's sample times by src/trace/blocks.rs (or read from the
// comments of a pprof selfprof wrote), and their text for `selfprof report --blocks`.

const { native, unavailable } = require('../native');
const { inputBytes } = require('./convert');
const profilerFrames = require('../profiler-frames');

const DEFAULT_THRESHOLD_MS = 50;

/** Throws a TypeError naming `what` unless `ms` is a finite number ≥ 0 (NaN said as NaN). */
function checkThreshold(ms, what) {
  if (typeof ms !== 'number' || !Number.isFinite(ms) || ms < 0) {
    throw new TypeError(`${what} must be a number of ms ≥ 0, got ${typeof ms === 'number' ? ms : JSON.stringify(ms)}`);
  }
}

/**
 * The event-loop blocks of a profile (any input `readProfile` takes) longer than
 * `thresholdMs` (default 50): `{ from, thresholdMs, found, blocks, note? }`; `from` says
 * whether they were found from the samples (`samples`), read from a pprof's comments
 * (`pprof`), or not at all (`none`, and `note` says why).
 * @param {any} input
 * @param {{ thresholdMs?: number, sourceMaps?: boolean, profilerFrames?: boolean }} [options]
 */
function eventLoopBlocks(input, options = {}) {
  if (options === null || typeof options !== 'object') throw new TypeError('eventLoopBlocks: options must be an object');
  const { thresholdMs = DEFAULT_THRESHOLD_MS, sourceMaps = false } = options;
  checkThreshold(thresholdMs, 'eventLoopBlocks: thresholdMs');
  if (typeof sourceMaps !== 'boolean') throw new TypeError('eventLoopBlocks: sourceMaps must be a boolean');
  if (!native) throw unavailable('eventLoopBlocks');
  const { profilerFrames: show, profilerRoots } = profilerFrames.buildOptions(profilerFrames.checkOption(options.profilerFrames, 'eventLoopBlocks'));
  let json;
  try {
    json = native.eventLoopBlocks(inputBytes(input, 'eventLoopBlocks'), thresholdMs, sourceMaps, show, profilerRoots);
  } catch (err) {
    throw new TypeError(`eventLoopBlocks: ${err.message}`, { cause: err });
  }
  return JSON.parse(json);
}

/** `name (file:line)`, the file shortened under `root`. */
function frameText(f, root) {
  if (f.url === undefined) return f.name;
  const url = root && f.url.startsWith(root) ? f.url.slice(root.length) : f.url.replace(/^file:\/\//, '');
  return `${f.name} (${url}${f.line === undefined ? '' : `:${f.line}`})`;
}

/** A request's labels in one line: its endpoint first, then the others as key=value. */
function requestText(labels) {
  const { endpoint, ...rest } = labels;
  const others = Object.entries(rest).map(([k, v]) => `${k}=${v}`);
  return [endpoint, others.length ? (endpoint === undefined ? others.join(' ') : `(${others.join(' ')})`) : ''].filter(Boolean).join(' ');
}

/**
 * The text `report --blocks` prints: each block (longest first) with when it began, its
 * duration ± its error, its requests, the function it ran in and its heaviest stacks
 * (`stacks` of them, each at most `frames` frames from the leaf); locations under `root`
 * relative to it.
 * @param {any} found
 * @param {{ root?: string, frames?: number, stacks?: number }} [options]
 */
function formatBlocks(found, { root, frames = 8, stacks = 3 } = {}) {
  const lines = [];
  const where =
    found.from === 'samples' ? 'found from the samples\u2019 times; each duration is \u00b1 the gaps between samples around it' : found.from === 'pprof' ? 'from the pprof\u2019s comments' : '';
  lines.push(`event-loop blocks longer than ${found.thresholdMs} ms: ${found.from === 'none' ? 'none looked for' : found.found}${where ? ` (${where})` : ''}`);
  if (found.note) lines.push(`  ${found.note}`);
  const blocks = [...found.blocks].sort((a, b) => b.duration - a.duration);
  const seconds = (ms) => `+${(ms / 1000).toFixed(3)} s`;
  blocks.forEach((b, k) => {
    const head = [`${b.openStart || b.openEnd ? '\u2265 ' : ''}${b.duration.toFixed(1)} ms \u00b1${b.error.toFixed(1)}`, `at ${seconds(b.offset)}`, `${b.samples} samples`];
    if (b.cpu !== undefined) head.push(`CPU ${b.cpu.toFixed(1)} ms`);
    if (b.unsampled >= 1) head.push(`the thread not running for ${b.unsampled.toFixed(1)} ms of it (no sample, no CPU time: a busy machine or a CPU limit)`);
    if (b.openStart) head.push('running as the recording began');
    if (b.openEnd) head.push('still running as it ended');
    if (b.gc) head.push(`GC ${b.gc} samples`);
    if (b.thread?.['thread name']) head.push(b.thread['thread name']);
    lines.push('', `#${k + 1}  ${head.join(', ')}`);
    if (!b.requests.length) lines.push('    requests: none (no sample in it carries request labels)');
    b.requests.forEach((r, i) => lines.push(`    ${i ? '         ' : 'requests:'} ${requestText(r.labels)}: ${r.samples} samples`));
    if (b.otherRequests) lines.push(`              and ${b.otherRequests} more requests`);
    if (b.unlabeled && b.requests.length) lines.push(`              no request's labels: ${b.unlabeled} samples`);
    if (b.function) lines.push(`    in:       ${frameText(b.function, root)}: ${b.function.samples} of its samples`);
    b.stacks.slice(0, stacks).forEach((st, i) => {
      const shown = st.frames.slice(0, frames).map((f) => frameText(f, root));
      const more = st.frames.length - shown.length + (st.more ?? 0);
      lines.push(`    ${i ? '        ' : 'stacks:'}  ${String(st.samples).padStart(4)}  ${shown.join(' \u2190 ')}${more ? ` \u2190 \u2026${more} more` : ''}`);
    });
  });
  return lines.join('\n');
}

module.exports = { eventLoopBlocks, formatBlocks, checkThreshold, DEFAULT_THRESHOLD_MS };
