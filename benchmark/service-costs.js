'use strict';
// What service mode costs, CPU only and with the heap profile, side by side with no
// profiler: every mode runs in a fresh process, modes alternate (shuffled per round), and
// each mode's ratio to the no-profiler run of the same round is reported as a median with
// its range, as throughput and as operations per CPU-second (the steadier measure on a
// shared machine).
//
//   node benchmark/service-costs.js [--rounds 5] [--seconds 3] [--period-ms 1000]
//
// The workload allocates (JSON round trips of request-like objects, some kept for a while,
// as a cache would) and computes, in labeled "requests": the heap sampler sees steady
// allocation and a heap that changes. Service mode ships to the file exporter in a temp dir
// every period (the default is 60 s; a short period here includes rotations in the cost).

const { spawnSync } = require('node:child_process');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { parseArgs } = require('node:util');

const MODES = ['none', 'cpu', 'cpu+heap'];

function child(mode, seconds, periodMs) {
  const { performance } = require('node:perf_hooks');
  const selfprof = require('..');
  let dir;
  let session;
  if (mode !== 'none') {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'selfprof-bench-'));
    session = selfprof.start({ service: 'bench', period: periodMs, heap: mode === 'cpu+heap', exporters: [{ type: 'file', dir }] });
  }
  const cache = [];
  let ops = 0;
  const request = (i) => {
    const order = { id: i, items: Array.from({ length: 20 }, (_, k) => ({ sku: `sku-${k}`, qty: k % 3, price: k * 1.25 })), note: 'x'.repeat(64) };
    const parsed = JSON.parse(JSON.stringify(order));
    let total = 0;
    for (const it of parsed.items) total += it.qty * it.price;
    if (i % 10 === 0) cache.push(parsed);
    if (cache.length > 5000) cache.splice(0, 1000);
    return total;
  };
  const cpu0 = process.cpuUsage();
  const t0 = performance.now();
  const end = t0 + seconds * 1000;
  const run = () => {
    while (performance.now() < end) {
      const slice = performance.now() + 5;
      while (performance.now() < slice) {
        selfprof.withLabels({ endpoint: ops % 2 ? 'POST /orders' : 'GET /cart' }, request, ops);
        ops++;
      }
      // Let the event loop turn (rotations, uploads) as a service's would.
      return setImmediate(run);
    }
    const wallMs = performance.now() - t0;
    const cpu = process.cpuUsage(cpu0);
    const finish = () => {
      process.stdout.write(JSON.stringify({ ops, wallMs, cpuMs: (cpu.user + cpu.system) / 1000 }));
      if (dir) fs.rmSync(dir, { recursive: true, force: true });
    };
    if (session) session.stop().then(finish);
    else finish();
  };
  run();
}

function median(xs) {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[s.length >> 1] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
}

function main() {
  const { values } = parseArgs({
    options: { rounds: { type: 'string' }, seconds: { type: 'string' }, 'period-ms': { type: 'string' }, child: { type: 'string' } },
  });
  const seconds = Number(values.seconds ?? 3);
  const periodMs = Number(values['period-ms'] ?? 1000);
  if (values.child) return child(values.child, seconds, periodMs);
  const rounds = Number(values.rounds ?? 5);
  const ratios = Object.fromEntries(MODES.map((m) => [m, { throughput: [], perCpu: [] }]));
  for (let r = 0; r < rounds; r++) {
    const order = [...MODES].sort(() => Math.random() - 0.5);
    const results = {};
    for (const mode of order) {
      const out = spawnSync(process.execPath, [__filename, '--child', mode, '--seconds', String(seconds), '--period-ms', String(periodMs)], { encoding: 'utf8' });
      if (out.status !== 0) throw new Error(`${mode}: ${out.stderr}`);
      results[mode] = JSON.parse(out.stdout);
    }
    const base = results.none;
    for (const mode of MODES) {
      const x = results[mode];
      ratios[mode].throughput.push(x.ops / x.wallMs / (base.ops / base.wallMs));
      ratios[mode].perCpu.push(x.ops / x.cpuMs / (base.ops / base.cpuMs));
    }
    process.stderr.write(`round ${r + 1}/${rounds}: ${order.map((m) => `${m} ${Math.round(results[m].ops / (results[m].cpuMs / 1000))} ops/CPU-s`).join(', ')}\n`);
  }
  const fmt = (xs) => `${median(xs).toFixed(3)} (${Math.min(...xs).toFixed(3)}–${Math.max(...xs).toFixed(3)})`;
  console.log(`Node ${process.version}, ${rounds} rounds × ${seconds} s, period ${periodMs} ms; ratio to no profiler, median (range)`);
  console.log('| mode | throughput | requests per CPU-second |');
  console.log('| --- | --- | --- |');
  for (const mode of MODES.slice(1)) {
    const name = mode === 'cpu' ? 'service mode, CPU only (`heap: false`)' : 'service mode, CPU + heap (default)';
    console.log(`| ${name} | ${fmt(ratios[mode].throughput)} | ${fmt(ratios[mode].perCpu)} |`);
  }
}

main();
