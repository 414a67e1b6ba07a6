'use strict';
// The sending half of the exit's delivery (exit.js): the last profiles' HTTP requests,
// sent while the exiting thread waits. Runs as a worker thread, answering on a
// MessagePort; or, when NODE_OPTIONS preloads code into every thread (a tracer, an
// instrumentation: slow to load, and not to run here), as a Node process of its own
// started without NODE_OPTIONS, reading the requests from stdin and writing one line per
// settled request to stdout. Each group (one exporter's) is sent in order, the groups at
// once, every request by the deadline.

const wt = require('node:worker_threads');
const { performance } = require('node:perf_hooks');
const { send } = require('./exporters/uploader');

/** Marks the worker's workerData (a worker with another purpose never starts sending). */
const SENDER = 'selfprof.exitSender';

/**
 * Sends `groups` (arrays of `{ id, url, method, headers, body }`), each in order, all by
 * `budgetMs` from now; `settled(id, error?)` for each request answered or failed. A
 * request not begun by then is not settled.
 */
async function deliver(groups, budgetMs, settled) {
  const deadline = performance.now() + budgetMs;
  // The uploads' sockets and timers are unref'd: this keeps the loop alive meanwhile.
  const alive = setInterval(() => {}, 1 << 30);
  try {
    await Promise.all(
      groups.map(async (group) => {
        for (const { id, url, method, headers, body } of group) {
          const left = deadline - performance.now();
          if (left < 1) return;
          try {
            await send(url, { method, headers, body }, left);
            settled(id);
          } catch (err) {
            settled(id, err.message);
          }
        }
      }),
    );
  } finally {
    clearInterval(alive);
  }
}

/**
 * The input a sender process reads: a line of JSON (`deadline`, in Date.now()'s ms; the
 * groups with each body's length), then the bodies' bytes in their order.
 */
function encodeInput(groups, deadline) {
  const bodies = groups.flat().map((r) => r.body);
  const head = { deadline, groups: groups.map((g) => g.map(({ body, ...r }) => ({ ...r, length: body.length }))) };
  return Buffer.concat([Buffer.from(`${JSON.stringify(head)}\n`), ...bodies]);
}

function decodeInput(bytes) {
  const nl = bytes.indexOf(10);
  const head = JSON.parse(bytes.subarray(0, nl).toString());
  let at = nl + 1;
  const groups = head.groups.map((g) =>
    g.map(({ length, ...r }) => {
      const body = bytes.subarray(at, at + length);
      at += length;
      return { ...r, body };
    }),
  );
  return { deadline: head.deadline, groups };
}

if (!wt.isMainThread && wt.workerData?.[SENDER]) {
  const { port, flag, budgetMs, groups } = wt.workerData[SENDER];
  const done = () => {
    Atomics.store(flag, 0, 1);
    Atomics.notify(flag, 0);
  };
  deliver(
    groups.map((g) => g.map((r) => ({ ...r, body: Buffer.from(r.body) }))),
    budgetMs,
    (id, error) => port.postMessage({ id, error }),
  ).then(done, done);
} else if (wt.isMainThread && require.main === module) {
  const chunks = [];
  process.stdin.on('data', (c) => chunks.push(c));
  process.stdin.on('end', () => {
    const { deadline, groups } = decodeInput(Buffer.concat(chunks));
    deliver(groups, deadline - Date.now(), (id, error) => process.stdout.write(`${JSON.stringify({ id, error })}\n`));
  });
}

module.exports = { SENDER, encodeInput, deliver };
