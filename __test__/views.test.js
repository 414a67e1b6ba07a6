'use strict';
// The report's views in headless Chromium (playwright-core, the system's browser, network
// blocked), on real recordings: the timeline's brushed range, time order, the sandwich and
// its hot lines, GC attribution, the diff of two profiles and of two label values, and the
// time the page takes at 100k samples. Every expected number is computed here, in Node,
// from the trace itself. Screenshots of each view go to out/test-report/.
/* global getComputedStyle -- used in page.$eval's callbacks, which run in the browser */
const { test, before, after } = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const path = require('node:path');
const { pathToFileURL } = require('node:url');
const { performance } = require('node:perf_hooks');
const { setTimeout: sleep } = require('node:timers/promises');
const { Profiler, withLabels, htmlReport } = require('..');
const { spin, sampledCall, untilSignals, assertValidTrace, stackFrames, definitionOf, lineIn } = require('./helpers');

const OUT = path.join(__dirname, '..', 'out', 'test-report');
const { missing, CHROMIUM, NO_CHROMIUM, launchChromium } = require('./tools');
const ROW = 16; // the time-order chart's row height

// ---- the recorded workload

function viewsShared(ms) {
  return spin(ms);
}
function viewsPrimes(ms) {
  viewsShared(ms / 2);
  return spin(ms / 2);
}
function viewsOrders(ms) {
  viewsShared(ms / 2);
  return spin(ms / 2);
}
function viewsLines(ms) {
  const end = performance.now() + ms;
  let x = 0;
  while (performance.now() < end) {
    for (let i = 0; i < 4000; i++) x += Math.sqrt(i + x) * Math.sin(i); // VIEWS-HOT-LINE
    x %= 1e9;
  }
  return x;
}
function viewsGarbage() {
  let junk = [];
  for (let i = 0; i < 300_000; i++) junk.push({ i, s: `item ${i}` });
  collectGarbage();
  junk = null;
  return junk;
}
function diffSteady(signals) {
  busyUntilSignalled(signals);
}
function diffSlowed(signals) {
  busyUntilSignalled(signals);
}
/** Busy until the sampler signalled `n` times (1 ms sampling: as many samples as `n` at no
 * load, and a loaded machine's shares as large), by one call path whoever calls it: its
 * frames are both diff functions' and so change little in share, and each diff function
 * has one box in the flame graph (sampledCall's first call and its later ones are two paths,
 * whose shares moved apart under load: diffSlowed's widest box in B was blue, its total up). */
function busyUntilSignalled(n) {
  untilSignals(n, spinOneMs);
}
function spinOneMs() {
  spin(1);
}

let collectGarbage;
let trace; // labeled phases: GET /primes, idle, POST /orders (with GC), idle
let traceA; // diffSteady 10 + diffSlowed 10, six times
let traceB; // diffSteady 10 + diffSlowed 30, six times
let browser;

/** Calls `fn(ms)` on until the sampler signalled `ms` times in it (1 ms sampling): as many
 * samples as `ms` at no load, and a loaded machine's shares as large (a fixed time gave
 * one diffSlowed 53% -> 58% where ~50% -> ~75% is the point). */
const sampled = (fn, ms) => sampledCall(ms, 10_000, fn, ms);

before(async () => {
  require('node:v8').setFlagsFromString('--expose-gc');
  collectGarbage = require('node:vm').runInNewContext('gc');
  const p = new Profiler({ sampleInterval: 1, maxBufferSize: 100_000 });
  await withLabels({ endpoint: 'GET /primes' }, async () => {
    sampled(viewsPrimes, 120);
    sampled(viewsLines, 60);
  });
  await sleep(15);
  await withLabels({ endpoint: 'POST /orders' }, async () => {
    sampled(viewsOrders, 100);
    viewsGarbage();
  });
  await sleep(15);
  trace = assertValidTrace(await p.stop());

  const record = async (slowMs) => {
    const q = new Profiler({ sampleInterval: 1, maxBufferSize: 100_000 });
    for (let i = 0; i < 6; i++) {
      diffSteady(10);
      diffSlowed(slowMs);
    }
    return assertValidTrace(await q.stop());
  };
  traceA = await record(10);
  traceB = await record(30);

  if (fs.existsSync(CHROMIUM)) {
    browser = await launchChromium();
  }
  fs.mkdirSync(OUT, { recursive: true });
});

after(() => browser?.close());

