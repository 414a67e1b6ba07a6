'use strict';
// Service mode against hostile options and receivers: values that pass a naive check but
// overflow a timer, credentials in URLs, a receiver that never answers or answers without
// end, and several sessions in one process. The app must keep running, exit on time, and
// no message may carry a secret. (One file over 600 lines: the cases share its receivers and
// child-process harness.)
const { test } = require('node:test');
const assert = require('node:assert/strict');
const { warningsIn } = require('./tools');
const http = require('node:http');
const path = require('node:path');
const { spawn } = require('node:child_process');
const { setTimeout: sleep } = require('node:timers/promises');
const { start, withLabels } = require('..');
const { spin, decodePprof, pprofWork, assertRequestLabels, receiver } = require('./helpers');
const { missing, otlpPython, OTLP_TOOL, decodeOtlp, otlpWork, formOf } = require('./tools');

const root = path.join(__dirname, '..');

/**
 * A loopback HTTP server; `handler(req, res, body)` answers (or not) once the body is read.
 * `early(req, res)`, if given, is called as the request arrives instead, its body unread.
 * `GET /seen` (not recorded) answers how many requests it has recorded: the app in a
 * child asks it to know an upload is under way.
 */
async function server(handler, { early } = {}) {
  const requests = [];
  const sockets = new Set();
  const srv = http.createServer((req, res) => {
    if (req.url === '/seen') return res.end(String(requests.length));
    if (early) {
      requests.push({ url: req.url, headers: req.headers, body: null, at: Date.now() });
      return early(req, res);
    }
    const chunks = [];
    req.on('data', (c) => chunks.push(c));
    req.on('end', () => {
      const record = { url: req.url, headers: req.headers, body: Buffer.concat(chunks), at: Date.now() };
      requests.push(record);
      handler(req, res, record);
    });
  });
  srv.on('connection', (s) => {
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
  });
  await new Promise((r) => srv.listen(0, '127.0.0.1', r));
  return {
    url: `http://127.0.0.1:${srv.address().port}`,
    requests,
    close: () => {
      for (const s of sockets) s.destroy();
      return new Promise((r) => srv.close(r));
    },
  };
}

/**
 * Runs `script` in a child Node process; resolves to { code, signal, stdout, stderr, ms,
 * exitedAt } (exitedAt: Date.now() at its exit). `killAfterMs`: SIGKILL it then (a child
 * held open by a bug must not hold the test run for long).
 */
function child(script, args = [], { onStdout, killAfterMs, env } = {}) {
  return new Promise((resolve) => {
    const started = performance.now();
    const p = spawn(process.execPath, ['-e', script, ...args], { cwd: root, stdio: ['ignore', 'pipe', 'pipe'], ...(env && { env: { ...process.env, ...env } }) });
    const killer = killAfterMs && setTimeout(() => p.kill('SIGKILL'), killAfterMs);
    let stdout = '';
    let stderr = '';
    p.stdout.on('data', (d) => {
      stdout += d;
      onStdout?.(p, stdout);
    });
    p.stderr.on('data', (d) => (stderr += d));
    p.on('exit', (code, signal) => {
      clearTimeout(killer);
      resolve({ code, signal, stdout, stderr, ms: performance.now() - started, exitedAt: Date.now() });
    });
  });
}

test('options that would overflow a timer are RangeErrors naming the option', () => {
  const cases = [
    [{ period: 3e9 }, /period must be from 100 to 2147483647 ms/],
    [{ exporters: [{ type: 'datadog', url: 'http://127.0.0.1:1', timeoutMs: 5e9 }] }, /exporter timeoutMs must be .* from 1 to 2147483647/],
    [{ exporters: [{ type: 'datadog', url: 'http://127.0.0.1:1', backoffMs: 1e12 }] }, /exporter backoffMs/],
    [{ exporters: [{ type: 'datadog', url: 'http://127.0.0.1:1', retries: 1.5 }] }, /exporter retries must be a whole number/],
    [{ exporters: [{ type: 'datadog', url: 'http://127.0.0.1:1', queueSize: 0 }] }, /exporter queueSize must be a whole number from 1/],
  ];
  for (const [options, message] of cases) {
    assert.throws(() => start(options), (err) => err instanceof RangeError && message.test(err.message), JSON.stringify(options));
  }
  // From the environment, the variable is named.
  process.env.SELFPROF_PERIOD_MS = 'soon';
  try {
    assert.throws(() => start({}), /SELFPROF_PERIOD_MS must be a number of ms, got "soon"/);
    process.env.SELFPROF_PERIOD_MS = '3000000000';
    assert.throws(() => start({}), RangeError);
  } finally {
    delete process.env.SELFPROF_PERIOD_MS;
  }
});

test('exporter retries and queueSize: taken at their maxima (100 and 1000), refused one past them; 100 retries are 101 attempts', async () => {
  // docs/reliability.md's bounds, at their number and one past it.
  for (const [key, max] of [['retries', 100], ['queueSize', 1000]]) {
    const message = new RegExp(`^start: exporter ${key} must be a whole number from \\d+ to ${max}, got ${max + 1}$`);
    assert.throws(() => start({ exporters: [{ type: 'datadog', url: 'http://127.0.0.1:1', [key]: max + 1 }] }), (err) => err instanceof RangeError && message.test(err.message), `${key}: ${max + 1}`);
  }
  // At the maxima: a profile refused with 500 every time is tried once and retried 100 times
  // (no backoff here), then given up.
  const rx = await receiver(() => ({ status: 500 }));
  const warnings = [];
  const onWarning = (w) => warnings.push(w.message);
  process.on('warning', onWarning);
  const session = start({ service: 'bounds', period: 60_000, heap: false, workers: false, exporters: [{ type: 'datadog', url: rx.url, retries: 100, backoffMs: 0, queueSize: 1000 }] });
  try {
    spin(20);
    await session.flush(60_000);
    const [exporter] = session.exporters;
    assert.equal(rx.requests.length, 101, 'one attempt and 100 retries');
    assert.deepEqual([exporter.sent, exporter.failed, exporter.dropped], [0, 1, 0]);
  } finally {
    await session.stop(0);
    process.off('warning', onWarning);
    await rx.close();
  }
  assert.ok(warnings.some((m) => /datadog export failed: .*500/.test(m)), warnings.join('\n'));
});

