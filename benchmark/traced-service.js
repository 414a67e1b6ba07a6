'use strict';
// What a traced service pays for profiling, as teams run it: the Express service of
// served.js under OpenTelemetry or dd-trace, profiled by selfprof's service mode at its
// defaults (99 Hz, heap on, labels from the tracer, a profile a minute to the file
// exporter), beside the tracer alone, V8's bare inspector Profiler at 99 Hz (the limit) and
// dd-trace's own profiler at its defaults (wall with endpoint labels, heap; dd-trace only).
// Every mode's server runs at once on the server core, one client process keeping each busy
// (served.js), for --rounds rounds; requests per server CPU-second, paired within each
// round, median [min, max] over the rounds.
//
// --in-turn warms every mode's server at once, then drives each alone for --seconds, in a
// new shuffled order each round, the others idle: each server has the core, its caches and
// its profiler's signals to itself, as in a service, where served together nine servers
// share them and a request pays a sample's costs about ten times as often.
// A mode named again with `#2` (`service-nolabels#2`) is a second server of that mode: its
// ratio to the first is what the benchmark cannot tell from nothing (an A/A control).
//
//   node benchmark/traced-service.js --tracer otel|dd-trace [--node PATH] [--rounds 7]
//        [--seconds 3] [--warmup 15 | --warmup-requests N] [--modes a,b,...] [--baseline DIR] [--in-turn]
//
// --warmup is the seconds each round's servers are driven before its window. A
// service runs warmed up: after 2 s of requests V8 was still compiling (its workers' CPU
// ~100 µs a request, a third of the request; ~8 µs after 15 s), and a mode that tiers up
// later (labels did) paid its compiling in the window (docs/performance.md, 2026-12-02).
// --warmup-requests N warms until every server has served N requests instead: served
// together, a server gets a share of the core, and on Node 20 under dd-trace 15 s left V8
// compiling (a few thousand requests each; docs/performance.md, 2026-12-02).
//
// Modes (--modes picks; the tracer alone always runs):
//   tracer                   the tracer, no profiler
//   inspector                V8's inspector Profiler at 99 Hz, nothing else
//   dd-profiler              dd-trace's profiler, its defaults (dd-trace only)
//   dd-profiler-nolabels     the same without its span labels (code hotspots and endpoint
//                            collection off): what the peer's own labels cost it
//   service                  selfprof's service mode, its defaults
//   service-nolabels         the same with spanLabels: false (SELFPROF_SPAN_LABELS=0)
//   service-noheap           the same with heap: false
//   service-nolabels-noheap  both off
//   service-listened         service mode without tracer labels, but with listeners that do
//                            nothing where selfprof's integration listens (dd-trace's span
//                            channels, an OpenTelemetry span processor): what the tracer
//                            itself spends telling a listener, apart from selfprof's work
//   service-labels-off       service mode with tracer labels, set up and proved, then their
//                            dynamic parts turned off at the first measure (OpenTelemetry's
//                            span processor out of the provider, the handler's frame read
//                            off): what labels cost once set up, apart from their work per
//                            request and sample (which processor-toggled.js measures)
//   service-withlabels       service mode without tracer labels, each request labeled by a
//                            withLabels({ endpoint, span_id }) middleware instead: what the
//                            integrations are held to (issue 49: no more than withLabels)
//   baseline                 service mode at its defaults from --baseline DIR (another
//                            checkout, built): a change's before and after in one run

const path = require('node:path');
const fs = require('node:fs');
const os = require('node:os');
const { spawnSync } = require('node:child_process');
const { parseArgs } = require('node:util');
const { median, range, shuffle, serve, runTogether, startTracer, expressService, labelsSwitch, startInspectorProfiler } = require('./served');

const { values: opts } = parseArgs({
  options: {
    tracer: { type: 'string' },
    node: { type: 'string', default: process.execPath },
    rounds: { type: 'string', default: '7' },
    seconds: { type: 'string', default: '3' },
    warmup: { type: 'string', default: '15' },
    'warmup-requests': { type: 'string', default: '0' },
    modes: { type: 'string' },
    baseline: { type: 'string' },
    server: { type: 'string' },
    'in-turn': { type: 'boolean', default: false },
  },
  strict: true,
});

