'use strict';
// The events of a request a span labels (its body's 'data' and 'end', the response's
// 'finish' and 'close') run with the request's labels.
//
// A tracer labels a request where its server span starts, inside the HTTP server's
// 'request' event, and AsyncLocalStorage carries that to what the request starts. But the
// request's and response's own events are emitted from the connection, which was set up
// before the request began: on Node >= 24 (AsyncLocalStorage on V8's continuation data)
// they run with the connection's context, so a handler that runs once the body has
// arrived (any POST through a body parser) would carry no labels. The tracers bind those
// emitters to their own context for the same reason; this binds them to selfprof's.
//
// Node publishes `http.server.request.start` just before it emits 'request', in the same
// turn; the first request span labeled before that turn ends claims the request.
//
// Where the handler reads the context frame, the claim comes just after the labels were
// entered and makes an AsyncResource there: its scope is that frame, so each event runs in
// it by swapping frames, with no copy of the frame's Map per event (`run()` makes two).
//
// Only subscribed while requests' events are bound: with a subscriber, Node builds and
// publishes a message at every request, which cost a traced request ~2.5 µs of the main
// thread even where the handler returned at once (docs/performance.md).

const { AsyncResource } = require('node:async_hooks');
const dc = require('node:diagnostics_channel');

const CHANNEL = 'http.server.request.start';

let watching = false;
/** The request whose 'request' event is being emitted: `{ store, scope }`, until claimed;
 * then `claimed`, until that turn ends. */
let emitting = null;
let claimed = null;
let runWith = null;

/** Whether requests' events are bound now: not where every tracer's contexts are read from
 * the frame (capture/labels/spans.js), since a tracer binds them to its context itself. */
let binding = () => true;

function onRequestStart({ request, response }) {
  if (!binding()) return updateRequestWatch();
  const holder = { store: null, scope: null };
  bind(request, holder);
  bind(response, holder);
  emitting = holder;
  if (!clearQueued) {
    clearQueued = true;
    queueMicrotask(clearEmitting);
  }
}

/** The turn a request started in is over: a span labeled later claims no request. */
let clearQueued = false;
function clearEmitting() {
  clearQueued = false;
  emitting = null;
  claimed = null;
}

function bind(emitter, holder) {
  if (!emitter || typeof emitter.emit !== 'function') return;
  const emit = emitter.emit;
  emitter.emit = function emitWithLabels(...args) {
    const store = holder.store;
    // An event with no listener runs nothing (most of a request's): it needs no scope.
    if (store === null || this.listenerCount(args[0]) === 0) return emit.apply(this, args);
    if (holder.scope !== null) return holder.scope.runInAsyncScope(emit, this, ...args);
    return runWith(store, emit, this, args);
  };
}

/** Starts binding requests' events (once); `run(store, fn, thisArg, args)` runs with a store. */
function watchRequests(run) {
  if (watching) return;
  watching = true;
  runWith = run;
  updateRequestWatch();
}

/** Whether onRequestStart is subscribed now. */
let subscribed = false;

/** Subscribes to requests' starts while their events are bound, else unsubscribes. Called
 * where that may have begun (a tracer registered: its contexts are not read until proved)
 * and, where it ended, by the next request's start. */
function updateRequestWatch() {
  const want = watching && binding();
  if (want === subscribed) return;
  subscribed = want;
  if (want) dc.subscribe(CHANNEL, onRequestStart);
  else dc.unsubscribe(CHANNEL, onRequestStart);
}

/**
 * A request span labeled `store`: the request being emitted now (if any) takes it. With
 * `inFrame` (the current frame holds `store`), its events run in this frame. `over`: the
 * store `store` was made over (another tracer's span of the same request): the request
 * that one claimed in this turn takes `store` instead.
 */
function claimRequest(store, inFrame, over) {
  let holder = emitting;
  if (holder === null) {
    if (over === undefined || claimed?.store !== over) return;
    holder = claimed;
  }
  holder.store = store;
  holder.scope = inFrame ? new AsyncResource('selfprof.request') : null;
  emitting = null;
  claimed = holder;
}

/** Whether a request's 'request' event is being emitted now and no span has claimed it
 * (known only while requests' events are bound). */
const requestEmitting = () => emitting !== null;

/** Binds requests' events only while `when()` says so. */
function bindRequestsWhile(when) {
  binding = when;
  updateRequestWatch();
}

module.exports = { watchRequests, claimRequest, bindRequestsWhile, updateRequestWatch, requestEmitting };
