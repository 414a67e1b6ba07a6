'use strict';
// `node -r selfprof/start app.js`: service mode configured from the environment
// (SELFPROF_SERVICE, SELFPROF_EXPORTER_URL, ... — see README). Never fails the app.
// In a worker_thread (a preload runs in every worker) it is the worker's agent instead:
// the main thread's session profiles it and ships its samples with its own.
if (require('node:worker_threads').isMainThread) {
  try {
    require('./lib/service').start();
  } catch (err) {
    process.emitWarning(`selfprof: not started: ${err.message}`, { code: 'SELFPROF_START' });
  }
} else {
  require('./lib/service/worker');
}