/** Opens `html` (written to out/test-report/NAME.html) with every request but the file blocked. */
async function open(t, name, html) {
  const file = path.join(OUT, `${name}.html`);
  fs.writeFileSync(file, html);
  const url = pathToFileURL(file).href;
  const page = await browser.newPage({ viewport: { width: 1400, height: 1000 } });
  const problems = [];
  page.on('pageerror', (e) => problems.push(`page error: ${e.message}`));
  page.on('console', (m) => m.type() === 'error' && problems.push(`console error: ${m.text()}`));
  await page.route('**/*', (route) => {
    const u = route.request().url();
    return u === url || u.startsWith('data:') ? route.continue() : route.abort();
  });
  await page.goto(url);
  await page.waitForSelector('body[data-ready="true"]');
  t.after(async () => {
    await page.close();
  });
  page.problems = problems;
  return page;
}

function needsBrowser(t) {
  if (browser) return false;
  return missing(t, NO_CHROMIUM);
}

const endpointOf = (tr, s) => (s.contextId === undefined ? undefined : tr.contexts[s.contextId].labels.endpoint);
const has = (tr, s, name) => s.stackId !== undefined && stackFrames(tr, s).some((f) => f.name === name);
const frameIdOf = (tr, name) => {
  const id = tr.frames.findIndex((f) => f.name === name);
  assert.ok(id >= 0, `${name} is in the trace`);
  return id;
};

/**
 * A function's share of the busy samples (all but idle) of the samples `keep` keeps, in %:
 * total (anywhere on the stack) and self (innermost). What the diff view compares.
 */
function shares(tr, name, keep = () => true) {
  const kept = tr.samples.filter(keep);
  const busy = kept.filter((s) => s.marker !== 'idle');
  const total = busy.filter((s) => has(tr, s, name)).length;
  const self = busy.filter((s) => s.stackId !== undefined && s.marker === undefined && tr.frames[tr.stacks[s.stackId].frameId].name === name).length;
  return { total: (100 * total) / busy.length, self: (100 * self) / busy.length, busy: busy.length };
}

// ---- timeline

test('timeline: a brushed range filters the totals, tables, label panel and flame graph to its samples', async (t) => {
  if (needsBrowser(t)) return;
  const page = await open(t, 'timeline', htmlReport(trace, { title: 'timeline', sampleInterval: 1 }));
  const total = () => page.textContent('#total-samples').then(Number);
  assert.equal(await total(), trace.samples.length);

  // Drag across the first 40% of the timeline: the GET /primes phase and a little more.
  const box = await page.$eval('#timeline', (e) => {
    const r = e.getBoundingClientRect();
    return { x: r.left, y: r.top, w: e.clientWidth, h: r.height };
  });
  await page.mouse.move(box.x + box.w * 0.02, box.y + box.h / 2);
  await page.mouse.down();
  await page.mouse.move(box.x + box.w * 0.25, box.y + box.h / 2, { steps: 5 });
  await page.mouse.move(box.x + box.w * 0.4, box.y + box.h / 2, { steps: 5 });
  await page.mouse.up();
  const range = await page.$eval('#timeline', (e) => [Number(e.dataset.from), Number(e.dataset.to)]);
  const inRange = trace.samples.filter((s) => s.timestamp >= range[0] && s.timestamp <= range[1]);
  assert.ok(inRange.length > 10 && inRange.length < trace.samples.length, `the range holds some samples (${inRange.length})`);
  assert.equal(await total(), inRange.length, 'the totals are the samples in the range, as counted in Node');
  assert.match(await page.textContent('#active-range'), /^\+[\d.]+ ms … \+[\d.]+ ms/);

  // The top functions' totals are those of the range.
  await page.selectOption('#top-limit', '0');
  const topTotal = async (name) =>
    page.$$eval('#top-functions tbody tr', (rows, n) => {
      const row = rows.find((r) => r.querySelector('td.fn').textContent === n);
      return row ? Number(row.cells[2].textContent) : 0;
    }, name);
  for (const name of ['viewsPrimes', 'viewsLines', 'viewsOrders']) {
    assert.equal(await topTotal(name), inRange.filter((s) => has(trace, s, name)).length, `${name}'s total in the range`);
  }
  // The label panel counts the range's samples per value.
  const panel = await page.$$eval('#label-values tbody tr', (rows) => Object.fromEntries(rows.map((r) => [r.dataset.none ? '(none)' : r.dataset.value, Number(r.cells[1].textContent)])));
  const expected = {};
  for (const s of inRange) {
    const v = endpointOf(trace, s) ?? '(none)';
    expected[v] = (expected[v] ?? 0) + 1;
  }
  assert.deepEqual(panel, expected);
  // The flame graph has only the range's functions.
  const names = await page.$$eval('#flamegraph .frame', (els) => els.map((e) => e.dataset.name));
  assert.equal(names.includes('viewsOrders'), inRange.some((s) => has(trace, s, 'viewsOrders')));
  assert.equal(names.includes('viewsPrimes'), inRange.some((s) => has(trace, s, 'viewsPrimes')));
  await page.screenshot({ path: path.join(OUT, 'timeline.png') });

  // With a label filter too: both apply.
  await page.click('#label-values tbody tr[data-value="GET /primes"]');
  assert.equal(await total(), inRange.filter((s) => endpointOf(trace, s) === 'GET /primes').length);
  // A click without a drag clears the range; the label filter stays. (The timeline is
  // found again: the label panel's click may have scrolled the page.)
  const again = await page.$eval('#timeline', (e) => {
    e.scrollIntoView({ block: 'center' });
    const r = e.getBoundingClientRect();
    return { x: r.left, y: r.top, w: e.clientWidth, h: r.height };
  });
  await page.mouse.click(again.x + again.w * 0.7, again.y + again.h / 2);
  assert.equal(await total(), trace.samples.filter((s) => endpointOf(trace, s) === 'GET /primes').length);
  await page.click('#reset');
  assert.equal(await total(), trace.samples.length);
  assert.deepEqual(page.problems, []);
});

