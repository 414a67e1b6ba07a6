'use strict';
// The HTML report: a real labeled trace, checked as text in Node and driven in the system's
// headless Chromium (playwright-core, no browser download) with the network blocked.
/* global window -- used in page.evaluate's callbacks, which run in the browser */
const { test, before } = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const path = require('node:path');
const { pathToFileURL } = require('node:url');
const { setTimeout: sleep, setImmediate: tick } = require('node:timers/promises');
const { Profiler, withLabels, htmlReport } = require('..');
const { spin, assertValidTrace } = require('./helpers');

const OUT = path.join(__dirname, '..', 'out', 'test-report');
const { missing, CHROMIUM, NO_CHROMIUM, launchChromium } = require('./tools');
const SCRIPT_BREAKER = '</script><script>window.broken = 1</script>';

function reportPrimes(ms) {
  return spin(ms);
}

function reportOrders(ms) {
  return spin(ms);
}

async function primesHandler() {
  reportPrimes(80);
  await sleep(5);
  reportPrimes(40);
}

async function ordersHandler() {
  reportOrders(30);
  await tick();
  reportOrders(20);
}

let trace;
before(async () => {
  const p = new Profiler({ sampleInterval: 1, maxBufferSize: 100000 });
  await Promise.all([
    withLabels({ endpoint: 'GET /primes' }, primesHandler),
    withLabels({ endpoint: 'POST /orders', note: SCRIPT_BREAKER }, ordersHandler),
  ]);
  await sleep(10); // some idle samples
  trace = assertValidTrace(await p.stop());
});

const endpointOf = (s) => (s.contextId === undefined ? undefined : trace.contexts[s.contextId].labels.endpoint);

