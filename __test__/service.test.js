'use strict';
// Service mode against real HTTP receivers on 127.0.0.1 playing Datadog's agent and
// Pyroscope; uploads decoded with an independent pprof decoder (pprof-format).
const { test } = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const zlib = require('node:zlib');
const { spawn } = require('node:child_process');
const { setTimeout: sleep } = require('node:timers/promises');
const { start, withLabels } = require('..');
const { spin, decodePprof, WorkLog, pprofWork, assertRequestLabels, receiver } = require('./helpers');

async function formOf(record) {
  return new Response(record.body, { headers: { 'content-type': record.headers['content-type'] } }).formData();
}

/** The heap sampling interval of the Datadog test: see there. */
const HEAP_INTERVAL = 64 * 1024;

function serviceCheckoutWork(ms) {
  return spin(ms);
}
serviceCheckoutWork(30); // warm: its first deoptimizations (samples V8 takes without a signal) before any recording

/**
 * Labeled busy requests for `ms`, each recorded in `log` (a WorkLog) if given; with a log,
 * 40 requests at least (twice the samples the tests judge, each call waiting for a signal:
 * a loaded machine runs few in a fixed time), or 30 s.
 */
async function workload(ms, log) {
  const t0 = performance.now();
  const more = () => (performance.now() - t0 < ms || (log && log.calls.length < 40)) && performance.now() - t0 < 30_000;
  let i = 0;
  while (more()) {
    const labels = { endpoint: i % 2 ? 'POST /checkout' : 'GET /cart', span_id: (0xf00n + BigInt(i++)).toString(16).padStart(16, '0') };
    await withLabels(labels, async () => {
      if (log) log.run(labels, serviceCheckoutWork, 4);
      else serviceCheckoutWork(4);
      await sleep(1);
    });
  }
}

/** Keeps `mib` MiB in arrays of 64 KiB, allocated here (a heap profile's known allocation). */
function serviceHeapHog(mib) {
  const kept = [];
  for (let i = 0; i < mib * 16; i++) kept.push(new Array(8192).fill(i + 0.5));
  return kept;
}

/** The entries of `labels` under `keys` (those present). */
const pick = (labels, keys) => Object.fromEntries(keys.filter((k) => k in labels).map((k) => [k, labels[k]]));

