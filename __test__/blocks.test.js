'use strict';
// What blocked the event loop: an Express service under dd-trace (real packages, service
// mode with a file exporter), loaded from this process with short requests all along while
// one endpoint blocks the loop 120–300 ms now and then. The app measures itself, with
// performance.now(): each request's handler, and each turn of its loop (a 5 ms timer). The
// blocks found from the samples (the API, `selfprof report --blocks` on the trace and on
// the pprof's comments, and the HTML report in Chromium) must be those requests', in that
// endpoint and its blocking function, each within one sampling interval of the handler's
// time, and every block a stretch where the app's loop did not wait for events (libuv's
// idle time, noted at each turn of its loop).
/* global document -- used in page.evaluate's callbacks, which run in the browser */
const { test, before, after } = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const http = require('node:http');
const zlib = require('node:zlib');
const { fork, spawnSync } = require('node:child_process');
const { setTimeout: sleep } = require('node:timers/promises');
const { eventLoopBlocks, htmlReport } = require('..');
const { missing, inChromium, findTool, startTestAgent, formOf } = require('./tools');
const { definitionOf, lineOf, stackFrames } = require('./helpers');

const root = path.join(__dirname, '..');
const CLI = path.join(root, 'bin', 'selfprof.js');
const REPORT = 'GET /report/:ms';
const APP = path.join(__dirname, 'fixtures', 'blocks-app.js');
/** The blocking requests' durations (ms), sent one after another among the short ones. */
const BLOCKS_MS = [120, 300, 180, 250, 140, 220];
/** Blocking requests that ran with the process on CPU throughout, wanted to judge by; at
 * most so many sent. */
const ON_CPU_WANTED = 5;
const BLOCKING_MAX = 16;
/** The blocks a pprof's comments keep: the longest (src/formats/pprof/comments.rs). */
const PPROF_BLOCKS = 20;

let dir;
let agent = null; // Datadog's test agent, when scripts/test-tools.sh set it up
let run; // { measured, turns, trace, traceFile, pprofFile, blocking }
before(async () => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'selfprof-blocks-'));
  const binary = findTool('ddagent', 'ddapm-test-agent');
  if (binary) agent = await startTestAgent(binary);
  run = await runApp(dir);
});
after(async () => {
  await agent?.stop();
  if (process.env.SELFPROF_TEST_KEEP) console.log(`kept ${dir}`);
  else fs.rmSync(dir, { recursive: true, force: true });
});

