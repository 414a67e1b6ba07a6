'use strict';
// Converting a trace for other tools: Chrome DevTools / speedscope `.cpuprofile`, and
// folded stacks for flamegraph.pl, inferno and speedscope. The work is in src/convert.rs.

const zlib = require('node:zlib');
const native = require('../binding.js');

const TARGETS = ['cpuprofile', 'folded'];

/** The trace's JSON from a trace object, its JSON text, or json-gzip bytes. */
function traceJson(trace) {
  if (typeof trace === 'string') return trace;
  if (trace instanceof Uint8Array) {
    const bytes = Buffer.from(trace.buffer, trace.byteOffset, trace.byteLength);
    return (bytes[0] === 0x1f && bytes[1] === 0x8b ? zlib.gunzipSync(bytes) : bytes).toString('utf8');
  }
  if (trace !== null && typeof trace === 'object') return JSON.stringify(trace);
  throw new TypeError('convert: trace must be a trace object, its JSON, or json-gzip bytes');
}

/**
 * Converts a selfprof trace: `{ to: 'cpuprofile' }` returns the `.cpuprofile` JSON text,
 * `{ to: 'folded' }` folded stacks (`outer;...;leaf count` lines).
 */
function convert(trace, { to } = {}) {
  if (!TARGETS.includes(to)) {
    throw new TypeError(`convert: to must be one of ${TARGETS.join(', ')}, got ${JSON.stringify(to)}`);
  }
  return native.convertTrace(traceJson(trace), to);
}

module.exports = { convert };
