'use strict';
const { Profiler, fromCpuProfile, setBaseInterval } = require('./lib/profiler');
const { withLabels, setLabels, getLabels } = require('./lib/labels');
const { start } = require('./lib/service');
const { openTelemetrySpanProcessor } = require('./lib/otel');
const { convert, readProfile } = require('./lib/convert');
const { htmlReport } = require('./lib/report');

module.exports = {
  Profiler,
  fromCpuProfile,
  setBaseInterval,
  withLabels,
  setLabels,
  getLabels,
  start,
  openTelemetrySpanProcessor,
  convert,
  readProfile,
  htmlReport,
};