/** Runs the app, loads it (short requests on 2 connections all along, the blocking ones in turn), stops it. */
async function runApp(out) {
  const child = fork(APP, {
    cwd: out,
    execArgv: ['-r', path.join(__dirname, 'fixtures', 'apps', 'tracing', 'dd-trace.js')],
    stdio: ['ignore', 'pipe', 'pipe', 'ipc'],
    env: {
      ...process.env,
      SELFPROF_TEST_DIR: out,
      DD_TRACE_AGENT_URL: agent?.url ?? 'http://127.0.0.1:9', // else nothing listens: traces are dropped
      ...(agent && { SELFPROF_TEST_DD_URL: agent.url }),
      DD_INSTRUMENTATION_TELEMETRY_ENABLED: 'false',
      DD_REMOTE_CONFIGURATION_ENABLED: 'false',
      DD_TRACE_STARTUP_LOGS: 'false',
    },
  });
  let stderr = '';
  child.stderr.on('data', (d) => (stderr += d));
  child.stdout.resume();
  const exited = new Promise((resolve) => child.on('exit', (code) => resolve(code)));
  const message = (want) =>
    new Promise((resolve, reject) => {
      child.on('message', (m) => want(m) && resolve(m));
      exited.then((code) => reject(new Error(`the app exited (${code}) early:\n${stderr}`)));
    });
  const { port } = await message((m) => m?.port);
  const keepAlive = new http.Agent({ keepAlive: true, maxSockets: 8 });
  const get = (p) =>
    new Promise((resolve, reject) => {
      http
        .get({ host: '127.0.0.1', port, path: p, agent: keepAlive }, (res) => {
          let body = '';
          res.setEncoding('utf8');
          res.on('data', (d) => (body += d));
          res.on('end', () => (res.statusCode === 200 ? resolve(body) : reject(new Error(`${p}: ${res.statusCode}`))));
        })
        .on('error', reject);
    });
  let pinging = true;
  const pings = [0, 1].map(async (k) => {
    while (pinging) {
      await get('/ping');
      await sleep(10 + 15 * k);
    }
  });
  // The service's first requests: each endpoint's code compiled, the tracer's first span (a
  // cold first request may be a block of its own, as the app measures it).
  await get('/report/20');
  await sleep(1000);
  // Each blocking request once, then more in turn until enough ran with the process on CPU
  // throughout (on a busy machine it stops for tens of ms at times, and no sample sees where
  // in that hole a request began or ended).
  let blocking = 0;
  for (let onCpu = 0; blocking < BLOCKS_MS.length || (onCpu < ON_CPU_WANTED && blocking < BLOCKING_MAX); blocking++) {
    const { longestStopMs } = JSON.parse(await get(`/report/${BLOCKS_MS[blocking % BLOCKS_MS.length]}`));
    if (longestStopMs <= 15) onCpu++;
    await sleep(300);
  }
  pinging = false;
  await Promise.all(pings);
  keepAlive.destroy();
  child.send('stop');
  const { measured, turns, waited } = await message((m) => m?.measured);
  assert.equal(await exited, 0, stderr);
  const files = fs.readdirSync(out);
  const traceFile = path.join(out, files.find((f) => f.endsWith('.trace.json.gz')));
  const pprofFile = path.join(out, files.find((f) => f.endsWith('.pb.gz') && !f.includes('heap')));
  const trace = JSON.parse(zlib.gunzipSync(fs.readFileSync(traceFile)));
  // Kept (SELFPROF_TEST_KEEP) beside the profiles: what the app measured, to judge a failure again.
  if (process.env.SELFPROF_TEST_KEEP) fs.writeFileSync(path.join(out, 'measured.json'), JSON.stringify({ measured, turns, waited, blocking }));
  return { measured, turns, waited, trace, traceFile, pprofFile, stderr, blocking };
}

const isReport = (r) => r.labels.endpoint === REPORT;

/**
 * The blocking requests V8 sampled as they began and ended: those with no hole in the
 * samples at their handler's start or end longer than half the threshold (the whole
 * process stopped, as on a machine this busy it can for a quarter of a second: no sampler
 * sees where in the hole the request began). The others are counted.
 */
function sampledReports({ measured, trace }, thresholdMs = 50) {
  const times = trace.samples.map((s) => s.timestamp);
  const gapAt = (t) => {
    const i = times.findIndex((x) => x > t);
    return i <= 0 ? Infinity : times[i] - times[i - 1];
  };
  const seen = (m) => gapAt(m.t0) <= thresholdMs / 2 && gapAt(m.t1) <= thresholdMs / 2;
  const reports = measured.filter((m) => m.path === '/report' && m.ms >= 100);
  return { reports: reports.filter(seen), holes: reports.filter((m) => !seen(m)).length, all: reports.length };
}

const frameNames = (st) => st.frames.map((f) => f.name);

/** The lines (1-based) V8 gives the blocking function's and its handler's (an arrow's)
 * frames. */
const BUILD_REPORT_LINE = definitionOf(APP, 'buildReport').line;
const HANDLER_LINE = lineOf(APP, "app.get('/report/:ms'");

/** Block `b`'s JS samples (a stack, no marker: those its `function` is found from). */
const jsSamplesIn = (trace, b) => trace.samples.filter((s) => s.timestamp >= b.start && s.timestamp <= b.start + b.duration && s.stackId !== undefined && !s.marker);

/** The block whose stretch holds request `m`'s time on the loop. */
const blockOf = (blocks, m) => blocks.filter((b) => b.start < m.t1 && b.start + b.duration > m.t0);

