'use strict';
// Service mode at the process's end: every session's last profile is shipped however the
// process ends, or one warning per exporter says what could not be.
//
// - The event loop empties (`beforeExit`), or SIGTERM/SIGINT comes to an app without a
//   handler of its own: each session stops as `stop()` does (its uploads within
//   EXIT_BUDGET_MS), then the signal is raised again so that it ends the process.
// - A signal the app (or a library) handles is the app's: selfprof stops listening for it,
//   ships what was recorded so far at once (a listener may end the process before another
//   turn of the event loop, as signal-exit does), and profiling goes on; whatever end the
//   app then chooses (`process.exit()` in its handler, or the loop emptying) ships the rest.
// - `process.exit()` (also from a signal handler, or with `process.exitCode`), or an
//   uncaught exception: only the 'exit' event runs, and nothing after it. There each
//   session's last period is built on this thread, the file exporter writes it
//   synchronously, and the HTTP exporters' requests (with any profile still waiting in
//   their queues) are sent by a helper (exit-sender.js) while this thread waits, all within
//   EXIT_BUDGET_MS. The exit code is the app's; its exit takes at most that much longer.

const path = require('node:path');
const wt = require('node:worker_threads');
const { spawnSync } = require('node:child_process');
const { performance } = require('node:perf_hooks');
const { redact } = require('./exporters/uploader');
const { SENDER, encodeInput } = require('./exit-sender');

/** How much the end of the process waits, at most, for the last profiles. */
const EXIT_BUDGET_MS = 2000;
const SENDER_PATH = path.join(__dirname, 'exit-sender.js');
/** Marks selfprof's own signal listeners (of any copy of it): they are not the app's. */
const OWN_LISTENER = Symbol.for('selfprof.signalListener');

/** Whether the app (not selfprof) listens for `signal`. */
const appHandles = (signal) => process.listeners(signal).some((l) => !l[OWN_LISTENER]);

/**
 * One set of exit handlers for every session in the process. Per-session handlers would
 * let the first session to finish end the process under the others' uploads.
 */
const exitGuard = {
  sessions: new Set(),
  handlers: null,

  add(session) {
    this.sessions.add(session);
    if (this.handlers) return;
    const stopAll = () => Promise.allSettled([...this.sessions].map((s) => s.stop()));
    const onSignal = (signal) => {
      if (appHandles(signal)) {
        const reRaise = onlySignalExitBefore(signal, onSignal);
        this.uninstall([signal]);
        atHandledSignal(signal, [...this.sessions], reRaise);
        return;
      }
      this.uninstall(['SIGTERM', 'SIGINT', 'beforeExit']);
      const sessions = [...this.sessions];
      let raised = false;
      let stopped = false;
      const raise = () => {
        if (raised) return;
        raised = true;
        // Time ran out first (an event loop held for seconds): what the stops had not
        // delivered is said now, or the signal would end the process with it unsaid.
        if (!stopped) for (const s of sessions) s.abandonNow(signal);
        if (!appHandles(signal)) process.kill(process.pid, signal);
      };
      setTimeout(raise, EXIT_BUDGET_MS + 500);
      // After the warnings stop() emitted (process.emitWarning writes on a later tick).
      stopAll().then(() => {
        stopped = true;
        setImmediate(raise);
      });
    };
    onSignal[OWN_LISTENER] = true;
    this.handlers = [
      ['beforeExit', () => stopAll()],
      ['SIGTERM', onSignal],
      ['SIGINT', onSignal],
      ['exit', () => atExit([...this.sessions])],
    ];
    for (const [event, handler] of this.handlers) process.on(event, handler);
  },

  remove(session) {
    this.sessions.delete(session);
    if (this.sessions.size === 0) this.uninstall();
  },

  /** Removes the handlers of `events` (default: all). */
  uninstall(events) {
    for (const [event, handler] of this.handlers ?? []) if (!events || events.includes(event)) process.removeListener(event, handler);
    if (this.handlers) this.handlers = events ? this.handlers.filter(([event]) => !events.includes(event)) : null;
  },
};

