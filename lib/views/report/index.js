'use strict';
// A self-contained HTML report of a trace: a timeline, flame graph, time-ordered stacks,
// sandwich (with source lines), diff, top functions and samples per label value. One file:
// the trace is embedded as JSON and read by the inline script assembled from ./client/*.js
// (one file per view); nothing is fetched (a Content-Security-Policy forbids it).

const fs = require('node:fs');
const path = require('node:path');
const { readProfile } = require('../convert');
const { sourceLines } = require('./sources');
const { page } = require('./shell');
const { SHARED } = require('../format');
const { eventLoopBlocks, checkThreshold } = require('../blocks');

// The client, in the order its parts are defined: the functions shared with Node (by their
// source text), the model and helpers, then the views, the page's wiring (main.js) last.
// All share one function scope in the page.
const CLIENT_FILES = ['model.js', 'flame.js', 'blocks.js', 'timeline.js', 'timeorder.js', 'sandwich.js', 'diff.js', 'tables.js', 'main.js'];
let clientCode;
function client() {
  if (clientCode === undefined) {
    const shared = `// ---- lib/views/format.js\n${SHARED.map(String).join('\n\n')}`;
    const parts = [shared, ...CLIENT_FILES.map((f) => `// ---- ${f}\n${fs.readFileSync(path.join(__dirname, 'client', f), 'utf8')}`)];
    // Inside an inline <script>, `</script` would end it: no client file may contain one
    // except as this escape (which means the same inside strings and regexes).
    clientCode = `(function () {\n'use strict';\n${parts.join('\n')}\n})();`.replace(/<\/(script)/gi, '<\\/$1');
  }
  return clientCode;
}

/**
 * The trace object from a trace (object, JSON text, json-gzip bytes), a V8 CPU profile or
 * pprof bytes, read and checked by the Rust reader: every id in range, so the page never
 * meets a dangling one.
 */
function traceObject(input, what = '', sourceMaps = false, profilerFrames = false) {
  try {
    return readProfile(input, { sourceMaps, profilerFrames });
  } catch (err) {
    if (err.code === 'ERR_SELFPROF_UNAVAILABLE') throw err; // no addon here, not a bad input
    throw new TypeError(`htmlReport: ${what}${err.message.replace(/^convert: /, '')}`, { cause: err });
  }
}

function escapeHtml(s) {
  return String(s).replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
}

/** JSON that is safe inside a <script> element: no `<` (so no `</script>` or `<!--`). */
function scriptJson(value) {
  return JSON.stringify(value)
    .replace(/</g, '\\u003c')
    .replace(/\u2028/g, '\\u2028')
    .replace(/\u2029/g, '\\u2029');
}

const VIEWS = ['flame', 'timeorder', 'sandwich', 'diff'];

/**
 * A complete HTML document (one file, no network) showing `trace`. Options:
 * - `title`, `sampleInterval` (ms; else the median gap between samples is shown);
 * - `baseline`: another profile (same inputs as `trace`) to diff against; the report opens
 *   on the diff view, A = baseline, B = `trace`; `baselineName`, `name` label them;
 * - `labelDiff: { key, a, b }`: open the diff view on two values of a label (`null` for
 *   samples without the label);
 * - `sources` (default true): embed the text of the hot lines that the trace carries
 *   (`trace.sourceText`: from the scripts the recorded program loaded, and its source
 *   maps' sourcesContent; no file is read here); false: none;
 * - `view`: the view to open (`flame`, `timeorder`, `sandwich`, `diff`);
 * - `sourceMaps` (default false): map the frames through the source maps found here first
 *   (a trace from `stop()` or `record` was mapped when it was built);
 * - `profilerFrames` (default false): show selfprof's own frames as recorded, rather than
 *   hidden (src/trace/profiler_frames.rs);
 * - `blockThresholdMs` (default 50): the event-loop blocks listed first are longer than this
 *   (lib/views/blocks.js).
 */
function htmlReport(trace, options = {}) {
  const {
    title = 'selfprof report',
    sampleInterval,
    baseline,
    baselineName,
    name,
    labelDiff,
    sources = true,
    view,
    sourceMaps = false,
    profilerFrames = false,
    blockThresholdMs,
  } = options ?? {};
  if (typeof sourceMaps !== 'boolean') throw new TypeError('htmlReport: sourceMaps must be a boolean');
  if (typeof profilerFrames !== 'boolean') throw new TypeError('htmlReport: profilerFrames must be a boolean');
  if (blockThresholdMs !== undefined) checkThreshold(blockThresholdMs, 'htmlReport: blockThresholdMs');
  const main = traceObject(trace, '', sourceMaps, profilerFrames);
  const base = baseline === undefined || baseline === null ? undefined : traceObject(baseline, 'baseline: ', sourceMaps, profilerFrames);
  // The event-loop blocks, read as `main` was (frames hidden and mapped alike).
  const blocks = eventLoopBlocks(trace, { thresholdMs: blockThresholdMs, sourceMaps, profilerFrames });
  return reportOfTraces(main, base, { title, sampleInterval, baselineName, name, labelDiff, sources, view, blocks });
}