/** The samples from `from` to `to` (ms), told briefly for a failure's message: each one's
 * time, its outermost and innermost frames (or its marker) and its endpoint. */
function samplesTold(trace, from, to) {
  return trace.samples
    .filter((s) => s.timestamp >= from && s.timestamp <= to)
    .map((s) => {
      const frames = s.stackId === undefined ? [] : stackFrames(trace, s);
      const where = frames.length ? `${frames.at(-1).name || '(anonymous)'}…${frames[0].name || '(anonymous)'}` : `(${s.marker ?? 'none'})`;
      return `${s.timestamp.toFixed(1)} ${where} ${trace.contexts?.[s.contextId]?.labels?.endpoint ?? '-'}`;
    })
    .join('; ');
}

/**
 * At least how long the app's loop waited for events from `from` to `to` (ms): for each two
 * turns in a row, the wait between them (`waited`, libuv's idle time at each turn) less
 * the part of their stretch outside `from`-`to`.
 */
function waitedWithin(turns, waited, from, to) {
  let sum = 0;
  for (let k = 1; k < turns.length; k++) {
    if (turns[k] <= from || turns[k - 1] >= to) continue;
    const outside = Math.max(0, from - turns[k - 1]) + Math.max(0, turns[k] - to);
    sum += Math.max(0, waited[k] - waited[k - 1] - outside);
  }
  return sum;
}

