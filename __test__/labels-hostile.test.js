'use strict';
// Labels against hostile values and odd ways of running JS: a lone surrogate (a string cut
// mid-emoji) in a label, label sets at the documented maxima, JS entered without an
// async_hooks `before` (FinalizationRegistry cleanups, 'exit' listeners), and the package's
// JS loaded twice in one process. A recording is never lost to a label value, and a sample
// never carries labels that are not its own.
const { test } = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const http = require('node:http');
const os = require('node:os');
const path = require('node:path');
const v8 = require('node:v8');
const vm = require('node:vm');
const zlib = require('node:zlib');
const { spawnSync } = require('node:child_process');
const { setTimeout: sleep } = require('node:timers/promises');
const { Profiler, withLabels, setLabels, getLabels, start } = require('..');
const { labelStats } = require('../lib/capture/labels');
const { spin, samplesIn, labelVerdicts, assertOwnLabels, decodePprof } = require('./helpers');

const root = path.join(__dirname, '..');
const CUT_EMOJI = '😀'.slice(0, 1); // '\ud83d': a lone high surrogate
const labelsOf = (trace, s) => (s.contextId === undefined ? undefined : trace.contexts[s.contextId].labels);

function surrogateWork(ms) {
  return spin(ms);
}

test('a label value with a lone surrogate: the recording is kept, the value becomes U+FFFD', async () => {
  const p = new Profiler({ sampleInterval: 1, maxBufferSize: 10_000 });
  await withLabels({ endpoint: 'GET /emoji', user: `bob${CUT_EMOJI}` }, async () => {
    surrogateWork(40);
    await null;
  });
  const trace = await p.stop();
  const samples = samplesIn(trace, 'surrogateWork');
  assert.ok(samples.length >= 10, `${samples.length} samples`);
  assertOwnLabels(
    labelVerdicts(trace, samples, (l) => l.endpoint === 'GET /emoji' && l.user === 'bob\ufffd'),
    trace.metadata.unmatchedSamples,
    'surrogateWork',
  );
  // In the main context too: every later recording still builds.
  await new Promise((resolve) =>
    setImmediate(() => {
      setLabels({ note: `\udc00 trailing` });
      assert.equal(getLabels().note, '\udc00 trailing', 'JS keeps the value as given');
      resolve();
    }),
  );
  for (let i = 0; i < 3; i++) {
    const q = new Profiler({ sampleInterval: 1, maxBufferSize: 1000 });
    withLabels({ endpoint: `x${CUT_EMOJI}` }, () => surrogateWork(10));
    const t = await q.stop({ format: i === 2 ? 'pprof' : 'json' });
    assert.ok(i === 2 ? t.length > 0 : t.samples.length > 0);
  }
});

function wideWork(ms) {
  return spin(ms);
}

test('label values of every width come back whole in the trace object, keys in order', async () => {
  // The trace object's labels are sliced out of one string per piece in UTF-16 units.
  const sets = [
    { endpoint: 'GET /wide', user: '😀 grin', 10: 'ten', 9: 'nine', note: '' },
    { endpoint: 'GET /wide', user: '日本語 e\u0301', z: 'x'.repeat(4096) },
    { endpoint: 'GET /wide', user: '\u{10ffff}é', a: '\u{1f600}\u{1f600}' },
  ];
  const p = new Profiler({ sampleInterval: 1, maxBufferSize: 10_000 });
  for (const set of sets) {
    await withLabels(set, async () => {
      wideWork(30);
      await null;
      wideWork(10);
    });
  }
  const trace = await p.stop();
  const got = new Set(trace.contexts.filter((c) => c.labels.endpoint === 'GET /wide').map((c) => JSON.stringify(c.labels)));
  // As JSON.parse of the trace's JSON makes them: keys sorted, integer-like keys first.
  const byKey = ([a], [b]) => (a < b ? -1 : a > b ? 1 : 0);
  const expected = sets.map((s) => JSON.stringify(JSON.parse(JSON.stringify(Object.fromEntries(Object.entries(s).sort(byKey))))));
  assert.deepEqual([...got].sort(), expected.sort());
});