test('URL credentials become a Basic header and never appear in a warning', async () => {
  const agent = await server((req, res) => res.writeHead(200).end());
  const closed = await server(() => {});
  const closedUrl = closed.url;
  await closed.close();
  const withCreds = (url) => url.replace('http://', 'http://bob:S3CRET@');
  const script = `
    const { start, withLabels } = require('.');
    const s = start({ service: 'creds', period: 150, exporters: [
      { type: 'datadog', url: process.argv[1], retries: 0 },
      { type: 'pyroscope', url: process.argv[2], retries: 0, timeoutMs: 300 },
      { type: 'datadog', url: 'http://alice:An0therSecret@no-such-host.invalid', retries: 0, timeoutMs: 300 },
    ] });
    const end = Date.now() + 400;
    withLabels({ endpoint: 'GET /x' }, () => { while (Date.now() < end); });
    setTimeout(() => s.stop(), 300);
  `;
  const r = await child(script, [withCreds(agent.url), withCreds(closedUrl)]);
  await agent.close();
  assert.equal(r.code, 0, r.stderr);
  assert.ok(agent.requests.length >= 1, `uploads reached the agent: ${r.stderr}`);
  for (const req of agent.requests) {
    assert.equal(req.headers.authorization, `Basic ${Buffer.from('bob:S3CRET').toString('base64')}`);
    assert.doesNotMatch(req.url, /S3CRET|bob/);
  }
  assert.match(r.stderr, /pyroscope export failed/, 'the failures were reported');
  assert.doesNotMatch(r.stderr, /S3CRET|An0therSecret/, `no secret in: ${r.stderr}`);
});

/**
 * What an exit may take past docs/service-mode.md's 2 s: the last period's encoding and the child's
 * own teardown on a loaded machine (the time is taken from the end of the app's work, so
 * process start is not in it).
 */
const EXIT_MARGIN_MS = 1000;

test('a natural exit does not wait for a receiver that never answers', async () => {
  const silent = await server(() => {}); // accepts, reads, never answers
  const script = `
    const { start, withLabels } = require('.');
    start({ service: 'exiting', period: 60000, exporters: [{ type: 'datadog', url: process.argv[1] }] });
    const end = Date.now() + 200;
    withLabels({ endpoint: 'GET /bye' }, () => { while (Date.now() < end); });
    console.log('done ' + Date.now());
  `;
  const r = await child(script, [silent.url]);
  await silent.close();
  assert.equal(r.code, 0, r.stderr);
  assert.equal(silent.requests.length, 1, 'the final profile was sent');
  // docs/service-mode.md: the last profile is flushed within 2 s; then the upload is abandoned.
  const after = r.exitedAt - Number(/done (\d+)/.exec(r.stdout)[1]);
  assert.ok(after <= 2000 + EXIT_MARGIN_MS, `exited ${after} ms after the work ended (docs/service-mode.md: 2 s)`);
});

/** Whether a Datadog upload is the session's last one (its event's `snapshot` tag). */
const isLast = (record) => record.body?.includes('snapshot:on_shutdown');

/**
 * An app whose first upload is under way when its work ends: profiles in 100 ms periods,
 * works 250 ms, asks the receiver (argv[1]) until it has an upload, then prints
 * `done <Date.now()>` and has nothing more to do. Its queue holds every period (a receiver
 * that answers in 300 ms falls behind 100 ms periods; on a loaded machine the asking takes
 * long enough for the default queue to drop some, with a warning).
 */
const heldApp = `
  const http = require('node:http');
  const { start, withLabels } = require('.');
  const url = process.argv[1];
  start({ service: 'held', period: 100, exporters: [{ type: 'datadog', url, queueSize: 1000 }] });
  withLabels({ endpoint: 'GET /held' }, () => { const end = Date.now() + 250; while (Date.now() < end); });
  const seen = () => http.get(url + '/seen', { agent: false }, (res) => {
    let n = '';
    res.on('data', (d) => (n += d));
    res.on('end', () => (Number(n) >= 1 ? console.log('done ' + Date.now()) : setTimeout(seen, 20)));
  });
  seen();
`;

