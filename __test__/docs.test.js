'use strict';
// The reference docs against the code they describe, so that a new option without a row
// fails here: docs/service-mode.md's tables name every option of start() and of each
// exporter, and every environment variable selfprof reads (found in lib/'s source), and
// nothing it does not read; docs/cli.md has a row for every option of every command, and
// `selfprof --help` names each.
const { test } = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const path = require('node:path');

const root = path.join(__dirname, '..');
const doc = (name) => fs.readFileSync(path.join(root, 'docs', name), 'utf8');

/** The section of markdown `text` under heading `heading` (to the next heading of its level or above). */
function section(text, heading) {
  const at = text.indexOf(`\n${heading}\n`);
  assert.ok(at >= 0, `the doc has a section ${heading}`);
  const level = heading.match(/^#+/)[0].length;
  const rest = text.slice(at + heading.length + 2);
  const end = rest.search(new RegExp(`^#{1,${level}} `, 'm'));
  return end < 0 ? rest : rest.slice(0, end);
}

/** The rows of the markdown tables in `text`, each an array of its cells (header and rule left out). */
function tableRows(text) {
  const rows = [];
  let inTable = false;
  for (const line of text.split('\n')) {
    if (!line.startsWith('|')) {
      inTable = false;
      continue;
    }
    const cells = line.slice(1, -1).split('|').map((c) => c.trim());
    if (!inTable) {
      inTable = true; // the header
      continue;
    }
    if (/^-+$/.test(cells[0].replace(/\s/g, ''))) continue;
    rows.push(cells);
  }
  return rows;
}

const code = (cell) => [...cell.matchAll(/`([^`]+)`/g)].map((m) => m[1]);
const VARIABLE = /^[A-Z][A-Z0-9_]{2,}$/;

/** lib/'s JS files, the report's page and the command line's own left out. */
function libFiles(dir = path.join(root, 'lib')) {
  return fs.readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const p = path.join(dir, e.name);
    if (e.isDirectory()) return p.endsWith(path.join('views', 'report', 'client')) || p.endsWith(path.join('lib', 'cli')) ? [] : libFiles(p);
    return e.name.endsWith('.js') ? [p] : [];
  });
}

/** Variables lib/ reads that are not settings of selfprof's, and why. */
const NOT_SETTINGS = {
  NODE_OPTIONS: "Node's own, read to see whether --cpu-prof runs beside",
  NAPI_RS_NATIVE_LIBRARY_PATH: "napi's loader's override of the addon's path",
  SELFPROF_WORKER_CONFIG: "the main thread's session handing its settings to workers' (internal)",
  SELFPROF_TEST_EXIT_SENDER: "the tests' choice of the exit's sender, worker or process (lib/service/exit.js; internal)",
  UV_THREADPOOL_SIZE: "libuv's, reported to Datadog as dd-trace reports it",
};

/** The environment variables lib/ reads: `env.NAME`, `env['NAME']`, and names in string literals (not warning codes). */
function variablesRead() {
  const found = new Set();
  for (const f of [...libFiles(), ...['index.js', 'start.js', 'worker.js'].map((f) => path.join(root, f))]) {
    const s = fs.readFileSync(f, 'utf8');
    const codes = warningCodes(s);
    for (const re of [/\benv\??\.([A-Z][A-Z0-9_]{2,})\b/g, /\benv\[\s*['"]([A-Z][A-Z0-9_]{2,})['"]\s*\]/g, /(?<!code: )['"]((?:SELFPROF|DD|OTEL)_[A-Z0-9_]+)['"]/g]) {
      for (const m of s.matchAll(re)) if (!codes.has(m[1])) found.add(m[1]);
    }
  }
  return found;
}

/** The warning codes `warnNow(message, code)` calls in `source` pass: names, not variables. */
function warningCodes(source) {
  const codes = new Set();
  for (let at = source.indexOf('warnNow('); at >= 0; at = source.indexOf('warnNow(', at + 1)) {
    let depth = 0;
    let end = at + 'warnNow'.length;
    for (; end < source.length; end++) {
      if (source[end] === '(') depth++;
      else if (source[end] === ')' && --depth === 0) break;
    }
    const last = /,\s*['"]((?:SELFPROF)_[A-Z0-9_]+)['"]\s*,?\s*$/.exec(source.slice(at, end));
    if (last) codes.add(last[1]);
  }
  return codes;
}

test('docs/service-mode.md opens with a table of every option and environment variable, and names nothing the code does not read', () => {
  const text = doc('service-mode.md');
  const first = text.indexOf('\n## ');
  assert.equal(text.slice(first + 1, text.indexOf('\n', first + 1)), '## Options and environment variables', 'the first section is the tables');
  const rows = tableRows(section(text, '## Options and environment variables'));
  // Options: the first column's names, exporter options with their type in parentheses.
  const options = new Set();
  for (const [cell] of rows) {
    const type = /\((datadog|pyroscope|otlp|file)\)/.exec(cell)?.[1];
    for (const name of code(cell)) if (!VARIABLE.test(name)) options.add(type ? `${type}.${name}` : name);
  }
  const { START_KEYS } = require('../lib/service/options');
  for (const key of START_KEYS) {
    assert.ok(options.has(key) || [...options].some((o) => o.startsWith(`${key}.`)), `start() option ${key} has a row`);
  }
  const { KEYS, NUMBERS } = require('../lib/service/exporters');
  for (const [type, keys] of Object.entries(KEYS)) {
    for (const key of keys) assert.ok(options.has(`${type}.${key}`), `the ${type} exporter's ${key} has a row (\`${key}\` (${type}))`);
  }
  for (const key of ['type', ...Object.keys(NUMBERS)]) assert.ok(options.has(key), `every exporter's ${key} has a row`);
  // Variables: every one lib/ reads has a row (named in a row's first or second column),
  // and every one named there is read.
  const documented = new Set(rows.flatMap((cells) => cells.slice(0, 2).flatMap(code)).filter((n) => VARIABLE.test(n)));
  const read = variablesRead();
  for (const name of read) {
    if (NOT_SETTINGS[name]) continue;
    assert.ok(documented.has(name), `${name} (read in lib/) has a row in docs/service-mode.md`);
  }
  for (const name of documented) assert.ok(read.has(name), `${name} has a row in docs/service-mode.md but lib/ does not read it`);
  // And every row says what it does.
  for (const cells of rows) assert.ok(cells.length === 4 || cells.length === 3, `a row of 3 or 4 cells: ${cells.join(' | ')}`);
  for (const cells of rows) assert.ok(cells.at(-1).length > 3, `a row says what it does: ${cells.join(' | ')}`);
});