/**
 * How many listeners signal-exit (v3 and v4: many libraries' way to hear that the process
 * ends) has on each signal: it raises the signal again when its own are all there are.
 */
function signalExitListeners() {
  const v4 = /** @type {any} */ (globalThis)[Symbol.for('signal-exit emitter')]?.count;
  const v3 = /** @type {any} */ (process).__signal_exit_emitter__?.count;
  return (typeof v4 === 'number' ? v4 : 0) + (typeof v3 === 'number' ? v3 : 0);
}

/**
 * Whether the other listeners of `signal` are signal-exit's alone, and all ran before
 * `mine`: they saw it and let the signal be, which they would not have without it.
 */
function onlySignalExitBefore(signal, mine) {
  const listeners = process.listeners(signal);
  const others = listeners.filter((l) => !l[OWN_LISTENER]);
  const after = listeners.slice(listeners.indexOf(mine) + 1).filter((l) => !l[OWN_LISTENER]);
  return others.length > 0 && others.length === signalExitListeners() && after.length === 0;
}

/**
 * A signal the app (or a library) listens for too: its listeners decide the end, and one
 * may end the process before another turn of the event loop (signal-exit raises the
 * signal again once its listeners are the last). So selfprof stops listening for it (out
 * of their way), and what each session recorded so far is shipped now, synchronously
 * (within EXIT_BUDGET_MS); the sessions go on, and the end the app chooses ships the
 * rest. signal-exit's listeners that ran before selfprof's saw it and let the signal be:
 * it is raised again for them (`reRaise`).
 */
function atHandledSignal(signal, sessions, reRaise) {
  const deadline = performance.now() + EXIT_BUDGET_MS;
  deliver(
    sessions.flatMap((s) => s.atSignal(deadline, signal)),
    deadline,
    `at ${signal}`,
  );
  if (reRaise) process.kill(process.pid, signal);
}

/**
 * The 'exit' event: each session's last profile built here, and with what the exporters
 * have not delivered, written or sent before the process ends (EXIT_BUDGET_MS for all).
 */
function atExit(sessions) {
  const deadline = performance.now() + EXIT_BUDGET_MS;
  const work = sessions.flatMap((s) => s.atExit(deadline));
  deliver(work, deadline);
}

/**
 * Writes and sends `work` (`[{ exporter, profiles }]`) by `deadline`: files at once, the
 * HTTP requests by sendSync; then one warning per exporter naming what did not arrive
 * (`when`: "at exit", "at SIGTERM").
 */
function deliver(work, deadline, when = 'at exit') {
  const groups = [];
  const outcomes = [];
  const lose = (outcome, profile, reason) => {
    if (!outcome.lost.includes(profile)) outcome.lost.push(profile);
    outcome.reason = reason;
  };
  let next = 0;
  for (const { exporter, profiles } of work) {
    if (!profiles.length) continue;
    const outcome = { exporter, lost: [], reason: '', requests: [] };
    outcomes.push(outcome);
    const group = [];
    for (const profile of profiles) {
      try {
        if (exporter.exitWrite) exporter.exitWrite(profile);
        else {
          for (const request of exporter.exitRequests(profile)) {
            group.push({ id: next, ...request });
            outcome.requests.push({ id: next++, profile, url: request.url });
          }
        }
      } catch (err) {
        lose(outcome, profile, err.message);
      }
    }
    if (group.length) groups.push(group);
  }
  const results = groups.length ? sendSync(groups, deadline) : new Map();
  for (const outcome of outcomes) {
    for (const { id, profile, url } of outcome.requests) {
      const error = results.get(id);
      if (error === null) continue;
      lose(outcome, profile, error ?? `upload to ${redact(url)} got no answer within the ${EXIT_BUDGET_MS / 1000} s it had`);
    }
    const { exporter, lost, reason } = outcome;
    if (lost.length) exporter.warnLost(lost, when, reason, true);
  }
}

