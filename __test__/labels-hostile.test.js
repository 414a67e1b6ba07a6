'use strict';
// Labels against hostile values and odd ways of running JS: a lone surrogate (a string cut
// mid-emoji) in a label, label sets at the documented maxima, JS entered without an
// async_hooks `before` (FinalizationRegistry cleanups, 'exit' listeners), and the package's
// JS loaded twice in one process. A recording is never lost to a label value, and a sample
// never carries labels that are not its own.
const { test } = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const v8 = require('node:v8');
const vm = require('node:vm');
const zlib = require('node:zlib');
const { spawnSync } = require('node:child_process');
const { setTimeout: sleep } = require('node:timers/promises');
const { Profiler, withLabels, setLabels, getLabels, start } = require('..');
const { labelStats, labelsForTrace } = require('../lib/capture/labels');
const { spin, untilSignals, samplesIn, decodePprof, WorkLog, traceWork, samplesWhere, callSamples, pprofWork, assertRequestLabels, receiver } = require('./helpers');
const { native } = require('../lib/native');

const root = path.join(__dirname, '..');
const CUT_EMOJI = '😀'.slice(0, 1); // '\ud83d': a lone high surrogate
/** The entries of `labels` under `keys` (those present). */
const pick = (labels, keys) => Object.fromEntries(keys.filter((k) => k in labels).map((k) => [k, labels[k]]));
const labelsOf = (trace, s) => (s.contextId === undefined ? undefined : trace.contexts[s.contextId].labels);

function surrogateWork(ms) {
  return spin(ms);
}

test('a label value with a lone surrogate: the recording is kept, the value becomes U+FFFD', async () => {
  const p = new Profiler({ sampleInterval: 1, maxBufferSize: 10_000 });
  const log = new WorkLog({ signals: 30 }); // sampled however loaded the machine is (15 gave it 9 samples)
  await withLabels({ endpoint: 'GET /emoji', user: `bob${CUT_EMOJI}` }, async () => {
    log.run({ endpoint: 'GET /emoji', user: 'bob\ufffd' }, surrogateWork, 40);
    await null;
  });
  const trace = await p.stop();
  assertRequestLabels(traceWork(trace, ['surrogateWork']), log.calls, { what: 'surrogateWork', min: 10, exact: true });
  // In the main context too: every later recording still builds.
  await new Promise((resolve) =>
    setImmediate(() => {
      setLabels({ note: `\udc00 trailing` });
      assert.equal(getLabels().note, '\udc00 trailing', 'JS keeps the value as given');
      resolve();
    }),
  );
  for (const format of ['json', 'json-gzip', 'pprof']) {
    const later = new WorkLog();
    const q = new Profiler({ sampleInterval: 1, maxBufferSize: 1000 });
    // 40 signals: 15 gave surrogateWork 4 samples on a loaded machine (Node 22).
    withLabels({ endpoint: `x${CUT_EMOJI}` }, () => untilSignals(40, () => later.run({ endpoint: 'x\ufffd' }, surrogateWork, 2)));
    const out = await q.stop({ format });
    const samples =
      format === 'pprof' ? pprofWork(decodePprof(out), ['surrogateWork']) : traceWork(format === 'json' ? out : JSON.parse(zlib.gunzipSync(out)), ['surrogateWork']);
    assertRequestLabels(samples, later.calls, { what: `a later recording as ${format}`, min: 5, exact: true });
  }
});

function wideWork(ms) {
  return spin(ms);
}

