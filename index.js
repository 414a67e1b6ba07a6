'use strict';
const { Profiler, fromCpuProfile, setBaseInterval } = require('./lib/capture/profiler');
const { withLabels, setLabels, getLabels } = require('./lib/capture/labels');
const { start } = require('./lib/service');
const { openTelemetrySpanProcessor } = require('./lib/integrations/otel');
const { ddTraceIntegration } = require('./lib/integrations/ddtrace');
const { convert, readProfile } = require('./lib/views/convert');
const { htmlReport } = require('./lib/views/report');
const { eventLoopBlocks } = require('./lib/views/blocks');
const { diffProfiles, diffLabelValues } = require('./lib/views/diff');

module.exports = {
  Profiler,
  fromCpuProfile,
  setBaseInterval,
  withLabels,
  setLabels,
  getLabels,
  start,
  openTelemetrySpanProcessor,
  ddTraceIntegration,
  convert,
  readProfile,
  htmlReport,
  eventLoopBlocks,
  diffProfiles,
  diffLabelValues,
};