test("each context's labels are its own, whether its values repeat across contexts or not", async () => {
  // A repeating value (an endpoint, a method) reaches the trace object as one string for
  // all its contexts (src/trace/mod.rs, Repeats), a unique one (a span id) as a slice:
  // past the 1,024 values tried per key, each context must still get its own pairs.
  const endpoints = ['GET /a', 'POST /orders', 'GET /日本', 'GET /😀'];
  const methods = ['GET', 'POST', ''];
  const p = new Profiler({ sampleInterval: 1, maxBufferSize: 100_000 });
  for (let i = 0; i < 1400; i++) {
    const labels = { endpoint: endpoints[i % 4], method: methods[i % 3], span_id: (0x1000 + i).toString(16).padStart(16, '0') };
    withLabels(labels, () => spin(1.2));
  }
  const trace = await p.stop();
  const own = trace.contexts.filter((c) => c.labels.span_id !== undefined);
  assert.ok(own.length > 1100, `${own.length} contexts with a span id`);
  for (const { labels } of own) {
    const i = parseInt(labels.span_id, 16) - 0x1000;
    assert.deepEqual(labels, { endpoint: endpoints[i % 4], method: methods[i % 3], span_id: labels.span_id }, `request ${i}`);
  }
});

test('service mode keeps exporting when a client puts a lone surrogate into a label', async () => {
  const received = [];
  const srv = http.createServer((req, res) => {
    const chunks = [];
    req.on('data', (c) => chunks.push(c));
    req.on('end', () => {
      received.push({ headers: req.headers, body: Buffer.concat(chunks) });
      res.writeHead(200).end();
    });
  });
  await new Promise((r) => srv.listen(0, '127.0.0.1', r));
  const session = start({ service: 'emoji', period: 200, exporters: [{ type: 'datadog', url: `http://127.0.0.1:${srv.address().port}` }] });
  const end = performance.now() + 1000;
  for (let i = 0; performance.now() < end; i++) {
    const body = JSON.parse(`{"user":"\\ud800${i}"}`); // what a hostile client can send
    await withLabels({ endpoint: 'POST /profile', user: body.user }, async () => {
      surrogateWork(3);
      await sleep(1);
    });
  }
  await session.stop();
  await new Promise((r) => srv.close(r));
  assert.ok(received.length >= 4, `${received.length} profiles exported in 1 s at a 200 ms period`);
  // Some upload carries the value (the last, partial period may hold no labeled sample).
  let arrived = 0;
  for (const r of received) {
    const form = await new Response(r.body, { headers: { 'content-type': r.headers['content-type'] } }).formData();
    const { p, labels } = decodePprof(await form.get('wall.pprof').arrayBuffer());
    arrived += p.sample.filter((s) => /^\ufffd\d+$/.test(labels(s).user ?? '')).length;
  }
  assert.ok(arrived > 0, 'the value arrives with U+FFFD');
});

test('selfprof record writes the profile of a program that labels with a lone surrogate', () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'selfprof-surrogate-'));
  const script = `
    const { withLabels } = require(${JSON.stringify(root)});
    function recordedSurrogate() { const end = Date.now() + 150; while (Date.now() < end); }
    withLabels({ user: '\\ud83d' }, recordedSurrogate);
  `;
  const r = spawnSync(process.execPath, [path.join(root, 'bin', 'selfprof.js'), 'record', '-o', dir, '--', process.execPath, '-e', script], {
    encoding: 'utf8',
    timeout: 60_000,
  });
  assert.equal(r.status, 0, r.stderr);
  const trace = JSON.parse(zlib.gunzipSync(fs.readFileSync(path.join(dir, 'profile.trace.json.gz'))));
  assert.ok(samplesIn(trace, 'recordedSurrogate').some((s) => labelsOf(trace, s)?.user === '\ufffd'));
  fs.rmSync(dir, { recursive: true });
});

function maximaWork(ms) {
  return spin(ms);
}

