'use strict';
// The few source lines a report shows next to its line ticks: those the trace carries
// (`trace.sourceText`, added where it was recorded: the hot lines of the scripts that
// program loaded, and of its source maps' `sourcesContent`; src/symbolize/text.rs). Nothing
// is read from this machine: a profile (or a source map) can name any file, such as
// file:///proc/self/environ or ~/.npmrc, and a report is made to be shared. Bounded (line
// length, lines in all) and never throws: text that is not as selfprof writes it is left out.

const MAX_LINE_CHARS = 240;
const MAX_LINES = 4000;

/** `{ [resource url]: { [line]: text } }` of the trace's `sourceText`. */
function sourceLines(trace) {
  const out = {};
  const text = trace?.sourceText;
  if (text === null || typeof text !== 'object') return out;
  let budget = MAX_LINES;
  for (const [url, lines] of Object.entries(text)) {
    if (budget <= 0) break;
    if (url === '__proto__' || lines === null || typeof lines !== 'object') continue;
    const picked = {};
    for (const [line, s] of Object.entries(lines)) {
      if (budget <= 0) break;
      if (typeof s !== 'string' || !/^[1-9]\d*$/.test(line)) continue;
      budget--;
      picked[line] = s.length > MAX_LINE_CHARS + 1 ? `${s.slice(0, MAX_LINE_CHARS)}…` : s;
    }
    out[url] = picked;
  }
  return out;
}

module.exports = { sourceLines };
