'use strict';
// A long recording is handed over in segments as it runs (lib/capture/group.js), each
// joined on the thread pool (src/trace/join.rs), so that its stop has only the last one
// left. The trace must be the one a single build gives: every sample once, in order,
// labeled as the request it ran for, with its CPU time; the drained brackets of joined
// segments are let go as the recording runs.
const { test } = require('node:test');
const assert = require('node:assert/strict');
const { Profiler, withLabels, setBaseInterval } = require('..');
const { labelStats } = require('../lib/capture/labels');
const { native } = require('../lib/native');
const { group, SEGMENT_SIGNALS } = require('../lib/capture/group');
const { spin, stopAll, samplesIn, WorkLog, traceWork, assertRequestLabels } = require('./helpers');

function serveOrders(ms) {
  return spin(ms);
}

function serveUsers(ms) {
  return spin(ms);
}

test('a long labeled recording is joined in segments as it runs, and its trace is whole and labeled right', async (t) => {
  setBaseInterval(0.1);
  let p;
  try {
    p = new Profiler({ sampleInterval: 0.1, maxBufferSize: 1_000_000 });
    const signals0 = native.signalCount();
    const segments0 = group.segments;
    const deadline = performance.now() + 60_000;
    const log = new WorkLog();
    let i = 0;
    let mostRecords = 0;
    // Requests of two endpoints, each its own span id, with awaits between their work.
    while (native.signalCount() - signals0 < 8 * SEGMENT_SIGNALS && performance.now() < deadline) {
      const n = i++;
      const orders = n % 2 === 0;
      const labels = { endpoint: orders ? 'POST /orders' : 'GET /users/:id', span_id: `span-${n}` };
      await withLabels(labels, async () => {
        log.run(labels, orders ? serveOrders : serveUsers, 2);
        await new Promise((r) => setImmediate(r));
        log.run(labels, orders ? serveOrders : serveUsers, 1);
      });
      mostRecords = Math.max(mostRecords, labelStats().records);
    }
    const signals = native.signalCount() - signals0;
    const segments = group.segments - segments0;
    const trace = await p.stop();

    const orders = samplesIn(trace, 'serveOrders');
    const users = samplesIn(trace, 'serveUsers');
    t.diagnostic(
      `${signals} signals, ${segments} segments, ${trace.samples.length} samples (${orders.length} orders, ${users.length} users), ` +
        `at most ${mostRecords} drained brackets held; metadata ${JSON.stringify(trace.metadata)}`,
    );
    assert.ok(segments >= 6, `handed over in segments while it ran: ${segments} for ${signals} signals`);
    // Joined segments let their brackets go: the log holds about the last segment's (and a
    // second of slack, ~5k signals here), not the whole recording's.
    assert.ok(mostRecords < signals * 0.5, `at most ${mostRecords} brackets held of ${signals}`);

    // Every sample once, in time order: the hand-offs' overlapping ticks count once.
    for (let k = 1; k < trace.samples.length; k++) {
      assert.ok(trace.samples[k].timestamp > trace.samples[k - 1].timestamp, `sample ${k} after sample ${k - 1}`);
    }
    // Labeled as the request it ran for: its endpoint and its span id, in every segment.
    t.diagnostic(assertRequestLabels(traceWork(trace, ['serveOrders', 'serveUsers']), log.calls, { what: 'segments', min: 1000, exact: true }));
    for (const [samples, endpoint] of [
      [orders, 'POST /orders'],
      [users, 'GET /users/:id'],
    ]) {
      const timed = samples.filter((s) => s.cpuTime !== undefined);
      assert.ok(timed.length >= 0.99 * samples.length, `${timed.length} of ${samples.length} ${endpoint} samples carry CPU time`);
    }
    const { matchedSamples, unmatchedSamples } = trace.metadata;
    assert.ok(unmatchedSamples <= 0.01 * matchedSamples, `${unmatchedSamples} samples unmatched, ${matchedSamples} matched`);
  } finally {
    await stopAll(p); // (setBaseInterval throws while one runs)
    setBaseInterval(1);
  }
});

test('a recording that fills its buffer after a segment keeps at most maxBufferSize samples, up to when it filled', async (t) => {
  setBaseInterval(0.1);
  let p;
  try {
    const max = SEGMENT_SIGNALS + 4000;
    p = new Profiler({ sampleInterval: 0.1, maxBufferSize: max });
    const segments0 = group.segments;
    let full = false;
    let firedAt;
    p.addEventListener('samplebufferfull', () => {
      full = true;
      firedAt = performance.now();
    });
    const deadline = performance.now() + 60_000;
    let i = 0;
    while (!full && performance.now() < deadline) {
      await withLabels({ span_id: String(i++) }, async () => {
        spin(2);
        await new Promise((r) => setImmediate(r));
      });
    }
    assert.ok(full, 'samplebufferfull fired');
    assert.ok(group.segments > segments0, 'a segment was handed over before the buffer filled');
    const trace = await p.stop();
    // The buffer fills by the signal count's estimate: V8 may have taken fewer, more so on a
    // loaded machine (93% beside another test file on Node 26). A segment counted twice would
    // stop it near half.
    t.diagnostic(`${trace.samples.length} samples of ${max}`);
    assert.ok(trace.samples.length <= max && trace.samples.length >= 0.85 * max, `${trace.samples.length} samples of ${max}`);
    assert.ok(trace.samples.every((s) => s.timestamp <= firedAt), 'nothing sampled after it filled');
  } finally {
    await stopAll(p); // (setBaseInterval throws while one runs)
    setBaseInterval(1);
  }
});
