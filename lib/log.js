'use strict';
// A profiler must not flood a service's logs: each kind of failure is logged once.

const warned = new Set();

/** Logs `message` the first time `kind` fails; later failures of that kind are silent. */
function warnOnce(kind, message) {
  if (warned.has(kind)) return;
  warned.add(kind);
  process.emitWarning(message, { code: `SELFPROF_${kind.toUpperCase().replace(/\W/g, '_')}` });
}

module.exports = { warnOnce };
