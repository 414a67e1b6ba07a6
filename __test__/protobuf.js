'use strict';
// A minimal protobuf writer for tests: hostile pprof inputs byte by byte, independent of
// selfprof's encoder and of pprof-format.

function varint(n) {
  const out = [];
  let v = BigInt(n);
  if (v < 0n) v += 1n << 64n;
  do {
    let b = Number(v & 0x7fn);
    v >>= 7n;
    if (v) b |= 0x80;
    out.push(b);
  } while (v);
  return Buffer.from(out);
}

/** Field `n` as a varint. */
const int = (n, v) => Buffer.concat([varint(n << 3), varint(v)]);
/** Field `n`, length-delimited (bytes, a string or an embedded message). */
const bytes = (n, b) => {
  const buf = Buffer.isBuffer(b) ? b : Buffer.from(b, 'utf8');
  return Buffer.concat([varint((n << 3) | 2), varint(buf.length), buf]);
};
/** Field `n`, packed repeated varints. */
const packed = (n, values) => bytes(n, Buffer.concat(values.map(varint)));

/**
 * A pprof Profile: `strings` (index 0 must be ''), `sampleTypes` [[type, unit]],
 * `samples` [{ locations, values, labels: [[key, str]] }], `locations` [{ id, lines:
 * [[functionId, line]] }], `functions` [{ id, name, file }], `period`.
 */
function pprofBytes({ strings, sampleTypes = [], samples = [], locations = [], functions = [], period }) {
  const parts = [];
  for (const [type, unit] of sampleTypes) parts.push(bytes(1, Buffer.concat([int(1, type), int(2, unit)])));
  for (const s of samples) {
    const fields = [packed(1, s.locations), packed(2, s.values)];
    for (const [key, str] of s.labels ?? []) fields.push(bytes(3, Buffer.concat([int(1, key), int(2, str)])));
    parts.push(bytes(2, Buffer.concat(fields)));
  }
  for (const l of locations) {
    parts.push(bytes(4, Buffer.concat([int(1, l.id), ...l.lines.map(([f, line]) => bytes(4, Buffer.concat([int(1, f), int(2, line)])))])));
  }
  for (const f of functions) parts.push(bytes(5, Buffer.concat([int(1, f.id), int(2, f.name), int(4, f.file)])));
  for (const s of strings) parts.push(bytes(6, s));
  if (period !== undefined) parts.push(int(12, period));
  return Buffer.concat(parts);
}

module.exports = { varint, int, bytes, packed, pprofBytes };
