'use strict';
// Commands to this thread's own inspector session (the CPU and heap profilers' domains).

/** A session connected on this thread dispatches each command synchronously: its result, or the error thrown. */
function post(session, method, params) {
  let failure;
  let result;
  session.post(method, params, (err, res) => {
    failure = err;
    result = res;
  });
  if (failure) throw failure;
  return result;
}

module.exports = { post };
