'use strict';
// The few source lines a report shows next to its line ticks: the hot lines of each
// function V8 counted lines for, read from `file://` resources on this machine. Bounded
// (file size, line length, lines in all) and never throws: an unreadable file has none.

const fs = require('node:fs');
const { fileURLToPath } = require('node:url');

const MAX_FILE_BYTES = 4 << 20;
const MAX_LINE_CHARS = 240;
const MAX_LINES = 4000;

/**
 * `{ [resource url]: { [line]: text } }` for the lines in `trace.lineTicks` (and each such
 * function's definition line), from files that can be read.
 */
function readSourceLines(trace) {
  const wanted = new Map(); // url -> Set of lines
  const want = (resourceId, line) => {
    const url = trace.resources[resourceId];
    if (typeof url !== 'string' || !url.startsWith('file://') || !(line >= 1)) return;
    if (!wanted.has(url)) wanted.set(url, new Set());
    wanted.get(url).add(line);
  };
  for (const { stackId, line } of trace.lineTicks ?? []) {
    const frame = trace.frames[trace.stacks[stackId]?.frameId];
    if (frame?.resourceId === undefined) continue;
    want(frame.resourceId, line);
    if (frame.line !== undefined) want(frame.resourceId, frame.line);
  }
  const out = {};
  let budget = MAX_LINES;
  for (const [url, lines] of wanted) {
    if (budget <= 0) break;
    const text = readSmallFile(url);
    if (text === undefined) continue;
    const all = text.split(/\r?\n/);
    const picked = {};
    for (const line of [...lines].sort((a, b) => a - b)) {
      if (line > all.length || budget-- <= 0) continue;
      const s = all[line - 1];
      picked[line] = s.length > MAX_LINE_CHARS ? `${s.slice(0, MAX_LINE_CHARS)}…` : s;
    }
    out[url] = picked;
  }
  return out;
}

function readSmallFile(url) {
  try {
    const file = fileURLToPath(url);
    const st = fs.statSync(file);
    if (!st.isFile() || st.size > MAX_FILE_BYTES) return undefined;
    return fs.readFileSync(file, 'utf8');
  } catch {
    return undefined;
  }
}

module.exports = { readSourceLines };
