'use strict';
// The source text a report embeds: only the hot lines of scripts the profiled program
// loaded (read when its trace was built, and carried in the trace as `sourceText`) and of
// source maps' own `sourcesContent`; never a file that a profile or a map merely names
// (file:///proc/self/environ, a secret beside the app, a file a map's `sources` lists).
// `sources: false` / `--no-sources` embed none.

const { test, before, after } = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const zlib = require('node:zlib');
const { spawnSync } = require('node:child_process');
const { pathToFileURL } = require('node:url');
const { Profiler, htmlReport } = require('..');

const ROOT = path.join(__dirname, '..');
const CLI = path.join(ROOT, 'bin', 'selfprof.js');
const SECRET = `selfprof-secret-${process.pid}-${Date.now()}`;
const ENV = { ...process.env, SELFPROF_TEST_SECRET: SECRET };

let dir;
before(() => {
  dir = fs.realpathSync(fs.mkdtempSync(path.join(os.tmpdir(), 'selfprof-report-sources-')));
  fs.writeFileSync(path.join(dir, 'secret.txt'), `password=${SECRET}\n`.repeat(5));
  fs.writeFileSync(path.join(dir, 'secret.js'), `// ${SECRET}\nmodule.exports = ${JSON.stringify(SECRET)};\n`.repeat(3));
});
after(() => fs.rmSync(dir, { recursive: true, force: true }));

/** The report's embedded data (`{ trace, sources, ... }`). */
function embedded(html) {
  const json = html.match(/<script type="application\/json" id="trace-data">([^<]*)<\/script>/)[1];
  return JSON.parse(json);
}

function cli(args, options = {}) {
  const r = spawnSync(process.execPath, [CLI, ...args], { encoding: 'utf8', env: ENV, timeout: 60_000, ...options });
  assert.equal(r.status, 0, `selfprof ${args.join(' ')}: ${r.stderr}`);
  return r;
}

/** A trace that names local files as its resources, with line ticks on their first lines. */
function namingTrace() {
  const files = [pathToFileURL(path.join(dir, 'secret.txt')).href, 'file:///proc/self/environ', pathToFileURL(path.join(dir, 'secret.js')).href];
  return {
    resources: files,
    frames: files.map((_, i) => ({ name: `f${i}`, resourceId: i, line: 1, column: 1 })),
    stacks: files.map((_, i) => ({ frameId: i })),
    samples: files.flatMap((_, i) => [0, 1, 2].map((k) => ({ timestamp: i * 10 + k, stackId: i, contextId: k % 2 }))),
    contexts: [{ labels: { k: 'a' } }, { labels: { k: 'b' } }],
    lineTicks: files.flatMap((_, i) => [1, 2].map((line) => ({ stackId: i, line, ticks: 3 }))),
  };
}

test('a profile naming local files: report --html, diff --html and htmlReport embed none of them', () => {
  const file = path.join(dir, 'naming.json');
  fs.writeFileSync(file, JSON.stringify(namingTrace()));
  const out = (name) => path.join(dir, name);
  cli(['report', file, '--html', out('report.html')]);
  cli(['diff', file, file, '--html', out('diff.html')]);
  cli(['diff', file, '--by', 'k', 'a', 'b', '--html', out('diff-by.html')]);
  // htmlReport in a process whose environment holds the secret (/proc/self/environ is its own).
  const code = `process.stdout.write(require(${JSON.stringify(ROOT)}).htmlReport(require(${JSON.stringify(file)})))`;
  const api = spawnSync(process.execPath, ['-e', code], { encoding: 'utf8', env: ENV, maxBuffer: 64 << 20 });
  assert.equal(api.status, 0, api.stderr);
  fs.writeFileSync(out('api.html'), api.stdout);
  for (const name of ['report.html', 'diff.html', 'diff-by.html', 'api.html']) {
    const html = fs.readFileSync(out(name), 'utf8');
    assert.ok(!html.includes(SECRET), `${name} holds no text of the files the profile names`);
    assert.deepEqual(embedded(html).sources, {}, name);
  }
});

// Generated scripts whose maps point their lines at local files: secret.txt, and
// /proc/self/environ (the recorder's environment holds the secret).
function mappedScript(name, source) {
  const body = [
    `function ${name}Hot(ms) {`,
    '  const end = Date.now() + ms;',
    '  let x = 0;',
    '  while (Date.now() < end) {',
    '    x += Math.sqrt(x + 1);',
    '  }',
    '  return x;',
    '}',
    `exports.spin = ${name}Hot;`,
  ];
  // Every generated line from the first line of `source`.
  const map = { version: 3, sources: [source], names: [], mappings: Array(body.length).fill('AAAA').join(';') };
  fs.writeFileSync(path.join(dir, `${name}.js`), `${body.join('\n')}\n//# sourceMappingURL=${name}.js.map\n`);
  fs.writeFileSync(path.join(dir, `${name}.js.map`), JSON.stringify(map));
}

