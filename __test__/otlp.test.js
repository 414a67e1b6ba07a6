'use strict';
// OTLP profiles: selfprof's uploads (to a loopback receiver) decoded by an independent
// decoder, the opentelemetry-proto Python package (1.45.2, proto v1.10 profiles/
// v1development: the same descriptors the Rust crate is generated from), and compared
// sample by sample with the trace of the same recording (the file exporter's trace: true
// writes it beside): stacks, timestamps, wall time, labels as attributes, ids as links;
// and each sample of the requests' work judged against the test's own record of them.
const { test } = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const zlib = require('node:zlib');
const { setTimeout: sleep } = require('node:timers/promises');
const { start, withLabels } = require('..');
const { spin, stackFrames, receiver, WorkLog, assertRequestLabels, unvouchedSamples } = require('./helpers');
const { missing, otlpPython, OTLP_TOOL, decodeOtlp, otlpWork: otlpSamples } = require('./tools');

function otlpWork(ms) {
  return spin(ms);
}

/** Env variables set for one block, restored after. */
async function withEnv(vars, fn) {
  const saved = Object.fromEntries(Object.keys(vars).map((k) => [k, process.env[k]]));
  Object.assign(process.env, vars);
  try {
    return await fn();
  } finally {
    for (const [k, v] of Object.entries(saved)) if (v === undefined) delete process.env[k];
    else process.env[k] = v;
  }
}

