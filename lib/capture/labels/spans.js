'use strict';
// A tracer's requests labeled with selfprof's own sets: where the handler does not read the
// tracer's contexts from the frame (Node 20 and 22, whose AsyncLocalStorage runs on
// async_hooks; a check that failed; another copy's tracer), an integration enters a lazy
// store for each request as its span starts (`enterSpanLabels`), whose labels are worked
// out only when a sample took it or they are asked for, and binds the request's events to
// it (integrations/http-requests.js).

const { executionAsyncResource } = require('node:async_hooks');
const { als, currentStore, storesInFrame, path } = require('./thread');
const { lazyStore, endRequestDerived } = require('./sets');
const { publish, runWithStore, storeRunning } = require('./switching');
const { drainIfBatched } = require('./frame');
const { useLabels } = require('./activity');
const { allTracersRead, combineRequests, spansOf, tracers } = require('./tracers');
const { envSwitchOn } = require('../../log');
const { watchRequests, claimRequest, bindRequestsWhile, requestEmitting } = require('../../integrations/http-requests');

// A request's events need binding only where AsyncLocalStorage keeps its stores in the
// frame (on async_hooks the store entered as the span starts is the connection's, which
// emits them: Node 20, 22), and there only where the tracer's contexts are not read from
// the frame (the tracer binds them to its own context).
const FRAME_STORES = storesInFrame();
bindRequestsWhile(() => FRAME_STORES && !(path.frameRead && allTracersRead()));

/**
 * The tracing integrations' `setLabels`: labels the rest of the current async context with
 * a request's span, and the HTTP request being handled, if any, runs its events with them
 * too. The labels are worked out only when needed (a sample took the store, the labels
 * are asked for, labels are merged over them): `resolve(span)` gives them then, as
 * `{ labels, derived }` (sets.js `derivedLabels`) or null. Most requests are never sampled,
 * and their span is then never read. `span` is the integration's record of the span
 * (`ended` once it ended), `key` its tracer's (tracers.js: 1 dd-trace, 2 OpenTelemetry);
 * `leaveSpanLabels(span)` as the span ends. With `maybeRequest` (a span not yet known to
 * be a request: dd-trace tags its kind just after it starts), no set is entered while the
 * handler may soon read the tracer's contexts (`tracerReadPending`) unless an HTTP request
 * is being emitted now: the span is then most likely a start-up DNS lookup or connection,
 * whose set would stay in the frames of what it sets up (a server that listens in the
 * lookup's callback gives it to every request's frame), and any samples it has before the
 * handler reads the tracer's context carry no labels.
 */
function enterSpanLabels(span, resolve, key, maybeRequest = false) {
  watchSpanRequests();
  useLabels();
  if (maybeRequest && tracerReadPending(key) && !requestEmitting()) return;
  const current = storeRunning();
  // Its labels are its base's with the span's over them. Another span's store in effect
  // here (a consumer's loop starts each message where the last one's labels are) gives
  // way to its own base: the span's labels replace that span's, and a chain of them would
  // keep every earlier request alive. But another tracer's request still running here is
  // this one's too (both tracers trace it): the store holds both (tracers.js).
  let base = current;
  let store = null;
  if (current.resolve !== undefined) {
    base = current.base;
    const others = current.spanKey === undefined ? [] : spansOf(current).filter((other) => other.key !== key && !other.record.ended);
    if (others.length > 0) {
      const spans = [{ key, record: span, resolve }, ...others].sort((a, b) => a.key - b.key);
      store = lazyStore(base, spans, resolveSpans);
      store.spans = spans;
    }
  }
  // One tracer's (most requests): its span, allocating nothing more.
  store ??= lazyStore(base, span, resolve);
  store.spanKey = key;
  drainIfBatched();
  if (!storesInFrame()) {
    // AsyncLocalStorage on async_hooks (Node < 24) keeps the store on the resource being
    // run, which for a request is its connection's: note it, to take it back at the span's
    // end, or the next request on the connection starts with this one's.
    const resource = executionAsyncResource();
    span.entered = { resource, store, outer: resource[als.kResourceStore] };
    // What enterWith does, on the resource already looked up (once enabled).
    if (als.enabled === true) resource[als.kResourceStore] = store;
    else als.enterWith(store);
  } else {
    als.enterWith(store);
  }
  // Claimed now, where the frame holds the store: on the frame path the request's events
  // run in this frame (http-requests.js). Over another tracer's store of this request, it
  // takes that one's claim.
  claimRequest(store, path.frameRead, store.spans !== undefined ? current : undefined);
  publish(store);
}

/** Whether the handler may read tracer `key`'s contexts from the frame but has not proved
 * it can yet: the frame's check under way (it ends in a timer), or the tracer's key being
 * proved (an await). */
function tracerReadPending(key) {
  if (key === undefined || !FRAME_STORES) return false;
  const pending = path.frameReason === 'checking' || (path.frameRead && tracers[key]?.checking === true);
  return pending && envSwitchOn('SELFPROF_TRACER_CONTEXTS');
}

/** The request labels of a store holding both tracers' spans (`enterSpanLabels`; tracers.js
 * `combineRequests`). */
function resolveSpans(spans) {
  const found = [];
  for (const s of spans) found[s.key] = s.resolve(s.record);
  return combineRequests(found);
}

/** The span `enterSpanLabels` labeled with ended. */
function leaveSpanLabels(span) {
  const entered = span.entered;
  if (entered === undefined) return;
  span.entered = undefined;
  if (entered.resource[als.kResourceStore] === entered.store) {
    // Back to what was there, but not to a store whose requests all ended (the other
    // tracer's, where both traced this request and that one ended first).
    let outer = entered.outer;
    while (outer?.spanKey !== undefined && spansOf(outer).every((s) => s.record.ended)) outer = outer.base;
    entered.resource[als.kResourceStore] = outer;
    publish(currentStore());
  }
}

/**
 * The request's span ended: its store leaves the connection it was entered on, first (a
 * sample taken in it is saved as it leaves, which works out its labels). Then, where
 * nothing has worked its labels out and `endpointWanted` is false (not counted), it is
 * only marked ended, its final labels read from the ended span if a sample drained later
 * needs them (sets.js `requestDerived`), and false is returned; else its samples carry the
 * labels it ended with (`labelsOf(root)` then), and its endpoint is returned.
 * @returns {string | undefined | false}
 */
function endRequest(root, labelsOf, endpointWanted) {
  leaveSpanLabels(root);
  if (root.derived === null && !endpointWanted) {
    root.ended = true;
    return false;
  }
  return endRequestDerived(root, labelsOf);
}

/** Starts watching HTTP requests for `enterSpanLabels`: an integration calls it as it is set
 * up, so that its first request's events are bound too (http-requests.js). */
function watchSpanRequests() {
  watchRequests(runWithStore);
}

module.exports = { enterSpanLabels, leaveSpanLabels, endRequest, watchSpanRequests };