test('record: a map whose sources name local files gets no text from them; the app\'s own hot line does', () => {
  mappedScript('toSecret', path.join(dir, 'secret.txt'));
  mappedScript('toEnviron', '/proc/self/environ');
  fs.writeFileSync(
    path.join(dir, 'app.js'),
    `function appHot(ms) {
  const end = Date.now() + ms;
  let x = 0;
  while (Date.now() < end) x += Math.sqrt(x + 1); // APP-HOT-LINE
  return x;
}
require('./toSecret.js').spin(200);
require('./toEnviron.js').spin(200);
appHot(200);
`,
  );
  const out = path.join(dir, 'rec');
  cli(['record', '-o', out, '--', process.execPath, path.join(dir, 'app.js')]);
  const html = fs.readFileSync(path.join(out, 'profile.html'), 'utf8');
  const trace = JSON.parse(zlib.gunzipSync(fs.readFileSync(path.join(out, 'profile.trace.json.gz'))));
  // The mapped frames are where the maps put them, and their line ticks too: only the text is withheld.
  const urls = [pathToFileURL(path.join(dir, 'secret.txt')).href, 'file:///proc/self/environ'];
  for (const url of urls) assert.ok(trace.resources.includes(url), `${url} is a mapped frame's file`);
  assert.ok(!html.includes(SECRET), 'profile.html holds no text of the files the maps name');
  assert.ok(!JSON.stringify(trace).includes(SECRET), 'nor does the trace');
  const appUrl = pathToFileURL(path.join(dir, 'app.js')).href;
  const appLines = embedded(html).sources[appUrl];
  assert.ok(appLines && Object.values(appLines).some((l) => l.includes('APP-HOT-LINE')), `app.js's hot line: ${JSON.stringify(appLines)}`);
  for (const url of Object.keys(embedded(html).sources)) assert.ok(!urls.includes(url), `no text of ${url}`);

  // --no-sources: no text in the report or the trace.
  const bare = path.join(dir, 'rec-bare');
  cli(['record', '--no-sources', '-o', bare, '--', process.execPath, path.join(dir, 'app.js')]);
  assert.deepEqual(embedded(fs.readFileSync(path.join(bare, 'profile.html'), 'utf8')).sources, {});
  assert.equal(JSON.parse(zlib.gunzipSync(fs.readFileSync(path.join(bare, 'profile.trace.json.gz')))).sourceText, undefined);
});

function fromContentHot(ms) {
  const end = Date.now() + ms;
  let x = 0;
  while (Date.now() < end) x += Math.sqrt(x + 1); // SOURCES-TEST-HOT-LINE
  return x;
}

test('stop(): the trace carries the hot lines of loaded scripts and of sourcesContent, not of files a map names', async () => {
  // m1.js: its map carries its source's text (the original is not on disk); m2.js: its map
  // names a file that is on disk, without sourcesContent.
  const lines = Array.from({ length: 9 }, (_, i) => `original line ${i + 1} // ORIGINAL-${i + 1}`);
  mappedScript('withContent', 'orig.ts');
  const mapFile = path.join(dir, 'withContent.js.map');
  fs.writeFileSync(mapFile, JSON.stringify({ ...JSON.parse(fs.readFileSync(mapFile, 'utf8')), sourcesContent: [lines.join('\n')] }));
  fs.writeFileSync(path.join(dir, 'named.ts'), `// ${SECRET}\n`.repeat(9));
  mappedScript('namesFile', 'named.ts');
  const p = new Profiler({ sampleInterval: 1, maxBufferSize: 100_000 });
  require(path.join(dir, 'withContent.js')).spin(200);
  require(path.join(dir, 'namesFile.js')).spin(200);
  fromContentHot(200);
  const trace = await p.stop();
  const text = trace.sourceText;
  assert.ok(text, 'the trace carries sourceText');
  const origUrl = pathToFileURL(path.join(dir, 'orig.ts')).href;
  assert.deepEqual(text[origUrl], { 1: lines[0] }, 'orig.ts line 1, from the map\'s sourcesContent');
  assert.ok(trace.resources.includes(pathToFileURL(path.join(dir, 'named.ts')).href));
  assert.equal(text[pathToFileURL(path.join(dir, 'named.ts')).href], undefined, 'no text of named.ts');
  const own = text[pathToFileURL(__filename).href];
  assert.ok(own && Object.values(own).some((l) => l.includes('SOURCES-TEST-HOT-LINE')), 'this file\'s hot line');
  assert.ok(!JSON.stringify(trace).includes(SECRET));

  const data = embedded(htmlReport(trace));
  assert.deepEqual(data.sources, text, 'the report embeds what the trace carries');
  assert.equal(data.trace.sourceText, undefined, 'once');
  const none = htmlReport(trace, { sources: false });
  assert.deepEqual(embedded(none).sources, {});
  assert.ok(!none.includes('SOURCES-TEST-HOT-LINE') && !none.includes('ORIGINAL-1'), 'sources: false embeds no text at all');
  // stop({ sourceText: false }): none in the trace.
  const q = new Profiler({ sampleInterval: 1, maxBufferSize: 100_000 });
  fromContentHot(100);
  assert.equal((await q.stop({ sourceText: false })).sourceText, undefined);
});

