'use strict';
// `selfprof record`: preloaded into the recorded Node process (NODE_OPTIONS=--require).
// Profiles the main thread from start to exit and writes, on the way out, the trace
// (json-gzip) and the pprof of the same recording to SELFPROF_RECORD_DIR as
// selfprof-<pid>.trace.json.gz / .pb.gz. Exit of any kind is covered: the end of the
// program, process.exit(), an uncaught exception (the 'exit' event, with a synchronous
// build), and SIGINT/SIGTERM/SIGHUP (written, then the signal is raised again unless the
// app handles it). Never fails the app: a problem is one warning.

const { isMainThread } = require('node:worker_threads');

function record(env) {
  const fs = require('node:fs');
  const path = require('node:path');
  const { Profiler, stopSync } = require('../capture/profiler');
  const dir = env.SELFPROF_RECORD_DIR;
  const profiler = new Profiler({
    sampleInterval: Number(env.SELFPROF_RECORD_INTERVAL_MS || 1),
    maxBufferSize: Number(env.SELFPROF_RECORD_MAX_SAMPLES || 10_000_000),
  });
  let written = false;
  const write = () => {
    if (written) return;
    written = true;
    try {
      const [trace, pprof] = profiler[stopSync]('json-gzip', 'pprof');
      const base = path.join(dir, `selfprof-${process.pid}`);
      fs.writeFileSync(`${base}.pb.gz`, pprof);
      // The trace last: the recorder takes it as the sign that both are complete.
      fs.writeFileSync(`${base}.trace.json.gz.tmp`, trace);
      fs.renameSync(`${base}.trace.json.gz.tmp`, `${base}.trace.json.gz`);
    } catch (err) {
      process.emitWarning(`selfprof record: the profile could not be written: ${err.message}`, { code: 'SELFPROF_RECORD' });
    }
  };
  process.on('exit', write);
  for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP']) {
    const onSignal = () => {
      write();
      process.removeListener(signal, onSignal);
      if (process.listenerCount(signal) === 0) process.kill(process.pid, signal);
    };
    process.on(signal, onSignal);
  }
}

if (isMainThread && process.env.SELFPROF_RECORD_DIR) {
  try {
    record(process.env);
  } catch (err) {
    process.emitWarning(`selfprof record: not recording: ${err.message}`, { code: 'SELFPROF_RECORD' });
  }
}
