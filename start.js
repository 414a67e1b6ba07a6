'use strict';
// `node -r selfprof/start app.js`: service mode configured from the environment
// (SELFPROF_SERVICE, SELFPROF_EXPORTER_URL, ... — see README). Never fails the app.
try {
  require('./lib/service').start();
} catch (err) {
  process.emitWarning(`selfprof: not started: ${err.message}`, { code: 'SELFPROF_START' });
}
