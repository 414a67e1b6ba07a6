'use strict';
// Drives V8's CPU profiler through Node's inspector Profiler domain, one inspector
// session per recording (V8 gives each session its own CpuProfile).

let inspector;
function loadInspector() {
  if (inspector === undefined) {
    try {
      inspector = require('node:inspector');
    } catch (err) {
      inspector = null;
      loadInspector.error = err;
    }
  }
  if (inspector === null) {
    throw new DOMException(
      `selfprof needs Node's inspector, which this Node cannot provide: ${loadInspector.error.message}`,
      'NotSupportedError',
    );
  }
  return inspector;
}

// A session connected on the main thread dispatches each command synchronously,
// so a failing start is known before the constructor returns.
function postSync(session, method, params) {
  let failure;
  session.post(method, params, (err) => {
    if (err) failure = err;
  });
  if (failure) throw failure;
}

function post(session, method, params) {
  return new Promise((resolve, reject) => {
    session.post(method, params, (err, result) => (err ? reject(err) : resolve(result)));
  });
}

/** Starts a V8 CPU profile sampling every `intervalUs` microseconds. */
function startRecording(intervalUs) {
  const session = new (loadInspector().Session)();
  session.connect();
  try {
    postSync(session, 'Profiler.enable');
    postSync(session, 'Profiler.setSamplingInterval', { interval: Math.max(1, Math.round(intervalUs)) });
    postSync(session, 'Profiler.start');
  } catch (err) {
    session.disconnect();
    throw err;
  }
  return session;
}

/** Stops the recording on `session` and resolves to V8's profile. */
async function stopRecording(session) {
  try {
    const { profile } = await post(session, 'Profiler.stop');
    return profile;
  } finally {
    session.disconnect();
  }
}

/** Best-effort stop for a recording nobody will collect. */
function abandonRecording(session) {
  try {
    session.disconnect();
  } catch {
    // Already disconnected.
  }
}

module.exports = { startRecording, stopRecording, abandonRecording };