// ---- time order

test('time order: each sample\'s stack over time; a box is the function that ran then, click opens its sandwich', async (t) => {
  if (needsBrowser(t)) return;
  const page = await open(t, 'timeorder', htmlReport(trace, { title: 'time order', view: 'timeorder' }));
  assert.ok(Number(await page.$eval('#timeorder', (e) => e.dataset.boxes)) > 10, 'boxes are drawn');
  // Where viewsLines ran longest: the middle of its longest run of consecutive samples.
  let best = [0, 0];
  let start = -1;
  trace.samples.forEach((s, i) => {
    if (has(trace, s, 'viewsLines')) {
      if (start < 0) start = i;
      if (i - start > best[1] - best[0]) best = [start, i];
    } else start = -1;
  });
  assert.ok(best[1] - best[0] >= 2, 'viewsLines ran for several samples in a row');
  const at = (best[0] + best[1]) >> 1;
  const mid = trace.samples[at];
  const depth = stackFrames(trace, mid).findIndex((f) => f.name === 'viewsLines');
  const frames = stackFrames(trace, mid).length;
  const first = trace.samples[0].timestamp;
  const gap = (trace.samples.at(-1).timestamp - first) / (trace.samples.length - 1);
  const span = trace.samples.at(-1).timestamp + gap - first;
  const canvas = await page.$eval('#timeorder-canvas', (e) => {
    const r = e.getBoundingClientRect();
    return { x: r.left, y: r.top, w: r.width };
  });
  // The middle of the sample's column: it lasts until the next sample.
  const x = canvas.x + (((mid.timestamp + trace.samples[at + 1].timestamp) / 2 - first) / span) * canvas.w;
  const y = canvas.y + (frames - 1 - depth) * ROW + ROW / 2; // root at the top
  await page.mouse.move(x, y);
  assert.match(await page.textContent('#timeorder-details'), /^viewsLines — .*views\.test\.js/);
  await page.screenshot({ path: path.join(OUT, 'timeorder.png') });
  await page.mouse.click(x, y);
  assert.equal(await page.$eval('#view-sandwich', (e) => e.hidden), false, 'the sandwich view opens');
  assert.equal(await page.$eval('#sandwich-fn', (e) => Number(e.value)), frameIdOf(trace, 'viewsLines'));
  assert.deepEqual(page.problems, []);
});

// ---- sandwich and hot lines