test('Datadog agent: multipart event + wall.pprof every period, decodable, labeled, totals ≈ period', async (t) => {
  const agent = await receiver();
  const session = start({
    service: 'checkout',
    env: 'test',
    version: '1.2.3',
    tags: { team: 'payments' },
    period: 500,
    // A heap sample every 64 KiB (the default 512 KiB is checked in otlp.test.js): the 32
    // MiB hog below is then ~325 samples, whose estimate is within 4% (1 sd) of it where at
    // 512 KiB it is ~60 samples, 19 to 40 MiB in 15 runs (measured 2026-11-29).
    heapSamplingInterval: HEAP_INTERVAL,
    exporters: [{ type: 'datadog', url: agent.url }],
  });
  // Each call on until signalled in: a loaded machine still gives every call samples.
  const log = new WorkLog({ signals: 1 });
  // 32 MiB kept through the recording: the heap profile's in-use bytes must show it.
  let hog = serviceHeapHog(32);
  await workload(1300, log);
  await session.stop();
  // eslint-disable-next-line no-unused-vars -- never read: `hog` kept the allocation alive until here
  hog = null;
  await agent.close();

  assert.ok(agent.requests.length >= 3, `${agent.requests.length} uploads`);
  const full = [];
  const samples = [];
  let hogBytes = 0;
  let longestSilence = 0;
  for (const r of agent.requests) {
    assert.equal(r.method, 'POST');
    assert.equal(r.url, '/profiling/v1/input');
    const form = await formOf(r);
    const event = JSON.parse(await form.get('event').text());
    assert.deepEqual(event.attachments, ['wall.pprof', 'space.pprof'], 'the heap profile on by default, named as dd-trace names it');
    const space = decodePprof(await form.get('space.pprof').arrayBuffer());
    assert.deepEqual(space.p.sampleType.map((v) => `${space.str(v.type)}/${space.str(v.unit)}`), ['inuse_objects/count', 'inuse_space/bytes']);
    assert.equal(Number(space.p.period), HEAP_INTERVAL, 'a heap sample every 64 KiB, as asked');
    hogBytes = space.p.sample.filter((s) => space.names(s)[0] === 'serviceHeapHog').reduce((n, s) => n + Number(s.value[1]), 0);
    assert.equal(event.family, 'node');
    assert.equal(event.version, '4');
    for (const tag of ['service:checkout', 'env:test', 'version:1.2.3', 'team:payments', 'runtime:nodejs']) {
      assert.ok(event.tags_profiler.split(',').includes(tag), `${tag} in ${event.tags_profiler}`);
    }
    const periodMs = Date.parse(event.end) - Date.parse(event.start);
    const pprof = decodePprof(await form.get('wall.pprof').arrayBuffer());
    const { p, str, names, labels, numLabels, sum } = pprof;
    assert.deepEqual(p.sampleType.map((v) => str(v.type)), ['sample', 'wall', 'cpu']);
    const wallMs = sum(1) / 1e6;
    // The event's window is the pprof's own (ISO strings: whole ms).
    assert.ok(Math.abs(Date.parse(event.start) - Number(p.timeNanos) / 1e6) <= 1, `start ${event.start} vs pprof ${p.timeNanos}`);
    assert.ok(Math.abs(periodMs - Number(p.durationNanos) / 1e6) <= 2, `period ${periodMs} vs pprof ${p.durationNanos}`);
    const last = event.tags_profiler.split(',').includes('snapshot:on_shutdown');
    // Its samples' times: the longest silence between two of them, and the time after the
    // last one that no sample covers.
    const times = p.sample.map((s) => Number(numLabels(s).end_timestamp_ns) / 1e6).sort((x, y) => x - y);
    for (let i = 1; i < times.length; i++) longestSilence = Math.max(longestSilence, times[i] - times[i - 1]);
    if (!last) full.push({ periodMs, wallMs, tailMs: Date.parse(event.end) - times.at(-1) });
    const busy = p.sample.filter((s) => names(s).includes('serviceCheckoutWork'));
    // The shutdown snapshot covers what is left of a period, which on a loaded machine
    // may hold none of the work.
    if (!last) assert.ok(busy.length > 0, `the busy function is in every full period's profile (${periodMs} ms)`);
    // Datadog's names: `trace endpoint`, and the span id in decimal as numeric labels.
    samples.push(
      ...pprofWork(pprof, ['serviceCheckoutWork'], {
        labels: (s) => ({ ...pick(labels(s), ['trace endpoint']), ...pick(numLabels(s), ['span id', 'local root span id']) }),
      }),
    );
    for (const s of p.sample) {
      assert.equal(labels(s)['thread name'], 'Main Event Loop');
      assert.ok(Number(numLabels(s).end_timestamp_ns) / 1e6 >= Date.parse(event.start) - 1, 'end_timestamp_ns inside the window');
    }
  }
  // Each sample of a request's work carries that request's endpoint and span id.
  const datadogNames = (c) => ({ 'trace endpoint': c.labels.endpoint, 'span id': BigInt(`0x${c.labels.span_id}`), 'local root span id': BigInt(`0x${c.labels.span_id}`) });
  // (A floor of 97%: the heap hog's collections at the start make V8 take one sample of
  // its own, without a signal, in the first period's work.)
  const judged = assertRequestLabels(samples, log.calls, { what: 'serviceCheckoutWork', min: 20, floor: 0.97, expected: datadogNames, exact: true });
  // The last profile's heap: the 32 MiB kept. V8's estimate is statistical: at 64 KiB, 15
  // runs gave 30.0 to 33.8 MiB (sd ~1 MiB), so 32 MiB ± 15% (over 4 sd) is what a right
  // profile gives, and a heap halved or doubled is not.
  const hogMiB = hogBytes / 2 ** 20;
  assert.ok(hogMiB >= 32 * 0.85 && hogMiB <= 32 * 1.15, `serviceHeapHog holds ${hogMiB.toFixed(1)} MiB in the last heap profile, not 32 ± 15%`);
  t.diagnostic(
    `${agent.requests.length} uploads; ${judged}; heap hog ${(hogBytes / 2 ** 20).toFixed(1)} MiB; full periods wall/period (unsampled tail): ${full.map((f) => `${f.wallMs.toFixed(0)}/${f.periodMs} (${f.tailMs.toFixed(0)})`).join(', ')}; longest silence between samples ${longestSilence.toFixed(1)} ms`,
  );
  // Every period but the last (partial) one: its wall time adds up to its window, however
  // late the rotation timer fired on a busy machine; less, by at most the time after its
  // last sample, where that is no longer than a silence the sampler had inside a period (a
  // machine so busy that no sample came for 77 ms at a load of 9, once).
  assert.ok(full.length >= 2, 'at least two full periods');
  for (const f of full) {
    const excused = Math.min(Math.max(0, f.tailMs), longestSilence);
    assert.ok(f.wallMs <= 1.1 * f.periodMs && f.wallMs >= 0.9 * f.periodMs - excused, `wall ${f.wallMs} vs period ${f.periodMs} (its last ${f.tailMs.toFixed(1)} ms unsampled; the longest silence inside a period ${longestSilence.toFixed(1)} ms)`);
  }
});

