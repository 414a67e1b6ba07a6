'use strict';
// The native addon (napi-rs), in one place: every module that needs it requires this.
//
// `native` is the binding, or null where it cannot load (a platform with no prebuilt
// binary, an optional platform package npm left out, a libc too old). selfprof must never
// break the app that requires it, so a missing binding is not an error here: labels keep
// working through AsyncLocalStorage, `start()` warns once and profiles nothing, and only
// the calls that need the addon (`new Profiler`, the converters) throw `unavailable()`.

/** The platforms with a prebuilt binary (npm packages `selfprof-<platform>`). */
const PREBUILT = ['linux-x64-gnu', 'linux-arm64-gnu', 'linux-x64-musl', 'linux-arm64-musl', 'darwin-x64', 'darwin-arm64', 'win32-x64'];

/**
 * The binding. napi's generated loader looks for an MSVC build on Windows; selfprof's
 * Windows binary is its own package (built with mingw-w64, a Node-API addon like any), so
 * it is looked for first there: beside this package (a build copied in), then the package.
 */
function load() {
  if (process.platform !== 'win32' || process.arch !== 'x64' || process.env.NAPI_RS_NATIVE_LIBRARY_PATH) return require('../binding.js');
  const failed = [];
  for (const id of ['../selfprof.win32-x64.node', 'selfprof-win32-x64']) {
    try {
      return require(id);
    } catch (err) {
      failed.push(err);
    }
  }
  try {
    return require('../binding.js');
  } catch {
    // Why selfprof's own did not load (the package is missing, or it is there and did not
    // load); napi's loader looked for other names.
    let cause;
    for (const e of failed.reverse()) {
      if (cause !== undefined) e.cause ??= cause;
      cause = e;
    }
    throw new Error('selfprof-win32-x64 did not load', { cause });
  }
}

// Every copy of selfprof says where its files are, whatever it was loaded for: a build
// hides their frames (lib/profiler-frames.js).
require('./profiler-frames');

let native = null;
let loadError = null;
try {
  native = load();
} catch (err) {
  loadError = err;
}

let host;
/** This process's platform in the packages' naming: `linux-x64-gnu`, `darwin-arm64`, `win32-x64`, ... */
function hostPlatform() {
  if (host === undefined) {
    host = `${process.platform}-${process.arch}`;
    if (process.platform === 'linux') {
      let glibc = true;
      try {
        glibc = Boolean(/** @type {any} */ (process.report.getReport()).header.glibcVersionRuntime);
      } catch {
        // No report to read: taken as glibc, the common case.
      }
      host += glibc ? '-gnu' : '-musl';
    }
  }
  return host;
}

/** The innermost causes of the generated loader's error (it says "npm has a bug"; they say why). */
function causes(err) {
  const out = [];
  for (let e = err?.cause; e && out.length < 8; e = e.cause) {
    if (e.message) out.push(e.message.split('\n')[0]);
  }
  return out;
}

/** Why the binding did not load, in one line. */
function whyNot() {
  if (!loadError) return '';
  const platform = hostPlatform();
  if (!PREBUILT.includes(platform)) return `no prebuilt binary for ${platform}`;
  const all = causes(loadError);
  // A package that is there but does not load (wrong libc, a too-old glibc) says more
  // than the paths that were not found.
  const real = all.find((m) => !/Cannot find module/.test(m));
  // (Windows' messages end with a period, and a carriage return before the path.)
  return real ? `the native addon did not load: ${real.replace(/[.\s]+$/, '')}` : `the package selfprof-${platform} is not installed (npm left out the optional dependency?)`;
}

/** The one-line error for using what needs the addon where it did not load. */
function unavailable(what) {
  const err = /** @type {Error & { code?: string }} */ (new Error(
    `selfprof: ${what} is not available on ${hostPlatform()}: ${whyNot()}. ` +
      `Prebuilt for ${PREBUILT.join(', ')}. ` +
      'Labels (withLabels/setLabels/getLabels) still work.',
  ));
  err.code = 'ERR_SELFPROF_UNAVAILABLE';
  return err;
}

module.exports = { native, loadError, PREBUILT, hostPlatform, unavailable };