test('sandwich: callers and callees of a function called from two places total its samples', async (t) => {
  if (needsBrowser(t)) return;
  const page = await open(t, 'sandwich', htmlReport(trace, { title: 'sandwich' }));
  const shared = trace.samples.filter((s) => has(trace, s, 'viewsShared'));
  const self = shared.filter((s) => s.marker === undefined && trace.frames[trace.stacks[s.stackId].frameId].name === 'viewsShared').length;
  assert.ok(shared.length > 4, `viewsShared has samples (${shared.length})`);
  await page.selectOption('#top-limit', '0');
  await page.click('#top-functions td.fn span >> text=viewsShared');
  assert.equal(Number(await page.textContent('#sandwich-total')), shared.length, 'its total samples');
  assert.equal(Number(await page.textContent('#sandwich-self')), self);
  const rootSamples = (id) => page.$eval(`#${id} .frame[data-key="root"]`, (e) => Number(e.dataset.samples));
  assert.equal(await rootSamples('sandwich-callers'), shared.length, 'callers total = its samples');
  assert.equal(await rootSamples('sandwich-callees'), shared.length, 'callees total = its samples');
  // Its two callers, each with the samples viewsShared had under it.
  const callers = await page.$$eval('#sandwich-callers .frame[data-key^="root/"]', (els) =>
    Object.fromEntries(els.filter((e) => e.dataset.key.split('/').length === 2).map((e) => [e.dataset.name, Number(e.dataset.samples)])));
  const callerOf = (s) => stackFrames(trace, s)[stackFrames(trace, s).findLastIndex((f) => f.name === 'viewsShared') + 1]?.name;
  const expected = {};
  for (const s of shared) expected[callerOf(s)] = (expected[callerOf(s)] ?? 0) + 1;
  assert.deepEqual(callers, expected);
  assert.ok(callers.viewsPrimes > 0 && callers.viewsOrders > 0, 'called from two places');
  // Callers grow upward: the function's box is the bottom row.
  const [rootTop, callerTop] = await Promise.all([
    page.$eval('#sandwich-callers .frame[data-key="root"]', (e) => e.offsetTop),
    page.$eval('#sandwich-callers .frame[data-name="viewsPrimes"]', (e) => e.offsetTop),
  ]);
  assert.ok(callerTop < rootTop, 'callers are drawn above the function');

  // Under a label filter, the sandwich is the label's.
  await page.click('#label-values tbody tr[data-value="GET /primes"]');
  const primesOnly = shared.filter((s) => endpointOf(trace, s) === 'GET /primes');
  assert.equal(Number(await page.textContent('#sandwich-total')), primesOnly.length);
  assert.equal(await rootSamples('sandwich-callers'), primesOnly.length);
  await page.click('#all-samples');
  await page.screenshot({ path: path.join(OUT, 'sandwich.png'), fullPage: true });
  assert.deepEqual(page.problems, []);
});

test('hot lines: a function\'s source lines by samples, from V8\'s line ticks, with the source text', async (t) => {
  if (needsBrowser(t)) return;
  const page = await open(t, 'lines', htmlReport(trace, { title: 'hot lines', view: 'sandwich' }));
  const frame = frameIdOf(trace, 'viewsLines');
  await page.selectOption('#sandwich-fn', String(frame));
  const stacks = new Set(trace.stacks.flatMap((s, i) => (s.frameId === frame ? [i] : [])));
  const perLine = new Map();
  for (const l of trace.lineTicks) if (stacks.has(l.stackId)) perLine.set(l.line, (perLine.get(l.line) ?? 0) + l.ticks);
  const rows = await page.$$eval('#lines-table tbody tr[data-line]', (trs) =>
    trs.map((r) => ({ line: Number(r.dataset.line), samples: Number(r.dataset.samples), source: r.cells[3].textContent })));
  assert.deepEqual(new Map(rows.map((r) => [r.line, r.samples])), perLine, 'the trace\'s line ticks, per line');
  const text = fs.readFileSync(__filename, 'utf8');
  const source = text.split('\n');
  const hot = lineIn(text, 'VIEWS-HOT-LINE');
  assert.equal(rows[0].line, hot, 'the hottest line first');
  assert.equal(rows[0].source, source[hot - 1].slice(0, 240), 'with its source text');
  // V8 counts a tick in code it inlined (e.g. Node's validateThisInternalField under
  // performance.now()) at the inlined function's line, under this function: rare lines
  // outside its body are V8's, passed on as they are. Nearly all must be inside it.
  const def = definitionOf(__filename, 'viewsLines').line;
  const inside = rows.filter((r) => r.line >= def && r.line < def + 9).reduce((a, r) => a + r.samples, 0);
  const all = rows.reduce((a, r) => a + r.samples, 0);
  assert.ok(inside >= all * 0.9, `${inside} of ${all} line ticks in viewsLines' body: ${JSON.stringify(rows.map((r) => r.line))}`);
  await page.screenshot({ path: path.join(OUT, 'lines.png'), fullPage: true });
  // Without sources, the same numbers and no text.
  const bare = await open(t, 'lines-no-sources', htmlReport(trace, { view: 'sandwich', sources: false }));
  await bare.selectOption('#sandwich-fn', String(frame));
  assert.equal(await bare.$eval('#lines-table tbody tr[data-line] td.src', (e) => e.textContent), '');
  assert.deepEqual([...page.problems, ...bare.problems], []);
});

