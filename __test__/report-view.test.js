'use strict';
// The report's defaults, checked in headless Chromium from what the page draws (the boxes'
// computed colors, the axis' labels; no screenshot): the event loop's idle time apart from
// the flame graph (as speedscope and 0x show it) with its share said, your code, your
// dependencies (node_modules) and Node's own code in colors of their own, and one time unit
// per axis. The profile: requests served by Express (the real package) in this process,
// with the loop idle most of the time, as a lightly loaded service is.
/* global getComputedStyle -- used in page.evaluate's callbacks, which run in the browser */
const { test, before } = require('node:test');
const assert = require('node:assert/strict');
const http = require('node:http');
const { setTimeout: sleep } = require('node:timers/promises');
const express = require('express');
const { Profiler, htmlReport } = require('..');
const { spin } = require('./helpers');
const { inChromium } = require('./tools');


function viewHandlerWork(ms) {
  return spin(ms);
}

let trace;
before(async () => {
  const app = express();
  app.get('/work', (req, res) => {
    viewHandlerWork(4);
    res.send('ok');
  });
  const server = await new Promise((resolve) => {
    const s = app.listen(0, '127.0.0.1', () => resolve(s));
  });
  const get = () => new Promise((resolve, reject) => http.get(`http://127.0.0.1:${server.address().port}/work`, (r) => r.resume().on('end', resolve)).on('error', reject));
  const p = new Profiler({ sampleInterval: 1, maxBufferSize: 100_000 });
  for (let i = 0; i < 40; i++) {
    await get();
    await sleep(15); // the loop waits: most samples are idle
  }
  trace = await p.stop();
  server.close();
});

/** The flame graph's boxes: name, origin, width and drawn color (r, g, b). */
const boxes = (page) =>
  page.$$eval('#flamegraph .frame', (els) =>
    els.map((e) => {
      const [r, g, b] = getComputedStyle(e).backgroundColor.match(/\d+/g).map(Number);
      return { name: e.dataset.name, origin: e.dataset.origin, width: e.getBoundingClientRect().width, r, g, b };
    }),
  );

test('idle time is apart from the flame graph by default, its share said; a checkbox shows it', async (t) => {
  const idle = trace.samples.filter((s) => s.marker === 'idle').length;
  const share = idle / trace.samples.length;
  assert.ok(share > 0.3, `the loop was idle much of the time (${(100 * share).toFixed(1)}%)`);
  await inChromium(t, htmlReport(trace), async (page) => {
    const width = await page.$eval('#flamegraph', (e) => e.clientWidth);
    assert.ok(!(await boxes(page)).some((b) => b.name === '(idle)'), 'no (idle) box');
    assert.equal(await page.isChecked('#show-idle'), false);
    assert.equal(await page.textContent('#idle-share'), `(idle): ${(100 * share).toFixed(1)}% of the samples, not shown`);
    // The busy samples fill the graph: a function's box is its share of them.
    const handlerWidth = async () => (await boxes(page)).filter((b) => b.name === 'viewHandlerWork').reduce((w, b) => w + b.width, 0);
    const hidden = await handlerWidth();
    assert.equal(Number(await page.textContent('#total-samples')), trace.samples.length, 'the totals still count every sample');
    const top = await page.$$eval('#top-functions td.fn', (tds) => tds.map((td) => td.textContent));
    assert.ok(!top.includes('(idle)'));

    await page.check('#show-idle');
    const shown = await handlerWidth();
    assert.ok(Math.abs(hidden / shown - 1 / (1 - share)) < 0.05 / (1 - share), `viewHandlerWork: ${hidden.toFixed(0)} px without idle, ${shown.toFixed(0)} px with`);
    const idleBox = (await boxes(page)).find((b) => b.name === '(idle)');
    assert.ok(Math.abs(idleBox.width / width - share) < 0.01, `(idle) is its share wide (${idleBox.width} of ${width})`);
    assert.equal(await page.textContent('#idle-share'), `(idle): ${(100 * share).toFixed(1)}% of the samples`);
    assert.ok((await page.$$eval('#top-functions td.fn', (tds) => tds.map((td) => td.textContent))).includes('(idle)'));
  });
});

