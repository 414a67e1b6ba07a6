'use strict';
// Converting a profile for other tools: Chrome DevTools / speedscope `.cpuprofile`,
// folded stacks for flamegraph.pl, inferno and speedscope, pprof, and the spec trace.
// Input: a selfprof trace (object, JSON text, json-gzip bytes) or pprof bytes (plain or
// gzip'd). The work is in src/convert.rs and src/pprof_decode.rs.

const { native, unavailable } = require('../native');
const profilerFrames = require('../profiler-frames');

const TARGETS = ['cpuprofile', 'folded', 'pprof', 'trace'];

const INPUT = 'a trace object, its JSON, json-gzip bytes, or pprof bytes (Buffer, Uint8Array, ArrayBuffer)';

/** What `value` is, for a message. */
function kind(value) {
  if (value === null) return 'null';
  if (typeof value !== 'object') return typeof value;
  return Array.isArray(value) ? 'an array' : `a ${value.constructor?.name ?? 'null-prototype object'}`;
}

/** The input as bytes for the native reader, which tells JSON from pprof and gunzips; a
 * mistake is a TypeError naming `what` (the API function). */
function inputBytes(input, what = 'convert') {
  if (typeof input === 'string') return Buffer.from(input, 'utf8');
  if (ArrayBuffer.isView(input)) return Buffer.from(input.buffer, input.byteOffset, input.byteLength);
  if (input instanceof ArrayBuffer || (typeof SharedArrayBuffer === 'function' && input instanceof SharedArrayBuffer)) {
    return Buffer.from(input);
  }
  const proto = input !== null && typeof input === 'object' ? Object.getPrototypeOf(input) : undefined;
  if (proto === Object.prototype || proto === null) {
    let json;
    try {
      json = JSON.stringify(input);
    } catch (err) {
      throw new TypeError(`${what}: the trace object cannot be serialized: ${err.message}`, { cause: err });
    }
    return Buffer.from(json, 'utf8');
  }
  throw new TypeError(`${what}: input must be ${INPUT}, got ${kind(input)}`);
}

/**
 * Converts a trace or pprof profile: `{ to: 'cpuprofile' }` returns the `.cpuprofile`
 * JSON text, `{ to: 'folded' }` folded stacks (`outer;...;leaf count` lines),
 * `{ to: 'trace' }` the spec trace's JSON, `{ to: 'pprof' }` a Buffer of gzip'd pprof
 * (`lines: true`: samples at line-level locations from the trace's line ticks).
 * selfprof's own frames are hidden (`profilerFrames: true`: as recorded).
 */
function convert(input, options) {
  const to = options?.to;
  if (!TARGETS.includes(to)) {
    throw new TypeError(`convert: to must be one of ${TARGETS.join(', ')}, got ${JSON.stringify(to)}`);
  }
  if (!native) throw unavailable('convert');
  const lines = options.lines ?? false;
  if (typeof lines !== 'boolean') throw new TypeError(`convert: lines must be a boolean, got ${typeof lines}`);
  // Off by default: a profile file is taken as it was recorded (its scripts may be on
  // another machine, or rebuilt since); selfprof's own traces were mapped when recorded.
  const sourceMaps = options.sourceMaps ?? false;
  if (typeof sourceMaps !== 'boolean') throw new TypeError(`convert: sourceMaps must be a boolean, got ${typeof sourceMaps}`);
  const { profilerFrames: show, profilerRoots } = profilerFrames.buildOptions(profilerFrames.checkOption(options.profilerFrames, 'convert'));
  return native.convertProfile(inputBytes(input), to, lines, sourceMaps, show, profilerRoots);
}

/**
 * Reads a trace or pprof profile (as `convert` takes it) into a trace object;
 * `{ sourceMaps: true }` maps its frames through the source maps found here.
 */
function readProfile(input, options) {
  return JSON.parse(convert(input, { to: 'trace', sourceMaps: options?.sourceMaps, profilerFrames: options?.profilerFrames }));
}

module.exports = { convert, readProfile, inputBytes, TARGETS };