// ---- GC attribution

test('GC attribution: (garbage collector) samples go under the JS sample before them, marked as attributed', async (t) => {
  if (needsBrowser(t)) return;
  const gcs = trace.samples.map((s, i) => [s, i]).filter(([s]) => s.marker === 'gc' && s.stackId === undefined);
  assert.ok(gcs.length > 0, 'the recording has GC samples (gc() was called)');
  // What the report should attribute: the previous non-GC sample, when it is JS.
  const expected = new Map(); // stack id -> count
  for (const [, i] of gcs) {
    let j = i - 1;
    while (j >= 0 && trace.samples[j].marker === 'gc' && trace.samples[j].stackId === undefined) j--;
    const prev = trace.samples[j];
    if (prev && prev.stackId !== undefined && prev.marker === undefined) expected.set(prev.stackId, (expected.get(prev.stackId) ?? 0) + 1);
  }
  const attributed = [...expected.values()].reduce((a, b) => a + b, 0);
  assert.ok(attributed > 0, 'some GC followed JS');
  const page = await open(t, 'gc', htmlReport(trace, { title: 'GC attribution' }));
  const rootGc = () => page.$eval('#flamegraph .frame[data-key="gc"]', (e) => Number(e.dataset.samples)).catch(() => 0);
  assert.equal(await rootGc(), gcs.length);
  await page.check('#gc-attribute');
  const boxes = await page.$$eval('#flamegraph .frame.attributed', (els) => els.map((e) => [e.dataset.key, Number(e.dataset.samples), e.title]));
  assert.deepEqual(new Map(boxes.map(([key, n]) => [Number(key.slice(1)), n])), expected, 'under the stack of the JS sample before');
  assert.ok(boxes.every(([, , title]) => /attributed/.test(title)), 'labelled as attributed');
  assert.equal(await rootGc(), gcs.length - attributed, 'the rest stays a root box');
  assert.equal(Number(await page.textContent('#total-samples')), trace.samples.length, 'no sample gained or lost');
  await page.screenshot({ path: path.join(OUT, 'gc-attributed.png') });
  assert.deepEqual(page.problems, []);
});

// ---- diff

const deltas = (page) =>
  page.$$eval('#diff-table tbody tr', (rows) =>
    Object.fromEntries(rows.map((r) => [r.dataset.name + ' ' + r.cells[7].textContent, { self: Number(r.cells[0].dataset.deltaSelf), total: Number(r.cells[3].dataset.deltaTotal) }])));

test('diff: a profile against itself is zero everywhere', async (t) => {
  if (needsBrowser(t)) return;
  const page = await open(t, 'diff-self', htmlReport(trace, { title: 'self diff', baseline: trace, baselineName: 'same' }));
  assert.equal(await page.$eval('#view-diff', (e) => e.hidden), false, 'the report opens on the diff');
  await page.selectOption('#diff-limit', '0');
  const rows = Object.values(await deltas(page));
  assert.ok(rows.length > 5);
  assert.ok(rows.every((r) => r.self === 0 && r.total === 0), 'every function: Δ 0');
  const boxes = await page.$$eval('#diff-flame .frame', (els) => els.map((e) => [Number(e.dataset.delta), getComputedStyle(e).backgroundColor]));
  assert.ok(boxes.length > 5);
  assert.ok(boxes.every(([d]) => d === 0), 'every call path: Δ 0');
  assert.ok(boxes.slice(1).every(([, c]) => c === 'rgb(233, 233, 233)'), 'all neutral grey');
  assert.match(await page.textContent('#diff-legend'), /−0\.00 pp.*\+0\.00 pp.*share in B − share in A/);
  // Also the label diff of a value with itself.
  await page.selectOption('#diff-mode', 'label');
  await page.selectOption('#diff-b', 'GET /primes');
  await page.selectOption('#diff-a', 'GET /primes');
  assert.ok(Object.values(await deltas(page)).every((r) => r.self === 0 && r.total === 0));
  assert.deepEqual(page.problems, []);
});