const MODES = {
  tracer: 'the tracer alone',
  inspector: 'bare inspector Profiler, 99 Hz',
  'dd-profiler': "dd-trace's profiler (defaults)",
  'dd-profiler-nolabels': "dd-trace's profiler, no span labels",
  service: 'selfprof service mode (defaults)',
  'service-nolabels': 'service mode, no tracer labels',
  'service-noheap': 'service mode, no heap',
  'service-nolabels-noheap': 'service mode, no labels, no heap',
  'service-listened': 'service mode, no labels, listened',
  'service-withlabels': 'service mode, withLabels instead',
  'service-labels-off': 'service mode, labels set up, then off',
  baseline: 'service mode (defaults), baseline',
};
const TRACERS = ['otel', 'dd-trace'];
if (!TRACERS.includes(opts.tracer)) throw new Error(`--tracer is otel or dd-trace, not ${opts.tracer}`);
const INTERVAL_MS = 1000 / 99;

/** Starts `mode` in this process (a server); returns what stops its profiler. */
async function startMode(mode) {
  const selfprof = mode === 'baseline' ? require(process.env.SELFPROF_BASELINE) : require('..');
  if (mode === 'dd-profiler' || mode === 'dd-profiler-nolabels') {
    const off = mode === 'dd-profiler-nolabels' ? { DD_PROFILING_CODEHOTSPOTS_ENABLED: 'false', DD_PROFILING_ENDPOINT_COLLECTION_ENABLED: 'false' } : {};
    startTracer('dd-trace', { ddOptions: { profiling: true }, ddEnv: { DD_PROFILING_ENABLED: 'true', ...off } });
    return async () => {};
  }
  // service-listened: OpenTelemetry's no-op processor goes in as the provider is made.
  const listened = mode === 'service-listened';
  provider = startTracer(opts.tracer, listened && opts.tracer === 'otel' ? { spanProcessors: [NOOP_PROCESSOR] } : {});
  if (listened && opts.tracer === 'dd-trace') {
    const dc = require('node:diagnostics_channel');
    for (const name of ['dd-trace:span:start', 'dd-trace:span:finish']) dc.subscribe(name, () => {});
  }
  if (mode === 'inspector') {
    return startInspectorProfiler(INTERVAL_MS);
  }
  if (mode.startsWith('service') || mode === 'baseline') {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'selfprof-traced-service-'));
    process.on('exit', () => fs.rmSync(dir, { recursive: true, force: true }));
    const session = selfprof.start({
      service: 'traced-service',
      exporters: [{ type: 'file', dir }],
      ...(mode.includes('nolabels') || mode === 'service-withlabels' || mode === 'service-listened' ? { spanLabels: false } : {}),
      ...(mode.includes('noheap') ? { heap: false } : {}),
    });
    return async () => {
      await session.stop?.();
    };
  }
  return async () => {};
}

/** The tracer's provider (OpenTelemetry). */
let provider = null;

/** A span processor that does nothing (service-listened). */
const NOOP_PROCESSOR = { onStart() {}, onEnd() {}, forceFlush: async () => {}, shutdown: async () => {} };

