'use strict';
// What a WeakMap entry costs the collector when its key (a span, say) dies young: entries
// left in the map until their keys die, entries deleted before, and a symbol property on
// the key instead, each beside the same garbage a small request makes (~30 KB), against
// none of them. Prints each mode's CPU time over the median of --rounds runs, each in a
// fresh process (so one mode's heap never shapes another's).
//
//   node benchmark/weakmap-entries.js [--entries 300000] [--rounds 5]

const { spawnSync } = require('node:child_process');

const MODES = ['none', 'left', 'deleted', 'property'];

function arg(name, fallback) {
  const at = process.argv.indexOf(`--${name}`);
  return at >= 0 ? process.argv[at + 1] : fallback;
}

/** One run of `mode` over `entries` keys: the CPU milliseconds it took. */
function child(mode, entries) {
  const map = new WeakMap();
  const KEY = Symbol('entry');
  let batch = [];
  let sink = 0;
  const t0 = process.cpuUsage();
  for (let i = 0; i < entries; i++) {
    const span = { payload: new Array(40).fill(i), tags: { a: i, b: `x${i & 1023}` } };
    if (mode === 'left' || mode === 'deleted') map.set(span, { read: () => span.tags });
    else if (mode === 'property') span[KEY] = { read: () => span.tags };
    for (let j = 0; j < 60; j++) {
      const o = { a: j, b: [i, j, 'y'], c: { d: j } };
      sink += o.b.length;
    }
    sink += new Array(200).fill(i).length;
    batch.push(span);
    // A hundred requests at a time end (and, in `deleted`, take their entries out).
    if (batch.length > 100) {
      if (mode === 'deleted') for (const s of batch) map.delete(s);
      batch = [];
    }
  }
  const used = process.cpuUsage(t0);
  return { ms: (used.user + used.system) / 1000, sink };
}

if (process.argv[2] === '--child') {
  const { ms } = child(process.argv[3], Number(process.argv[4]));
  process.stdout.write(`${ms}\n`);
} else {
  const entries = Number(arg('entries', 300_000));
  const rounds = Number(arg('rounds', 5));
  if (!(entries >= 1000 && entries <= 1e8) || !(rounds >= 1 && rounds <= 100)) throw new Error('--entries 1000..1e8, --rounds 1..100');
  const times = Object.fromEntries(MODES.map((m) => [m, []]));
  for (let r = 0; r < rounds; r++) {
    for (const mode of MODES) {
      const out = spawnSync(process.execPath, [__filename, '--child', mode, String(entries)], { encoding: 'utf8' });
      if (out.status !== 0) throw new Error(`${mode}: ${out.stderr}`);
      times[mode].push(Number(out.stdout));
    }
  }
  const median = (xs) => [...xs].sort((a, b) => a - b)[xs.length >> 1];
  const none = median(times.none);
  console.log(`${entries} entries, node ${process.version}, median of ${rounds} runs (CPU ms; per entry over none)`);
  for (const mode of MODES) {
    const m = median(times[mode]);
    console.log(`${mode.padEnd(9)} ${m.toFixed(0).padStart(7)} ms  ${mode === 'none' ? '' : `${(((m - none) / entries) * 1000).toFixed(2)} µs an entry`}`);
  }
}
