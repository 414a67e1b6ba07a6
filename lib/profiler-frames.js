'use strict';
// selfprof's own frames in the user's profiles: hidden unless asked for (the rule is in
// src/trace/profiler_frames.rs; it runs where traces are built and read). A frame is
// selfprof's when its script is one of the package's own files, under any root a copy
// of selfprof was loaded from in this isolate (each copy adds its root, as loaded and its
// real path, when it loads: one installed twice, or linked, is found too), or under any
// `node_modules/selfprof/` (a file recorded elsewhere).

const fs = require('node:fs');
const path = require('node:path');

const KEY = Symbol.for('selfprof.packageRoots');

/** The roots every copy of selfprof loaded in this isolate registered. */
function registry() {
  const existing = globalThis[KEY];
  if (existing instanceof Set) return existing;
  const roots = new Set();
  try {
    Object.defineProperty(globalThis, KEY, { value: roots, configurable: true });
  } catch {
    // A frozen global: this copy's root is still passed with each build.
  }
  return roots;
}

const ROOT = path.resolve(__dirname, '..');
const OWN = [ROOT];
try {
  const real = fs.realpathSync(ROOT);
  if (real !== ROOT) OWN.push(real);
} catch {
  // The root as loaded is enough.
}
const roots = registry();
for (const r of OWN) roots.add(r);

/** The package roots to pass to a build: this copy's and every other copy's. */
function profilerRoots() {
  const all = new Set(OWN);
  for (const r of registry()) if (typeof r === 'string' && path.isAbsolute(r)) all.add(r);
  return [...all];
}

/**
 * Whether to show selfprof's own frames: the option if given (a boolean), else
 * SELFPROF_PROFILER_FRAMES (`1`, `true`, `on`, `yes`) when `env` is given, else hidden.
 */
function shown(option, env) {
  if (option !== undefined) return option;
  const v = env?.SELFPROF_PROFILER_FRAMES;
  return v !== undefined && /^(1|true|on|yes)$/i.test(v.trim());
}

/** A `profilerFrames` option as given: undefined or a boolean, else a TypeError naming `where`. */
function checkOption(value, where) {
  if (value !== undefined && typeof value !== 'boolean') {
    throw new TypeError(`${where}: profilerFrames must be a boolean, got ${value === null ? 'null' : typeof value}`);
  }
  return value;
}

/** The build options: `{ profilerFrames, profilerRoots }`. */
function buildOptions(option, env) {
  return shown(option, env) ? { profilerFrames: true } : { profilerFrames: false, profilerRoots: profilerRoots() };
}

module.exports = { buildOptions, profilerRoots, shown, checkOption, ROOT };
