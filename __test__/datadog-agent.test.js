'use strict';
// Datadog: selfprof and dd-trace upload from the same traced HTTP service to Datadog's test
// agent (ddapm-test-agent, started here on loopback); both uploads are read back through
// the agent's HTTP API (/test/session/requests) and compared: event fields, tags, pprof
// label keys and kinds. The spans dd-trace sent from selfprof's run (/test/session/traces)
// check the join Datadog makes (Code Hotspots): each sample's `local root span id` is a
// root span's id, its `trace endpoint` that span's resource.
const { test } = require('node:test');
const assert = require('node:assert/strict');
const zlib = require('node:zlib');
const fs = require('node:fs');
const os = require('node:os');
const net = require('node:net');
const path = require('node:path');
const { execFileSync } = require('node:child_process');
const { findTool, missing, startTestAgent, freePort, runNode, formOf, warningsIn } = require('./tools');
const { decodePprof, pprofWork, assertRequestLabels } = require('./helpers');

/** A pprof as gzip: dd-trace compresses with zstd where Node has it (Node 24). */
function gzipped(buf) {
  if (buf[0] === 0x28 && buf[1] === 0xb5 && buf[2] === 0x2f && buf[3] === 0xfd) return zlib.gzipSync(zlib.zstdDecompressSync(buf));
  return buf;
}

/** Uploads of /profiling/v1/input as { headers, event, pprof }. */
async function uploads(agent) {
  const out = [];
  for (const r of (await agent.requests()).filter((x) => x.path === '/profiling/v1/input')) {
    const form = await formOf(r.body, r.headers['Content-Type']);
    out.push({
      headers: r.headers,
      fields: [...form.keys()],
      event: JSON.parse(await form.get('event').text()),
      pprof: decodePprof(gzipped(Buffer.from(await form.get('wall.pprof').arrayBuffer()))),
      space: form.has('space.pprof') ? decodePprof(gzipped(Buffer.from(await form.get('space.pprof').arrayBuffer()))) : undefined,
    });
  }
  return out.sort((a, b) => Date.parse(a.event.start) - Date.parse(b.event.start));
}

/** Tags of `k:v,k:v` as an object. */
const tagsOf = (text) => Object.fromEntries(text.split(',').map((kv) => [kv.slice(0, kv.indexOf(':')), kv.slice(kv.indexOf(':') + 1)]));

/** Label key -> 'str' | 'num' over the samples that carry a span id. */
function labelKinds(pprof) {
  const kinds = {};
  for (const s of pprof.p.sample) {
    const keys = s.label.map((l) => pprof.str(l.key));
    if (!keys.includes('span id')) continue;
    for (const l of s.label) kinds[pprof.str(l.key)] = Number(l.str) !== 0 ? 'str' : 'num';
  }
  return kinds;
}

/** The agent's traces, ids kept exact (they pass 2^53). */
async function spansOf(agent) {
  const text = await (await fetch(`${agent.url}/test/session/traces`)).text();
  return JSON.parse(text.replace(/"(trace_id|span_id|parent_id)":\s*(\d+)/g, '"$1":"$2"')).flat();
}