/** The mode a server runs: `service-nolabels#2` is a second `service-nolabels`. */
const modeOf = (name) => name.replace(/#\d+$/, '');

async function server(name) {
  const mode = modeOf(name);
  const stop = await startMode(mode);
  let requests = 0;
  // withLabels per request, as an app without a tracer integration would label it.
  const { withLabels } = require('..');
  const routes = { users: 'GET /users/:id', orders: 'POST /orders', search: 'GET /search/:q', health: 'GET /health' };
  const labeled =
    mode === 'service-withlabels'
      ? (req, res, next) => withLabels({ endpoint: routes[req.url.split('/')[1]] ?? 'other', span_id: (0x10000000 + requests).toString(16).padStart(16, '0') }, next)
      : null;
  // How selfprof's modes labeled samples (a label path not taken shows here).
  const root = mode === 'baseline' ? process.env.SELFPROF_BASELINE : path.join(__dirname, '..');
  const info = () => (mode.startsWith('service') || mode === 'baseline' ? require(path.join(root, 'lib', 'capture', 'labels')).labelState?.() : undefined);
  // The signals selfprof's sampler sent (process-wide), for the signals a request.
  const native = mode.startsWith('service') || mode === 'baseline' ? require(path.join(root, 'lib', 'native')).native : undefined;
  const signals = typeof native?.signalCount === 'function' ? () => native.signalCount() : () => undefined;
  if (mode === 'service-labels-off') {
    if (opts.tracer !== 'otel') throw new Error('service-labels-off is a mode of --tracer otel');
    // At the first measure: after the warm-up's requests set the labels up and proved them.
    const off = (msg) => {
      if (msg !== 'mark') return;
      process.off('message', off);
      // The labels' work per request and per sample off; their set-up left as it is.
      labelsSwitch(provider)(false, { frame: true });
    };
    process.on('message', off);
  }
  serve(expressService(() => requests++, labeled), () => requests, stop, info, signals);
}

function modesOf() {
  // withLabels' and the listeners' modes run when --modes names them.
  const all = Object.keys(MODES).filter((m) => (!m.startsWith('dd-profiler') || opts.tracer === 'dd-trace') && (m !== 'baseline' || opts.baseline));
  const byDefault = all.filter((m) => !['service-withlabels', 'service-listened', 'dd-profiler-nolabels', 'service-labels-off'].includes(m));
  const asked = opts.modes?.split(',') ?? byDefault;
  for (const m of asked) if (!all.includes(modeOf(m))) throw new Error(`no mode ${m} here: ${all.join(', ')}`);
  if (new Set(asked).size !== asked.length) throw new Error(`a mode named twice in --modes: ${opts.modes} (a second server of a mode is MODE#2)`);
  return ['tracer', ...asked.filter((m) => m !== 'tracer')];
}

async function parent() {
  const rounds = Number(opts.rounds);
  const seconds = Number(opts.seconds);
  const warmupMs = Number(opts.warmup) * 1000;
  if (!(Number.isInteger(rounds) && rounds >= 1 && rounds <= 100)) throw new Error(`--rounds is 1 to 100, not ${opts.rounds}`);
  if (!(seconds > 0 && seconds <= 600)) throw new Error(`--seconds is over 0 and at most 600, not ${opts.seconds}`);
  if (!(warmupMs >= 0 && warmupMs <= 600_000)) throw new Error(`--warmup is 0 to 600 seconds, not ${opts.warmup}`);
  const warmupRequests = Number(opts['warmup-requests']);
  if (process.argv.some((a) => a === '--warmup' || a.startsWith('--warmup=')) && process.argv.some((a) => a.startsWith('--warmup-requests'))) {
    throw new Error('--warmup and --warmup-requests are two ways to warm up: give one');
  }
  if (!(Number.isInteger(warmupRequests) && warmupRequests >= 0 && warmupRequests <= 1_000_000)) throw new Error(`--warmup-requests is a whole number 0 to 1000000, not ${opts['warmup-requests']}`);
  const modes = modesOf();
  const version = spawnSync(opts.node, ['--version'], { encoding: 'utf8' }).stdout.trim();
  const inTurn = opts['in-turn'];
  const how = inTurn ? 'each mode alone in turn on one core' : 'every mode at once on one core';
  const warmed = warmupRequests > 0 ? `warmed until each server served ${warmupRequests} requests` : `warmed ${opts.warmup} s`;
  console.log(`traced service (Express under ${opts.tracer}): node ${version}, ${rounds} rounds × ${seconds} s, ${how}, ${warmed}`);
  const env = opts.baseline ? { SELFPROF_BASELINE: path.resolve(opts.baseline) } : {};
  const perRound = [];
  for (let round = 0; round < rounds; round++) {
    perRound.push(
      await runTogether({ node: opts.node, script: __filename, modes: shuffle(modes), serverArgs: ['--tracer', opts.tracer], seconds, warmupMs, warmupRequests, env, inTurn }),
    );
    process.stderr.write(`round ${round + 1}/${rounds} done\n`);
  }
  const ratios = (mode, other) => perRound.map((got) => got[mode].perCpuSecond / got[other].perCpuSecond);
  const last = perRound[perRound.length - 1];
  const title = (mode) => (mode === modeOf(mode) ? MODES[mode] : `${MODES[modeOf(mode)]} (${mode.slice(modeOf(mode).length)})`);
  for (const mode of modes) if (last[mode].info) console.log(`${title(mode)}: labels ${JSON.stringify(last[mode].info)}`);
  console.log('\nrequests per server CPU-second, × the tracer alone, median [min, max] of the rounds');
  for (const mode of modes) {
    const cpu = median(perRound.map((got) => got[mode].perCpuSecond));
    // In turn, a server kept busy is on its core ~100% of its window (less: its client lagged).
    const busy = inTurn ? `  busy ${range(perRound.map((got) => got[mode].busy))}` : '';
    console.log(`${title(mode).padEnd(36)}${cpu.toFixed(0).padStart(8)}  ${range(ratios(mode, 'tracer'))}${busy}`);
  }
  // Node >= 22 splits a request's CPU by thread (process.threadCpuUsage).
  // With selfprof's signals a request: a request pays a sample's costs that many times.
  if (perRound[0].tracer.perRequest) console.log('\nCPU µs a request, medians: main thread user, system; other threads user, system; selfprof\'s signals a request');
  for (const mode of perRound[0].tracer.perRequest ? modes : []) {
    const cols = ['mainUser', 'mainSystem', 'otherUser', 'otherSystem'].map((k) => median(perRound.map((got) => got[mode].perRequest?.[k] ?? NaN)).toFixed(1).padStart(8));
    const signals = median(perRound.map((got) => got[mode].signalsPerRequest ?? NaN));
    console.log(`${title(mode).padEnd(36)}${cols.join('')}${Number.isNaN(signals) ? '' : signals.toFixed(3).padStart(8)}`);
  }
  // By thread name (Linux): which of the process's threads a mode's extra CPU is on.
  const names = [...new Set(perRound.flatMap((got) => modes.flatMap((mode) => Object.keys(got[mode].byThread ?? {}))))].sort();
  if (names.length > 0) {
    console.log(`\nCPU µs a request by thread name (all of a name summed), medians:\n${''.padEnd(36)}${names.map((n) => n.slice(0, 15).padStart(17)).join('')}`);
    for (const mode of modes) {
      const cols = names.map((n) => median(perRound.map((got) => got[mode].byThread?.[n] ?? 0)).toFixed(1).padStart(17));
      console.log(`${title(mode).padEnd(36)}${cols.join('')}`);
    }
  }
  // The targets of issue 49, each paired within its rounds.
  console.log('\npaired within each round, median [min, max]');
  const pairs = [
    ['service', 'service-nolabels', 'labels ÷ no labels (target ≥ 0.985 on Node 24/26, ≥ 0.975 on 20)'],
    ['service-noheap', 'service-nolabels-noheap', 'labels ÷ no labels, without heap'],
    ['service', 'dd-profiler', "selfprof ÷ dd-trace's profiler (target ≥ 1.15)"],
    ['dd-profiler', 'dd-profiler-nolabels', "dd-trace's profiler: its span labels ÷ none (the peer's cost of labels)"],
    ['service-nolabels', 'dd-profiler-nolabels', "selfprof ÷ dd-trace's profiler, neither labeling"],
    ['service-nolabels-noheap', 'inspector', 'selfprof without labels or heap ÷ the bare inspector (target ≥ 0.98)'],
    ['service', 'baseline', 'service mode ÷ the baseline'],
    ['service-listened', 'service-nolabels', "the tracer telling listeners that do nothing ÷ no labels"],
    ['service', 'service-listened', "labels ÷ the tracer telling listeners that do nothing (selfprof's own work)"],
    ['service-withlabels', 'service-nolabels', 'withLabels a request ÷ no labels (what the integrations are held to on Node 20, 22)'],
    ['service-labels-off', 'service-nolabels', 'labels set up, then off ÷ no labels (what labels cost apart from their work)'],
    ['service', 'service-labels-off', 'labels ÷ labels set up, then off (their work per request and sample)'],
  ];
  for (const mode of modes) if (mode !== modeOf(mode) && modes.includes(modeOf(mode))) pairs.push([mode, modeOf(mode), `${mode} ÷ ${modeOf(mode)} (the same mode twice: what this run cannot tell from nothing)`]);
  for (const [a, b, what] of pairs) if (modes.includes(a) && modes.includes(b)) console.log(`${what}: ${range(ratios(a, b))}`);
}

const fail = (err) => {
  console.error(err);
  process.exit(1);
};
if (opts.server) server(opts.server).catch(fail);
else parent().catch(fail);