test('Pyroscope: /ingest with name{tags}, from/until, raw pprof body, auth and tenant headers', async (t) => {
  const pyro = await receiver();
  const session = start({
    service: 'cart',
    env: 'test',
    period: 400,
    exporters: [{ type: 'pyroscope', url: pyro.url, authToken: 'secret-token', tenantId: 'team-a' }],
  });
  const log = new WorkLog({ signals: 1 });
  await workload(900, log);
  await session.stop();
  await pyro.close();
  assert.ok(pyro.requests.length >= 1);
  const r = pyro.requests[0];
  const u = new URL(r.url, pyro.url);
  assert.equal(u.pathname, '/ingest');
  assert.equal(u.searchParams.get('name'), 'cart{service_name=cart,env=test}');
  assert.equal(u.searchParams.get('spyName'), 'nodespy');
  assert.equal(u.searchParams.get('format'), 'pprof');
  assert.equal(r.headers['content-type'], 'application/octet-stream');
  assert.ok(Number(u.searchParams.get('until')) >= Number(u.searchParams.get('from')));
  assert.equal(r.headers.authorization, 'Bearer secret-token');
  assert.equal(r.headers['x-scope-orgid'], 'team-a');
  const { p, str } = decodePprof(r.body);
  assert.deepEqual(p.sampleType.map((v) => `${str(v.type)}/${str(v.unit)}`), ['samples/count', 'wall/nanoseconds', 'cpu/nanoseconds']);
  // Every upload: each sample of a request's work carries that request's endpoint (a
  // series label) and span id (16 hex digits, for span profiles), and nothing else.
  const cpu = pyro.requests.map((q) => decodePprof(q.body)).filter((d) => d.p.sampleType.some((v) => d.str(v.type) === 'wall'));
  const samples = cpu.flatMap((d) => pprofWork(d, ['serviceCheckoutWork']));
  t.diagnostic(assertRequestLabels(samples, log.calls, { what: 'Pyroscope', exact: true }));
});

test('receiver down, 500s, 429 and slow answers: the app runs on, uploads recover', async (t) => {
  let mode = 'fail';
  const flaky = await receiver((_, n) => {
    if (mode === 'fail') return n % 2 ? { status: 500 } : { status: 429 };
    if (mode === 'slow') return { status: 200, delayMs: 400 };
    return { status: 200 };
  });
  const down = await receiver();
  const downUrl = down.url;
  await down.close(); // nothing listens there any more
  const session = start({
    service: 'flaky',
    period: 150,
    exporters: [
      { type: 'datadog', url: flaky.url, retries: 2, backoffMs: 20, timeoutMs: 200, queueSize: 2 },
      { type: 'datadog', url: downUrl, retries: 1, backoffMs: 10, timeoutMs: 200, queueSize: 2 },
    ],
  });
  const [flakyExporter, downExporter] = session.exporters;
  const rssBefore = process.memoryUsage().rss;
  await workload(700); // 500/429 with retries
  mode = 'slow';
  await workload(500); // answers after the 200 ms timeout
  mode = 'ok';
  await workload(600);
  await session.stop(3000);
  await flaky.close();
  const rssGrowth = (process.memoryUsage().rss - rssBefore) / 2 ** 20;
  t.diagnostic(
    `flaky: ${flaky.requests.length} requests, sent ${flakyExporter.sent}, failed ${flakyExporter.failed}, dropped ${flakyExporter.dropped}; ` +
      `down: sent ${downExporter.sent}, failed ${downExporter.failed}, dropped ${downExporter.dropped}; RSS +${rssGrowth.toFixed(1)} MiB`,
  );
  assert.ok(flakyExporter.failed + flakyExporter.dropped > 0, 'some uploads were given up while failing');
  assert.ok(flakyExporter.sent >= 1, 'uploads succeed once the receiver recovers');
  assert.equal(downExporter.sent, 0);
  assert.ok(downExporter.failed + downExporter.dropped >= 3);
  assert.ok(rssGrowth < 64, 'memory stays bounded');
});

