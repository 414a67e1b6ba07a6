'use strict';
// Heap profiles: V8's sampling heap profiler, read through an inspector session on this
// thread (one per isolate: this module is loaded once per isolate, as the ProfilerGroup
// is). V8 samples an allocation about every `samplingInterval` bytes and keeps the sampled
// objects until they are collected, with the stack that allocated each: `take()` is a
// snapshot of the heap in use (not a rate), flattened for Rust (`src/formats/heap.rs`).
//
// The sampler is started through V8's C++ API where the host exports it
// (`native.heapSamplerStart`): the inspector's `startSampling` asks V8 for a full garbage
// collection before every profile, on this thread, which on a large heap is nearly all of
// a snapshot's cost. Without it a profile also holds sampled objects that died since V8
// last collected. Elsewhere, the inspector starts it as before.
//
// A profile is read through V8's C++ API too where it can be (`snapshot()`:
// `native.heapProfileRead`, src/capture/heap_profile.rs): V8's tree walked in Rust into a
// compact binary form, with no inspector command, no JSON and no JS object per node, so a
// snapshot costs the event loop about what V8's own copy of its tree does. Where it cannot
// (another platform, a V8 whose layout the build was not checked against), `snapshot()` is
// `take()`: the inspector's `getSamplingProfile`, flattened here to JSON.
//
// One sampler per isolate, shared: the first user's interval is the one in use; the last
// to release it stops V8's sampler.

const { post } = require('./inspector-post');
const { native } = require('../native');
const { performance } = require('node:perf_hooks');
const path = require('node:path');
const { pathToFileURL } = require('node:url');
const { runtimeScriptsOf } = require('../symbolize');
const { warnOnce } = require('../log');

/** @datadog/pprof's and @pyroscope/nodejs's default: one sample per 512 KiB allocated. */
const DEFAULT_HEAP_INTERVAL = 512 * 1024;
/** V8 takes the interval as an int; below 1 KiB sampling costs much and says little more. */
const MIN_HEAP_INTERVAL = 1024;
const MAX_HEAP_INTERVAL = 2 ** 31 - 1;

function checkHeapInterval(value, name = 'heapSamplingInterval') {
  if (typeof value !== 'number' || !Number.isFinite(value)) {
    throw new TypeError(`${name} must be a finite number of bytes, got ${typeof value === 'number' ? value : typeof value}`);
  }
  if (!Number.isInteger(value) || value < MIN_HEAP_INTERVAL || value > MAX_HEAP_INTERVAL) {
    throw new RangeError(`${name} must be a whole number of bytes from ${MIN_HEAP_INTERVAL} to ${MAX_HEAP_INTERVAL}, got ${value}`);
  }
  return value;
}


let session = null;
let users = 0;
let interval = 0;
/** How this isolate's sampler was started: 'native' (by us, through V8's API), 'inspector'
 * (by us, through the session) or 'shared' (it ran already: never ours to stop). */
let startedBy = null;

/** Starts V8's sampler on session `s`: through V8's API if it can, else the inspector. */
function startSampler(s, samplingInterval) {
  let how = 'unavailable';
  try {
    how = native?.heapSamplerStart?.(samplingInterval) ?? 'unavailable';
  } catch {
    // The inspector then.
  }
  if (how === 'started') return 'native';
  if (how === 'running') return 'shared';
  post(s, 'HeapProfiler.enable');
  post(s, 'HeapProfiler.startSampling', { samplingInterval });
  return 'inspector';
}

/**
 * Why this isolate's heap profile cannot be read through V8's C++ API, or null if it can
 * (then `snapshot()` reads it so; service mode's start line says which).
 */
function nativeReadUnavailable() {
  if (!native?.heapProfileRead) return 'this build of selfprof cannot read it';
  if (nativeReadFailed) return nativeReadFailed;
  try {
    return native.heapProfileUnreadable(process.versions.v8) ?? null;
  } catch (err) {
    return err.message;
  }
}

/** Set when reading through V8's C++ API failed once: the inspector's from then on. */
let nativeReadFailed = null;

/** A script path as the CPU profiler names it: the same resource in both profiles. */
function urlMaker() {
  const urls = new Map();
  return (url) => {
    if (typeof url !== 'string' || !path.isAbsolute(url)) return url ?? '';
    let u = urls.get(url);
    if (u === undefined) urls.set(url, (u = pathToFileURL(url).href));
    return u;
  };
}

/**
 * The profile read through V8's C++ API: `{ profile, urls }` (the flat form's bytes, and
 * the URL of each script they index), or null where it cannot be (the first failure says
 * why, once). Throws if no sampler runs.
 */