test('Datadog agent: selfprof uploads what dd-trace uploads, and its span ids join the traces', async (t) => {
  const binary = findTool('ddagent', 'ddapm-test-agent');
  if (!binary && missing(t, 'ddapm-test-agent')) return;
  const agent = await startTestAgent(binary);
  t.after(() => agent.stop());
  const port = new URL(agent.url).port;
  // Both run in a git checkout whose origin URL has credentials: the source code
  // integration's tags (git.repository_url without them, git.commit.sha) must agree.
  const cwd = fs.mkdtempSync(path.join(os.tmpdir(), 'selfprof-dd-git-'));
  t.after(() => fs.rmSync(cwd, { recursive: true, force: true }));
  const git = (...args) => execFileSync('git', ['-c', 'user.name=t', '-c', 'user.email=t@example.com', ...args], { cwd, encoding: 'utf8' }).trim();
  git('init', '-q');
  git('remote', 'add', 'origin', 'https://someone:s3cret@git.example.com/acme/shop.git');
  git('commit', '-q', '--allow-empty', '-m', 'deployed');
  const headSha = git('rev-parse', 'HEAD');
  const app = JSON.stringify(path.join(__dirname, 'fixtures', 'dd-app.js'));
  const identity = { DD_SERVICE: 'ddapp', DD_ENV: 'test', DD_VERSION: '1.0.0', DD_TAGS: 'team:payments', DD_PROFILING_UPLOAD_PERIOD: '1', DD_APP_MS: '2500' };

  // The reference: dd-trace's own profiler.
  const ref = await runNode(
    `require(${app})`,
    { ...identity, DD_APP_MODE: 'dd-trace', DD_TRACE_AGENT_URL: agent.url, DD_PROFILING_PROFILERS: 'wall,space' },
    { cwd },
  );
  assert.equal(ref.code, 0, ref.stderr);
  const theirs = await uploads(agent);
  assert.ok(theirs.length >= 2, `dd-trace uploaded ${theirs.length} profiles`);
  await agent.clear();

  // selfprof, configured only by the environment: SELFPROF_EXPORTER=datadog without a URL
  // finds the agent from DD_AGENT_HOST + DD_TRACE_AGENT_PORT, as dd-trace does.
  const run = await runNode(
    `require(${app})`,
    { ...identity, DD_APP_MODE: 'selfprof', SELFPROF_EXPORTER: 'datadog', DD_AGENT_HOST: '127.0.0.1', DD_TRACE_AGENT_PORT: port },
    { cwd },
  );
  assert.equal(run.code, 0, run.stderr);
  assert.doesNotMatch(warningsIn(run.stderr), /selfprof/, 'no selfprof warning');
  const { requests, calls, timeOrigin } = JSON.parse(run.stdout);
  const ours = await uploads(agent);
  const spans = await spansOf(agent);
  assert.ok(ours.length >= 2, `selfprof uploaded ${ours.length} profiles`);

  // Event fields: everything dd-trace sends (dd-trace adds events.pprof, an attachment of
  // its other profiler, not a wall-profile field).
  const refEvent = theirs[0].event;
  for (const u of ours) {
    assert.deepEqual(u.fields, ['event', 'wall.pprof', 'space.pprof']);
    // The heap profile as dd-trace's: same attachment name, same sample and period types.
    const ref = theirs.find((x) => x.space)?.space;
    assert.ok(ref, 'dd-trace sent space.pprof');
    const types = (pp) => pp.p.sampleType.map((v) => `${pp.str(v.type)}/${pp.str(v.unit)}`);
    // dd-trace on Node >= 26 adds allocation totals (alloc_objects, alloc_space) from V8's
    // C++ API; through the inspector a profile is either the live heap or every sampled
    // allocation, and selfprof sends the live heap: dd-trace's in-use types, in its order.
    const live = types(ref).filter((ty) => ty.startsWith('inuse_'));
    assert.deepEqual(types(u.space), live);
    if (live.length === types(ref).length) {
      assert.equal(`${u.space.str(u.space.p.periodType.type)}/${u.space.str(u.space.p.periodType.unit)}`, `${ref.str(ref.p.periodType.type)}/${ref.str(ref.p.periodType.unit)}`);
    }
    assert.equal(Number(u.space.p.period), Number(ref.p.period), 'the same sampling interval (512 KiB)');
    assert.ok(u.event.attachments.includes('space.pprof'));
    for (const key of Object.keys(refEvent)) assert.ok(key in u.event || key === 'endpoint_counts', `event.${key}`);
    assert.deepEqual(Object.keys(u.event.info).sort(), Object.keys(refEvent.info).sort(), 'info sections');
    assert.deepEqual(Object.keys(u.event.info.application).sort(), Object.keys(refEvent.info.application).sort());
    for (const key of Object.keys(refEvent.info.runtime)) assert.ok(key in u.event.info.runtime, `info.runtime.${key}`);
    for (const key of ['activation', 'ssi', 'version']) assert.ok(key in u.event.info.profiler, `info.profiler.${key}`);
    // process_tags: dd-trace's keys, values sanitized as dd-trace's (lower case, [a-z0-9/_.-]).
    const refKeys = refEvent.process_tags.split(',').map((kv) => kv.split(':')[0]);
    for (const kv of u.event.process_tags.split(',')) {
      const [k, v] = [kv.slice(0, kv.indexOf(':')), kv.slice(kv.indexOf(':') + 1)];
      assert.ok(refKeys.includes(k), `process_tags ${k} is one of dd-trace's (${refKeys})`);
      assert.match(v, /^[a-z0-9/_.-]+$/);
    }
    assert.match(u.event.process_tags, /entrypoint\.type:script/);
    assert.equal(u.headers['DD-EVP-ORIGIN'], 'selfprof');
  }
  // Tags: dd-trace's keys (but its remote-config client id, which selfprof has none of).
  const refTags = tagsOf(refEvent.tags_profiler);
  const ourTags = ours.map((u) => tagsOf(u.event.tags_profiler));
  for (const key of Object.keys(refTags)) {
    if (key === '_dd.rc.client_id') continue;
    assert.ok(key in ourTags[0], `tags_profiler ${key} (ours: ${ours[0].event.tags_profiler})`);
  }
  for (const key of ['service', 'env', 'version', 'team', 'language', 'runtime', 'format']) assert.equal(ourTags[0][key], refTags[key], key);
  assert.equal(refTags['git.repository_url'], 'https://git.example.com/acme/shop.git', "dd-trace's tag");
  assert.equal(refTags['git.commit.sha'], headSha, "dd-trace's tag");
  for (const tg of ourTags) {
    assert.equal(tg['git.repository_url'], refTags['git.repository_url']);
    assert.equal(tg['git.commit.sha'], refTags['git.commit.sha']);
  }
  assert.deepEqual(ourTags.map((tg) => Number(tg.profile_seq)), ours.map((_, i) => i), 'profile_seq counts from 0');
  assert.deepEqual(ourTags.map((tg) => tg.snapshot), ours.map((_, i) => (i === ours.length - 1 ? 'on_shutdown' : 'periodic')));
  // runtime-id: dd-trace's own in that process, the one its spans carry.
  const runtimeIds = new Set(spans.map((s) => s.meta?.['runtime-id']).filter(Boolean));
  assert.equal(runtimeIds.size, 1);
  for (const tg of ourTags) assert.equal(tg['runtime-id'], [...runtimeIds][0]);

  // endpoint_counts: every request, by the endpoint dd-trace's own profiler names.
  const counted = {};
  for (const u of ours) for (const [k, n] of Object.entries(u.event.endpoint_counts ?? {})) counted[k] = (counted[k] ?? 0) + n;
  const refKeys = new Set(theirs.flatMap((u) => Object.keys(u.event.endpoint_counts ?? {})));
  assert.deepEqual(Object.keys(counted), [...refKeys], 'the same endpoint names');
  assert.equal(Object.values(counted).reduce((a, b) => a + b, 0), requests, 'every request counted once');

  // pprof: the label keys dd-trace writes, each as a string or a number as dd-trace's.
  const refKinds = Object.assign({}, ...theirs.map((u) => labelKinds(u.pprof)));
  const ourKinds = Object.assign({}, ...ours.map((u) => labelKinds(u.pprof)));
  assert.deepEqual(ourKinds, refKinds);
  for (const u of ours) {
    const st = u.pprof.p.sampleType.map((v) => `${u.pprof.str(v.type)}/${u.pprof.str(v.unit)}`);
    assert.deepEqual(st, theirs[0].pprof.p.sampleType.map((v) => `${theirs[0].pprof.str(v.type)}/${theirs[0].pprof.str(v.unit)}`));
  }

  // The join: each sample of a handler's work carries the span dd-trace made active for
  // that request, a server span the agent received (its parent is the client's span,
  // remote: the service's local root), as `local root span id` and `span id`, and that
  // span's resource as `trace endpoint`.
  const roots = new Map(spans.filter((s) => s.type === 'web').map((s) => [s.span_id, s]));
  assert.ok(roots.size >= requests * 0.9, `${roots.size} server spans for ${requests} requests`);
  for (const c of calls) assert.ok(roots.has(c.spanId), `the handler's span ${c.spanId} is a server span the agent received`);
  const labelsOf = (pprof) => (s) => {
    const num = pprof.numLabels(s);
    const str = pprof.labels(s);
    return Object.fromEntries(
      [
        ['trace endpoint', str['trace endpoint']],
        ['local root span id', num['local root span id']],
        ['span id', num['span id']],
      ].filter(([, v]) => v !== undefined),
    );
  };
  const samples = ours.flatMap((u) => pprofWork(u.pprof, ['ddAppHandler'], { timeOrigin, labels: labelsOf(u.pprof) }));
  const joined = assertRequestLabels(samples, calls, {
    what: 'ddAppHandler',
    expected: (c) => ({ 'trace endpoint': roots.get(c.spanId).resource, 'local root span id': c.spanId, 'span id': c.spanId }),
    exact: true,
  });
  // selfprof's uploads are not traced as the app's outgoing requests.
  assert.equal(spans.filter((s) => String(s.meta?.['http.url'] ?? '').includes('/profiling/v1/input')).length, 0);
  t.diagnostic(`dd-trace: ${theirs.length} uploads; selfprof: ${ours.length} uploads, ${requests} requests; joined to their request's span: ${joined}`);
});