test('your code, dependencies (node_modules) and Node\'s own code are colored apart, as the legend says', async (t) => {
  await inChromium(t, htmlReport(trace), async (page) => {
    const all = await boxes(page);
    const urlOf = (f) => (f.resourceId === undefined ? '' : trace.resources[f.resourceId]);
    const byOrigin = {};
    for (const b of all.filter((x) => x.origin)) (byOrigin[b.origin] ??= []).push(b);
    // Each box's origin is its frame's: Express's frames are a dependency's, not yours.
    for (const b of all.filter((x) => x.origin)) {
      const urls = new Set(trace.frames.filter((f) => (f.name || '(anonymous)') === b.name).map(urlOf));
      if (urls.size !== 1) continue; // a name in several places
      const [url] = urls;
      const want = url === '' ? 'native' : url.startsWith('node:') ? 'node' : /[\\/]node_modules[\\/]/.test(url) ? 'dependency' : 'app';
      assert.equal(b.origin, want, `${b.name} (${url})`);
    }
    assert.equal(all.find((b) => b.name === 'viewHandlerWork').origin, 'app');
    assert.ok(all.some((b) => b.origin === 'dependency' && /handle|next|dispatch/.test(b.name)), 'Express\'s router is drawn');
    // What is drawn: yours warm (red over blue), dependencies blue, Node's green.
    for (const b of byOrigin.app) assert.ok(b.r > b.b + 40, `${b.name}: ${b.r},${b.g},${b.b}`);
    for (const b of byOrigin.dependency) assert.ok(b.b > b.r + 40, `${b.name}: ${b.r},${b.g},${b.b}`);
    for (const b of byOrigin.node) assert.ok(b.g > b.r + 20 && b.g > b.b, `${b.name}: ${b.r},${b.g},${b.b}`);
    const legend = await page.$$eval('#flame-legend i', (is) => is.map((i) => ({ cls: i.className, text: i.nextSibling.textContent.trim(), color: getComputedStyle(i).backgroundColor })));
    assert.deepEqual(legend.map((l) => l.text).slice(0, 3), ['your code', 'dependencies (node_modules)', 'Node (node:)']);
  });
});

test('each time axis is in one unit: ms under 10 s, s from 10 s on', async (t) => {
  // The same samples over 15 s: the axis' steps (2 s) go past 10 s, where ms and s met.
  const spanOf = (tr) => tr.samples.at(-1).timestamp - tr.samples[0].timestamp;
  const k = 15_000 / spanOf(trace);
  const stretched = { ...trace, samples: trace.samples.map((s) => ({ ...s, timestamp: s.timestamp * k })) };
  assert.ok(spanOf(trace) < 10_000 && spanOf(stretched) > 10_000);
  for (const [tr, unit] of [[trace, 'ms'], [stretched, 's']]) {
    await inChromium(t, htmlReport(tr), async (page) => {
      const ticks = await page.$$eval('#timeline-axis span', (s) => s.map((x) => x.textContent).filter((x) => x !== '0'));
      assert.ok(ticks.length >= 3, ticks.join());
      for (const tick of ticks) assert.match(tick, new RegExp(`^\\+[\\d.]+ ${unit}$`), `${ticks.join(', ')}`);
      // The same decimals on every tick, and the range selected says it in the same unit.
      assert.equal(new Set(ticks.map((x) => (x.split(' ')[0].split('.')[1] ?? '').length)).size, 1, ticks.join());
      const box = await page.$eval('#timeline', (e) => {
        e.scrollIntoView();
        const r = e.getBoundingClientRect();
        return { x: r.left, y: r.top, w: e.clientWidth, h: r.height };
      });
      await page.mouse.move(box.x + box.w * 0.2, box.y + box.h / 2);
      await page.mouse.down();
      await page.mouse.move(box.x + box.w * 0.5, box.y + box.h / 2, { steps: 5 });
      await page.mouse.move(box.x + box.w * 0.9, box.y + box.h / 2, { steps: 5 });
      await page.mouse.up();
      assert.match(await page.textContent('#active-range'), new RegExp(`^\\+[\\d.]+ ${unit} … \\+[\\d.]+ ${unit} `));
    });
  }
});