function readNative() {
  if (nativeReadUnavailable() !== null) return null;
  let read;
  try {
    read = native.heapProfileRead(process.versions.v8);
  } catch (err) {
    nativeReadFailed = err.message;
    warnOnce('heap-read', `selfprof: heap profiles are read through the inspector from now on, at more cost to the event loop: ${err.message}`);
    return null;
  }
  if (read === null) throw new Error('the heap sampler is not running');
  return { profile: read.profile, urls: read.scripts.map(urlMaker()) };
}

/**
 * The sampling heap profile as `{ interval, nodes: [{ parent, name, url, line, column,
 * selfSize }], samples: [nodeIndex, size, ...] }`, parents before children (iteratively:
 * V8's tree is as deep as the deepest allocating stack).
 */
function flatten(profile, samplingInterval) {
  // The heap profiler names a CommonJS script by its path where the CPU profiler gives a
  // file:// URL: the same URL in both, so their frames are the same resource and source
  // maps and reports find the file.
  const urlOf = urlMaker();
  const nodes = [];
  const index = new Map();
  const todo = [[profile.head, -1]];
  while (todo.length) {
    const [node, parent] = todo.pop();
    const i = nodes.length;
    const cf = node.callFrame ?? {};
    nodes.push({ parent, name: cf.functionName ?? '', url: urlOf(cf.url), line: cf.lineNumber ?? -1, column: cf.columnNumber ?? -1, selfSize: node.selfSize ?? 0 });
    index.set(node.id, i);
    const children = node.children ?? [];
    for (let k = children.length - 1; k >= 0; k--) todo.push([children[k], i]);
  }
  const samples = [];
  for (const s of profile.samples ?? []) {
    const i = index.get(s.nodeId);
    if (i !== undefined) samples.push(i, s.size);
  }
  return { json: JSON.stringify({ interval: samplingInterval, nodes, samples }), urls: nodes.map((n) => n.url) };
}

/**
 * Starts (or joins) this isolate's heap sampler. Returns a handle: `interval` (bytes, the
 * one in use), `snapshot()` (`{ profile, urls?, atMs, interval, scripts, read }`: `profile`
 * the flat form's bytes with `urls` its scripts' URLs, read `'v8-api'`, or the flat JSON,
 * read `'inspector'`), `take()` (always through the inspector: `profile` the flat JSON)
 * and `release()`. Throws if V8's sampler cannot start (another session holds it).
 */
function startHeapSampling(samplingInterval = DEFAULT_HEAP_INTERVAL) {
  checkHeapInterval(samplingInterval);
  if (users === 0) {
    const inspector = require('node:inspector');
    const s = new inspector.Session();
    s.connect();
    try {
      startedBy = startSampler(s, samplingInterval);
    } catch (err) {
      s.disconnect();
      throw new Error(`the heap profiler could not start: ${err.message}`, { cause: err });
    }
    session = s;
    interval = samplingInterval;
  }
  users++;
  let released = false;
  return {
    interval,
    take() {
      if (released || session === null) throw new Error('the heap profiler was stopped');
      const { profile } = post(session, 'HeapProfiler.getSamplingProfile');
      const flat = flatten(profile, interval);
      // `scripts`: those whose source maps only this thread's Node may hold (see lib/symbolize).
      return { profile: flat.json, atMs: performance.now(), interval, scripts: runtimeScriptsOf(flat.urls) };
    },
    snapshot() {
      if (released || session === null) throw new Error('the heap profiler was stopped');
      const read = readNative();
      if (read === null) return { ...this.take(), read: 'inspector' };
      return { profile: read.profile, urls: read.urls, atMs: performance.now(), interval, scripts: runtimeScriptsOf(read.urls), read: 'v8-api' };
    },
    release() {
      if (released) return;
      released = true;
      users--;
      if (users === 0 && session !== null) {
        try {
          if (startedBy === 'native') native.heapSamplerStop();
          else if (startedBy === 'inspector') {
            post(session, 'HeapProfiler.stopSampling');
            post(session, 'HeapProfiler.disable');
          }
        } catch {
          // Disconnecting stops the inspector's.
        }
        session.disconnect();
        session = null;
        startedBy = null;
      }
    },
  };
}

module.exports = { startHeapSampling, flatten, nativeReadUnavailable, checkHeapInterval, DEFAULT_HEAP_INTERVAL, MIN_HEAP_INTERVAL, MAX_HEAP_INTERVAL };