test('docs/cli.md has a row for every option of every command, and --help names each', () => {
  const text = doc('cli.md');
  const { USAGE } = require('../lib/cli/args');
  for (const command of ['record', 'report', 'convert', 'diff']) {
    const { OPTIONS } = require(`../lib/cli/${command}`);
    const rows = tableRows(section(text, `## ${command}`));
    const documented = new Set(rows.flatMap(([cell]) => code(cell).map((c) => c.split(' ')[0])));
    const usage = USAGE.split('\n')
      .filter((l) => l.startsWith(`  selfprof ${command} `))
      .join(' ');
    assert.ok(usage, `--help has a line for ${command}`);
    for (const [name, spec] of Object.entries(OPTIONS)) {
      assert.ok(documented.has(`--${name}`), `docs/cli.md: ${command} --${name} has a row`);
      if (spec.short) assert.ok(documented.has(`-${spec.short}`), `docs/cli.md: ${command} -${spec.short} is named`);
      assert.ok(usage.includes(`--${name}`) || (spec.short && usage.includes(`-${spec.short} `)), `--help: ${command} names --${name}`);
    }
    for (const name of documented) {
      const long = name.replace(/^--?/, '');
      assert.ok(OPTIONS[long] || Object.values(OPTIONS).some((s) => s.short === long), `docs/cli.md: ${command} ${name} is not one of its options`);
    }
  }
});