test('an upload under way when the work ends or SIGTERM comes holds the exit at most 2 s; one that answers still completes', async () => {
  const never = await server(() => {}); // reads the profile, never answers
  // Answers at once, never ends its reply, never reads the profile.
  const early = await server(null, {
    early: (req, res) => {
      res.writeHead(200, { 'content-length': '100' });
      res.write('partial');
      req.socket.pause();
    },
  });
  const slow = await server((req, res) => setTimeout(() => res.writeHead(200).end(), 300));
  const silent = await server(() => {}); // for a service ended by SIGTERM
  const receivers = { 'never answers': never, 'answers early, stops reading': early, 'answers in 300 ms': slow };
  // The same, as a service (kept alive by a timer) sent SIGTERM once its upload is under way.
  const service = heldApp.replace("console.log('done ' + Date.now())", "(setInterval(() => {}, 1000), console.log('done ' + Date.now()))");
  let signalled = 0;
  const sigterm = child(service, [silent.url], {
    killAfterMs: 8000,
    onStdout: (p, out) => {
      if (!signalled && out.includes('done')) {
        signalled = Date.now();
        p.kill('SIGTERM');
      }
    },
  });
  const runs = await Promise.all(Object.values(receivers).map((rx) => child(heldApp, [rx.url], { killAfterMs: 8000 })));
  const term = await sigterm;
  await Promise.all([...Object.values(receivers), silent].map((rx) => rx.close()));
  const byName = Object.fromEntries(Object.keys(receivers).map((name, i) => [name, runs[i]]));
  for (const [name, r] of Object.entries(byName)) {
    assert.equal(r.code, 0, `${name}: exit ${r.code} ${r.signal}: ${r.stderr}`);
    const after = r.exitedAt - Number(/done (\d+)/.exec(r.stdout)[1]);
    assert.ok(after <= 2000 + EXIT_MARGIN_MS, `${name}: exited ${after} ms after the work ended (docs/service-mode.md: 2 s)`);
  }
  // The receiver that answers got every profile, the last one included; nothing was warned.
  assert.ok(slow.requests.some(isLast), `the last profile reached the slow receiver (${slow.requests.length} uploads)`);
  assert.doesNotMatch(warningsIn(byName['answers in 300 ms'].stderr), /selfprof/, byName['answers in 300 ms'].stderr);
  // A reply's status decides: the early receiver's 200 counts, so the last profile went too.
  assert.ok(early.requests.length >= 2, `the early receiver had ${early.requests.length} uploads`);
  assert.doesNotMatch(warningsIn(byName['answers early, stops reading'].stderr), /selfprof/, byName['answers early, stops reading'].stderr);
  // The silent one: the upload under way was abandoned; one warning says what was lost.
  const lost = byName['never answers'].stderr.match(/selfprof: datadog exporter could not send .*/g) ?? [];
  assert.equal(lost.length, 1, byName['never answers'].stderr);
  assert.match(lost[0], /could not send \d+ profiles? before shutdown \(.*\d{4}-\d\d-\d\dT[\d:.]+Z to [\d:.]+Z \(the last\)\): upload to http:\/\/127\.0\.0\.1:\d+\/profiling\/v1\/input was abandoned unanswered at shutdown$/);
  // SIGTERM: the signal still ends the process, within the 2 s, and after that warning.
  assert.equal(term.signal, 'SIGTERM', term.stderr);
  assert.ok(term.exitedAt - signalled <= 2000 + EXIT_MARGIN_MS, `ended ${term.exitedAt - signalled} ms after SIGTERM`);
  assert.match(term.stderr, /selfprof: datadog exporter could not send \d+ profiles? before shutdown \(.*\(the last\)\): .* was abandoned unanswered at shutdown/, term.stderr);
});

// A service that holds its event loop for seconds at a time (a CPU-bound job, 3 s between
// turns): SIGTERM's stop cannot finish within its 2 s, and the signal is raised again once
// they are up, in the first turn after them. What the uploads under way and the periods
// being built lose is said first, at once.
test('SIGTERM to a service that holds its event loop past the 2 s: the signal ends it, after warnings naming what was lost', async () => {
  const silent = await server(() => {});
  const busy = heldApp.replace(
    "console.log('done ' + Date.now())",
    "(console.log('done ' + Date.now()), (function hold() { const end = Date.now() + 3000; while (Date.now() < end); setImmediate(hold); })())",
  );
  let signalled = 0;
  const term = await child(busy, [silent.url], {
    killAfterMs: 15000,
    onStdout: (p, out) => {
      if (!signalled && out.includes('done')) {
        signalled = Date.now();
        p.kill('SIGTERM');
      }
    },
  });
  await silent.close();
  assert.equal(term.signal, 'SIGTERM', term.stderr);
  assert.equal(term.stderr.match(/selfprof: datadog exporter could not send \d+ profiles? before shutdown \(.*\): the datadog export under way did not finish before shutdown$/gm)?.length, 1, term.stderr);
  assert.equal(term.stderr.match(/selfprof: the profiles? of .* (was|were) still being encoded when SIGTERM ended the process, and (is|are) lost$/gm)?.length, 1, term.stderr);
});

test('503 or 429 until the app ends: each waiting profile is tried once more, then one warning says what was lost', async () => {
  const always503 = await server((req, res) => res.writeHead(503).end());
  const always429 = await server((req, res) => res.writeHead(429, { 'retry-after': '3600' }).end());
  let recovered = 0;
  const recovering = await server((req, res) => {
    if (req.url === '/recover') recovered = Date.now();
    res.writeHead(recovered ? 200 : 503).end();
  });
  // The first attempts fail (the app waits until each receiver has had one), so the
  // exporters are in their backoff when the work ends; then one receiver recovers.
  const script = `
    const http = require('node:http');
    const { start, withLabels } = require('.');
    const [dd, py, ot] = process.argv.slice(1);
    start({ service: 'backoff', period: 100, exporters: [
      { type: 'datadog', url: dd },
      { type: 'pyroscope', url: py },
      { type: 'otlp', url: ot + '/v1development/profiles' },
    ] });
    withLabels({ endpoint: 'GET /503' }, () => { const end = Date.now() + 250; while (Date.now() < end); });
    const get = (url) => new Promise((resolve) => http.get(url, { agent: false }, (res) => {
      let n = '';
      res.on('data', (d) => (n += d));
      res.on('end', () => resolve(n));
    }));
    (async () => {
      for (const url of [dd, py, ot]) while (Number(await get(url + '/seen')) < 1) await new Promise((r) => setTimeout(r, 20));
      await get(ot + '/recover');
      console.log('done ' + Date.now());
    })();
  `;
  const r = await child(script, [always503.url, always429.url, recovering.url], { killAfterMs: 8000 });
  await Promise.all([always503, always429, recovering].map((rx) => rx.close()));
  assert.equal(r.code, 0, r.stderr);
  const done = Number(/done (\d+)/.exec(r.stdout)[1]);
  assert.ok(r.exitedAt - done <= 2000 + EXIT_MARGIN_MS, `exited ${r.exitedAt - done} ms after the work ended`);
  // Each failing receiver was tried again after the work ended, the last profile included.
  assert.ok(always503.requests.some((q) => q.at >= done && isLast(q)), 'the last profile was tried at the 503 receiver');
  assert.ok(always429.requests.some((q) => q.at >= done), 'the 429 receiver was tried again');
  // One warning per failing exporter, naming the periods it could not send; none for the
  // one that recovered (its waiting profiles went on the retry).
  for (const [name, status] of [['datadog', 503], ['pyroscope', 429]]) {
    const lines = r.stderr.match(new RegExp(`selfprof: ${name} exporter could not send .*`, 'g')) ?? [];
    assert.equal(lines.length, 1, `${name}: ${r.stderr}`);
    assert.match(lines[0], new RegExp(`before shutdown \\(.*Z to .*Z \\(the last\\)\\): upload to http://127\\.0\\.0\\.1:\\d+/\\S* answered ${status}$`), lines[0]);
  }
  assert.doesNotMatch(r.stderr, /otlp exporter could not send|otlp export failed/, r.stderr);
  assert.ok(recovering.requests.some((q) => q.at >= recovered && q.url !== '/recover'), 'the recovered receiver got the waiting profiles');
});

