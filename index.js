'use strict';
const { Profiler, fromCpuProfile, setBaseInterval } = require('./lib/profiler');
const { withLabels, setLabels, getLabels } = require('./lib/labels');

module.exports = { Profiler, fromCpuProfile, setBaseInterval, withLabels, setLabels, getLabels };
