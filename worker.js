'use strict';
// `require('selfprof/worker')` at the top of a worker script: the worker is profiled by the
// main thread's service-mode session (for workers the wrapped `Worker` cannot reach:
// created before `start()`, or from an ES module's `Worker` import). See README.
require('./lib/service/worker');