test('diff: a function made slower shows the expected positive share (profile B against baseline A)', async (t) => {
  if (needsBrowser(t)) return;
  const a = shares(traceA, 'diffSlowed');
  const b = shares(traceB, 'diffSlowed');
  const steadyA = shares(traceA, 'diffSteady');
  const steadyB = shares(traceB, 'diffSteady');
  const want = { total: b.total - a.total, self: b.self - a.self };
  t.diagnostic(`diffSlowed: ${a.total.toFixed(1)}% -> ${b.total.toFixed(1)}% of busy samples (expected ~50% -> ~75%)`);
  assert.ok(want.total > 10, `diffSlowed takes a larger share in B (${want.total.toFixed(2)} pp)`);

  const page = await open(t, 'diff', htmlReport(traceB, { title: 'diff', baseline: traceA, baselineName: 'A (10 ms)', name: 'B (30 ms)' }));
  const rows = await deltas(page);
  const row = (name) => Object.entries(rows).find(([k]) => k.startsWith(`${name} `))[1];
  assert.ok(Math.abs(row('diffSlowed').total - want.total) < 1e-9, `page ${row('diffSlowed').total} vs ${want.total}`);
  assert.ok(Math.abs(row('diffSlowed').self - want.self) < 1e-9);
  assert.ok(row('diffSlowed').total > 10, 'positive');
  assert.ok(Math.abs(row('diffSteady').total - (steadyB.total - steadyA.total)) < 1e-9);
  assert.ok(row('diffSteady').total < 0, 'the unchanged function takes a smaller share');
  // By change in total share, it is among the first (the leaf, spin, has the self time).
  await page.selectOption('#diff-sort', 'total');
  const order = await page.$$eval('#diff-table tbody tr', (r) => r.map((x) => x.dataset.name));
  t.diagnostic(`by change in total share: ${order.slice(0, 6).join(', ')}`);
  assert.ok(order.indexOf('diffSlowed') >= 0 && order.indexOf('diffSlowed') < 3, order.join());
  // Its box is red, diffSteady's blue: the widest box of each (a function on a second,
  // rarer path, as a busy run's samples may put it, has a box of its own there).
  const color = (name) =>
    page.$$eval(`#diff-flame .frame[data-name="${name}"]`, (els) => {
      const widest = els.reduce((a, e) => (e.getBoundingClientRect().width > a.getBoundingClientRect().width ? e : a));
      return getComputedStyle(widest).backgroundColor.match(/\d+/g).map(Number);
    });
  const [r1, , b1] = await color('diffSlowed');
  const [r2, , b2] = await color('diffSteady');
  assert.ok(r1 > b1 && b2 > r2, `red for more, blue for less: ${r1},${b1} / ${r2},${b2}`);
  assert.match(await page.textContent('#diff-summary'), new RegExp(`A: A \\(10 ms\\): ${a.busy} busy samples · B: B \\(30 ms\\): ${b.busy} busy samples`));
  await page.screenshot({ path: path.join(OUT, 'diff.png'), fullPage: true });
  assert.deepEqual(page.problems, []);
});

test('diff: a baseline picked in the page from a trace file gives the same numbers; bad files are a message', async (t) => {
  if (needsBrowser(t)) return;
  const page = await open(t, 'diff-picked', htmlReport(traceB, { title: 'pick a baseline', view: 'diff' }));
  const pick = async (name, content) => {
    const file = path.join(OUT, name);
    fs.writeFileSync(file, content);
    await page.$eval('body', (b) => delete b.dataset.baselinePicked);
    await page.setInputFiles('#diff-file', file);
    await page.waitForSelector('body[data-baseline-picked]');
    return page.textContent('#diff-file-status');
  };
  assert.match(await page.textContent('#diff-summary'), /Nothing to compare/);
  assert.match(await pick('baseline-a.json.gz', require('node:zlib').gzipSync(JSON.stringify(traceA))), new RegExp(`^baseline-a\\.json\\.gz: ${traceA.samples.length} samples$`));
  const rows = await deltas(page);
  const got = Object.entries(rows).find(([k]) => k.startsWith('diffSlowed '))[1].total;
  const want = shares(traceB, 'diffSlowed').total - shares(traceA, 'diffSlowed').total;
  assert.ok(Math.abs(got - want) < 1e-9, `page ${got}, Node ${want}`);
  // Bad files: one message, the diff unchanged, no page error.
  const bad = { ...traceA, stacks: [...traceA.stacks, { frameId: 99999 }] };
  assert.match(await pick('bad.json', JSON.stringify(bad)), /^bad\.json: not a valid trace: stack \d+ is out of range$/);
  assert.match(await pick('garbage.json', '{"resources": ['), /^garbage\.json: .*JSON/);
  assert.match(await pick('x.cpuprofile', JSON.stringify({ nodes: [], startTime: 0, endTime: 1, samples: [], timeDeltas: [] })), /V8 CPU profile: selfprof convert/);
  assert.match(await pick('x.pb', Buffer.from([0x0a, 0x02, 0x08, 0x01])), /not JSON: a pprof file is read by selfprof diff/);
  assert.equal(Object.entries(await deltas(page)).find(([k]) => k.startsWith('diffSlowed '))[1].total, got, 'still the picked baseline');
  assert.deepEqual(page.problems, []);
});