test('label sets at the documented maxima: stop() resolves, what it keeps is bounded, later profilers work', async (t) => {
  const big = 'v'.repeat(4096);
  const many = (i) => Object.fromEntries(Array.from({ length: 64 }, (_, k) => [`key${String(k).padStart(3, '0')}${'k'.repeat(240)}`, `${i}:${big}`.slice(0, 4096)]));
  const rss0 = process.memoryUsage().rss;
  const p = new Profiler({ sampleInterval: 1, maxBufferSize: 100_000 });
  const sets = 3000;
  for (let i = 0; i < sets; i++) withLabels(many(i), () => maximaWork(1.2));
  const stats = labelStats();
  const trace = await p.stop({ format: 'json-gzip' });
  const parsed = JSON.parse(zlib.gunzipSync(trace));
  const json = JSON.stringify(parsed.contexts).length;
  t.diagnostic(
    `${sets} sets of 64 × 4096: kept ${stats.saved} (${(stats.bytes / 2 ** 20).toFixed(0)} MiB, ${stats.dropped} dropped); ` +
      `trace: ${parsed.samples.length} samples, ${parsed.contexts.length} contexts (${(json / 2 ** 20).toFixed(0)} MiB), ` +
      `labelsLostSamples ${parsed.metadata.labelsLostSamples ?? 0}; RSS +${((process.memoryUsage().rss - rss0) / 2 ** 20).toFixed(0)} MiB`,
  );
  assert.ok(stats.bytes <= 128 * 2 ** 20, 'kept label bytes are bounded');
  assert.ok(json <= 160 * 2 ** 20, 'the trace carries at most the kept sets');
  assert.ok(parsed.contexts.length > 0 && (parsed.metadata.labelsLostSamples ?? 0) > 0, 'some kept, the rest counted lost');
  // Every labeled sample has its own set: the i in its values is the request's.
  for (const s of samplesIn(parsed, 'maximaWork')) {
    const l = labelsOf(parsed, s);
    if (l) assert.match(l[Object.keys(l)[0]], /^\d+:v+$/);
  }
  assert.equal(labelStats().saved, 0, 'released once built');
  const q = new Profiler({ sampleInterval: 1, maxBufferSize: 1000 });
  withLabels({ endpoint: 'after' }, () => maximaWork(20));
  const after = await q.stop();
  assert.ok(samplesIn(after, 'maximaWork').some((s) => labelsOf(after, s)?.endpoint === 'after'));
});

function cleanupWork(ms) {
  return spin(ms);
}
function requestWork(ms) {
  return spin(ms);
}

test('FinalizationRegistry callbacks run without a request: their samples carry no labels', async (t) => {
  v8.setFlagsFromString('--expose-gc');
  const gc = vm.runInNewContext('gc');
  const seen = [];
  const registry = new FinalizationRegistry(() => {
    seen.push(getLabels());
    cleanupWork(3);
  });
  const p = new Profiler({ sampleInterval: 1, maxBufferSize: 100_000 });
  // Each round is a labeled timer callback that drops objects and collects them: V8 posts
  // the cleanup as a task, which the event loop runs right after, with no callback of its
  // own in between (as in a service, where a GC happens during some request).
  await new Promise((resolve) => {
    let round = 0;
    const next = () => {
      if (round === 30) return void setTimeout(resolve, 20);
      const r = round++;
      withLabels({ endpoint: 'GET /leaky', span_id: String(r) }, () =>
        setTimeout(() => {
          for (let i = 0; i < 3; i++) registry.register({ r, i }, r);
          requestWork(2);
          gc();
          setTimeout(next, 5);
        }, 1),
      );
    };
    next();
  });
  const trace = await p.stop();
  const inCleanup = samplesIn(trace, 'cleanupWork');
  const labeled = inCleanup.filter((s) => labelsOf(trace, s) !== undefined);
  t.diagnostic(`${seen.length} cleanups; ${inCleanup.length} samples in them, ${labeled.length} labeled`);
  assert.ok(seen.length >= 30 && seen.every((l) => Object.keys(l).length === 0), 'getLabels() there is {}');
  assert.ok(inCleanup.length >= 20, `samples in cleanups: ${inCleanup.length}`);
  assert.equal(labeled.length, 0, 'no cleanup sample carries a request’s labels');
  assertOwnLabels(
    labelVerdicts(trace, samplesIn(trace, 'requestWork'), (l) => l.endpoint === 'GET /leaky'),
    trace.metadata.unmatchedSamples,
    'requestWork',
  );
});

