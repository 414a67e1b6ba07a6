'use strict';
// Pyroscope: selfprof's uploads parsed by Pyroscope's own ingest rules (pyroscope-rules.js,
// ported from the server's Go code): the name key, profile type ids, which labels become
// series, validation; and the name values the server's parser cannot carry rejected at start.
const { test } = require('node:test');
const assert = require('node:assert/strict');
const { setTimeout: sleep } = require('node:timers/promises');
const { start, withLabels } = require('..');
const { spin, receiver } = require('./helpers');
const { ingest, parseLabelSet } = require('./pyroscope-rules');

function pyroWork(ms) {
  return spin(ms);
}

const ODD = 'GET /a,b}=c';
const LONG = `GET /${'x'.repeat(3000)}`;

async function requests(n) {
  for (let i = 0; i < n; i++) {
    const endpoint = [ODD, 'GET /cart', LONG][i % 3];
    await withLabels(
      {
        endpoint,
        tenant: i % 2 ? 'acme' : 'globex',
        span_id: (0xabc0n + BigInt(i)).toString(16).padStart(16, '0'),
        trace_id: (0x1234n + BigInt(i)).toString(16).padStart(32, '0'),
        request_id: `r-${i}`,
      },
      async () => {
        pyroWork(6);
        await sleep(1);
      },
    );
  }
}

test('Pyroscope ingest rules: Node profile types, series only from series labels, span_id kept for span profiles', async (t) => {
  const pyro = await receiver();
  const session = start({
    service: 'cart',
    env: 'test',
    tags: { team: 'payments', 'k8s.ns': 'shop' },
    period: 300,
    exporters: [{ type: 'pyroscope', url: pyro.url }],
  });
  await requests(90);
  await session.stop();
  await pyro.close();
  assert.ok(pyro.requests.length >= 2, `${pyro.requests.length} uploads`);
  const endpoints = new Set();
  let spanSamples = 0;
  let heaps = 0;
  for (const r of pyro.requests) {
    const { set, typeIds, series, str } = ingest(r.url, r.body);
    assert.deepEqual(set, { __name__: 'cart', service_name: 'cart', env: 'test', team: 'payments', 'k8s.ns': 'shop' });
    if (typeIds[0].startsWith('inuse_space:')) {
      // The heap profile, a second ingest of the period: @pyroscope/nodejs's types (its
      // pprof comes from @datadog/pprof's heap serializer, period type inuse_space/bytes).
      assert.deepEqual(typeIds, ['inuse_space:inuse_objects:count:inuse_space:bytes', 'inuse_space:inuse_space:bytes:inuse_space:bytes']);
      heaps++;
      continue;
    }
    // As @pyroscope/nodejs's (samples, not sample): queries for Node's types find these.
    assert.deepEqual(typeIds, ['wall:samples:count:wall:nanoseconds', 'wall:wall:nanoseconds:wall:nanoseconds', 'wall:cpu:nanoseconds:wall:nanoseconds']);
    for (const { labels, samples } of series) {
      const names = Object.keys(labels).sort();
      for (const n of names) {
        assert.ok(['__name__', '__delta__', 'pyroscope_spy', 'service_name', 'env', 'team', 'k8s.ns', 'endpoint'].includes(n), `series label ${n}`);
      }
      assert.equal(labels.pyroscope_spy, 'nodespy');
      if (labels.endpoint) endpoints.add(labels.endpoint);
      for (const { sample, kept } of samples) {
        assert.equal(kept.trace_id, undefined, 'trace_id is not sent (older servers make it a series)');
        if (kept.span_id) {
          assert.match(kept.span_id, /^[0-9a-f]{16}$/);
          spanSamples++;
        }
        for (const l of sample.label) assert.ok(['endpoint', 'span_id'].includes(str(l.key)), `label ${str(l.key)} in the pprof`);
      }
    }
  }
  assert.ok(endpoints.has(ODD), `a value with ",}=" arrives whole as a series label: ${[...endpoints]}`);
  assert.ok(endpoints.has('GET /cart'));
  const long = [...endpoints].find((e) => e.startsWith('GET /xxx'));
  assert.equal(Buffer.byteLength(long), 2048, 'a value over the server limit is cut to 2048 bytes');
  assert.ok(spanSamples > 0);
  assert.ok(heaps >= 1, `${heaps} heap profiles ingested`);
  t.diagnostic(`${pyro.requests.length} uploads; series endpoints: ${[...endpoints].map((e) => e.slice(0, 20)).join(' | ')}; ${spanSamples} samples with span_id`);
});

test('Pyroscope: seriesLabels picks more series labels', async () => {
  const pyro = await receiver();
  const session = start({ service: 'cart', period: 300, pyroscope: { seriesLabels: ['endpoint', 'tenant'] }, exporters: [{ type: 'pyroscope', url: pyro.url }] });
  await requests(30);
  await session.stop();
  await pyro.close();
  const tenants = new Set(pyro.requests.flatMap((r) => ingest(r.url, r.body).series.map((s) => s.labels.tenant)).filter(Boolean));
  assert.deepEqual([...tenants].sort(), ['acme', 'globex']);
});

test('Pyroscope: what the name key cannot carry is one clear error at start', () => {
  const url = 'http://127.0.0.1:1';
  const cases = [
    [{ tags: { team: 'a,b' } }, /label "team"'s value contains "," or "}"/],
    [{ tags: { team: 'a}b' } }, /label "team"'s value contains "," or "}"/],
    [{ tags: { team: ' padded' } }, /surrounding spaces/],
    [{ tags: { team: 'x\ud800' } }, /not valid Unicode/],
    [{ tags: { 'bad-name': 'x' } }, /"bad-name" is not a valid Pyroscope label name/],
    [{ service: 'my app' }, /app name "my app" may hold only/],
    [{ pyroscope: { seriesLabels: ['span_id'] } }, /seriesLabels cannot hold span_id/],
    [{ pyroscope: { seriesLabels: ['otel_trace_id'] } }, /seriesLabels cannot hold otel_trace_id/],
    [{ pyroscope: { seriesLabels: ['http-route'] } }, /series label "http-route" is not a valid/],
    [{ pyroscope: { seriesLabels: 'endpoint' } }, /seriesLabels must be an array/],
  ];
  for (const [options, message] of cases) {
    assert.throws(() => start({ ...options, exporters: [{ type: 'pyroscope', url }] }), (err) => err instanceof TypeError && message.test(err.message), JSON.stringify(options));
  }
  // Why: the server's parser cuts a value at "," or "}" and silently loses the rest.
  assert.deepEqual(parseLabelSet('app{team=a,b}'), { __name__: 'app', team: 'a' });
  assert.throws(() => parseLabelSet('app{team=a}b,env=x}'), /invalid label name: b,env/);
  assert.throws(() => parseLabelSet('app{b=1,bad-name=2}'), /invalid label name/);
  assert.deepEqual(parseLabelSet('app{team=x=y}'), { __name__: 'app', team: 'x=y' }, '"=" in a value is kept');
});