test('diff of two label values: what POST /orders does that GET /primes does not', async (t) => {
  if (needsBrowser(t)) return;
  const page = await open(t, 'diff-labels', htmlReport(trace, { title: 'label diff', labelDiff: { key: 'endpoint', a: 'GET /primes', b: 'POST /orders' } }));
  await page.selectOption('#diff-limit', '0');
  const rows = await deltas(page);
  const isA = (s) => endpointOf(trace, s) === 'GET /primes';
  const isB = (s) => endpointOf(trace, s) === 'POST /orders';
  for (const name of ['viewsPrimes', 'viewsOrders', 'viewsShared', 'viewsLines']) {
    const want = shares(trace, name, isB).total - shares(trace, name, isA).total;
    const got = Object.entries(rows).find(([k]) => k.startsWith(`${name} `))[1].total;
    assert.ok(Math.abs(got - want) < 1e-9, `${name}: page ${got}, Node ${want}`);
  }
  assert.ok(Object.entries(rows).find(([k]) => k.startsWith('viewsOrders '))[1].total > 0);
  assert.ok(Object.entries(rows).find(([k]) => k.startsWith('viewsPrimes '))[1].total < 0);
  await page.screenshot({ path: path.join(OUT, 'diff-labels.png'), fullPage: true });
  assert.deepEqual(page.problems, []);
});

// ---- bad input

