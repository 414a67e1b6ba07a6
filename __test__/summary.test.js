'use strict';
const { test } = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { execFileSync } = require('node:child_process');
const { topFunctions, samplesByLabel, formatTable } = require('../lib/views/summary');
const { assertValidTrace } = require('./helpers');

test('topFunctions counts self and total samples, recursion once per sample', () => {
  const trace = {
    resources: ['file:///a.js'],
    frames: [
      { name: 'main', resourceId: 0, line: 1, column: 14 },
      { name: 'rec', resourceId: 0, line: 5, column: 13 },
      { name: 'now' },
    ],
    stacks: [
      { frameId: 0 },
      { frameId: 1, parentId: 0 },
      { frameId: 1, parentId: 1 },
      { frameId: 2, parentId: 2 },
    ],
    samples: [
      { timestamp: 1, stackId: 2 },
      { timestamp: 2, stackId: 3 },
      { timestamp: 3, stackId: 0 },
      { timestamp: 4, marker: 'idle' },
    ],
  };
  const rows = topFunctions(trace);
  assert.deepEqual(
    rows.map((r) => [r.name, r.location, r.self, r.total]),
    [
      ['main', 'file:///a.js:1:14', 1, 3],
      ['rec', 'file:///a.js:5:13', 1, 2],
      ['now', '(native)', 1, 1],
    ],
  );
  assert.equal(rows[0].totalPercent, 100);
  const table = formatTable(rows).split('\n');
  assert.match(table[0], /self\s+self %\s+total %\s+function\s+location/);
  assert.match(table[2], /^\s*1\s+33\.3\s+66\.7\s+rec\s+file:\/\/\/a\.js:5:13$/);
});

test('samplesByLabel groups every sample by a label value, as the HTML report does; weighted by bytes in a heap profile', () => {
  const trace = {
    resources: [],
    frames: [{ name: 'a' }, { name: 'b' }],
    stacks: [{ frameId: 0 }, { frameId: 1 }],
    samples: [
      { timestamp: 1, stackId: 0, contextId: 0 },
      { timestamp: 2, stackId: 1, contextId: 0 },
      { timestamp: 3, stackId: 1, contextId: 0 },
      { timestamp: 4, stackId: 0, contextId: 1 },
      { timestamp: 5, stackId: 0 },
      { timestamp: 6, marker: 'idle', contextId: 1 },
    ],
    contexts: [{ labels: { endpoint: 'GET /a' } }, { labels: { span_id: '1' } }],
  };
  // The idle sample counts too (under "(none)": no request runs while the loop waits).
  assert.deepEqual(samplesByLabel(trace, 'endpoint'), [
    { value: 'GET /a', samples: 3, percent: 50, top: 'b' },
    { value: '(none)', samples: 3, percent: 50, top: 'a' },
  ]);
  const heap = { ...trace, samples: trace.samples.slice(0, 5), weight: { type: 'inuse_space', unit: 'bytes', values: [100, 200, 300, 4000, 400] } };
  assert.deepEqual(samplesByLabel(heap, 'endpoint'), [
    { value: '(none)', samples: 4400, percent: 88, top: 'a' },
    { value: 'GET /a', samples: 600, percent: 12, top: 'b' },
  ]);
  assert.deepEqual(
    topFunctions(heap).map((r) => [r.name, r.self]),
    [
      ['a', 4500],
      ['b', 500],
    ],
  );
});

test('samplesByLabel reads label keys as own properties: constructor, toString, __proto__', () => {
  const trace = {
    resources: [],
    frames: [{ name: 'a' }],
    stacks: [{ frameId: 0 }],
    samples: [
      { timestamp: 1, stackId: 0, contextId: 0 },
      { timestamp: 2, stackId: 0, contextId: 1 },
    ],
    // As JSON.parse makes them from a trace file: "__proto__" is an own key there.
    contexts: JSON.parse('[{ "labels": { "toString": "x", "__proto__": "p" } }, { "labels": { "endpoint": "GET /a" } }]'),
  };
  for (const [key, values] of [['constructor', ['(none)', '(none)']], ['toString', ['x', '(none)']], ['__proto__', ['p', '(none)']]]) {
    assert.deepEqual(samplesByLabel(trace, key).map((g) => g.value).sort(), [...new Set(values)].sort(), key);
  }
});

test('npm run demo writes a trace and prints the top functions', () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'selfprof-demo-'));
  const out = execFileSync(process.execPath, [path.join(__dirname, '..', 'examples', 'demo.js'), dir], {
    encoding: 'utf8',
  });
  const trace = assertValidTrace(JSON.parse(fs.readFileSync(path.join(dir, 'demo-trace.json'), 'utf8')));
  assert.ok(trace.samples.length > 100);
  assert.match(out, /served \d+ requests/);
  assert.match(out, /countPrimes\s+examples\/workload\.js:\d+:\d+/);
  assert.match(out, /GET \/primes\s+\d+\s+[\d.]+%\s+mostly in countPrimes/);
  assert.ok(trace.contexts.length > 0 && trace.metadata.matchedSamples > 0);
  fs.rmSync(dir, { recursive: true });
});
