'use strict';
// A profiler must not flood a service's logs: each kind of failure is logged once.

const warned = new Set();

/** Logs `message` the first time `kind` fails; later failures of that kind are silent. */
function warnOnce(kind, message) {
  if (warned.has(kind)) return;
  warned.add(kind);
  process.emitWarning(message, { code: `SELFPROF_${kind.toUpperCase().replace(/\W/g, '_')}` });
}

/**
 * process.emitWarning for the process's 'exit' event, whose later ticks never come
 * (emitWarning emits on one): the same warning, emitted now to the 'warning' listeners
 * (Node's own prints it, unless --no-warnings).
 */
function warnNow(message, code) {
  const warning = Object.assign(new Error(message), { name: 'Warning', code });
  process.emit('warning', warning);
}

/**
 * A 1/0 (true/false, yes/no, on/off) variable's value: true or false, undefined when unset
 * or empty, null when it is none of these.
 */
function switchValue(value) {
  const text = value?.trim().toLowerCase();
  if (text === undefined || text === '') return undefined;
  if (['0', 'false', 'no', 'off'].includes(text)) return false;
  if (['1', 'true', 'yes', 'on'].includes(text)) return true;
  return null;
}

/**
 * Whether the environment variable `name`, which can turn off something that is on by
 * default, leaves it on: 0, false, no or off turn it off; 1, true, yes, on, empty or unset
 * leave it on. Anything else leaves it on and says so once, naming the variable and value.
 */
function envSwitchOn(name) {
  const value = process.env[name];
  const on = switchValue(value);
  if (on !== null) return on ?? true;
  warnOnce(`${name.replace(/^SELFPROF_/, '')}_env`, `selfprof: ${name} must be 1 or 0 (true or false), got ${JSON.stringify(value.slice(0, 100))}: left on`);
  return true;
}

module.exports = { warnOnce, warnNow, envSwitchOn, switchValue };