/**
 * What reportOfTraces and reportChunks take: htmlReport's options but the reading ones, and
 * `blocks`: the event-loop blocks listed first (eventLoopBlocks' result for the same input;
 * no list if not given).
 * @typedef {{ title?: string, sampleInterval?: number, baselineName?: string, name?: string,
 *   labelDiff?: { key: string, a: string | null, b: string | null }, sources?: boolean, view?: string, blocks?: any }} PageOptions
 */

/**
 * htmlReport of trace objects `readProfile` made (the command line's: a file is read once,
 * not again here); their `sourceText` is taken out (it goes in as `sources`).
 * @param {any} main
 * @param {any} base
 * @param {PageOptions} [options]
 */
function reportOfTraces(main, base, options) {
  return [...reportChunks(main, base, options)].join('');
}

/** Arrays longer than this go into the page a slice at a time (reportChunks). */
const SLICE = 1 << 16;

/**
 * `JSON.stringify(value)` as an iterable of pieces (the objects of the first `depth`
 * levels a key at a time, arrays over SLICE a slice at a time), each safe in a <script>:
 * a report of a 250 MB trace is never one string of it.
 */
function* jsonPieces(value, depth = 3) {
  if (Array.isArray(value) && value.length > SLICE) {
    for (let i = 0; i < value.length; i += SLICE) yield `${i ? ',' : '['}${scriptJson(value.slice(i, i + SLICE)).slice(1, -1)}`;
    yield ']';
  } else if (depth > 0 && value !== null && typeof value === 'object' && !Array.isArray(value) && typeof value.toJSON !== 'function') {
    let first = true;
    for (const [key, v] of Object.entries(value)) {
      if (v === undefined || typeof v === 'function' || typeof v === 'symbol') continue;
      yield `${first ? '{' : ','}${scriptJson(key)}:`;
      first = false;
      yield* jsonPieces(v, depth - 1);
    }
    yield first ? '{}' : '}';
  } else {
    yield scriptJson(value);
  }
}

/**
 * reportOfTraces as pieces of the page, in order, to be written one after another (the
 * command line's: the page's text of a 250 MB trace is never held whole).
 * @param {any} main
 * @param {any} base
 * @param {PageOptions} [options]
 */
function* reportChunks(main, base, { title = 'selfprof report', sampleInterval, baselineName, name, labelDiff, sources = true, view, blocks } = {}) {
  if (view !== undefined && !VIEWS.includes(view)) {
    throw new TypeError(`htmlReport: view must be one of ${VIEWS.join(', ')}, got ${JSON.stringify(view)}`);
  }
  if (labelDiff !== undefined && (labelDiff === null || typeof labelDiff !== 'object' || typeof labelDiff.key !== 'string')) {
    throw new TypeError('htmlReport: labelDiff must be { key, a, b } with a label key and two values');
  }
  // The hot lines' text goes in once, as `sources` (and not at all with `sources: false`).
  const text = sources ? sourceLines(main) : {};
  delete main.sourceText;
  if (base) delete base.sourceText;
  const data = {
    // As the Rust reader writes it: the trace's fields, `contexts` always present.
    trace: main,
    sampleInterval: typeof sampleInterval === 'number' ? sampleInterval : undefined,
    name: name === undefined ? undefined : String(name),
    baseline: base,
    baselineName: baselineName === undefined ? undefined : String(baselineName),
    labelDiff: labelDiff && { key: labelDiff.key, a: labelDiff.a ?? null, b: labelDiff.b ?? null },
    sources: text,
    blocks,
    view: view ?? (base || labelDiff ? 'diff' : 'flame'),
  };
  // The page around its data (the shell's text, split where the data goes).
  const marker = `\0selfprof-data-${process.pid}\0`;
  const [head, tail] = page({ title: escapeHtml(title), json: marker, script: client() }).split(marker);
  yield head;
  yield* jsonPieces(data);
  yield tail;
}

module.exports = { htmlReport, reportOfTraces, reportChunks, scriptJson };
