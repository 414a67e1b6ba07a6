'use strict';
// The trace object from the parts Rust built (src/trace/columns.rs, `TraceColumns`), in slices.
//
// Parsing a whole trace's JSON is one block of the event loop that grows with the trace
// (110-130 ms at 100k labeled samples). The parts keep it short: the small tables are
// parsed, each piece of contexts is made on its own turn of the event loop (label values
// sliced out of one string per piece: parsing them as JSON took ~5× as long), and the
// samples are made from typed arrays `SLICE` at a time, yielding in between (a turn is then
// a few ms). The objects are the ones JSON.parse of the trace's JSON makes: the same keys
// in the same order, absent optional members absent.

const { setImmediate: nextTurn } = require('node:timers/promises');

/** Samples made per turn of the event loop. */
const SLICE = 8192;
const MARKERS = [undefined, 'gc', 'idle', 'other'];

/**
 * The trace object of `parts` (`{ head, keySets, contextKeys, values, valueEnds, shared,
 * pieceContexts, timestamp, stack, marker, context, cpuTime }`, src/trace/columns.rs `TraceColumns`).
 */
async function traceObject(parts) {
  const head = JSON.parse(parts.head);
  const keySets = JSON.parse(parts.keySets);
  const contexts = [];
  const at = { context: 0, value: 0 };
  for (let p = 0; p < parts.values.length; p++) {
    await nextTurn();
    makeContexts(contexts, parts, p, keySets, at);
  }
  const n = parts.timestamp.length;
  const samples = new Array(n);
  for (let i = 0; i < n; i += SLICE) {
    if (i > 0) await nextTurn();
    makeSamples(samples, parts, i, Math.min(n, i + SLICE));
  }
  const trace = { resources: head.resources, frames: head.frames, stacks: head.stacks, samples, contexts };
  if (head.metadata !== undefined) trace.metadata = head.metadata;
  if (head.lineTicks !== undefined) trace.lineTicks = head.lineTicks;
  if (head.sourceMaps !== undefined) trace.sourceMaps = head.sourceMaps;
  if (head.sourceText !== undefined) trace.sourceText = head.sourceText;
  return trace;
}

// The loops are plain functions, not inlined in traceObject: V8 optimizes a loop inside an
// async function poorly (each turn resumes it), and these run ~100k times per stop: the
// samples took 18-28 ms in the async function, 7-9 ms here (~97k samples, Node 20).

/** Appends piece `p`'s contexts; `at` is where the piece's contexts and values start. */
// A value that repeats from context to context (an endpoint) is one string in `shared`
// (value end `-1 - i`), not a slice per context: ~80k fewer strings for the scavenges
// that making ~80k contexts sets off to copy.
function makeContexts(contexts, { contextKeys, valueEnds, pieceContexts, values, shared }, p, keySets, at) {
  const text = values[p];
  let c = at.context;
  let v = at.value;
  let from = 0;
  for (const end = c + pieceContexts[p]; c < end; c++) {
    const keys = keySets[contextKeys[c]];
    const labels = {};
    for (let k = 0; k < keys.length; k++) {
      const until = valueEnds[v++];
      // Keys come from withLabels/setLabels, which refuse "__proto__".
      if (until < 0) {
        labels[keys[k]] = shared[-1 - until];
      } else {
        labels[keys[k]] = text.slice(from, until);
        from = until;
      }
    }
    contexts.push({ labels });
  }
  at.context = c;
  at.value = v;
}

/** Makes samples `from` to `to` (exclusive). */
function makeSamples(samples, { timestamp, stack, marker, context, cpuTime }, from, to) {
  for (let i = from; i < to; i++) {
    samples[i] = sample(timestamp[i], stack[i], marker[i], context[i], cpuTime[i]);
  }
}

/**
 * One sample (`stackId` < 0, `marker` 0, `contextId` < 0 and `cpuTime` NaN: none). A
 * sample on a stack and without a marker, nearly all of them, is made whole by one literal:
 * properties added one by one go to a second, out-of-object array per sample, which the
 * scavenges that ~100k new samples set off then copy as well.
 */
function sample(timestamp, stackId, marker, contextId, cpuTime) {
  if (stackId >= 0 && marker === 0) {
    if (cpuTime === cpuTime) {
      return contextId >= 0 ? { timestamp, stackId, contextId, cpuTime } : { timestamp, stackId, cpuTime };
    }
    return contextId >= 0 ? { timestamp, stackId, contextId } : { timestamp, stackId };
  }
  const s = { timestamp };
  if (stackId >= 0) s.stackId = stackId;
  if (marker !== 0) s.marker = MARKERS[marker];
  if (contextId >= 0) s.contextId = contextId;
  if (cpuTime === cpuTime) s.cpuTime = cpuTime;
  return s;
}

module.exports = { traceObject };
