'use strict';
const { Profiler, fromCpuProfile } = require('./lib/profiler');

module.exports = { Profiler, fromCpuProfile };