test('label values of every width come back whole in the trace object, keys in order', async () => {
  // The trace object's labels are sliced out of one string per piece in UTF-16 units.
  const sets = [
    { endpoint: 'GET /wide', user: '😀 grin', 10: 'ten', 9: 'nine', note: '' },
    // A key and a value at their bounds (256 and 4096 characters: docs/reliability.md).
    { endpoint: 'GET /wide', user: '日本語 e\u0301', z: 'x'.repeat(4096), ['k'.repeat(256)]: 'a key at the bound' },
    { endpoint: 'GET /wide', user: '\u{10ffff}é', a: '\u{1f600}\u{1f600}' },
  ];
  const p = new Profiler({ sampleInterval: 1, maxBufferSize: 10_000 });
  // Each call on until signalled 10 times: a loaded machine gets samples of each.
  const log = new WorkLog({ signals: 10 });
  for (const set of sets) {
    await withLabels(set, async () => {
      log.run(set, wideWork, 30);
      await null;
      log.run(set, wideWork, 10);
    });
  }
  const trace = await p.stop();
  // Each sample its own request's whole set, every key and no other.
  assertRequestLabels(traceWork(trace, ['wideWork']), log.calls, { what: 'wideWork', min: 20, exact: true });
  const got = new Set(trace.contexts.filter((c) => c.labels.endpoint === 'GET /wide').map((c) => JSON.stringify(c.labels)));
  // As JSON.parse of the trace's JSON makes them: keys sorted, integer-like keys first.
  const byKey = ([a], [b]) => (a < b ? -1 : a > b ? 1 : 0);
  const expected = sets.map((s) => JSON.stringify(JSON.parse(JSON.stringify(Object.fromEntries(Object.entries(s).sort(byKey))))));
  assert.deepEqual([...got].sort(), expected.sort());
});

function repeatWork(ms) {
  return spin(ms);
}

test("each context's labels are its own, whether its values repeat across contexts or not", async () => {
  // A repeating value (an endpoint, a method) reaches the trace object as one string for
  // all its contexts (src/trace/columns.rs, SharedValues), a unique one (a span id) as a slice:
  // past the 1,024 values tried per key, each context must still get its own pairs.
  const endpoints = ['GET /a', 'POST /orders', 'GET /日本', 'GET /😀'];
  const methods = ['GET', 'POST', ''];
  repeatWork(20); // warm: its first deoptimizations before the recording
  const p = new Profiler({ sampleInterval: 1, maxBufferSize: 100_000 });
  // Each call on until signalled twice: the contexts judged below are those of the requests
  // sampled, which a loaded machine's fixed 1.2 ms would leave fewer of.
  const log = new WorkLog({ signals: 2 });
  for (let i = 0; i < 1400; i++) {
    const labels = { endpoint: endpoints[i % 4], method: methods[i % 3], span_id: (0x1000 + i).toString(16).padStart(16, '0') };
    withLabels(labels, () => log.run(labels, repeatWork, 1.2));
  }
  const trace = await p.stop();
  assertRequestLabels(traceWork(trace, ['repeatWork']), log.calls, { what: 'repeatWork', min: 500, exact: true });
  const own = trace.contexts.filter((c) => c.labels.span_id !== undefined);
  assert.ok(own.length > 1100, `${own.length} contexts with a span id`);
  for (const { labels } of own) {
    const i = parseInt(labels.span_id, 16) - 0x1000;
    assert.deepEqual(labels, { endpoint: endpoints[i % 4], method: methods[i % 3], span_id: labels.span_id }, `request ${i}`);
  }
});

test('service mode keeps exporting when a client puts a lone surrogate into a label', async () => {
  const rx = await receiver();
  const received = rx.requests;
  const session = start({ service: 'emoji', period: 200, exporters: [{ type: 'datadog', url: rx.url }] });
  const log = new WorkLog();
  // Until ~100 signals (1.1 s at 99 Hz on an idle machine), however busy it is.
  const until = native.signalCount() + 100;
  const end = performance.now() + 30_000;
  for (let i = 0; native.signalCount() < until && performance.now() < end; i++) {
    const body = JSON.parse(`{"user":"\\ud800${i}"}`); // what a hostile client can send
    await withLabels({ endpoint: 'POST /profile', user: body.user }, async () => {
      log.run({ 'trace endpoint': 'POST /profile', user: `\ufffd${i}` }, surrogateWork, 3);
      await sleep(1);
    });
  }
  await session.stop();
  await rx.close();
  assert.ok(received.length >= 4, `${received.length} profiles exported at a 200 ms period`);
  // Every sample in the requests' work arrives with its request's value, U+FFFD for the
  // lone surrogate (the uploads' end_timestamp_ns places each sample on the requests' line).
  const samples = [];
  for (const r of received) {
    const form = await new Response(r.body, { headers: { 'content-type': r.headers['content-type'] } }).formData();
    const pprof = decodePprof(await form.get('wall.pprof').arrayBuffer());
    samples.push(...pprofWork(pprof, ['surrogateWork'], { labels: (s) => pick(pprof.labels(s), ['trace endpoint', 'user']) }));
  }
  assertRequestLabels(samples, log.calls, { what: 'uploads', min: 10, exact: true });
});

