'use strict';
// Source maps, the JS side. The mapping itself runs in Rust as part of the trace build
// (src/symbolize/), on the thread pool; it reads maps from disk. What only this process
// knows is handed to it here: whether to map (options, SELFPROF_SOURCE_MAPS), and the maps
// Node holds for scripts a loader compiled in memory (tsx, esbuild-register: V8 ran
// JavaScript for `app.ts`, whose file on disk is TypeScript with no source-map comment).
// Node keeps those maps when source maps are enabled (`--enable-source-maps`, or
// `process.setSourceMapsEnabled(true)`, which tsx and esbuild-register call).

const { findSourceMap } = require('node:module');

/** Scripts whose file is what V8 ran: their maps are read from disk, in Rust. */
const JS_FILE = /\.[cm]?js$/i;
/** Bounds on what is handed over per trace (the Rust side's own limit per map too). */
const MAX_MAP_CHARS = 32 << 20;
const MAX_TOTAL_CHARS = 64 << 20;
const MAX_SCRIPTS = 4096;

/**
 * Whether to map: the option if given (a boolean), else SELFPROF_SOURCE_MAPS (`0`,
 * `false`, `off`, `no` turn it off), else on.
 */
function enabled(option, env = process.env) {
  if (option !== undefined) return option;
  const v = env.SELFPROF_SOURCE_MAPS;
  return v === undefined || !/^(0|false|off|no)$/i.test(v.trim());
}

/**
 * The scripts of a V8 profile (the inspector's object) whose maps only Node may hold:
 * `file://` URLs that are not `.js`/`.mjs`/`.cjs` files. Cheap: one pass over the nodes.
 */
function runtimeScripts(profile) {
  return runtimeScriptsOf((profile?.nodes ?? []).map((node) => node.callFrame?.url));
}

/** `runtimeScripts` of a list of script URLs (a heap profile's). */
function runtimeScriptsOf(allUrls) {
  const seen = new Set();
  const urls = [];
  for (const url of allUrls) {
    if (typeof url !== 'string' || seen.has(url)) continue;
    seen.add(url);
    if (url.startsWith('file:') && !JS_FILE.test(url.split(/[?#]/)[0])) {
      urls.push(url);
      if (urls.length >= MAX_SCRIPTS) break;
    }
  }
  return urls;
}

// Each map's JSON once per SourceMap object Node holds (Node keeps one per script).
const jsonOf = new WeakMap();

function payloadJson(map) {
  let json = jsonOf.get(map);
  if (json === undefined) {
    const payload = map.payload;
    if (typeof payload?.mappings !== 'string' || payload.mappings.length > MAX_MAP_CHARS) {
      json = null;
    } else {
      // The sources' text is left out: a script compiled in memory is V8's own, so its
      // hot lines are read from its file when the trace is built (src/symbolize/text.rs).
      json = JSON.stringify(payload, (key, value) => (key === 'sourcesContent' ? undefined : value));
      if (json.length > MAX_MAP_CHARS) json = null;
    }
    jsonOf.set(map, json);
  }
  return json;
}

/**
 * `[{ url, map }]`: the maps Node holds for `urls` (as JSON), for the trace build. Never
 * throws: a script Node has no map for is left to the disk lookup.
 */
function runtimeMaps(urls) {
  const out = [];
  let total = 0;
  for (const url of new Set(urls)) {
    let map;
    try {
      map = findSourceMap(url);
    } catch {
      continue;
    }
    if (!map) continue;
    const json = payloadJson(map);
    if (json === null || total + json.length > MAX_TOTAL_CHARS) continue;
    total += json.length;
    out.push({ url, map: json });
  }
  return out;
}

/** The trace-build options for source maps: `{ sourceMaps, scriptMaps }`. */
function buildOptions(option, scripts) {
  const on = enabled(option);
  return on ? { sourceMaps: true, scriptMaps: runtimeMaps(scripts) } : { sourceMaps: false };
}

module.exports = { enabled, runtimeScripts, runtimeScriptsOf, runtimeMaps, buildOptions };