test('a redirect is not followed: no credential or profile goes where it points, and the warning says so', async () => {
  const elsewhere = await server((req, res) => res.writeHead(200).end());
  const target = `${elsewhere.url}/steal?token=QSECRET`;
  const statuses = [301, 302, 307, 308];
  // The 308's location carries user-info too: the warning shows neither it nor the query.
  const withUserInfo = target.replace('http://', 'http://bob:LOCSECRET@');
  const redirecting = await Promise.all(
    statuses.map((status) => server((req, res) => res.writeHead(status, { location: status === 308 ? withUserInfo : target }).end())),
  );
  const script = `
    const { start, withLabels } = require('.');
    const url = process.argv[1];
    const s = start({ service: 'redirected', period: 60000, exporters: [
      { type: 'datadog', url, apiKey: 'DDKEYSECRET' },
      { type: 'pyroscope', url, authToken: 'PYTOKENSECRET', tenantId: 'TENANTSECRET' },
      { type: 'otlp', url: url + '/v1development/profiles', headers: { 'x-api-key': 'OTLPSECRET' } },
    ] });
    withLabels({ endpoint: 'GET /r' }, () => { const end = Date.now() + 150; while (Date.now() < end); });
    s.stop().then(() => console.log('stopped'));
  `;
  const runs = await Promise.all(redirecting.map((rx) => child(script, [rx.url], { killAfterMs: 8000 })));
  await Promise.all([elsewhere, ...redirecting].map((rx) => rx.close()));
  assert.deepEqual(elsewhere.requests.map((q) => q.url), [], 'nothing reached where the redirects pointed');
  statuses.forEach((status, i) => {
    const r = runs[i];
    assert.equal(r.code, 0, `${status}: ${r.stderr}`);
    assert.match(r.stdout, /stopped/);
    for (const name of ['datadog', 'pyroscope', 'otlp']) {
      // Sent at stop(): the failure is in the warning that says what was not sent.
      const warning = new RegExp(
        `selfprof: ${name} exporter could not send \\d+ profiles? before shutdown \\(.*\\): ` +
          `upload to http://127\\.0\\.0\\.1:\\d+/\\S+ answered ${status}, a redirect to ${elsewhere.url}/steal; not followed`,
      );
      assert.match(r.stderr, warning, `${status} ${name}: ${r.stderr}`);
    }
    assert.doesNotMatch(r.stderr, /QSECRET|LOCSECRET|bob|DDKEYSECRET|PYTOKENSECRET|TENANTSECRET|OTLPSECRET/, r.stderr);
    // Not retried: one request per profile (OTLP sends the heap profile on its own).
    const paths = redirecting[i].requests.map((q) => q.url.replace(/\?.*/, '')).sort();
    assert.deepEqual(paths, ['/ingest', '/profiling/v1/input', '/v1development/profiles', '/v1development/profiles'], `${status}`);
  });
});

/**
 * The most a peer can write to a socket that is never read: the sender's and the
 * receiver's kernel buffers at their largest (Linux's tcp_wmem and tcp_rmem maxima).
 */
function socketBuffersMax() {
  const max = (name) => {
    try {
      return Number(require('node:fs').readFileSync(`/proc/sys/net/ipv4/${name}`, 'utf8').trim().split(/\s+/)[2]);
    } catch {
      return 32 * 2 ** 20;
    }
  };
  return max('tcp_wmem') + max('tcp_rmem');
}

test('a reply without end is not read: its status decides', async (t) => {
  const written = [];
  const chunk = Buffer.alloc(1 << 20, 120);
  const flood = await server((req, res) => {
    const i = written.push(0) - 1;
    res.writeHead(200, { 'content-type': 'application/octet-stream' });
    const pump = () => {
      while (written[i] < 6 * 2 ** 30 && !res.destroyed) {
        written[i] += chunk.length;
        if (!res.write(chunk)) return res.once('drain', pump);
      }
      res.end();
    };
    res.on('close', () => res.destroy());
    pump();
  });
  const rss0 = process.memoryUsage().rss;
  const session = start({ service: 'flood', period: 300, exporters: [{ type: 'datadog', url: flood.url, timeoutMs: 3000, retries: 0 }] });
  const end = performance.now() + 1200;
  while (performance.now() < end) {
    await withLabels({ endpoint: 'GET /f' }, async () => {
      spin(3);
      await sleep(2);
    });
  }
  await session.stop(3000);
  const grown = (process.memoryUsage().rss - rss0) / 2 ** 20;
  await flood.close();
  const bound = socketBuffersMax() + chunk.length;
  t.diagnostic(`${flood.requests.length} uploads; the receiver wrote ${written.map((w) => (w / 2 ** 20).toFixed(0)).join(', ')} MiB (what the kernel's buffers hold: at most ${(bound / 2 ** 20).toFixed(0)} MiB); RSS +${grown.toFixed(0)} MiB`);
  assert.ok(flood.requests.length >= 2);
  assert.ok(session.exporters[0].sent >= 2, 'each upload counted as sent once its status arrived');
  // Never read: each reply got no further than the sockets' buffers (read, it would have
  // run to gigabytes before the 3 s timeout).
  for (const w of written) assert.ok(w <= bound, `a reply's body was read: ${w} bytes written, more than the ${bound} the socket buffers hold`);
  assert.ok(grown < 100, `RSS grew ${grown.toFixed(0)} MiB`);
});

