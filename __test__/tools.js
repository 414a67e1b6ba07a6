'use strict';
// The external tools the backend tests read uploads back with (installed by
// scripts/test-tools.sh into .venv/, which .ci/run runs): Datadog's test agent and a
// Python with the opentelemetry-proto package; and the browser tests' Chromium (.ci/run
// installs Debian's). A missing tool makes its test skip, saying so; under CI (CI set) a
// missing tool is a failure instead, so CI never skips silently.
const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const net = require('node:net');
const path = require('node:path');
const { spawn, spawnSync } = require('node:child_process');
const { pathToFileURL } = require('node:url');
const { setTimeout: sleep } = require('node:timers/promises');

const root = path.join(__dirname, '..');

function findTool(venv, name) {
  const local = path.join(root, '.venv', venv, 'bin', name);
  if (fs.existsSync(local)) return local;
  const r = spawnSync('sh', ['-c', `command -v ${name}`], { encoding: 'utf8' });
  return r.status === 0 ? r.stdout.trim() : null;
}

/** `t.skip(why)` locally; a thrown error under CI. Returns true if the test must stop. */
function missing(t, what) {
  const why = what === NO_CHROMIUM ? `no ${what}` : `${what} not found: run scripts/test-tools.sh`;
  if (process.env.CI) throw new Error(`${why} (CI must not skip this test)`);
  t.skip(why);
  return true;
}

/** What the browser tests need, for `missing`: Debian's Chromium, driven by playwright-core. */
const CHROMIUM = '/usr/bin/chromium';
const NO_CHROMIUM = `chromium at ${CHROMIUM} (apt-get install chromium)`;

/** A free loopback TCP port. */
async function freePort() {
  const srv = net.createServer();
  await new Promise((r) => srv.listen(0, '127.0.0.1', r));
  const { port } = srv.address();
  await new Promise((r) => srv.close(r));
  return port;
}

/**
 * Starts ddapm-test-agent on free loopback ports. Returns { url, requests(), traces(), stop() }:
 * `requests()` reads back what it stored (/test/session/requests), bodies as Buffers.
 * A free port can be taken by another process before the agent binds it (CI runs lanes
 * side by side), so an agent that exits on "address already in use" is started again on
 * new ports; any other failure is thrown at once.
 */
async function startTestAgent(binary, { pickPort = freePort } = {}) {
  for (let attempt = 1; ; attempt++) {
    const started = await startTestAgentOnce(binary, pickPort);
    if (started.agent) return started.agent;
    if (!/address already in use/.test(started.stderr) || attempt === 5) {
      throw new Error(`ddapm-test-agent did not start (attempt ${attempt}): ${started.stderr}`);
    }
  }
}

/** Resolves once `child` has exited (at once if it already has, by a code or a signal). */
const exited = (child) => new Promise((r) => (child.exitCode !== null || child.signalCode !== null ? r() : child.once('exit', r)));

/** One try of startTestAgent: { agent } once it answers, or { stderr } if it exited or hung. */
async function startTestAgentOnce(binary, pickPort) {
  // Each freePort() closes its listener, so the next bind to port 0 may hand the same port
  // back; the agent refuses two equal ports, so a repeat is asked for again.
  const ports = [];
  while (ports.length < 3) {
    const p = await pickPort();
    if (!ports.includes(p)) ports.push(p);
  }
  const [port, otlpHttp, otlpGrpc] = ports;
  const child = spawn(
    binary,
    ['--port', String(port), '--host', '127.0.0.1', '--otlp-http-port', String(otlpHttp), '--otlp-grpc-port', String(otlpGrpc)],
    { stdio: ['ignore', 'ignore', 'pipe'], env: { ...process.env, LOG_LEVEL: 'WARNING' } },
  );
  let stderr = '';
  child.stderr.on('data', (d) => (stderr = (stderr + d).slice(-4000)));
  const url = `http://127.0.0.1:${port}`;
  const deadline = Date.now() + 30_000;
  for (;;) {
    try {
      // Whatever holds the port may be another process's server that never answers.
      const res = await fetch(`${url}/test/session/requests`, { signal: AbortSignal.timeout(2000) });
      if (res.ok) break;
    } catch {
      // not up yet, or not the agent
    }
    if (child.exitCode !== null || Date.now() > deadline) {
      child.kill();
      await exited(child);
      return { stderr };
    }
    await sleep(200);
  }
  const agent = {
    url,
    async requests() {
      const list = await (await fetch(`${url}/test/session/requests`)).json();
      return list.reverse().map((r) => ({ ...r, body: Buffer.from(r.body, 'base64'), path: new URL(r.url).pathname }));
    },
    async traces() {
      return (await fetch(`${url}/test/session/traces`)).json();
    },
    async clear() {
      await fetch(`${url}/test/session/clear`);
    },
    stop() {
      child.kill();
      return exited(child);
    },
  };
  return { agent };
}