test('selfprof record writes the profile of a program that labels with a lone surrogate', () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'selfprof-surrogate-'));
  const script = `
    const { withLabels } = require(${JSON.stringify(root)});
    // Busy until the sampler (the copy record preloads) signalled 60 times, where 20 samples
    // are judged: a fixed 150 ms once gave a loaded machine none.
    const { group } = require(${JSON.stringify(path.join(root, 'lib', 'capture', 'group.js'))});
    function recordedSurrogate() { const until = group.ticks() + 60; const end = Date.now() + 30000; while (group.ticks() < until && Date.now() < end); }
    const t0 = performance.now();
    withLabels({ user: '\\ud83d' }, recordedSurrogate);
    console.log(JSON.stringify({ labels: { user: '\\ufffd' }, work: 'recordedSurrogate', t0, t1: performance.now() }));
  `;
  const r = spawnSync(process.execPath, [path.join(root, 'bin', 'selfprof.js'), 'record', '-o', dir, '--', process.execPath, '-e', script], {
    encoding: 'utf8',
    timeout: 60_000,
  });
  assert.equal(r.status, 0, r.stderr);
  const trace = JSON.parse(zlib.gunzipSync(fs.readFileSync(path.join(dir, 'profile.trace.json.gz'))));
  const call = JSON.parse(r.stdout.split('\n').find((l) => l.startsWith('{')));
  assertRequestLabels(traceWork(trace, ['recordedSurrogate']), [call], { what: 'recordedSurrogate', min: 20, exact: true });
  fs.rmSync(dir, { recursive: true });
});

/** Of the requests at the label maxima, the newest this many must keep their sets (see the test). */
const NEWEST_KEPT = 400;

function maximaWork(ms) {
  return spin(ms);
}

test('label sets at the documented maxima: stop() resolves, what it keeps is bounded, later profilers work', async (t) => {
  const big = 'v'.repeat(4096);
  // 64 keys of 256 characters, each with a value of 4096.
  const many = (i) => Object.fromEntries(Array.from({ length: 64 }, (_, k) => [`key${String(k).padStart(3, '0')}${'k'.repeat(250)}`, `${i}:${big}`.slice(0, 4096)]));
  const rss0 = process.memoryUsage().rss;
  const p = new Profiler({ sampleInterval: 1, maxBufferSize: 100_000 });
  const sets = 3000;
  // Each call on until signalled: every request is sampled, the newest judged below too.
  const log = new WorkLog({ signals: 1 });
  for (let i = 0; i < sets; i++) {
    const labels = many(i);
    withLabels(labels, () => log.run(labels, maximaWork, 1.2));
  }
  labelsForTrace(); // what the handler queued, saved (as the build would first)
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
  // Every labeled sample has its own request's whole set. Past the bound the oldest sets
  // are dropped by design (their samples counted in labelsLostSamples): the newest ~500 of
  // the 3,000 requests keep theirs (docs/reliability.md: 128 MiB of them; each time it is
  // passed the oldest eighth goes, so at least 7/8 of ~500 stay). So: none wrong of all
  // the samples (the older ones may carry none), and the newest 400 requests' samples
  // labeled, at the usual floor.
  const samples = traceWork(parsed, ['maximaWork']);
  const all = assertRequestLabels(samples, log.calls, { what: 'maximaWork', min: 1000, floor: 0, exact: true });
  const newest = log.calls.slice(-NEWEST_KEPT);
  const inNewest = samplesWhere(samples, (s) => s.t >= newest[0].t0);
  t.diagnostic(`maximaWork: ${all}; the newest ${NEWEST_KEPT} requests: ${assertRequestLabels(inNewest, newest, { what: `the newest ${NEWEST_KEPT} requests`, min: 200, exact: true })}`);
  assert.equal(labelStats().saved, 0, 'released once built');
  const q = new Profiler({ sampleInterval: 1, maxBufferSize: 1000 });
  const later = new WorkLog();
  withLabels({ endpoint: 'after' }, () => untilSignals(40, () => later.run({ endpoint: 'after' }, maximaWork, 2))); // as the lone surrogate's: 15 gave that one 4 samples
  const after = await q.stop();
  assertRequestLabels(traceWork(after, ['maximaWork']), later.calls, { what: 'a later recording', min: 5, exact: true });
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
  // Each request's work goes on until 2 signals reached it: CI's Node 26 lane, loaded, had
  // 4 samples in 30 calls of a fixed 2 ms.
  const log = new WorkLog({ signals: 2 });
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
          log.run({ endpoint: 'GET /leaky', span_id: String(r) }, requestWork, 2);
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
  assertRequestLabels(callSamples(trace, log.calls, 'requestWork'), log.calls, { what: 'requestWork', min: 10, exact: true });
});

