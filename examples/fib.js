const { Profiler } = require('selfprof');

function fib(n) {
  return n < 2 ? n : fib(n - 1) + fib(n - 2);
}

(async () => {
  const profiler = new Profiler({ sampleInterval: 9.5, maxBufferSize: 1000 });
  fib(35);
  const trace = await profiler.stop();

  console.log(profiler.sampleInterval, profiler.stopped);
  console.log(trace.resources.length, trace.frames.length, trace.stacks.length, trace.samples.length);
  const fibId = trace.frames.findIndex((f) => f.name === 'fib');
  console.log(trace.frames[fibId], trace.resources[trace.frames[fibId].resourceId]);
  const sample = trace.samples.find((s) => trace.stacks[s.stackId]?.frameId === fibId);
  console.log(sample, trace.stacks[sample.stackId]);
})();