test("OTLP: each sample of a request's work carries its labels as attributes and its ids as a link; samples, stacks and times equal the trace of the same recording", async (t) => {
  const python = otlpPython();
  if (!python && missing(t, OTLP_TOOL)) return;
  const rx = await receiver(() => ({ headers: { 'content-type': 'application/x-protobuf' } }));
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'selfprof-otlp-trace-'));
  const session = await withEnv(
    {
      OTEL_EXPORTER_OTLP_ENDPOINT: `${rx.url}/otlp/`,
      OTEL_EXPORTER_OTLP_HEADERS: 'x-api-key=s3cr%20et,x-tenant = team-a ',
      OTEL_SERVICE_NAME: 'checkout',
      OTEL_RESOURCE_ATTRIBUTES: 'deployment.environment.name=prod,k8s.pod.name=pod%2C1,service.name=ignored',
    },
    () =>
      start({
        period: 400,
        exporters: [{ type: 'otlp' }, { type: 'file', dir, trace: true }],
      }),
  );
  // The requests' record: each call on until signalled. Requests for 0.9 s (two periods'
  // rotations and more) and 40 of them at least (twice the samples judged: a loaded
  // machine ran 5 in 0.9 s), or 30 s.
  const log = new WorkLog({ signals: 1 });
  const t0 = performance.now();
  for (let i = 0; (performance.now() - t0 < 900 || log.calls.length < 40) && performance.now() - t0 < 30_000; i++) {
    const labels = { endpoint: i % 2 ? 'POST /pay' : 'GET /cart', tenant: 'acme,inc}=' };
    if (i % 3) Object.assign(labels, { trace_id: (0x4bf9n + BigInt(i)).toString(16).padStart(32, '0'), span_id: (0xa0n + BigInt(i)).toString(16).padStart(16, '0') });
    await withLabels(labels, async () => {
      log.run(labels, otlpWork, 5);
      await sleep(1);
    });
  }
  await session.stop();
  await rx.close();

  assert.ok(rx.requests.length >= 2, `${rx.requests.length} uploads`);
  for (const r of rx.requests) {
    assert.equal(r.url, '/otlp/v1development/profiles');
    assert.equal(r.headers['content-type'], 'application/x-protobuf');
    assert.equal(r.headers['x-api-key'], 's3cr et', 'header values are percent-decoded');
    assert.equal(r.headers['x-tenant'], 'team-a');
  }
  const all = decodeOtlp(python, rx.requests.map((r) => r.body));
  const isHeap = (req) => req.resources[0].scopes[0].profiles[0].sample_type[0] === 'inuse_space';
  const decoded = all.filter((req) => !isHeap(req));
  const heaps = all.filter(isHeap);
  const read = (heap) =>
    fs
      .readdirSync(dir)
      .filter((f) => f.endsWith('.trace.json.gz') && f.endsWith('.heap.trace.json.gz') === heap)
      .sort()
      .map((f) => JSON.parse(zlib.gunzipSync(fs.readFileSync(path.join(dir, f)))));
  const traces = read(false);
  const heapTraces = read(true);
  fs.rmSync(dir, { recursive: true });
  assert.equal(traces.length, decoded.length, 'one trace per upload');

  // The heap profile of each period: its own request, the same samples as the file
  // exporter's heap trace (bytes, objects, stacks), in-use types with the interval as period.
  assert.ok(heapTraces.length > 0 && heaps.length === heapTraces.length, `${heaps.length} heap uploads for ${heapTraces.length} heap traces`);
  heaps.forEach((req, n) => {
    const [space, objects] = req.resources[0].scopes[0].profiles;
    assert.deepEqual([space.sample_type, objects.sample_type], [['inuse_space', 'bytes'], ['inuse_objects', 'count']]);
    assert.deepEqual(space.period_type, ['inuse_space', 'bytes']);
    assert.equal(Number(space.period), 524288);
    assert.equal(req.resources[0].attributes['service.name'], 'checkout');
    const trace = heapTraces[n];
    assert.equal(space.samples.length, trace.samples.length);
    space.samples.forEach((s, i) => {
      assert.equal(Number(s.values[0]), Math.round(trace.weight.values[i]), `sample ${i}'s bytes`);
      assert.equal(Number(objects.samples[i].values[0]), Math.round(trace.weight.counts[i]), `sample ${i}'s objects`);
      assert.deepEqual(s.timestamps, []);
      assert.deepEqual(s.stack.map((f) => f.name), stackFrames(trace, trace.samples[i]).map((f) => f.name || '(anonymous)'));
    });
    assert.notEqual(space.profile_id, objects.profile_id);
  });
  let linked = 0;
  let compared = 0;
  decoded.forEach((req, n) => {
    assert.deepEqual(Object.values(req.zero), Object.values(req.zero).map(() => true), `every table starts with its zero value: ${JSON.stringify(req.zero)}`);
    const [res] = req.resources;
    assert.equal(res.attributes['service.name'], 'checkout', 'OTEL_SERVICE_NAME wins over OTEL_RESOURCE_ATTRIBUTES');
    assert.equal(res.attributes['deployment.environment.name'], 'prod');
    assert.equal(res.attributes['k8s.pod.name'], 'pod,1');
    assert.equal(res.attributes['process.runtime.name'], 'nodejs');
    const [scope] = res.scopes;
    assert.equal(scope.name, 'selfprof');
    const [wall, cpu] = scope.profiles;
    assert.deepEqual(wall.sample_type, ['wall', 'nanoseconds']);
    assert.deepEqual(cpu.sample_type, ['cpu', 'nanoseconds']);
    assert.match(wall.profile_id, /^[0-9a-f]{32}$/);
    const trace = traces[n];
    assert.equal(wall.samples.length, trace.samples.length, 'one OTLP sample per trace sample');
    const t0 = BigInt(wall.time_unix_nano);
    wall.samples.forEach((s, i) => {
      const ts = trace.samples[i];
      // Timestamps: the trace's ms since the time origin; the profile's start is the origin + its first ms.
      const frames = stackFrames(trace, ts).map((f) => ({
        name: f.name || '(anonymous)',
        file: f.resourceId === undefined ? '' : trace.resources[f.resourceId],
        line: f.line ?? 0,
        column: f.column ?? 0,
      }));
      const pseudo = { idle: '(idle)', gc: '(garbage collector)', other: '(program)' }[ts.marker];
      const expected = pseudo ? [{ name: pseudo, file: '', line: 0, column: 0 }, ...frames] : frames.length ? frames : [{ name: '(root)', file: '', line: 0, column: 0 }];
      assert.deepEqual(s.stack, expected, `sample ${i}'s stack`);
      const labels = ts.contextId === undefined ? {} : trace.contexts[ts.contextId].labels;
      const { trace_id: traceId, span_id: spanId, ...rest } = labels;
      if (traceId && spanId) {
        assert.deepEqual(s.link, { trace_id: traceId, span_id: spanId });
        assert.deepEqual(s.attributes, rest);
        linked++;
      } else {
        assert.equal(s.link, null);
        assert.deepEqual(s.attributes, labels);
      }
      assert.equal(s.timestamps.length, 1);
      compared++;
      if (i > 0) {
        // Same times as the trace's: gaps between samples, and wall time = the gap.
        const gapNs = Number(BigInt(s.timestamps[0]) - BigInt(wall.samples[i - 1].timestamps[0]));
        const traceGapNs = (ts.timestamp - trace.samples[i - 1].timestamp) * 1e6;
        assert.ok(Math.abs(gapNs - traceGapNs) <= 2, `sample ${i}: gap ${gapNs} ns vs the trace's ${traceGapNs}`);
        assert.ok(Math.abs(Number(s.values[0]) - traceGapNs) <= 2, `sample ${i}: wall ${s.values[0]} ns`);
      }
      assert.ok(BigInt(s.timestamps[0]) >= t0 - 1000n);
    });
    // Wall time adds up to the time the samples cover, from the profile's start to the
    // last sample (how close that comes to the whole window depends on when V8's sampler
    // thread last got the CPU), never past the window.
    const wallNs = wall.samples.reduce((a, s) => a + Number(s.values[0]), 0);
    const covered = Number(BigInt(wall.samples.at(-1).timestamps[0]) - t0);
    assert.ok(Math.abs(wallNs - covered) <= 2 * wall.samples.length, `wall ${wallNs} ns adds up to the ${covered} ns the samples cover`);
    assert.ok(covered <= Number(wall.duration_nano), `the samples cover ${covered} ns of the ${wall.duration_nano} ns window`);
    assert.equal(cpu.samples.length, trace.samples.filter((s) => s.cpuTime !== undefined).length);
  });
  assert.ok(linked > 0, 'samples with trace and span ids carry a link');
  // Against the requests' record: every sample in otlpWork, placed on the calls' time line
  // by its timestamp, carries its own request's labels as attributes and, where it had
  // them, its ids as the link; none another's, none missing a key.
  // V8's samples no signal vouched for (fresh code's deoptimizations, in the first calls
  // on Node 26 under load) may be unlabeled: as many as the periods' traces counted.
  const unvouched = traces.reduce((n, trace) => n + unvouchedSamples(trace), 0);
  const judged = assertRequestLabels(otlpSamples(decoded, ['otlpWork'], performance.timeOrigin), log.calls, { what: 'OTLP', exact: true, unvouched });
  t.diagnostic(`${decoded.length} uploads, ${compared} samples compared, ${linked} linked; ${judged} (${unvouched} unvouched); sizes ${rx.requests.map((r) => r.body.length).join(', ')} bytes`);
});
