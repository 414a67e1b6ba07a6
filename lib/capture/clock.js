'use strict';
// performance.now() counts from performance.timeOrigin on the monotonic clock that
// process.hrtime() reads (libuv's uv_hrtime, CLOCK_MONOTONIC on Linux). V8's profiler
// stamps samples with its TimeTicks, which on Linux read that same clock. So the
// time origin on V8's clock is hrtime - performance.now(), read back to back.

const { performance } = require('node:perf_hooks');

let origin;

/** `performance.timeOrigin` on V8's monotonic clock, in microseconds. */
function timeOriginUs() {
  if (origin === undefined) {
    // Take the tightest of a few brackets so a preemption between reads cannot skew it.
    let best = Infinity;
    for (let i = 0; i < 8; i++) {
      const a = performance.now();
      const hr = process.hrtime.bigint();
      const b = performance.now();
      if (b - a < best) {
        best = b - a;
        origin = Number(hr) / 1e3 - ((a + b) / 2) * 1e3;
      }
    }
  }
  return origin;
}

module.exports = { timeOriginUs };