test('each kind of failure is warned once per exporter, however many periods fail', async () => {
  const fs = require('node:fs');
  const os = require('node:os');
  // datadog: 500 and 400 in turn; otlp: a redirect; pyroscope: answers after 400 ms with a
  // queue of one (it falls behind); file: a dir that is a regular file.
  let n = 0;
  const flaky = await server((req, res) => res.writeHead(n++ % 2 ? 400 : 500).end());
  const redirecting = await server((req, res) => res.writeHead(302, { location: 'http://127.0.0.1:1/elsewhere' }).end());
  const slow = await server((req, res) => setTimeout(() => res.writeHead(200).end(), 400));
  const base = fs.mkdtempSync(path.join(os.tmpdir(), 'selfprof-warn-once-'));
  const notADir = path.join(base, 'file');
  fs.writeFileSync(notADir, 'a file, not a directory');
  const script = `
    const { start, withLabels } = require('.');
    const [dd, ot, py, dir] = process.argv.slice(1);
    const s = start({ service: 'failing', period: 100, heap: false, exporters: [
      { type: 'datadog', url: dd, retries: 0 },
      { type: 'otlp', url: ot + '/v1development/profiles', retries: 0 },
      { type: 'pyroscope', url: py, queueSize: 1, timeoutMs: 5000 },
      { type: 'file', dir },
    ] });
    // Until each has failed many times (about 15 periods on an idle machine; a fixed 1.5 s
    // gave 6 under load), the slow one has fallen behind and the file's has failed twice.
    const [ddx, otx, pyx, filex] = s.exporters;
    const deadline = Date.now() + 15_000;
    const more = () => ddx.failed < 8 || otx.failed < 8 || pyx.dropped < 1 || filex.failed < 2;
    (async () => {
      while (more() && Date.now() < deadline) {
        await withLabels({ endpoint: 'GET /fail' }, async () => {
          const e = Date.now() + 3; while (Date.now() < e);
          await new Promise((r) => setTimeout(r, 2));
        });
      }
      await s.stop();
    })();
  `;
  const r = await child(script, [flaky.url, redirecting.url, slow.url, notADir], { killAfterMs: 20_000 });
  await Promise.all([flaky, redirecting, slow].map((rx) => rx.close()));
  fs.rmSync(base, { recursive: true });
  assert.equal(r.code, 0, r.stderr);
  // Each failed many times.
  assert.ok(flaky.requests.length >= 8 && redirecting.requests.length >= 8, `${flaky.requests.length} and ${redirecting.requests.length} uploads`);
  const lines = (re) => r.stderr.split('\n').filter((l) => re.test(l));
  for (const [what, re] of [
    ['datadog 5xx', /selfprof: datadog export failed: upload to \S+ answered 500$/],
    ['datadog 4xx', /selfprof: datadog export failed: upload to \S+ was refused: 400$/],
    ['otlp redirect', /selfprof: otlp export failed: upload to \S+ answered 302, a redirect to http:\/\/127\.0\.0\.1:1\/elsewhere; not followed/],
    ['pyroscope behind', /selfprof: pyroscope exporter fell behind; dropping the oldest profiles$/],
    ['file', /selfprof: file export failed: /],
  ]) {
    assert.equal(lines(re).length, 1, `${what}: once in ${r.stderr}`);
  }
  // Nothing else is warned during the run but those (and, at stop, what could not be sent),
  // after the one start line.
  assert.equal(lines(/^selfprof: profiling "failing" at 99 Hz; a profile every 0\.1 s to datadog /).length, 1, r.stderr);
  const others = lines(/selfprof: /).filter((l) => !/^selfprof: profiling |export failed|fell behind|could not (send|write) \d+ profiles? before shutdown/.test(l));
  assert.deepEqual(others, []);
});

test('two sessions and SIGTERM: both ship their last profile before the signal ends the process', async () => {
  // Each answers after a while; an upload is cut if its client hangs up before that.
  const cut = [];
  const slow = (ms, name) => (req, res) => {
    const timer = setTimeout(() => res.writeHead(200).end(), ms);
    req.socket.once('close', () => {
      if (!res.headersSent) cut.push(name);
      clearTimeout(timer);
    });
  };
  const a = await server(slow(300, 'a'));
  const b = await server(slow(600, 'b'));
  const script = `
    const { start, withLabels } = require('.');
    start({ service: 'a', period: 60000, exporters: [{ type: 'datadog', url: process.argv[1] }] });
    start({ service: 'b', period: 60000, exporters: [{ type: 'datadog', url: process.argv[2] }] });
    const end = Date.now() + 200;
    withLabels({ endpoint: 'GET /two' }, () => { while (Date.now() < end); });
    setInterval(() => {}, 1000);
    console.log('ready');
  `;
  let signalled = 0;
  const r = await child(script, [a.url, b.url], {
    onStdout: (p, out) => {
      if (!signalled && out.includes('ready')) {
        signalled = Date.now();
        p.kill('SIGTERM');
      }
    },
  });
  await a.close();
  await b.close();
  assert.equal(r.signal, 'SIGTERM', `the signal still ends the process: ${r.stderr}`);
  assert.ok(r.exitedAt - signalled <= 2000 + EXIT_MARGIN_MS, `ended ${r.exitedAt - signalled} ms after SIGTERM (docs/service-mode.md: 2 s)`);
  assert.equal(a.requests.length, 1, 'session a shipped');
  assert.equal(b.requests.length, 1, 'session b shipped');
  assert.deepEqual(cut, [], 'no upload was cut short by the other session re-raising the signal');
  assert.doesNotMatch(r.stderr, /export failed|abandoned/, r.stderr);
});

