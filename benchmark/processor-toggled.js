'use strict';
// What selfprof's OpenTelemetry span processor costs a request, measured in one server:
// the Express service of served.js under OpenTelemetry, selfprof's service mode at its
// defaults, its span processor taken out of the provider's list and put back every
// --window ms, in a shuffled order within each pair of windows, while one client process
// keeps the server busy throughout. With `--toggle labels`, the signal handler's read of
// the async context frame goes off and on with it: the samples' labels whole (their
// drain too, as nothing is queued), all but the frame reader's GC callbacks. Requests per server CPU-second, each window with the
// processor ÷ its pair's without, median [min, max]; and, as the control, the same ratio
// between two windows in the same state (what the run cannot tell from nothing).
//
// Paired within one process, a few hundred ms apart, the machine's drift and the
// process's own heap and code layout fall on both sides alike, which across servers
// (traced-service.js) they do not. What it cannot see: what the processor's presence does
// to code both states share (the SDK's call to its processors is polymorphic in both), and
// what labels cost outside the processor (the frame reader, the drain).
//
//   node benchmark/processor-toggled.js [--node PATH] [--seconds 120] [--window 500]
//        [--toggle processor|labels]

const path = require('node:path');
const { spawn, spawnSync } = require('node:child_process');
const { parseArgs } = require('node:util');
const fs = require('node:fs');
const os = require('node:os');
const { median, range, shuffle, pinned, startTracer, expressService, labelsSwitch } = require('./served');

const { values: opts } = parseArgs({
  options: {
    node: { type: 'string', default: process.execPath },
    seconds: { type: 'string', default: '120' },
    window: { type: 'string', default: '500' },
    toggle: { type: 'string', default: 'processor' },
    server: { type: 'boolean', default: false },
  },
  strict: true,
});

/** The server: toggles the processor at the parent's 'window' messages, reports each window. */
function server() {
  const provider = startTracer('otel');
  const selfprof = require('..');
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'selfprof-processor-toggled-'));
  process.on('exit', () => fs.rmSync(dir, { recursive: true, force: true }));
  const session = selfprof.start({ service: 'processor-toggled', exporters: [{ type: 'file', dir }] });
  let requests = 0;
  const srv = expressService(() => requests++);
  srv.keepAliveTimeout = 60_000;
  srv.listen(0, '127.0.0.1', () => process.stdout.write(`${srv.address().port}\n`));
  // Made at the first window, once the processor is in the list (wired at start).
  let set = null;
  let mark = null;
  process.on('message', async (msg) => {
    if (msg.window !== undefined) {
      const cpu = process.cpuUsage();
      const main = process.threadCpuUsage?.();
      if (mark) {
        const used = process.cpuUsage(mark.cpu);
        const count = requests - mark.requests;
        // The main thread's CPU µs a request, where Node splits it by thread (>= 23.9).
        const mainUs = main ? (main.user - mark.main.user + main.system - mark.main.system) / count : undefined;
        process.send({ on: mark.on, perCpuSecond: count / ((used.user + used.system) / 1e6), mainUs });
      }
      set ??= labelsSwitch(provider);
      set(msg.window, { frame: opts.toggle === 'labels' });
      mark = { on: msg.window, requests, cpu, main };
    } else if (msg === 'stop') {
      // How samples were labeled (the frame's path, OpenTelemetry's contexts read there).
      process.send({ labels: require('../lib/capture/labels').labelState() });
      await session.stop();
      srv.close();
      process.exit(0);
    }
  });
}

async function parent() {
  const seconds = Number(opts.seconds);
  const windowMs = Number(opts.window);
  if (!(seconds >= 10 && seconds <= 3600)) throw new Error(`--seconds is 10 to 3600, not ${opts.seconds}`);
  if (!(windowMs >= 50 && windowMs <= 60_000)) throw new Error(`--window is 50 to 60000 ms, not ${opts.window}`);
  if (!['processor', 'labels'].includes(opts.toggle)) throw new Error(`--toggle is processor or labels, not ${opts.toggle}`);
  const srv = spawn(...pinned(1, [opts.node, __filename, '--server', '--toggle', opts.toggle]), { cwd: path.join(__dirname, '..'), stdio: ['ignore', 'pipe', 'inherit', 'ipc'] });
  const port = await new Promise((resolve) => srv.stdout.once('data', (d) => resolve(Number(d))));
  const warmup = 5;
  const client = spawn(...pinned(0, [opts.node, path.join(__dirname, 'served.js'), '--client', String(port), '--seconds', String(seconds + 60), '--warmup', String(warmup)]), { stdio: ['ignore', 'ignore', 'inherit'] });
  const windows = [];
  let labels;
  srv.on('message', (w) => (w.labels ? (labels = w.labels) : windows.push(w)));
  await new Promise((r) => setTimeout(r, warmup * 1000));
  // Pairs of windows, each pair in a shuffled order; four kinds of pair: on/off twice, and
  // on/on and off/off as the controls.
  const kinds = [];
  const pairs = Math.floor((seconds * 1000) / windowMs / 2) - 1;
  for (let i = 0; i < pairs; i++) kinds.push(i % 4 === 2 ? [true, true] : i % 4 === 3 ? [false, false] : shuffle([true, false]));
  const schedule = kinds.flat();
  for (const on of schedule) {
    srv.send({ window: on });
    await new Promise((r) => setTimeout(r, windowMs));
  }
  srv.send({ window: false });
  await new Promise((r) => setTimeout(r, 200));
  // The client's own count is not needed: the server counted each window.
  client.kill();
  srv.send('stop');
  await new Promise((r) => srv.on('exit', r));
  const ratios = { versus: [], controlOn: [], controlOff: [], mainUs: [] };
  for (let i = 0; i + 1 < windows.length && i / 2 < kinds.length; i += 2) {
    const [a, b] = [windows[i], windows[i + 1]];
    if (a.on === b.on) (a.on ? ratios.controlOn : ratios.controlOff).push(a.perCpuSecond / b.perCpuSecond);
    else {
      const [on, off] = a.on ? [a, b] : [b, a];
      ratios.versus.push(on.perCpuSecond / off.perCpuSecond);
      if (on.mainUs !== undefined) ratios.mainUs.push(on.mainUs - off.mainUs);
    }
  }
  const version = spawnSync(opts.node, ['--version'], { encoding: 'utf8' }).stdout.trim();
  console.log(`${opts.toggle} toggled (Express under OpenTelemetry, service mode): node ${version}, ${seconds} s in ${windowMs} ms windows`);
  console.log(`labels: ${JSON.stringify(labels)}`);
  console.log(`requests per CPU-second, with ${median(windows.filter((w) => w.on).map((w) => w.perCpuSecond)).toFixed(0)}, without ${median(windows.filter((w) => !w.on).map((w) => w.perCpuSecond)).toFixed(0)} (medians)`);
  console.log(`with the ${opts.toggle} ÷ without, paired: ${range(ratios.versus)} (${ratios.versus.length} pairs)`);
  if (ratios.mainUs.length) console.log(`the main thread's CPU µs a request, with − without, paired: ${range(ratios.mainUs)}`);
  console.log(`control, with ÷ with: ${range(ratios.controlOn)} (${ratios.controlOn.length}); without ÷ without: ${range(ratios.controlOff)} (${ratios.controlOff.length})`);
}

const fail = (err) => {
  console.error(err);
  process.exit(1);
};
if (opts.server) server();
else parent().catch(fail);
