'use strict';
// Where a traced request's labels allocate, by selfprof's own functions: the Express
// service of benchmark/served.js under a tracer (otel: OpenTelemetry's http and Express
// instrumentations with selfprof's span processor; dd-trace: its plugins with selfprof's
// integration), a Profiler running, loaded from this process. V8's sampling heap profiler
// (every --bytes bytes, objects already collected included) weighs each allocation to the
// innermost frame of lib/ on its stack; printed in bytes a request, largest first.
// With --interval 1000 (the default) a request's costs are not mixed with a sample's (a
// sampled pair's labels worked out when drained); --interval 10 shows those too.
//
//   node benchmark/label-allocation-sites.js [--tracer otel|dd-trace] [--interval 1000]
//                                            [--requests 6000] [--bytes 64] [--top 20]

const path = require('node:path');
const http = require('node:http');
const inspector = require('node:inspector');
const served = require('./served');

const root = path.join(__dirname, '..');
const LIB = `${path.join(root, 'lib')}${path.sep}`;

function arg(name, fallback) {
  const at = process.argv.indexOf(`--${name}`);
  return at >= 0 ? process.argv[at + 1] : fallback;
}
const TRACER = arg('tracer', 'otel');
const INTERVAL = Number(arg('interval', 1000));
const REQUESTS = Number(arg('requests', 6000));
const BYTES = Number(arg('bytes', 64));
const TOP = Number(arg('top', 20));
if (!['otel', 'dd-trace'].includes(TRACER)) throw new Error(`--tracer is otel or dd-trace, not ${TRACER}`);

const selfprof = require(root);
if (TRACER === 'otel') served.startTracer('otel', { spanProcessors: [selfprof.openTelemetrySpanProcessor()] });
else {
  served.startTracer('dd-trace');
  selfprof.ddTraceIntegration();
}
const server = served.expressService();

const session = new inspector.Session();
session.connect();
const post = (method, params) => new Promise((resolve, reject) => session.post(method, params, (err, r) => (err ? reject(err) : resolve(r))));

/** Each allocation's bytes, by the innermost frame of lib/ on its stack. */
function bySelfprofFrame(profile) {
  const sites = new Map();
  const walk = (node, mine) => {
    const f = node.callFrame;
    const file = f.url.startsWith('file://') ? f.url.slice('file://'.length) : f.url;
    const here = file.startsWith(LIB) ? `${f.functionName || '(anonymous)'} ${path.relative(root, file)}:${f.lineNumber + 1}` : mine;
    if (node.selfSize > 0 && here !== undefined) sites.set(here, (sites.get(here) ?? 0) + node.selfSize);
    for (const child of node.children) walk(child, here);
  };
  walk(profile.head, undefined);
  return sites;
}

server.listen(0, '127.0.0.1', async () => {
  const agent = new http.Agent({ keepAlive: true });
  const port = server.address().port;
  const get = (p) =>
    new Promise((resolve, reject) => {
      http.get({ port, host: '127.0.0.1', path: p, agent }, (res) => res.resume().on('end', resolve)).on('error', reject);
    });
  const profiler = new selfprof.Profiler({ sampleInterval: INTERVAL, maxBufferSize: 1_000_000 });
  for (let i = 0; i < 2000; i++) await get(`/users/${i}`); // warm-up: code optimized, caches filled
  await post('HeapProfiler.startSampling', { samplingInterval: BYTES, includeObjectsCollectedByMajorGC: true, includeObjectsCollectedByMinorGC: true });
  for (let i = 0; i < REQUESTS; i++) await get(`/users/${i}`);
  const { profile } = await post('HeapProfiler.stopSampling');
  const trace = await profiler.stop();
  const sites = [...bySelfprofFrame(profile)].sort((a, b) => b[1] - a[1]);
  const total = sites.reduce((sum, [, bytes]) => sum + bytes, 0);
  console.log(`${TRACER}: selfprof's frames allocated ${(total / REQUESTS).toFixed(0)} B a request (${REQUESTS} requests, sampling every ${INTERVAL} ms: ${trace.samples.length} samples; node ${process.version})`);
  for (const [site, bytes] of sites.slice(0, TOP)) console.log(`${(bytes / REQUESTS).toFixed(1).padStart(9)} B  ${site}`);
  process.exit(0);
});