test('the file exporter keeps files inside its dir whatever the service is called', async () => {
  const fs = require('node:fs');
  const os = require('node:os');
  const base = fs.mkdtempSync(path.join(os.tmpdir(), 'selfprof-file-'));
  const dir = path.join(base, 'profiles');
  const session = start({ service: '../../escaped/evil', period: 60_000, exporters: [{ type: 'file', dir }] });
  withLabels({ endpoint: 'GET /f' }, () => spin(30));
  await session.stop();
  const inside = fs.readdirSync(dir);
  assert.equal(inside.length, 2, inside.join());
  for (const f of inside) assert.match(f, /^__\.\._escaped_evil-\d{4}-.*\.pb\.gz$/);
  assert.deepEqual(fs.readdirSync(base), ['profiles'], 'nothing written outside dir');
  fs.rmSync(base, { recursive: true });
});

test('bad backend variables: one warning naming the variable, no secret, the app runs on', async () => {
  const app = `console.log('app ran'); setTimeout(() => {}, 50);`;
  const cases = [
    [{ SELFPROF_EXPORTER: 'datadog', DD_TRACE_AGENT_PORT: 'abc' }, /DD_TRACE_AGENT_PORT must be a port number from 1 to 65535, got "abc"/],
    [{ SELFPROF_EXPORTER: 'datadog', DD_TRACE_AGENT_URL: 'unix:///var/run/datadog/apm.socket' }, /DD_TRACE_AGENT_URL must be an http\(s\) URL/],
    [{ SELFPROF_EXPORTER: 'datadog', DD_PROFILING_UPLOAD_PERIOD: 'soon' }, /DD_PROFILING_UPLOAD_PERIOD must be a number of seconds/],
    [{ SELFPROF_EXPORTER: 'otlp', OTEL_RESOURCE_ATTRIBUTES: 'garbage' }, /OTEL_RESOURCE_ATTRIBUTES entry 1 must be key=value, got "garbage"/],
    [{ SELFPROF_EXPORTER: 'otlp', OTEL_RESOURCE_ATTRIBUTES: 'a=%zz' }, /OTEL_RESOURCE_ATTRIBUTES entry 1 is not valid percent-encoding/],
    [{ SELFPROF_EXPORTER: 'otlp', OTEL_EXPORTER_OTLP_HEADERS: 'authorization=Bearer%20TOPSECRET,TOPSECRET2' }, /OTEL_EXPORTER_OTLP_HEADERS entry 2 must be key=value$/m],
    [{ SELFPROF_EXPORTER: 'otlp', OTEL_EXPORTER_OTLP_HEADERS: 'x-key=%E0%A4%ATOPSECRET' }, /OTEL_EXPORTER_OTLP_HEADERS entry 1 is not valid percent-encoding$/m],
    [{ SELFPROF_EXPORTER: 'otlp', OTEL_EXPORTER_OTLP_ENDPOINT: 'collector:4318' }, /OTEL_EXPORTER_OTLP_ENDPOINT must be an http\(s\) URL/],
    [{ SELFPROF_EXPORTER: 'otlp', OTEL_EXPORTER_OTLP_COMPRESSION: 'zstd' }, /OTEL_EXPORTER_OTLP_COMPRESSION must be "gzip" or "none"/],
    [{ SELFPROF_EXPORTER: 'pyroscope', SELFPROF_EXPORTER_URL: 'http://127.0.0.1:1', DD_TAGS: 'team:a}b' }, /label "team"'s value contains/],
  ];
  for (const [env, message] of cases) {
    const r = await new Promise((resolve) => {
      const p = spawn(process.execPath, ['-r', './start.js', '-e', app], { cwd: root, env: { ...process.env, ...env, DD_API_KEY: 'DDSECRETKEY' }, stdio: ['ignore', 'pipe', 'pipe'] });
      let stdout = '';
      let stderr = '';
      p.stdout.on('data', (d) => (stdout += d));
      p.stderr.on('data', (d) => (stderr += d));
      p.on('exit', (code) => resolve({ code, stdout, stderr }));
    });
    const what = JSON.stringify(env);
    assert.equal(r.code, 0, `${what}: ${r.stderr}`);
    assert.match(r.stdout, /app ran/, what);
    assert.match(r.stderr, message, what);
    assert.equal(r.stderr.match(/selfprof: not started/g)?.length, 1, `${what}: one warning: ${r.stderr}`);
    assert.doesNotMatch(r.stderr, /TOPSECRET|DDSECRETKEY/, `${what}: no secret in ${r.stderr}`);
  }
});

test('credentials, headers and URLs HTTP cannot carry are refused at start, naming the variable or option', async () => {
  // Each was accepted before, and then every upload failed (or start said only "URI malformed").
  const app = `console.log('app ran'); setTimeout(() => {}, 50);`;
  const url = 'http://127.0.0.1:1';
  const envCases = [
    [{ SELFPROF_EXPORTER: 'otlp', OTEL_EXPORTER_OTLP_HEADERS: 'content-length=5' }, /OTEL_EXPORTER_OTLP_HEADERS entry 1 sets content-length, which HTTP sets itself for each request$/m],
    [{ SELFPROF_EXPORTER: 'otlp', OTEL_EXPORTER_OTLP_HEADERS: 'x-a=TOPSECRET,Transfer-Encoding=chunked' }, /OTEL_EXPORTER_OTLP_HEADERS entry 2 sets transfer-encoding, which HTTP sets/],
    [{ SELFPROF_EXPORTER: 'otlp', OTEL_EXPORTER_OTLP_PROFILES_HEADERS: 'Connection=close' }, /OTEL_EXPORTER_OTLP_PROFILES_HEADERS entry 1 sets connection, which HTTP sets/],
    [{ SELFPROF_EXPORTER: 'otlp', OTEL_EXPORTER_OTLP_HEADERS: 'x-key=TOPSECRET%0D%0AX-Evil: 1' }, /OTEL_EXPORTER_OTLP_HEADERS entry 1 has a line break \(character 10 of 20\), which an HTTP header cannot carry$/m],
    [{ SELFPROF_EXPORTER: 'datadog', SELFPROF_API_KEY: 'TOPSECRET\r\nX-Evil: 1' }, /SELFPROF_API_KEY has a line break \(character 10 of 20\), which an HTTP header cannot carry$/m],
    [{ SELFPROF_EXPORTER: 'pyroscope', SELFPROF_EXPORTER_URL: url, SELFPROF_AUTH_TOKEN: 'TOPSECRET\n' }, /SELFPROF_AUTH_TOKEN has a line break \(character 10 of 10\)/],
    [{ SELFPROF_EXPORTER: 'pyroscope', SELFPROF_EXPORTER_URL: url, SELFPROF_TENANT_ID: 'TOPSECRET\u0007' }, /SELFPROF_TENANT_ID has a control character \(character 10 of 10\)/],
    [{ SELFPROF_EXPORTER: 'datadog', SELFPROF_EXPORTER_URL: 'http://user:TOPSECRET%@127.0.0.1:1' }, /SELFPROF_EXPORTER_URL's password is not valid percent-encoding \(write a % in it as %25\)/],
    [{ SELFPROF_EXPORTER: 'datadog', DD_TRACE_AGENT_URL: 'http://user:TOP%SECRET@127.0.0.1:1' }, /DD_TRACE_AGENT_URL's password is not valid percent-encoding/],
    [{ SELFPROF_EXPORTER: 'otlp', OTEL_EXPORTER_OTLP_ENDPOINT: 'http://TOP%zzSECRET:x@127.0.0.1:1' }, /OTEL_EXPORTER_OTLP_ENDPOINT's user name is not valid percent-encoding/],
  ];
  const runs = await Promise.all(
    envCases.map(([env]) => new Promise((resolve) => {
      const p = spawn(process.execPath, ['-r', './start.js', '-e', app], { cwd: root, env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
      let stdout = '';
      let stderr = '';
      p.stdout.on('data', (d) => (stdout += d));
      p.stderr.on('data', (d) => (stderr += d));
      p.on('exit', (code) => resolve({ code, stdout, stderr }));
    })),
  );
  envCases.forEach(([env, message], i) => {
    const r = runs[i];
    const what = JSON.stringify(env);
    assert.equal(r.code, 0, `${what}: ${r.stderr}`);
    assert.match(r.stdout, /app ran/, what);
    assert.match(r.stderr, message, `${what}: ${r.stderr}`);
    assert.equal(r.stderr.match(/selfprof/g)?.length, 1, `${what}: one warning: ${r.stderr}`);
    assert.doesNotMatch(r.stderr, /TOPSECRET|TOP%|%zz/, `${what}: no secret in ${r.stderr}`);
  });

  const optionCases = [
    [{ type: 'datadog', url, apiKey: 'TOPSECRET\r\nX-Evil: 1' }, /exporter apiKey has a line break \(character 10 of 20\)/],
    [{ type: 'pyroscope', url, authToken: 'TOPSECRET\n' }, /exporter authToken has a line break/],
    [{ type: 'pyroscope', url, tenantId: 'TOP\u0000SECRET' }, /exporter tenantId has a control character \(character 4 of 10\)/],
    [{ type: 'datadog', url, apiKey: 'TOPSECRET\u2122' }, /exporter apiKey has a character outside Latin-1 \(character 10 of 10\), which an HTTP header cannot carry/],
    [{ type: 'pyroscope', url, basicAuthUser: 'TOP:SECRET' }, /exporter basicAuthUser cannot contain ":"/],
    [{ type: 'otlp', url, headers: { 'Content-Length': '5' } }, /the otlp exporter's header "Content-Length" is one HTTP sets itself for each request/],
    [{ type: 'otlp', url, headers: { 'transfer-encoding': 'chunked' } }, /header "transfer-encoding" is one HTTP sets/],
    [{ type: 'otlp', url, headers: { connection: 'close' } }, /header "connection" is one HTTP sets/],
    [{ type: 'otlp', url, headers: { 'x-key': 'TOPSECRET\r\n' } }, /the otlp exporter's header "x-key" has a line break/],
    [{ type: 'datadog', url: 'http://user:TOPSECRET%@127.0.0.1:1' }, /exporter url's password is not valid percent-encoding/],
  ];
  // Every header HTTP sets itself, in any case.
  for (const name of ['content-length', 'Transfer-Encoding', 'connection', 'Keep-Alive', 'proxy-connection', 'upgrade', 'TE', 'trailer', 'expect']) {
    optionCases.push([{ type: 'otlp', url, headers: { [name]: 'x' } }, new RegExp(`header "${name}" is one HTTP sets itself`)]);
  }
  for (const [exporter, message] of optionCases) {
    assert.throws(
      () => start({ exporters: [exporter] }),
      (err) => err instanceof TypeError && message.test(err.message) && !/TOPSECRET/.test(err.message),
      JSON.stringify(exporter),
    );
  }
});

test('hostile label values reach every backend without breaking a profile', async (t) => {
  const python = otlpPython();
  if (!python && missing(t, OTLP_TOOL)) return;
  const got = { datadog: [], pyroscope: [], otlp: [] };
  const receivers = await Promise.all(
    Object.keys(got).map((name) => server((req, res, record) => {
      got[name].push(record);
      res.writeHead(name === 'otlp' ? 401 : 200).end(name === 'otlp' ? `bad key ${req.headers['x-api-key']}` : '');
    })),
  );
  const script = `
    const { start, withLabels } = require('.');
    const [dd, py, ot] = process.argv.slice(1);
    function hostileWork() { const e = Date.now() + 5; while (Date.now() < e); }
    for (let k = 0; k < 20; k++) hostileWork(); // warm: its deoptimizations before the recording
    const s = start({ service: 'hostile', period: 200, exporters: [
      { type: 'datadog', url: dd }, { type: 'pyroscope', url: py },
      { type: 'otlp', url: ot + '/v1development/profiles', headers: { 'x-api-key': 'OTLPSECRET' }, retries: 0 },
    ] });
    const values = [',}=', 'a\\ud800b', '\\udfff', 'x'.repeat(4096), '{"json":1}', '\\u0000nul', 'emoji 🎉'];
    const calls = [];
    // Until the session sampled ~120 times (at 99 Hz, 1.2 s on an idle machine), however busy it is.
    const { native } = require('./lib/native');
    const until = native.signalCount() + 120;
    const end = Date.now() + 20000;
    let i = 0;
    (async () => {
      while (native.signalCount() < until && Date.now() < end) {
        const v = values[i++ % values.length];
        const labels = { endpoint: v, span_id: v, trace_id: v, [v.slice(0, 200) || 'k']: v };
        // The request's time: all of withLabels, hostileRequest's first and last steps too.
        const t0 = performance.now();
        await withLabels(labels, async function hostileRequest() {
          hostileWork();
          await new Promise((r) => setTimeout(r, 1));
        });
        calls.push({ labels, work: 'hostileWork', t0, t1: performance.now() });
      }
      await s.stop();
      console.log(JSON.stringify({ timeOrigin: performance.timeOrigin, calls }));
    })();
  `;
  const r = await child(script, receivers.map((x) => x.url));
  await Promise.all(receivers.map((x) => x.close()));
  assert.equal(r.code, 0, r.stderr);
  assert.doesNotMatch(r.stderr, /could not be encoded/, r.stderr);
  assert.doesNotMatch(r.stderr, /OTLPSECRET/, `no header value in: ${r.stderr}`);
  assert.match(r.stderr, /otlp export failed: upload to .* was refused: 401/);
  for (const [name, list] of Object.entries(got)) assert.ok(list.length >= 2, `${name}: ${list.length} uploads`);
  // What each backend received, decoded, against what the app recorded: every sample of a
  // request's work with that request's values as the backend names them (a lone surrogate
  // as U+FFFD). JSON carries a lone surrogate as an escape: the child's values come whole.
  const { timeOrigin, calls } = JSON.parse(r.stdout);
  const clean = (v) => v.toWellFormed();
  // A request's samples: in hostileWork, or in hostileRequest around it (on a busy machine
  // V8 put a run's every sample of hostileWork at its caller's frame, hostileWork's missing).
  const WORKS = ['hostileWork', 'hostileRequest'];
  const asWork = (samples) => samples.map((s) => ({ ...s, work: 'hostileWork' }));
  const extraKey = (v) => clean(v.slice(0, 200) || 'k');
  // Pyroscope's bound on a value: 2,048 bytes of UTF-8, cut at a character's start.
  const cut = (v) => {
    const b = Buffer.from(v);
    let end = Math.min(b.length, 2048);
    while (end < b.length && (b[end] & 0xc0) === 0x80) end--;
    return b.subarray(0, end).toString();
  };
  const datadog = [];
  for (const q of got.datadog) {
    const pprof = decodePprof(Buffer.from(await (await formOf(q.body, q.headers['content-type'])).get('wall.pprof').arrayBuffer()));
    // Everything but the labels every sample carries (thread name, id and os thread id).
    const own = (s) => Object.fromEntries(Object.entries(pprof.labels(s)).filter(([k]) => !/^(os )?thread (name|id)$/.test(k)));
    datadog.push(...asWork(pprofWork(pprof, WORKS, { timeOrigin, labels: own })));
  }
  const judged = {
    // Datadog: `trace endpoint`; a span id that is not one stays a string label; no trace_id.
    datadog: assertRequestLabels(datadog, calls, {
      what: 'Datadog',
      min: 10,
      exact: true,
      expected: ({ labels: l }) => ({ 'trace endpoint': clean(l.endpoint), span_id: clean(l.span_id), [extraKey(l.endpoint)]: clean(l.endpoint) }),
    }),
    // Pyroscope: the series label (endpoint) and span_id, each cut to 2,048 bytes; nothing else.
    pyroscope: assertRequestLabels(
      got.pyroscope.map((q) => decodePprof(q.body)).filter((d) => d.p.sampleType.some((v) => d.str(v.type) === 'wall')).flatMap((d) => asWork(pprofWork(d, WORKS, { timeOrigin }))),
      calls,
      { what: 'Pyroscope', min: 10, exact: true, expected: ({ labels: l }) => ({ endpoint: cut(clean(l.endpoint)), span_id: cut(clean(l.span_id)) }) },
    ),
    // OTLP: every label an attribute (ids that are not ids make no link).
    otlp: assertRequestLabels(asWork(otlpWork(decodeOtlp(python, got.otlp.map((q) => q.body)), WORKS, timeOrigin)), calls, {
      what: 'OTLP',
      min: 10,
      exact: true,
      expected: ({ labels: l }) => ({ endpoint: clean(l.endpoint), span_id: clean(l.span_id), trace_id: clean(l.trace_id), [extraKey(l.endpoint)]: clean(l.endpoint) }),
    }),
  };
  t.diagnostic(JSON.stringify(judged));
});

test("the shutdown warning lists what was lost in time order, the last profile last, whatever order the exporter got them in", async () => {
  const { Uploader } = require('../lib/service/exporters/uploader');
  // An export that never answers: the one under way at shutdown is abandoned.
  const never = (profile, timeoutMs, signal) => new Promise((resolve, reject) => signal.addEventListener('abort', () => reject(new Error('abandoned'))));
  const up = new Uploader('datadog', never, { retries: 0 });
  const t = Date.parse('2026-11-29T21:29:32.000Z');
  // A period's profile built after the shutdown's own one was queued (seen on CI, Node 26).
  up.push({ start: t + 400, end: t + 835 });
  up.push({ start: t + 928, end: t + 944, snapshot: 'on_shutdown' });
  up.push({ start: t + 824, end: t + 933 });
  const warned = [];
  const onWarning = (w) => warned.push(w.message);
  process.on('warning', onWarning);
  try {
    await up.close(50);
    await new Promise((resolve) => setImmediate(resolve));
  } finally {
    process.off('warning', onWarning);
  }
  assert.equal(warned.length, 1, warned.join('\n'));
  assert.match(warned[0], /could not send 3 profiles before shutdown \(2026-11-29T21:29:32\.400Z to 21:29:32\.835Z, 2026-11-29T21:29:32\.824Z to 21:29:32\.933Z, 2026-11-29T21:29:32\.928Z to 21:29:32\.944Z \(the last\)\): /);
});