test('process exit flushes the final profile (SIGTERM and natural exit)', async (t) => {
  const agent = await receiver();
  t.after(() => agent.close()); // a failed assertion must not leave it listening
  const script = `
    const { start, withLabels } = require(${JSON.stringify(path.join(__dirname, '..'))});
    start({ service: 'exiting', period: 60000, exporters: [{ type: 'datadog', url: process.argv[1] }] });
    const { untilSignals, spin } = require(${JSON.stringify(path.join(__dirname, 'helpers'))});
    // Busy until the sampler signalled 40 times in it (the test judges 20 samples), however
    // loaded the machine: a fixed 300 ms gave a busy one 14.
    function byeWork() { untilSignals(40, () => spin(1), 30_000); }
    // Warm, as a service's code is: V8's deoptimizations of this loop, each a sample of its
    // own without a signal (so without labels), before the work judged.
    untilSignals(0, () => spin(1), 0);
    for (let k = 0; k < 50; k++) spin(1);
    const t0 = performance.now();
    withLabels({ endpoint: 'GET /bye' }, byeWork);
    const call = { labels: { 'trace endpoint': 'GET /bye' }, work: 'byeWork', t0, t1: performance.now() };
    console.log(JSON.stringify({ timeOrigin: performance.timeOrigin, call }));
    if (process.argv[2] === 'sigterm') setInterval(() => {}, 1000); // a service: alive until told to stop
  `;
  for (const how of ['sigterm', 'natural']) {
    const before = agent.requests.length;
    const child = spawn(process.execPath, ['-e', script, agent.url, how], { stdio: ['ignore', 'pipe', 'inherit'] });
    let stdout = '';
    child.stdout.on('data', (d) => {
      stdout += d;
      if (how === 'sigterm' && stdout.endsWith('\n')) child.kill('SIGTERM');
    });
    const [code, signal] = await new Promise((r) => child.on('exit', (c, s) => r([c, s])));
    assert.equal(agent.requests.length, before + 1, `${how}: one final upload`);
    if (how === 'sigterm') assert.equal(signal, 'SIGTERM', 'the signal still ends the process');
    else assert.equal(code, 0);
    // The final profile holds the last work, every sample with its labels.
    const { timeOrigin, call } = JSON.parse(stdout);
    const pprof = decodePprof(await (await formOf(agent.requests.at(-1))).get('wall.pprof').arrayBuffer());
    const samples = pprofWork(pprof, ['byeWork'], { timeOrigin, labels: (s) => pick(pprof.labels(s), ['trace endpoint']) });
    assertRequestLabels(samples, [call], { what: how, exact: true });
  }
});

test('file exporter and options validated with clear errors', async () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'selfprof-files-'));
  const session = start({ service: 'files', period: 200, exporters: [{ type: 'file', dir, trace: true }] });
  await workload(300);
  await session.stop();
  const files = fs.readdirSync(dir).sort();
  const pprofs = files.filter((f) => /^files-\d{4}-\d\d-\d\dT[\d-]+Z\.pb\.gz$/.test(f));
  const traces = files.filter((f) => f.endsWith('Z.trace.json.gz'));
  const heaps = files.filter((f) => f.endsWith('.heap.pb.gz'));
  const heapTraces = files.filter((f) => f.endsWith('.heap.trace.json.gz'));
  assert.ok(pprofs.length >= 1 && pprofs.length === traces.length && heaps.length === pprofs.length && heapTraces.length === pprofs.length, files.join());
  assert.equal(files.length, 4 * pprofs.length, files.join());
  const pprof = decodePprof(fs.readFileSync(path.join(dir, pprofs[0])));
  const trace = JSON.parse(zlib.gunzipSync(fs.readFileSync(path.join(dir, traces[0]))));
  assert.ok(pprof.p.sample.length > 0);
  assert.equal(trace.samples.length, pprof.p.sample.length, 'the trace beside it is the same recording');
  fs.rmSync(dir, { recursive: true });

  const bad = [
    [{ period: 'soon' }, TypeError, /period must be a finite number/],
    [{ period: 10 }, RangeError, /period must be from 100 to 2147483647 ms/],
    [{ service: '' }, TypeError, /service must be a non-empty string/],
    [{ tags: { a: 1 } }, TypeError, /tag "a" must be a string/],
    [{ collectCpuTime: 'yes' }, TypeError, /collectCpuTime must be a boolean/],
    [{ exporters: [{ type: 'kafka' }] }, TypeError, /exporter type must be one of datadog, pyroscope, otlp, file/],
    [{ exporters: [{ type: 'datadog', url: 'ftp://user:pw@x' }] }, TypeError, /needs an http\(s\) url/],
    [{ exporters: [{ type: 'file', dir: '/tmp', trace: 'yes' }] }, TypeError, /trace must be a boolean/],
  ];
  for (const [options, type, message] of bad) {
    assert.throws(() => start(options), (err) => err.constructor === type && message.test(err.message) && !/pw/.test(err.message));
  }
});