test('bad input: one clear error, or an empty but valid page', async (t) => {
  assert.throws(() => htmlReport(trace, { baseline: '{"garbage": true}' }), { name: 'TypeError', message: /^htmlReport: baseline: not a selfprof trace/ });
  assert.throws(() => htmlReport(trace, { view: 'nope' }), TypeError);
  if (needsBrowser(t)) return;
  const empty = { resources: [], frames: [], stacks: [], samples: [] };
  // No samples at all, against itself and as a baseline; a baseline with no common frames.
  const foreign = {
    resources: ['file:///elsewhere.js'],
    frames: [{ name: 'elsewhere', resourceId: 0, line: 1, column: 1 }],
    stacks: [{ frameId: 0 }],
    samples: [{ timestamp: 1, stackId: 0 }, { timestamp: 2, stackId: 0 }, { timestamp: 3, marker: 'idle' }],
  };
  for (const [name, html] of [
    ['empty', htmlReport(empty, { baseline: empty })],
    ['empty-baseline', htmlReport(traceA, { baseline: empty })],
    ['foreign-baseline', htmlReport(traceA, { baseline: foreign })],
    ['unknown-label', htmlReport(trace, { labelDiff: { key: 'nope', a: 'x', b: 'y' } })],
  ]) {
    const page = await open(t, `bad-${name}`, html);
    for (const v of ['flame', 'timeorder', 'sandwich', 'diff']) await page.click(`#tabs button[data-view=${v}]`);
    // Drag on the timeline, search: nothing breaks.
    const box = await page.$eval('#timeline', (e) => e.getBoundingClientRect().toJSON());
    await page.mouse.move(box.x + 10, box.y + 20);
    await page.mouse.down();
    await page.mouse.move(box.x + 200, box.y + 20);
    await page.mouse.up();
    await page.click('#tabs button[data-view=flame]');
    await page.fill('#search', 'x');
    assert.deepEqual(page.problems, [], name);
    if (name === 'foreign-baseline') {
      // Nothing in common: A's function is all removed, B's all added.
      await page.click('#reset'); // the range dragged above
      await page.click('#tabs button[data-view=diff]');
      await page.selectOption('#diff-limit', '0');
      const rows = await deltas(page);
      assert.equal(rows['elsewhere /elsewhere.js:1:1'].total, -100);
      assert.ok(rows[Object.keys(rows).find((k) => k.startsWith('diffSlowed '))].total > 0);
    }
    if (name === 'empty-baseline') assert.match(await page.textContent('#diff-summary'), /A: baseline: 0 busy samples \(nothing to compare/);
  }
});

// ---- 100k samples

test('100k samples: load, filter, brush and every view, timed in the browser', async (t) => {
  if (needsBrowser(t)) return;
  // The real recording's samples repeated, end to end, to 100,000 (its stacks, frames and
  // labels as recorded).
  const span = trace.samples.at(-1).timestamp - trace.samples[0].timestamp + 1;
  const samples = [];
  for (let k = 0; samples.length < 100_000; k++) {
    for (const s of trace.samples) {
      if (samples.length === 100_000) break;
      samples.push({ ...s, timestamp: s.timestamp + k * span });
    }
  }
  const big = { ...trace, samples };
  const html = htmlReport(big, { title: '100k samples', baseline: trace, view: 'flame' });
  t.diagnostic(`report: ${(html.length / 1e6).toFixed(1)} MB`);
  const started = performance.now();
  const page = await open(t, 'big', html);
  const wall = performance.now() - started;
  const ms = (attr) => page.$eval('body', (b, a) => Number(b.dataset[a]), attr);
  await page.waitForSelector('body[data-first-frame-ms]');
  const timings = {
    'open the file (goto until the script ran, from Node)': wall,
    'load: parse + first render (script)': await ms('loadMs'),
    'load: until the first frame is drawn': await ms('firstFrameMs'),
  };
  // Each input: the page's script, and until the next frame was drawn.
  const timed = async (what, action) => {
    await page.$eval('body', (b) => {
      delete b.dataset.lastMs;
      delete b.dataset.frameMs;
    });
    await action();
    await page.waitForSelector('body[data-frame-ms]');
    timings[what] = await ms('lastMs');
    timings[`${what} (drawn)`] = await ms('frameMs');
    assert.ok(Number.isFinite(timings[what]), `${what} was timed`);
  };
  await timed('label filter', () => page.click('#label-values tbody tr[data-value="GET /primes"]'));
  assert.equal(Number(await page.textContent('#total-samples')), samples.filter((s) => endpointOf(trace, s) === 'GET /primes').length);
  await timed('clear filter', () => page.click('#all-samples'));
  // (the clicks below the timeline scrolled the page: bring it back into view first)
  const box = await page.$eval('#timeline', (e) => {
    e.scrollIntoView();
    return e.getBoundingClientRect().toJSON();
  });
  await timed('brush a range', async () => {
    await page.mouse.move(box.x + box.width * 0.3, box.y + 20);
    await page.mouse.down();
    await page.mouse.move(box.x + box.width * 0.6, box.y + 20, { steps: 3 });
    await page.mouse.up();
  });
  const range = await page.$eval('#timeline', (e) => [Number(e.dataset.from), Number(e.dataset.to)]);
  assert.equal(Number(await page.textContent('#total-samples')), samples.filter((s) => s.timestamp >= range[0] && s.timestamp <= range[1]).length);
  await timed('GC attribution on', () => page.check('#gc-attribute'));
  for (const v of ['timeorder', 'sandwich', 'diff']) await timed(`open ${v} (range)`, () => page.click(`#tabs button[data-view=${v}]`));
  await timed('clear range (diff open)', () => page.click('#clear-range'));
  await timed('label diff, whole recording', () => page.selectOption('#diff-mode', 'label'));
  await timed('time order, whole recording', () => page.click('#tabs button[data-view=timeorder]'));
  await page.click('#tabs button[data-view=sandwich]');
  await page.uncheck('#gc-attribute');
  await timed('sandwich of a function, whole recording', () => page.selectOption('#sandwich-fn', String(frameIdOf(trace, 'viewsShared'))));
  assert.equal(Number(await page.textContent('#sandwich-total')), samples.filter((s) => has(trace, s, 'viewsShared')).length);
  for (const [what, v] of Object.entries(timings)) t.diagnostic(`${what}: ${v.toFixed(0)} ms`);
  // Generous bounds, for a shared 2-core machine: an interaction that takes seconds at 100k
  // samples has gone quadratic.
  for (const [what, v] of Object.entries(timings)) assert.ok(v < (what.startsWith('open the file') ? 20_000 : 5_000), `${what}: ${v} ms`);
  assert.deepEqual(page.problems, []);
});
