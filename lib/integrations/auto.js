'use strict';
// Service mode labels samples from the tracer the app already runs, with no code of the
// user's (`start({ spanLabels: false })` or SELFPROF_SPAN_LABELS=0 turns this off):
//
// - dd-trace: its spans are published on diagnostics channels, which selfprof listens to
//   whether dd-trace is loaded before or after it (`ddTraceIntegration`).
// - OpenTelemetry: selfprof's span processor is added to the tracer provider the app
//   registered (the SDK keeps its processors in a list that every tracer reads). The app
//   registers it at any time, often after `-r selfprof/start`: looked for at start, then
//   every 250 ms for a minute, and at each rotation. A provider this cannot add to (an
//   SDK shaped otherwise) gets one warning giving the line to add instead.

const { openTelemetrySpanProcessor, PROCESSOR } = require('./otel');
const { subscribeDdTrace } = require('./ddtrace');
const { warnOnce } = require('../log');

/** Where OpenTelemetry's API keeps what the app registered (API major 1). */
const OTEL_GLOBAL = Symbol.for('opentelemetry.js.api.1');
const LOOK_EVERY_MS = 250;
const LOOK_FOR_MS = 60_000;

/**
 * Adds selfprof's span processor to the registered OpenTelemetry SDK's provider. Returns
 * 'wired' (added now or before), 'absent' (no SDK provider registered yet) or 'unknown'.
 */
function wireOpenTelemetry() {
  const registered = globalThis[OTEL_GLOBAL]?.trace;
  if (!registered) return 'absent';
  const provider = typeof registered.getDelegate === 'function' ? registered.getDelegate() : registered;
  if (!provider || provider.constructor?.name === 'NoopTracerProvider') return 'absent';
  // SDK 2.x: the provider's MultiSpanProcessor, shared by its tracers.
  const list = provider._activeSpanProcessor?._spanProcessors;
  if (Array.isArray(list)) {
    if (!list.some((p) => p?.[PROCESSOR])) list.unshift(openTelemetrySpanProcessor());
    return 'wired';
  }
  // SDK 1.x: addSpanProcessor, with the added ones in _registeredSpanProcessors.
  if (typeof provider.addSpanProcessor === 'function') {
    const added = provider._registeredSpanProcessors;
    if (!Array.isArray(added) || !added.some((p) => p?.[PROCESSOR])) provider.addSpanProcessor(openTelemetrySpanProcessor());
    return 'wired';
  }
  return 'unknown';
}

/** Starts labeling from the app's tracers; returns `{ state(), rotate(), stop() }`. */
function wireTracers() {
  subscribeDdTrace();
  let otel = 'absent';
  let timer = null;
  const look = () => {
    if (otel === 'wired') return;
    try {
      otel = wireOpenTelemetry();
    } catch (err) {
      otel = 'unknown';
      warnOnce('otel-wire', `selfprof: could not add its span processor to OpenTelemetry's provider: ${err.message}`);
    }
    if (otel === 'unknown') {
      warnOnce(
        'otel-wire',
        "selfprof: OpenTelemetry's tracer provider is not one selfprof can add its span processor to; add it yourself so that samples carry span ids and routes: spanProcessors: [require('selfprof').openTelemetrySpanProcessor(), ...]",
      );
    }
    if (otel !== 'absent') stopLooking();
  };
  const stopLooking = () => {
    clearInterval(timer);
    timer = null;
  };
  look();
  if (otel === 'absent') {
    const until = Date.now() + LOOK_FOR_MS;
    timer = setInterval(() => (Date.now() > until ? stopLooking() : look()), LOOK_EVERY_MS);
    timer.unref();
  }
  return {
    /** Which tracers label samples: `{ openTelemetry: 'wired' | 'absent' | 'unknown' }`. */
    state: () => ({ openTelemetry: otel }),
    rotate: look,
    stop: stopLooking,
  };
}

module.exports = { wireTracers, wireOpenTelemetry };