test('the test agent starts when the same free port is handed out twice in a row', async (t) => {
  const binary = findTool('ddagent', 'ddapm-test-agent');
  if (!binary && missing(t, 'ddapm-test-agent')) return;
  // A port closed by freePort() can come back from the next bind to port 0 (CI saw it:
  // "OTLP HTTP and GRPC ports cannot be the same"); here the second port comes back third.
  const handedOut = [];
  const pickPort = async () => {
    const port = handedOut.length === 2 ? handedOut[1] : await freePort();
    handedOut.push(port);
    return port;
  };
  const agent = await startTestAgent(binary, { pickPort });
  t.after(() => agent.stop());
  assert.equal(handedOut[2], handedOut[1]);
  assert.equal((await fetch(`${agent.url}/test/session/requests`)).status, 200);
});

test('the test agent starts when another process takes its port first (CI runs lanes side by side)', async (t) => {
  const binary = findTool('ddagent', 'ddapm-test-agent');
  if (!binary && missing(t, 'ddapm-test-agent')) return;
  // The first port handed out is held by a listener here, as another lane's server would
  // hold it between freePort() and the agent's bind.
  const taken = net.createServer();
  await new Promise((r) => taken.listen(0, '127.0.0.1', r));
  t.after(() => taken.close());
  const handedOut = [];
  const pickPort = async () => {
    const port = handedOut.length === 0 ? taken.address().port : await freePort();
    handedOut.push(port);
    return port;
  };
  const agent = await startTestAgent(binary, { pickPort });
  t.after(() => agent.stop());
  assert.equal(handedOut[0], taken.address().port);
  assert.ok(handedOut.length >= 6, `a second set of ports was asked for: ${handedOut}`);
  assert.equal((await fetch(`${agent.url}/test/session/requests`)).status, 200);
});
