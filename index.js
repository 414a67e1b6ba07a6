'use strict';
const { Profiler, fromCpuProfile } = require('./lib/profiler');
const { withLabels, setLabels, getLabels } = require('./lib/labels');

module.exports = { Profiler, fromCpuProfile, withLabels, setLabels, getLabels };