test('a saved trace keeps its text: report --html embeds it where the scripts are gone; --no-sources none', async () => {
  const script = path.join(dir, 'gone.js');
  fs.writeFileSync(script, 'exports.spin = function goneHot(ms) {\n  const end = Date.now() + ms;\n  let x = 0;\n  while (Date.now() < end) x += Math.sqrt(x + 1); // GONE-HOT-LINE\n  return x;\n};\n');
  const p = new Profiler({ sampleInterval: 1, maxBufferSize: 100_000 });
  require(script).spin(250);
  const file = path.join(dir, 'saved.json.gz');
  fs.writeFileSync(file, await p.stop({ format: 'json-gzip' }));
  fs.rmSync(script);
  const out = path.join(dir, 'saved.html');
  cli(['report', file, '--html', out], { cwd: os.tmpdir() });
  const lines = embedded(fs.readFileSync(out, 'utf8')).sources[pathToFileURL(script).href];
  assert.ok(lines && Object.values(lines).some((l) => l.includes('GONE-HOT-LINE')), JSON.stringify(lines));
  cli(['report', file, '--no-sources', '--html', out]);
  assert.ok(!fs.readFileSync(out, 'utf8').includes('GONE-HOT-LINE'));
  cli(['diff', file, file, '--no-sources', '--html', out]);
  assert.ok(!fs.readFileSync(out, 'utf8').includes('GONE-HOT-LINE'));
});

test('the text a trace carries is embedded as it is, bounded: 240 characters a line, 4000 lines', () => {
  const trace = namingTrace();
  const lines = Object.fromEntries(Array.from({ length: 5000 }, (_, i) => [i + 1, i === 0 ? 'y'.repeat(1000) : `line ${i + 1}`]));
  trace.sourceText = { [trace.resources[2]]: lines };
  const { sources } = embedded(htmlReport(trace));
  const kept = sources[trace.resources[2]];
  assert.equal(Object.keys(kept).length, 4000);
  assert.equal(kept[1], `${'y'.repeat(240)}…`);
  assert.equal(kept[2], 'line 2');
  // Not as selfprof writes it: left out, the trace still read.
  const odd = { ...namingTrace(), sourceText: { 'file:///a.js': { x: 1 } } };
  assert.deepEqual(embedded(htmlReport(odd)).sources, {});
});

test('service mode: the traces a file exporter writes carry their hot lines\' text', () => {
  const out = path.join(dir, 'service');
  fs.mkdirSync(out);
  const app = path.join(dir, 'service-app.js');
  fs.writeFileSync(
    app,
    `const s = require(${JSON.stringify(ROOT)}).start({ service: 'texts', period: 200, heap: false, exporters: [{ type: 'file', dir: ${JSON.stringify(out)}, trace: true }] });
function serviceHot(ms) {
  const end = Date.now() + ms;
  let x = 0;
  while (Date.now() < end) x += Math.sqrt(x + 1); // SERVICE-HOT-LINE
  return x;
}
serviceHot(500);
s.stop();
`,
  );
  const r = spawnSync(process.execPath, [app], { encoding: 'utf8', timeout: 60_000 });
  assert.equal(r.status, 0, r.stderr);
  const traces = fs.readdirSync(out).filter((f) => f.endsWith('Z.trace.json.gz'));
  assert.ok(traces.length >= 1, fs.readdirSync(out).join());
  const texts = traces.map((f) => JSON.parse(zlib.gunzipSync(fs.readFileSync(path.join(out, f)))).sourceText?.[pathToFileURL(app).href] ?? {});
  assert.ok(texts.some((t) => Object.values(t).some((l) => l.includes('SERVICE-HOT-LINE'))), JSON.stringify(texts));
});