test('the blocks found from the samples are the blocking requests\', each within a sampling interval of what the app measured', () => {
  const { measured, turns, waited, trace } = run;
  const found = eventLoopBlocks(trace);
  assert.equal(found.from, 'samples');
  const { reports, holes, all } = sampledReports(run);
  const pings = measured.filter((m) => m.path === '/ping');
  assert.equal(all, run.blocking);
  assert.ok(reports.length >= ON_CPU_WANTED - 1, `enough blocking requests were sampled through to judge by: ${reports.length} (${holes} were not)`);
  assert.ok(pings.length > 50, `short requests ran all along (${pings.length})`);
  const gaps = [];
  for (let i = 1; i < trace.samples.length; i++) gaps.push(trace.samples[i].timestamp - trace.samples[i - 1].timestamp);
  const interval = gaps.sort((a, b) => a - b)[gaps.length >> 1];
  const lines = [];
  for (const m of reports) {
    const mine = blockOf(found.blocks, m);
    assert.equal(mine.length, 1, `one block holds the ${m.ms} ms request: ${JSON.stringify(mine.map((b) => [b.start, b.duration]))}`);
    const b = mine[0];
    const handler = m.t1 - m.t0;
    lines.push(`${m.ms} ms asked: the app measured ${handler.toFixed(1)} ms in its handler; the block ${b.duration.toFixed(1)} ± ${b.error.toFixed(1)} ms (${b.samples} samples, CPU ${b.cpu.toFixed(1)} ms, in ${b.function?.name}:${b.function?.line} ${b.function?.samples})`);
    assert.equal(b.requests[0].labels.endpoint, REPORT, 'that request first');
    assert.ok(b.requests[0].labels.span_id, 'with its span id');
    const others = b.requests.slice(1).reduce((n, r) => n + r.samples, 0);
    assert.ok(others <= 2, `and nearly alone (the rest of its samples unlabeled: its start, a collection): ${JSON.stringify(b.requests)}`);
    // It ran in the blocking function, as its heaviest stacks say; and where more than half
    // of its JS samples were not in it, in the handler that calls it (V8 puts some of its
    // samples there, its code inlined or at the call: 9 of 14 once, on Node 26).
    assert.ok(b.stacks.some((st) => frameNames(st).includes('buildReport')), `its heaviest stacks are the blocking function's: ${JSON.stringify(b.stacks)}`);
    const js = jsSamplesIn(trace, b);
    const inReport = js.filter((s) => stackFrames(trace, s).some((f) => f.name === 'buildReport')).length;
    const ran = 2 * inReport > js.length ? { name: 'buildReport', line: BUILD_REPORT_LINE } : { line: HANDLER_LINE };
    assert.ok(
      b.function?.url?.endsWith('blocks-app.js') && b.function.line === ran.line && (!ran.name || b.function.name === ran.name),
      `it ran in ${ran.name ?? `the handler at line ${ran.line}`} (${inReport} of ${js.length} JS samples in buildReport): ${JSON.stringify(b.function)}; stacks ${JSON.stringify(b.stacks.map((st) => [st.samples, frameNames(st)]))}`,
    );
    // It holds the handler, within its error, give or take the time its thread did not run
    // (a thread taken off the CPU near an edge is not sampled there).
    const offCpu = Math.max(0, b.duration - b.cpu);
    assert.ok(b.start <= m.t0 + b.error + offCpu && b.start + b.duration >= m.t1 - b.error - offCpu, `${lines.at(-1)}: it holds the handler`);
    // Within one sampling interval (as sampled: the gaps around its edges, `error`) of the
    // handler's time, give or take the time the thread did not run.
    assert.ok(Math.abs(b.duration - handler) <= Math.max(interval, b.error) + offCpu, `${lines.at(-1)}; interval ${interval.toFixed(1)} ms`);
  }
  // Every block is a stretch where the loop did not wait for events: in its certain part
  // the loop waited, as libuv counts it (the app notes its idle time at each turn of its
  // timer), less than half a sampling interval, a wait a sample would see one time in two.
  // None of the blocks here waited at all (0.00 ms in 19 kept runs, three at a time, some
  // beside a busy loop, 2026-11-30); a block stretched 30 ms past its end would show 8-33 ms.
  //
  // A block's certain part runs from its second sample time to the one before its last: its
  // first or last sample may be a neighbouring short task's, which may have begun (or
  // ended) anywhere in the gap to the next sample, with nothing to tell the two apart. A
  // short request's parsing, not labeled yet, in the same parser callback as the blocking
  // request's, began a block 11 ms early, the loop turning between (2026-11-30, three runs
  // at once); a short request's tick, labeled, ended the start-up's block 5 ms after the
  // request began (the landing CI of 252cd3f).
  //
  // The loop may turn inside a block without waiting: two tasks back to back whose boundary
  // no sample saw are one block (docs/api.md: what samples cannot show). A blocking
  // request's block ran on, with the loop turning once, into garbage collection and a
  // short request's parsing, unlabeled, in the same parser callback (2026-11-30, beside a
  // busy loop). (The landing CI of a654818 failed the turn check this replaced, its message
  // lost to the log's tail.) Such blocks are counted, not failed.
  // (Distinct times: V8 may record two samples at one time, its own beside a signal's, as
  // it did at a request's tick after a report in the fresh-clone CI of af74e2c.)
  const certainPart = (b) => {
    const times = trace.samples.slice(b.firstSample, b.lastSample + 1).map((s) => s.timestamp);
    const [from, to] = [times.find((t) => t > times[0]), times.findLast((t) => t < times.at(-1))];
    return from === undefined || to === undefined || to <= from ? null : { from, to };
  };
  let turned = 0;
  for (const b of found.blocks) {
    const part = certainPart(b);
    if (part === null) continue;
    const wait = waitedWithin(turns, waited, part.from, part.to);
    assert.ok(
      wait < interval / 2,
      `the loop waited ${wait.toFixed(1)} ms in a block's certain part ${part.from.toFixed(1)}-${part.to.toFixed(1)}; the block ${b.start.toFixed(1)} + ${b.duration.toFixed(1)} ms, CPU ${b.cpu.toFixed(1)} ms, requests ${JSON.stringify(b.requests.map((r) => [r.labels.endpoint, r.samples]))}; its samples: ${samplesTold(trace, b.start - b.error, b.start + b.duration + b.error)}; the block: ${JSON.stringify(b)}`,
    );
    if (turns.some((t) => t > part.from && t < part.to)) turned++;
  }
  const inBlocks = pings.filter((p) => blockOf(found.blocks, p).length > 0).length;
  console.log(
    `interval ${interval.toFixed(2)} ms; ${found.blocks.length} blocks: ${reports.length} of the blocking requests (${holes} more not sampled through), ${turned} where the loop turned without waiting (tasks back to back); ${inBlocks} of ${pings.length} short requests in a block\n${lines.join('\n')}`,
  );
});