/** Node options that load code into every thread: the app's preloads (a tracer, an agent). */
const PRELOADS = /(^|\s)(-r|--require|--import|--loader|--experimental-loader)(\s|=|$)/;

/**
 * Sends `groups` of requests by `deadline` while this thread waits; returns id -> null
 * (answered) or the error's message (no entry: not settled in time). A worker thread
 * sends them (it starts fastest), unless NODE_OPTIONS preloads code into every thread
 * (`-r dd-trace/init` takes ~0.7 s to load there): then a Node process of its own without
 * them; a worker again if that process cannot start.
 */
function sendSync(groups, deadline) {
  const results = new Map();
  const record = ({ id, error }) => results.set(id, error ?? null);
  // Test-only: SELFPROF_TEST_EXIT_SENDER=process|worker picks the way.
  const forced = process.env.SELFPROF_TEST_EXIT_SENDER;
  const apart = forced ? forced === 'process' : PRELOADS.test(process.env.NODE_OPTIONS ?? '') && canStartNode();
  if (apart && sendInProcess(groups, deadline, record)) return results;
  sendInWorker(groups, deadline, record);
  return results;
}

/** sendSync in a Node process of its own (the app's NODE_OPTIONS left out); false if it could not start. */
function sendInProcess(groups, deadline, record) {
  const budgetMs = Math.floor(deadline - performance.now());
  if (budgetMs < 1) return true;
  const env = { ...process.env };
  delete env.NODE_OPTIONS;
  const r = spawnSync(process.execPath, [SENDER_PATH], {
    // Its own start-up is part of the budget; it stops a little before, to answer.
    input: encodeInput(groups, Date.now() + budgetMs - 50),
    timeout: budgetMs,
    killSignal: 'SIGKILL',
    env,
    stdio: 'pipe',
    windowsHide: true,
    maxBuffer: 1 << 20,
  });
  // Killed at the deadline (ETIMEDOUT): what it answered by then stands.
  if (r.error && /** @type {NodeJS.ErrnoException} */ (r.error).code !== 'ETIMEDOUT') return false;
  for (const line of String(r.stdout ?? '').split('\n')) {
    try {
      if (line) record(JSON.parse(line));
    } catch {
      // a line cut short by the deadline
    }
  }
  return true;
}

/** Whether this process's binary is a Node that can run a script (not a single executable app, not Electron). */
function canStartNode() {
  if (process.release?.name !== 'node' || process.versions.electron) return false;
  try {
    return !require('node:sea').isSea();
  } catch {
    return true; // no node:sea (Node < 20.12): not one
  }
}

/** sendSync in a worker thread; the results via `record`. */
function sendInWorker(groups, deadline, record) {
  // Not the Worker service mode wraps (that one loads the profiling agent).
  const Worker = wt.Worker[Symbol.for('selfprof.workerWrapped')] ? Object.getPrototypeOf(wt.Worker) : wt.Worker;
  const { port1, port2 } = new wt.MessageChannel();
  const flag = new Int32Array(new SharedArrayBuffer(4));
  try {
    const budgetMs = Math.max(1, deadline - performance.now() - 20);
    // execArgv []: no preload of the app's command line (NODE_OPTIONS' load all the same).
    new Worker(SENDER_PATH, { workerData: { [SENDER]: { port: port2, flag, budgetMs, groups } }, transferList: [port2], execArgv: [], stdout: true, stderr: true });
  } catch (err) {
    for (const id of groups.flat().map((r) => r.id)) record({ id, error: `the exit's sender could not start (${err.code ?? err.message})` });
    return;
  }
  for (let left = deadline - performance.now(); left > 0 && Atomics.load(flag, 0) === 0; left = deadline - performance.now()) {
    Atomics.wait(flag, 0, 0, left);
  }
  for (let m = wt.receiveMessageOnPort(port1); m; m = wt.receiveMessageOnPort(port1)) record(m.message);
}

module.exports = { exitGuard, EXIT_BUDGET_MS, OWN_LISTENER };
