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
//
// The events are bound by an `emit` on the request's and response's prototypes, put there
// only while requests are bound, which finds the request's store in a WeakMap: nothing is
// added to the request objects themselves. An `emit` of their own gave the requests bound
// while a tracer's check ran shapes no other request has, and the code that reads every
// request (Node's `headers` getter first) stayed megamorphic for good after them
// (docs/performance.md).

const { AsyncResource } = require('node:async_hooks');
const dc = require('node:diagnostics_channel');
const { IncomingMessage, ServerResponse } = require('node:http');

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

/** Each bound request's and response's `{ store, scope }` (see emitWithLabels). */
const holders = new WeakMap();

function onRequestStart({ request, response }) {
  if (!binding()) return updateRequestWatch();
  const holder = { store: null, scope: null };
  hold(request, holder);
  hold(response, holder);
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

/** Binds `emitter`'s events to `holder`: through the prototypes' emitWithLabels where its
 * `emit` is that (the http module's classes, and classes made from them), else (a class
 * with an `emit` of its own) by an `emit` of the emitter's own. */
function hold(emitter, holder) {
  if (!emitter || typeof emitter.emit !== 'function') return;
  if (shadowed.some((s) => s.emitWithLabels === emitter.emit)) {
    holders.set(emitter, holder);
    return;
  }
  const emit = emitter.emit;
  emitter.emit = function emitWithLabels(...args) {
    return emitWith(holder, emit, this, args);
  };
}

/** Emits `args` on `emitter` by `emit`, with `holder`'s store where it has one. */
function emitWith(holder, emit, emitter, args) {
  const store = holder.store;
  // An event with no listener runs nothing (most of a request's): it needs no scope.
  if (store === null || emitter.listenerCount(args[0]) === 0) return emit.apply(emitter, args);
  if (holder.scope !== null) return holder.scope.runInAsyncScope(emit, emitter, ...args);
  return runWith(store, emit, emitter, args);
}

/** The prototypes' `emit`s as they were (`own` where one was theirs), and selfprof's
 * `emitWithLabels` over each, while selfprof's are on them. */
let shadowed = [];

/** Puts an emitWithLabels on the request's and response's prototypes. */
function patchPrototypes() {
  for (const proto of [IncomingMessage.prototype, ServerResponse.prototype]) {
    const own = Object.hasOwn(proto, 'emit') ? proto.emit : undefined;
    const parent = Object.getPrototypeOf(proto);
    // The emit looked up when it runs: one put on EventEmitter's prototype later is called.
    /** @this {import('node:events').EventEmitter} */
    const emitWithLabels = function emitWithLabels(...args) {
      const emit = own ?? parent.emit;
      const holder = holders.get(this);
      return holder === undefined ? emit.apply(this, args) : emitWith(holder, emit, this, args);
    };
    shadowed.push({ proto, own, emitWithLabels });
    proto.emit = emitWithLabels;
  }
}

/** Takes selfprof's emits off the prototypes again; one that another module wrapped since
 * stays under its wrapper (where it emits as the one it shadowed). Requests in flight are
 * no longer bound from here: binding stops only once every tracer's contexts are read
 * from the frame, where the tracer's own binding gives their events its span. */
function unpatchPrototypes() {
  for (const { proto, own, emitWithLabels } of shadowed) {
    if (proto.emit !== emitWithLabels) continue;
    if (own === undefined) delete proto.emit;
    else proto.emit = own;
  }
  shadowed = [];
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
  if (want) {
    patchPrototypes();
    dc.subscribe(CHANNEL, onRequestStart);
  } else {
    dc.unsubscribe(CHANNEL, onRequestStart);
    unpatchPrototypes();
  }
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
