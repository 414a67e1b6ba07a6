'use strict';
// What making a stop's trace object costs the main thread, with and without V8's
// collections of the new objects: selfprof's own `traceObject` (lib/capture/trace-object.js)
// on parts shaped as a labeled recording's (a span id per request, one of 4 endpoints
// each), made in two forms side by side:
//  - sliced: every label value sliced out of its piece's string (before `e0f7576`);
//  - shared: a value that repeats across contexts (the endpoint) handed over once, in
//    `shared`, and reused (what src/trace/columns.rs `SharedValues` makes).
//
//   node benchmark/trace-object-costs.js [--samples 95000] [--contexts 78000] [--rounds 6] [--node PATH]
//
// Each measurement is a fresh process (`--expose-gc`, a full GC before), the forms
// alternated per round. It prints medians (ranges) of: the main thread's CPU time from the
// call to the trace object (the collections during it included), the collections' pauses
// during it and in the 50 ms after (PerformanceObserver 'gc' entries), and the CPU time
// plus the pauses after: what making the object cost the main thread in all.

const { spawnSync } = require('node:child_process');
const path = require('node:path');

const FORMS = ['sliced', 'shared'];
const ENDPOINTS = ['GET /users/:id', 'POST /orders', 'GET /search', 'GET /health'];
const CONTEXTS_PER_PIECE = 2048; // src/trace/columns.rs

function arg(name, fallback) {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? process.argv[i + 1] : fallback;
}

/** A count option: a whole number from 1 to 10 million, else one error naming it. */
function count(name, fallback) {
  const v = Number(arg(name, fallback));
  if (!Number.isInteger(v) || v < 1 || v > 1e7) throw new RangeError(`--${name} must be a whole number from 1 to 10000000, got ${JSON.stringify(arg(name))}`);
  return v;
}

/** Parts of `n` samples and `c` contexts `{ endpoint, span_id }`, in `form`. */
function parts(form, n, c) {
  const values = [];
  const valueEnds = new Int32Array(2 * c);
  const pieceContexts = [];
  let v = 0;
  for (let from = 0; from < c; from += CONTEXTS_PER_PIECE) {
    const to = Math.min(c, from + CONTEXTS_PER_PIECE);
    let text = '';
    for (let i = from; i < to; i++) {
      if (form === 'shared' && i >= 4) {
        valueEnds[v++] = -1 - (i % 4);
      } else {
        text += ENDPOINTS[i % 4];
        valueEnds[v++] = text.length;
      }
      text += (0x1000_0000 + i).toString(16).padStart(16, '0');
      valueEnds[v++] = text.length;
    }
    values.push(text);
    pieceContexts.push(to - from);
  }
  const samples = { timestamp: new Float64Array(n), stack: new Int32Array(n), marker: new Uint8Array(n), context: new Int32Array(n), cpuTime: new Float64Array(n) };
  for (let i = 0; i < n; i++) {
    samples.timestamp[i] = 1000 + i * 0.21 + (i % 7) * 0.001;
    samples.stack[i] = i % 300;
    samples.context[i] = Math.floor((i * c) / n);
    samples.cpuTime[i] = 0.2 + (i % 11) * 0.001;
  }
  return {
    head: JSON.stringify({ resources: [], frames: [], stacks: [] }),
    keySets: JSON.stringify([['endpoint', 'span_id']]),
    contextKeys: new Uint32Array(c),
    values,
    valueEnds,
    shared: form === 'shared' ? ENDPOINTS.slice() : [],
    pieceContexts: Uint32Array.from(pieceContexts),
    ...samples,
  };
}

async function measure(form, n, c) {
  const { traceObject } = require('../lib/capture/trace-object');
  const { native } = require('../lib/native');
  const { PerformanceObserver } = require('node:perf_hooks');
  const p = parts(form, n, c);
  global.gc();
  const gcs = [];
  const obs = new PerformanceObserver((list) => gcs.push(...list.getEntries()));
  obs.observe({ entryTypes: ['gc'] });
  const cpu0 = native.threadCpuNs();
  const trace = await traceObject(p);
  const cpuMs = (native.threadCpuNs() - cpu0) / 1e6;
  const end = performance.now();
  await new Promise((resolve) => setTimeout(resolve, 50));
  obs.disconnect();
  // The forms must make the same object.
  const check = trace.contexts[c - 1].labels;
  if (trace.samples.length !== n || trace.contexts.length !== c || check.endpoint !== ENDPOINTS[(c - 1) % 4]) {
    throw new Error(`${form}: not the trace object expected`);
  }
  const sum = (list) => list.reduce((ms, e) => ms + e.duration, 0);
  return { form, cpuMs, gcDuringMs: sum(gcs.filter((e) => e.startTime < end)), gcAfterMs: sum(gcs.filter((e) => e.startTime >= end)) };
}

const median = (a) => {
  const s = [...a].sort((x, y) => x - y);
  const m = s.length >> 1;
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
};
const fmt = (a) => `${median(a).toFixed(1)} (${Math.min(...a).toFixed(1)}-${Math.max(...a).toFixed(1)})`;

if (process.argv.includes('--child')) {
  measure(arg('child'), Number(arg('samples')), Number(arg('contexts'))).then(
    (r) => console.log(JSON.stringify(r)),
    (err) => {
      console.error(err);
      process.exitCode = 1;
    },
  );
} else {
  try {
    main();
  } catch (err) {
    console.error(`trace-object-costs: ${err.message}`);
    process.exitCode = 2;
  }
}

function main() {
  const node = arg('node', process.execPath);
  const n = count('samples', 95000);
  const c = count('contexts', 78000);
  const rounds = count('rounds', 6);
  const probe = spawnSync(node, ['--version'], { encoding: 'utf8' });
  if (probe.status !== 0) throw new Error(`--node ${node} does not run: ${probe.error?.message ?? probe.stderr}`);
  const version = probe.stdout.trim();
  console.log(`trace object of ${n} samples and ${c} contexts, Node ${version}, ${rounds} rounds, forms alternated`);
  const got = Object.fromEntries(FORMS.map((f) => [f, []]));
  for (let r = 0; r < rounds; r++) {
    for (const form of r % 2 ? [...FORMS].reverse() : FORMS) {
      const run = spawnSync(node, ['--expose-gc', __filename, '--child', form, '--samples', String(n), '--contexts', String(c)], {
        cwd: path.join(__dirname, '..'),
        encoding: 'utf8',
      });
      if (run.status !== 0) throw new Error(`${form}: ${run.stderr}`);
      got[form].push(JSON.parse(run.stdout));
    }
  }
  console.log(`${'form'.padEnd(10)}${'main CPU, ms'.padEnd(22)}${'GC during, ms'.padEnd(22)}${'GC after, ms'.padEnd(22)}in all, ms`);
  for (const form of FORMS) {
    const ms = got[form];
    const col = (f) => fmt(ms.map(f)).padEnd(22);
    console.log(`${form.padEnd(10)}${col((m) => m.cpuMs)}${col((m) => m.gcDuringMs)}${col((m) => m.gcAfterMs)}${fmt(ms.map((m) => m.cpuMs + m.gcAfterMs))}`);
  }
}