/** Runs `node [execArgv] -e script [args]` with `env`; resolves to { code, signal, stdout, stderr }. */
function runNode(script, env, { cwd = root, timeoutMs = 60_000, execArgv = [], args = [] } = {}) {
  return new Promise((resolve) => {
    const p = spawn(process.execPath, [...execArgv, '-e', script, ...args], { cwd, env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    p.stdout.on('data', (d) => (stdout += d));
    p.stderr.on('data', (d) => (stderr += d));
    const timer = setTimeout(() => p.kill('SIGKILL'), timeoutMs);
    p.on('exit', (code, signal) => {
      clearTimeout(timer);
      resolve({ code, signal, stdout, stderr });
    });
  });
}

/**
 * The Python that reads OTLP profiles (opentelemetry-proto >= 1.43: profiles
 * v1development, proto v1.10), or null; `missing(t, ...)` says what to do without it.
 */
function otlpPython() {
  const python = findTool('otlp', 'python');
  const check = python && spawnSync(python, ['-c', 'import opentelemetry.proto.profiles.v1development.profiles_pb2 as p; assert "stack_index" in p.Sample.DESCRIPTOR.fields_by_name'], { encoding: 'utf8' });
  return check && check.status === 0 ? python : null;
}
const OTLP_TOOL = 'python with opentelemetry-proto >= 1.43 (profiles v1development, proto v1.10)';

/** OTLP ExportProfilesServiceRequest bodies decoded by opentelemetry-proto (otlp_decode.py). */
function decodeOtlp(python, bodies) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'selfprof-otlp-'));
  const files = bodies.map((b, i) => {
    const f = path.join(dir, `${i}.pb`);
    fs.writeFileSync(f, b);
    return f;
  });
  const r = spawnSync(python, [path.join(__dirname, 'otlp_decode.py'), ...files], { encoding: 'utf8', maxBuffer: 1 << 28 });
  fs.rmSync(dir, { recursive: true });
  if (r.status !== 0) throw new Error(`otlp_decode.py failed: ${r.stderr}`);
  return JSON.parse(r.stdout);
}

/**
 * The wall profiles' samples of decoded OTLP requests taken in `works`, one per timestamp,
 * as helpers' assertRequestLabels takes them: `{ t, work, labels }`, t on performance.now()'s
 * line of the process that recorded (its `timeOrigin`), labels its attributes with its
 * link's ids as `span_id`/`trace_id` (undefined if none).
 */
function otlpWork(requests, works, timeOrigin) {
  const out = [];
  for (const request of requests) {
    for (const res of request.resources) {
      for (const scope of res.scopes) {
        for (const profile of scope.profiles.filter((p) => p.sample_type[0] === 'wall')) {
          for (const s of profile.samples) {
            const work = s.stack.map((f) => f.name).find((n) => works.includes(n));
            if (!work) continue;
            const labels = { ...s.attributes, ...(s.link && { span_id: s.link.span_id, trace_id: s.link.trace_id }) };
            for (const ts of s.timestamps) {
              out.push({ t: Number(BigInt(ts) / 1000n) / 1000 - timeOrigin, work, labels: Object.keys(labels).length ? labels : undefined });
            }
          }
        }
      }
    }
  }
  return out;
}

/** A multipart body read as FormData. */
function formOf(body, contentType) {
  return new Response(body, { headers: { 'content-type': contentType } }).formData();
}

/** What a child printed besides service mode's one line at start: its warnings. */
function warningsIn(stderr) {
  return stderr.replace(/^selfprof: profiling .*\n?/gm, '');
}

/** The flags every browser test starts Chromium with: no sandbox or GPU (root, no display),
 * and none of its background connections, which this machine's closed network refuses. */
const CHROMIUM_ARGS = ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking',
  '--disable-component-update', '--disable-sync'];

/** Debian's Chromium, headless, started by playwright-core. A browser that dies while it
 * starts (seen once in CI: SIGSEGV at launch, the machine loaded by the sanitizer runs,
 * before any page was opened) is started again, up to three tries, each failure said on
 * stderr: no page of ours has run yet, so a retry hides nothing the test checks. */
async function launchChromium() {
  const { chromium } = require('playwright-core');
  for (let attempt = 1; ; attempt++) {
    try {
      return await chromium.launch({ executablePath: CHROMIUM, args: CHROMIUM_ARGS });
    } catch (e) {
      if (attempt === 3) throw e;
      process.stderr.write(`chromium did not start (try ${attempt} of 3), starting it again: ${String(e.message).split('\n')[0]}\n`);
    }
  }
}

/** The page `html` of test `t` in headless Chromium: `fn(page)`, then no page error or
 * console error (skipped, or under CI failed, without Chromium). */
async function inChromium(t, html, fn) {
  if (!fs.existsSync(CHROMIUM)) {
    if (missing(t, NO_CHROMIUM)) return;
  }
  const file = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'selfprof-page-')), 'r.html');
  fs.writeFileSync(file, html);
  const browser = await launchChromium();
  try {
    const page = await browser.newPage({ viewport: { width: 1400, height: 1000 } });
    const problems = [];
    page.on('pageerror', (e) => problems.push(e.message));
    page.on('console', (m) => m.type() === 'error' && problems.push(m.text()));
    await page.goto(pathToFileURL(file).href);
    await page.waitForSelector('body[data-ready]');
    await fn(page);
    assert.deepEqual(problems, []);
  } finally {
    await browser.close();
    fs.rmSync(path.dirname(file), { recursive: true });
  }
}

module.exports = { root, findTool, missing, CHROMIUM, NO_CHROMIUM, launchChromium, inChromium, freePort, startTestAgent, runNode, formOf, otlpPython, OTLP_TOOL, decodeOtlp, otlpWork, warningsIn };