test('the document is self-contained and its embedded JSON cannot break out', () => {
  const html = htmlReport(trace, { title: 'report <test>', sampleInterval: 1 });
  assert.match(html, /^<!DOCTYPE html>/);
  assert.match(html, /<title>report &#60;test&#62;<\/title>/);
  assert.doesNotMatch(html, /\b(src|href)\s*=\s*["']?\s*(https?:)?\/\//i, 'no network references');
  assert.doesNotMatch(html, /<script[^>]*\bsrc=/i, 'no external scripts');
  assert.doesNotMatch(html, /<link[^>]*stylesheet/i, 'no external styles');
  assert.ok(!html.includes(SCRIPT_BREAKER), 'the label value is escaped');
  assert.equal(html.match(/<\/script>/g).length, 2, 'only the two script elements close');
  const json = html.match(/<script type="application\/json" id="trace-data">([^<]*)<\/script>/)[1];
  const embedded = JSON.parse(json).trace;
  assert.equal(embedded.samples.length, trace.samples.length);
  assert.ok(embedded.contexts.some((c) => c.labels.note === SCRIPT_BREAKER), 'the value survives the round trip');

  // A function name can carry it too; JSON text and gzip'd bytes are accepted.
  const synthetic = {
    resources: ['file:///x.js'],
    frames: [{ name: '</script><!--', resourceId: 0, line: 1, column: 1 }],
    stacks: [{ frameId: 0 }],
    samples: [{ timestamp: 1, stackId: 0 }, { timestamp: 2, marker: 'idle' }],
  };
  for (const input of [synthetic, JSON.stringify(synthetic), require('node:zlib').gzipSync(JSON.stringify(synthetic))]) {
    const out = htmlReport(input);
    assert.ok(!out.includes('</script><!--'));
    assert.equal(out.match(/<\/script>/g).length, 2);
  }
  // pprof in, through the same reader; dangling ids are an error, not a broken page.
  const pprof = require('..').convert(synthetic, { to: 'pprof' });
  assert.ok(htmlReport(pprof).includes('\\u003c/script>\\u003c!--'));
  assert.throws(() => htmlReport({ frames: [] }), { name: 'TypeError', message: /not a selfprof trace/ });
  assert.throws(() => htmlReport({ ...synthetic, stacks: [{ frameId: 3 }] }), { name: 'TypeError', message: /stack 0 is out of range/ });
  assert.throws(() => htmlReport(42), TypeError);
});

test('in headless Chromium: flame graph, search, zoom and label filter', async (t) => {
  if (!fs.existsSync(CHROMIUM)) {
    if (missing(t, NO_CHROMIUM)) return;
  }
  fs.mkdirSync(OUT, { recursive: true });
  const file = path.join(OUT, 'report.html');
  fs.writeFileSync(file, htmlReport(trace, { title: 'selfprof test report', sampleInterval: 1 }));
  const fileUrl = pathToFileURL(file).href;

  const primes = trace.samples.filter((s) => endpointOf(s) === 'GET /primes').length;
  assert.ok(primes > 20, `GET /primes has samples (${primes})`);

  const browser = await launchChromium();
  try {
    const page = await browser.newPage({ viewport: { width: 1400, height: 1000 } });
    const problems = [];
    const requests = [];
    page.on('pageerror', (e) => problems.push(`page error: ${e.message}`));
    page.on('console', (m) => m.type() === 'error' && problems.push(`console error: ${m.text()}`));
    page.on('request', (r) => requests.push(r.url()));
    await page.route('**/*', (route) => {
      const url = route.request().url();
      return url === fileUrl || url.startsWith('data:') ? route.continue() : route.abort();
    });
    await page.goto(fileUrl);

    const total = () => page.textContent('#total-samples').then(Number);
    const names = () => page.$$eval('#flamegraph .frame', (els) => els.map((e) => e.dataset.name));
    assert.ok((await page.$$('#flamegraph .frame')).length > 3, 'the flame graph renders');
    assert.ok((await names()).includes('reportPrimes'));
    assert.ok((await names()).includes('reportOrders'));
    assert.equal(await total(), trace.samples.length);
    assert.equal(await page.textContent('#active-filter'), 'all samples');
    assert.ok((await page.$$('#top-functions tbody tr')).length > 0);
    assert.equal(await page.evaluate(() => window.broken), undefined, 'the label did not run as script');

    // Search: matching boxes are highlighted and their share is shown.
    await page.fill('#search', 'REPORTprimes');
    const highlighted = await page.$$eval('#flamegraph .frame.match', (els) => els.map((e) => e.dataset.name));
    assert.ok(highlighted.length > 0 && highlighted.every((n) => n === 'reportPrimes'), highlighted.join());
    assert.match(await page.textContent('#search-result'), /matched: \d+ samples \(\d+\.\d%\)/);
    await page.screenshot({ path: path.join(OUT, 'report-search.png') });
    await page.fill('#search', '');
    assert.equal((await page.$$('#flamegraph .frame.match')).length, 0);

    // Label filter: only GET /primes samples; reportOrders leaves the flame graph.
    await page.selectOption('#label-key', 'endpoint');
    await page.click('#label-values tbody tr[data-value="GET /primes"]');
    assert.equal(await total(), primes);
    assert.equal(await page.textContent('#active-filter'), 'endpoint = GET /primes');
    assert.ok((await names()).includes('reportPrimes'));
    assert.ok(!(await names()).includes('reportOrders'));
    const topNames = await page.$$eval('#top-functions td.fn', (els) => els.map((e) => e.textContent));
    assert.ok(topNames.includes('reportPrimes') && !topNames.includes('reportOrders'), 'the table follows the filter');
    await page.screenshot({ path: path.join(OUT, 'report.png'), fullPage: true });

    // Zoom: the widest reportPrimes box becomes the flame graph's full width.
    const widest = async (name) =>
      page.$$eval(`#flamegraph .frame[data-name="${name}"]`, (els) => {
        const e = els.sort((a, b) => b.getBoundingClientRect().width - a.getBoundingClientRect().width)[0];
        return { key: e.dataset.key, width: e.getBoundingClientRect().width };
      });
    const graphWidth = await page.$eval('#flamegraph', (e) => e.clientWidth);
    const before = await widest('reportPrimes');
    assert.ok(before.width < graphWidth - 2, 'reportPrimes is not full width before zooming');
    await page.click(`#flamegraph .frame[data-key="${before.key}"]`);
    const zoomed = await page.$eval(`#flamegraph .frame[data-key="${before.key}"]`, (e) => e.getBoundingClientRect().width);
    assert.ok(Math.abs(zoomed - graphWidth) < 1, `zoomed box is full width (${zoomed} of ${graphWidth})`);

    // Reset: filter and zoom cleared.
    await page.click('#reset');
    assert.equal(await total(), trace.samples.length);
    assert.equal(await page.textContent('#active-filter'), 'all samples');
    assert.ok((await names()).includes('reportOrders'));
    assert.ok((await widest('reportPrimes')).width < graphWidth - 2, 'zoom is reset');

    // (none) row and the all-samples control.
    await page.click('#label-values tbody tr[data-none]');
    assert.equal(await total(), trace.samples.filter((s) => endpointOf(s) === undefined).length);
    await page.click('#all-samples');
    assert.equal(await total(), trace.samples.length);

    assert.deepEqual(problems, []);
    assert.deepEqual(requests.filter((u) => u !== fileUrl && !u.startsWith('data:')), [], 'no network requests');
  } finally {
    await browser.close();
  }
});

test('embedded source lines and a baseline stay inert: a hot line containing </script> is shown, not run', async (t) => {
  // A real hot line whose text closes the script element, profiled from a file.
  const dir = fs.mkdtempSync(path.join(require('node:os').tmpdir(), 'selfprof-inert-'));
  const file = path.join(dir, 'hot.js');
  fs.writeFileSync(
    file,
    [
      "'use strict';",
      'module.exports = function inertHot(ms) {',
      '  const end = Date.now() + ms; let s = 0;',
      `  while (Date.now() < end) for (let i = 0; i < 2000; i++) s += '${SCRIPT_BREAKER}'.length * Math.sqrt(i);`,
      '  return s;',
      '};',
      '',
    ].join('\n'),
  );
  const inertHot = require(file);
  const p = new Profiler({ sampleInterval: 1, maxBufferSize: 100000 });
  inertHot(150);
  const hotTrace = await p.stop();
  const html = htmlReport(hotTrace, { title: 'inert', baseline: trace, view: 'sandwich' });
  fs.rmSync(dir, { recursive: true });
  assert.ok(!html.includes(SCRIPT_BREAKER), 'neither the source line nor the baseline\'s label appears raw');
  assert.equal(html.match(/<\/script>/g).length, 2, 'only the two script elements close');
  const embedded = JSON.parse(html.match(/<script type="application\/json" id="trace-data">([^<]*)<\/script>/)[1]);
  assert.ok(Object.values(embedded.sources).some((lines) => Object.values(lines).some((l) => l.includes(SCRIPT_BREAKER))), 'the line was read and embedded');
  if (!fs.existsSync(CHROMIUM)) {
    if (missing(t, NO_CHROMIUM)) return;
  }
  const browser = await launchChromium();
  try {
    const page = await browser.newPage();
    const out = path.join(OUT, 'inert.html');
    fs.writeFileSync(out, html);
    await page.goto(pathToFileURL(out).href);
    const frame = hotTrace.frames.findIndex((f) => f.name === 'inertHot');
    await page.selectOption('#sandwich-fn', String(frame));
    const sources = await page.$$eval('#lines-table td.src', (tds) => tds.map((td) => td.textContent));
    assert.ok(sources.some((s) => s.includes(SCRIPT_BREAKER)), 'shown as text');
    assert.equal(await page.evaluate(() => window.broken), undefined, 'not run');
    await page.click('#tabs button[data-view=diff]');
    assert.equal(await page.evaluate(() => window.broken), undefined);
  } finally {
    await browser.close();
  }
});
