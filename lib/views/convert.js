'use strict';
// Converting a profile for other tools: Chrome DevTools / speedscope `.cpuprofile`,
// folded stacks for flamegraph.pl, inferno and speedscope, pprof, and the spec trace.
// Input: a selfprof trace (object, JSON text, json-gzip bytes) or pprof bytes (plain or
// gzip'd). The work is in src/convert.rs and src/pprof_decode.rs.

const { native, unavailable } = require('../native');

const TARGETS = ['cpuprofile', 'folded', 'pprof', 'trace'];

/** The input as bytes for the native reader, which tells JSON from pprof and gunzips. */
function inputBytes(input) {
  if (typeof input === 'string') return Buffer.from(input, 'utf8');
  if (input instanceof Uint8Array) return Buffer.from(input.buffer, input.byteOffset, input.byteLength);
  if (input !== null && typeof input === 'object' && !Array.isArray(input)) return Buffer.from(JSON.stringify(input), 'utf8');
  throw new TypeError('convert: input must be a trace object, its JSON, json-gzip bytes, or pprof bytes');
}

/**
 * Converts a trace or pprof profile: `{ to: 'cpuprofile' }` returns the `.cpuprofile`
 * JSON text, `{ to: 'folded' }` folded stacks (`outer;...;leaf count` lines),
 * `{ to: 'trace' }` the spec trace's JSON, `{ to: 'pprof' }` a Buffer of gzip'd pprof.
 */
function convert(input, options) {
  const to = options?.to;
  if (!TARGETS.includes(to)) {
    throw new TypeError(`convert: to must be one of ${TARGETS.join(', ')}, got ${JSON.stringify(to)}`);
  }
  if (!native) throw unavailable('convert');
  return native.convertProfile(inputBytes(input), to);
}

/** Reads a trace or pprof profile (as `convert` takes it) into a trace object. */
function readProfile(input) {
  return JSON.parse(convert(input, { to: 'trace' }));
}

module.exports = { convert, readProfile, TARGETS };