test("'exit' listeners after the last request: their samples carry no labels", () => {
  const out = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'selfprof-exit-')), 'trace.json');
  const script = `
    const fs = require('node:fs');
    const { Profiler, withLabels } = require(${JSON.stringify(root)});
    const { stopSync } = require(${JSON.stringify(path.join(root, 'lib/capture/profiler'))});
    const { sampledCall } = require(${JSON.stringify(path.join(__dirname, 'helpers.js'))});
    const spin = (ms) => { const end = performance.now() + ms; while (performance.now() < end); };
    function exitWork(ms) { spin(ms); }
    const p = new Profiler({ sampleInterval: 1, maxBufferSize: 100000 });
    (async () => {
      for (let i = 0; i < 20; i++) await withLabels({ endpoint: 'GET /last' }, async () => { spin(2); await null; spin(1); });
      // The last JS before the loop empties: a labeled timer callback.
      withLabels({ endpoint: 'GET /last' }, () => setTimeout(() => spin(2), 20));
    })();
    process.on('exit', () => {
      // 60 ms, and on until signalled 30 times (a loaded machine samples 60 ms less).
      sampledCall(30, 5000, exitWork, 60);
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
  const first = { withLabels };
  assert.notEqual(other.withLabels, withLabels, 'a second copy of the JS');
  function copyAWork(ms) {
    return spin(ms);
  }
  function copyBWork(ms) {
    return spin(ms);
  }
  // Warmed first: V8 samples a deoptimization without a signal, and one close to a label
  // switch is left unlabeled (not certain), which fresh code does often in 2 ms requests.
  for (let i = 0; i < 200; i++) copyAWork(0.05) + copyBWork(0.05);
  const p = new Profiler({ sampleInterval: 1, maxBufferSize: 100_000 });
  const q = new other.Profiler({ sampleInterval: 1, maxBufferSize: 100_000 });
  const log = new WorkLog();
  await Promise.all(
    Array.from({ length: 40 }, (_, i) => {
      const [copy, labels, work] = i % 2 ? [first, { copy: 'A', req: String(i) }, copyAWork] : [other, { copy: 'B', req: String(i) }, copyBWork];
      return copy.withLabels(labels, async () => {
        log.run(labels, work, 2);
        await sleep(1);
        log.run(labels, work, 2);
      });
    }),
  );
  const [a, b] = [await p.stop(), await q.stop()];
  // Both profilers see both copies' work: each sample with its own request's labels, never
  // the other copy's, in either copy's trace (one native label store). On Node >= 24 the copy
  // loaded first reads the context frame and the second publishes with hooks; both keep
  // every one of their samples' labels.
  // Floor 95%: this test is about whose labels a sample carries (never the other copy's);
  // its 2 ms requests and 80 switches on a loaded machine leave a few samples unmatched
  // (a signal taken late, a deoptimization near a switch), which carry none.
  const floor = 0.95;
  for (const [trace, name] of [[a, 'A'], [b, 'B']]) {
    const samples = traceWork(trace, ['copyAWork', 'copyBWork']);
    const judged = [
      assertRequestLabels(samplesWhere(samples, (s) => s.work === 'copyAWork'), log.calls.filter((c) => c.work === 'copyAWork'), { what: `profiler of copy ${name}, copy A's work`, min: 20, exact: true, floor }),
      assertRequestLabels(samplesWhere(samples, (s) => s.work === 'copyBWork'), log.calls.filter((c) => c.work === 'copyBWork'), { what: `profiler of copy ${name}, copy B's work`, min: 20, exact: true, floor }),
    ];
    t.diagnostic(`profiler of copy ${name} (${a.metadata.labelPath}): ${judged.join(', ')}`);
  }
});