test("'exit' listeners after the last request: their samples carry no labels", () => {
  const out = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'selfprof-exit-')), 'trace.json');
  const script = `
    const fs = require('node:fs');
    const { Profiler, withLabels } = require(${JSON.stringify(root)});
    const { stopSync } = require(${JSON.stringify(path.join(root, 'lib/capture/profiler'))});
    const spin = (ms) => { const end = performance.now() + ms; while (performance.now() < end); };
    function exitWork() { spin(60); }
    const p = new Profiler({ sampleInterval: 1, maxBufferSize: 100000 });
    (async () => {
      for (let i = 0; i < 20; i++) await withLabels({ endpoint: 'GET /last' }, async () => { spin(2); await null; spin(1); });
      // The last JS before the loop empties: a labeled timer callback.
      withLabels({ endpoint: 'GET /last' }, () => setTimeout(() => spin(2), 20));
    })();
    process.on('exit', () => {
      exitWork();
      fs.writeFileSync(process.argv[1], p[stopSync]('json')[0]);
    });
  `;
  const r = spawnSync(process.execPath, ['-e', script, out], { encoding: 'utf8', timeout: 60_000 });
  assert.equal(r.status, 0, r.stderr);
  const trace = JSON.parse(fs.readFileSync(out, 'utf8'));
  const inExit = samplesIn(trace, 'exitWork');
  assert.ok(inExit.length >= 20, `samples in the exit listener: ${inExit.length}`);
  assert.equal(inExit.filter((s) => labelsOf(trace, s) !== undefined).length, 0, 'none carries the last request’s labels');
  fs.rmSync(path.dirname(out), { recursive: true });
});

test('the package loaded twice (require.cache cleared): each copy’s samples keep their own labels', async (t) => {
  // What jest's module registry and hot reload do: the JS is evaluated again, the addon not.
  const ours = Object.keys(require.cache).filter((f) => f.startsWith(root + path.sep) && f.endsWith('.js') && !f.includes('__test__') && !f.includes('node_modules'));
  for (const f of ours) delete require.cache[f];
  const other = require('..');
  assert.notEqual(other.withLabels, withLabels, 'a second copy of the JS');
  function copyAWork(ms) {
    return spin(ms);
  }
  function copyBWork(ms) {
    return spin(ms);
  }
  const p = new Profiler({ sampleInterval: 1, maxBufferSize: 100_000 });
  const q = new other.Profiler({ sampleInterval: 1, maxBufferSize: 100_000 });
  await Promise.all(
    Array.from({ length: 40 }, (_, i) =>
      i % 2
        ? withLabels({ copy: 'A', req: String(i) }, async () => {
            copyAWork(2);
            await sleep(1);
            copyAWork(2);
          })
        : other.withLabels({ copy: 'B', req: String(i) }, async () => {
            copyBWork(2);
            await sleep(1);
            copyBWork(2);
          }),
    ),
  );
  const [a, b] = [await p.stop(), await q.stop()];
  for (const [trace, name] of [[a, 'A'], [b, 'B']]) {
    for (const [fn, copy] of [['copyAWork', 'A'], ['copyBWork', 'B']]) {
      const samples = samplesIn(trace, fn);
      const wrong = samples.filter((s) => labelsOf(trace, s) && labelsOf(trace, s).copy !== copy);
      t.diagnostic(`profiler of copy ${name}: ${samples.length} samples in ${fn}, ${wrong.length} with the other copy's labels`);
      assert.equal(wrong.length, 0, `profiler of copy ${name}: no ${fn} sample carries copy ${copy === 'A' ? 'B' : 'A'}'s labels`);
    }
  }
  const labeledA = samplesIn(a, 'copyAWork').filter((s) => labelsOf(a, s)?.copy === 'A').length;
  assert.ok(labeledA > 0, 'copy A labels its own samples');
});