/** The blocks a pprof's comments keep of `all`: the 20 longest, in order of time. */
function pprofKept(all) {
  const longest = new Set([...all].sort((a, b) => b.duration - a.duration).slice(0, PPROF_BLOCKS));
  return all.filter((b) => longest.has(b));
}

test('selfprof report --blocks lists them, from the trace and from the pprof\'s comments', () => {
  const cli = (...args) => {
    const r = spawnSync(process.execPath, [CLI, 'report', ...args], { encoding: 'utf8', timeout: 60_000, cwd: dir });
    assert.equal(r.status, 0, r.stderr);
    return r.stdout;
  };
  const all = eventLoopBlocks(run.trace).blocks;
  const keptInPprof = pprofKept(all);
  for (const [file, api] of [
    [run.traceFile, all],
    [run.pprofFile, keptInPprof],
  ]) {
    const out = cli(file, '--blocks');
    // The blocks come first, then the summary.
    const text = out.slice(0, out.search(/^\d+ samples \(/m));
    assert.match(text, new RegExp(`^event-loop blocks longer than 50 ms: ${all.length} `), out);
    if (api.length < all.length) assert.match(text, new RegExp(`it kept the ${PPROF_BLOCKS} longest of the ${all.length} it found`), out);
    const reports = api.filter((b) => b.requests[0]?.labels.endpoint === REPORT);
    if (api === all) assert.ok(reports.length >= sampledReports(run).reports.length);
    assert.equal((text.match(/requests: GET \/report\/:ms /g) ?? []).length, reports.length, out);
    assert.equal((text.match(/^ +in: +buildReport \(.*blocks-app\.js:\d+\): \d+ of its samples$/gm) ?? []).length, reports.filter((b) => b.function?.name === 'buildReport').length, out);
    assert.equal((text.match(/stacks: +\d+ +\S/g) ?? []).length, api.filter((b) => b.stacks.length).length, out);
    if (!api.some((b) => b.requests.some((r) => r.labels.endpoint === 'GET /ping'))) assert.doesNotMatch(text, /GET \/ping/, 'no short request listed');
    // The durations printed are the API's, longest first.
    const printed = [...text.matchAll(/^#\d+ +(?:≥ )?([\d.]+) ms ±/gm)].map((x) => Number(x[1]));
    assert.deepEqual(printed, api.map((b) => Number(b.duration.toFixed(1))).sort((a, b) => b - a));
  }
  // The pprof's comments, as Datadog's own pprof reader (pprof-format) decodes them.
  const { Profile } = require('pprof-format');
  const p = Profile.decode(zlib.gunzipSync(fs.readFileSync(run.pprofFile)));
  const comments = p.comment.map((i) => p.stringTable.strings[Number(i)]);
  const head = comments.filter((c) => c.startsWith('selfprof-blocks: ')).map((c) => JSON.parse(c.slice('selfprof-blocks: '.length)));
  assert.deepEqual(head, [{ thresholdMs: 50, found: all.length, kept: keptInPprof.length }], comments.join('\n'));
  const inPprof = comments.filter((c) => c.startsWith('selfprof-block: ')).map((c) => JSON.parse(c.slice('selfprof-block: '.length)));
  const same = (b) => [b.duration.toFixed(6), b.requests, b.function];
  assert.deepEqual(inPprof.map(same), keptInPprof.map(same));
  assert.equal(inPprof.filter((b) => b.requests.some(isReport)).length, keptInPprof.filter((b) => b.requests.some(isReport)).length);
  const timeNanos = Number(p.timeNanos);
  for (const b of inPprof) assert.ok(Math.abs(b.unixMs - (timeNanos / 1e6 + b.offset)) < 1, 'each placed in time: its Unix time, its offset in the profile');
  // A threshold over every block finds none.
  const none = cli(run.traceFile, '--blocks', '--threshold', '60000');
  assert.match(none, /^event-loop blocks longer than 60000 ms: 0/);
  const bad = spawnSync(process.execPath, [CLI, 'report', run.traceFile, '--threshold', '10'], { encoding: 'utf8' });
  assert.equal(bad.status, 1);
  assert.match(bad.stderr, /--threshold goes with --blocks or --html/);
});

test('the Datadog upload carries the same blocks as pprof comments, as dd-trace\'s agent receives it', async (t) => {
  if (!agent && missing(t, 'ddapm-test-agent')) return;
  const commentsOf = (p) => p.comment.map((i) => p.stringTable.strings[Number(i)]).filter((c) => c.startsWith('selfprof-block: '));
  const { Profile } = require('pprof-format');
  const uploads = (await agent.requests()).filter((r) => r.path === '/profiling/v1/input');
  assert.equal(uploads.length, 1, 'one profile: the run was one period');
  const form = await formOf(uploads[0].body, uploads[0].headers['Content-Type']);
  const wall = Profile.decode(zlib.gunzipSync(Buffer.from(await form.get('wall.pprof').arrayBuffer())));
  const file = Profile.decode(zlib.gunzipSync(fs.readFileSync(run.pprofFile)));
  const blocks = (p) => commentsOf(p).map((c) => JSON.parse(c.slice('selfprof-block: '.length)));
  const kept = pprofKept(eventLoopBlocks(run.trace).blocks);
  assert.equal(blocks(wall).filter((b) => b.requests.some(isReport) && b.function?.name === 'buildReport').length, kept.filter((b) => b.requests.some(isReport) && b.function?.name === 'buildReport').length);
  assert.deepEqual(blocks(wall), blocks(file), 'the blocks the file exporter wrote');
});

test('in headless Chromium: the blocks are listed first, each opening the flame graph of its stretch', async (t) => {
  const found = eventLoopBlocks(run.trace);
  await inChromium(t, htmlReport(run.trace, { title: 'blocks' }), async (page) => {
    // First on the page, above the timeline; one row a block, longest first.
    const order = await page.evaluate(() => {
      const b = document.getElementById('blocks-section');
      const tl = document.getElementById('timeline-section');
      return { shown: !b.hidden, first: !!(b.compareDocumentPosition(tl) & 4) };
    });
    assert.deepEqual(order, { shown: true, first: true });
    const rows = await page.$$eval('#blocks tbody tr', (trs) => trs.map((tr) => ({ text: tr.textContent, duration: Number(tr.dataset.duration), first: tr.dataset.first })));
    assert.equal(rows.length, found.blocks.length);
    assert.deepEqual(rows.map((r) => r.duration), rows.map((r) => r.duration).sort((a, b) => b - a), 'longest first');
    const reportRows = rows.filter((r) => r.text.includes(REPORT));
    const sampled = sampledReports(run).reports.length;
    assert.ok(reportRows.length >= sampled);
    assert.ok(reportRows.filter((r) => /buildReport/.test(r.text)).length >= sampled, reportRows.map((r) => r.text).join('\n'));
    assert.equal(await page.$$eval('#block-marks div', (d) => d.length), found.blocks.length, 'each marked on the timeline');

    // A row opens the flame graph of its stretch: its samples, its blocking function.
    const b = found.blocks.find((x) => x.requests.some(isReport) && x.function?.name === 'buildReport');
    await page.click(`#blocks tbody tr[data-first="${b.firstSample}"]`);
    assert.equal(Number(await page.textContent('#total-samples')), b.lastSample - b.firstSample + 1);
    assert.match(await page.textContent('#active-range'), /^\+[\d.]+ (ms|s) … \+[\d.]+ (ms|s)/);
    const names = await page.$$eval('#flamegraph .frame', (els) => els.map((e) => e.dataset.name));
    assert.ok(names.includes('buildReport') && !names.includes('pingWork'), names.join());
    assert.equal(await page.$eval(`#blocks tbody tr[data-first="${b.firstSample}"]`, (tr) => tr.className), 'active');
  });
});
