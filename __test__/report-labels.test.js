'use strict';
// The HTML report's label panel with label keys that are also Object.prototype's names
// (`constructor`, `toString`) or `__proto__`, as a pprof file from anywhere may carry them:
// a sample without the key shows as (none), never as a prototype function.
const { test } = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { pathToFileURL } = require('node:url');
const { htmlReport } = require('..');

const { missing, CHROMIUM, NO_CHROMIUM, launchChromium } = require('./tools');

test('label keys named constructor, toString or __proto__ are read as labels, not prototype members', async (t) => {
  if (!fs.existsSync(CHROMIUM)) {
    if (missing(t, NO_CHROMIUM)) return;
  }
  const trace = {
    resources: ['file:///app.js'],
    frames: [{ name: 'work', resourceId: 0, line: 1, column: 10 }],
    stacks: [{ frameId: 0 }],
    samples: [
      { timestamp: 1, stackId: 0, contextId: 0 },
      { timestamp: 2, stackId: 0, contextId: 1 },
      { timestamp: 3, stackId: 0, contextId: 1 },
    ],
    contexts: JSON.parse('[{ "labels": { "endpoint": "GET /a" } }, { "labels": { "toString": "ts", "__proto__": "pp" } }]'),
  };
  const file = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'selfprof-report-labels-')), 'r.html');
  fs.writeFileSync(file, htmlReport(JSON.stringify(trace)));
  const browser = await launchChromium();
  try {
    const page = await browser.newPage();
    const problems = [];
    page.on('pageerror', (e) => problems.push(e.message));
    await page.goto(pathToFileURL(file).href);
    const rows = () => page.$$eval('#label-values tbody tr td:first-child', (tds) => tds.map((td) => td.textContent));
    const keys = await page.$$eval('#label-key option', (os) => os.map((o) => o.value));
    assert.deepEqual(keys.sort(), ['__proto__', 'endpoint', 'toString']);
    await page.selectOption('#label-key', 'toString');
    assert.deepEqual((await rows()).sort(), ['(none)', 'ts']);
    await page.selectOption('#label-key', '__proto__');
    assert.deepEqual((await rows()).sort(), ['(none)', 'pp']);
    await page.selectOption('#label-key', 'endpoint');
    assert.deepEqual((await rows()).sort(), ['(none)', 'GET /a']);
    assert.deepEqual(problems, []);
  } finally {
    await browser.close();
    fs.rmSync(path.dirname(file), { recursive: true });
  }
});
