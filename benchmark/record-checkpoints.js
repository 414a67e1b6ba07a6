'use strict';
// What `selfprof record`'s checkpoints cost the recorded program: the same labeled
// workload recorded with checkpoints off, every 5 s (the default) and every 1 s (to make
// their cost stand out), each mode in a fresh `selfprof record`, modes shuffled per round,
// medians (ranges) over rounds as ratios to "off" of the same round.
//
//   node benchmark/record-checkpoints.js [--rounds 3] [--seconds 20]
//
// Per run, in the recorded program: its requests per second of its main thread's CPU time
// and per second of the whole process's CPU time (the thread pool's builds of the
// checkpoints included), and the longest event-loop block in main-thread CPU time between
// the turns of a 1 ms ticker.

const { spawnSync } = require('node:child_process');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { parseArgs } = require('node:util');

const MODES = { off: '0', '5 s': '5000', '1 s': '1000' };

function app(seconds) {
  const { performance } = require('node:perf_hooks');
  const { withLabels } = require('..');
  const { native } = require('../lib/native');
  let ops = 0;
  const request = (i) => {
    const order = { id: i, items: Array.from({ length: 20 }, (_, k) => ({ sku: `sku-${k}`, qty: k % 3 })) };
    return JSON.parse(JSON.stringify(order)).items.length;
  };
  let lastCpu = native.threadCpuNs();
  let longest = 0;
  const tick = setInterval(() => {
    const cpu = native.threadCpuNs();
    longest = Math.max(longest, (cpu - lastCpu) / 1e6);
    lastCpu = cpu;
  }, 1);
  const main0 = native.threadCpuNs();
  const cpu0 = process.cpuUsage();
  const end = performance.now() + seconds * 1000;
  const run = () => {
    if (performance.now() < end) {
      const slice = performance.now() + 2;
      while (performance.now() < slice) {
        withLabels({ endpoint: ops % 2 ? 'POST /orders' : 'GET /cart', span_id: String(ops) }, request, ops);
        ops++;
      }
      return setImmediate(run);
    }
    clearInterval(tick);
    const cpu = process.cpuUsage(cpu0);
    fs.writeFileSync(process.env.BENCH_OUT, JSON.stringify({ ops, mainMs: (native.threadCpuNs() - main0) / 1e6, cpuMs: (cpu.user + cpu.system) / 1000, longest }));
  };
  run();
}

function median(xs) {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[s.length >> 1] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
}

function main() {
  const { values } = parseArgs({ options: { rounds: { type: 'string' }, seconds: { type: 'string' }, app: { type: 'boolean' } } });
  const seconds = Number(values.seconds ?? 20);
  if (values.app) return app(seconds);
  const rounds = Number(values.rounds ?? 3);
  const cli = path.join(__dirname, '..', 'bin', 'selfprof.js');
  const ratios = Object.fromEntries(Object.keys(MODES).map((m) => [m, { main: [], cpu: [], longest: [] }]));
  for (let r = 0; r < rounds; r++) {
    const order = Object.keys(MODES).sort(() => Math.random() - 0.5);
    const results = {};
    for (const mode of order) {
      const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'selfprof-bench-record-'));
      const out = path.join(dir, 'result.json');
      const run = spawnSync(process.execPath, [cli, 'record', '-o', path.join(dir, 'out'), '--', process.execPath, __filename, '--app', '--seconds', String(seconds)], {
        encoding: 'utf8',
        env: { ...process.env, SELFPROF_RECORD_CHECKPOINT_MS: MODES[mode], BENCH_OUT: out },
      });
      if (run.status !== 0) throw new Error(`${mode}: ${run.stderr}`);
      results[mode] = JSON.parse(fs.readFileSync(out, 'utf8'));
      fs.rmSync(dir, { recursive: true, force: true });
    }
    const base = results.off;
    for (const mode of Object.keys(MODES)) {
      const x = results[mode];
      ratios[mode].main.push(x.ops / x.mainMs / (base.ops / base.mainMs));
      ratios[mode].cpu.push(x.ops / x.cpuMs / (base.ops / base.cpuMs));
      ratios[mode].longest.push(x.longest);
    }
    process.stderr.write(`round ${r + 1}/${rounds}: ${order.map((m) => `${m} ${Math.round(results[m].ops / (results[m].mainMs / 1000))} req/main-CPU-s`).join(', ')}\n`);
  }
  const fmt = (xs, d = 3) => `${median(xs).toFixed(d)} (${Math.min(...xs).toFixed(d)}–${Math.max(...xs).toFixed(d)})`;
  console.log(`Node ${process.version}, ${rounds} rounds × ${seconds} s under selfprof record; median (range)`);
  console.log('| checkpoints | requests per main-thread CPU-s, × off | requests per process CPU-s, × off | longest block, ms |');
  console.log('| --- | --- | --- | --- |');
  for (const mode of Object.keys(MODES)) console.log(`| ${mode} | ${fmt(ratios[mode].main)} | ${fmt(ratios[mode].cpu)} | ${fmt(ratios[mode].longest, 1)} |`);
}

main();
