'use strict';
// Label sets: what withLabels/setLabels make (checked and merged over the current set),
// sets worked out later from a tracer's span (lazy stores), and labels derived from a span
// that change as the span does.
//
// A tracing integration labels a request from its root span, but some of those labels
// are known only later: the route is set once the framework has routed the request
// (OpenTelemetry renames the span at its end; dd-trace sets the resource then). Samples
// are joined to label sets when a trace is built, so a set can still be completed after
// its samples were taken: the integration gives a `Derived` that reads the span as it is
// now, marks it as the span changes (`markDerived`), and updates it when next needed (a
// set saved, the labels asked for, a trace built) and when it ends. The sets already saved
// for samples are then amended natively (traces not yet built take the new labels), and
// the sets saved later carry the new values. Only sets made in the request's own context
// (its store, and stores merged over it) take a span's values, so no sample gets another
// request's.

const { native } = require('../../native');
const { warnOnce } = require('../../log');
const { EMPTY, newId } = require('./thread');

const MAX_KEYS = 64;
const MAX_KEY_LENGTH = 256;
const MAX_VALUE_LENGTH = 4096;

/** `[key, value, key, value, ...]` of a frozen label set. */
function flatOf(labels) {
  const flat = [];
  for (const key in labels) flat.push(key, labels[key]);
  return flat;
}

function labelValue(fn, key, value) {
  switch (typeof value) {
    case 'string':
      break;
    case 'number':
    case 'bigint':
    case 'boolean':
      value = String(value);
      break;
    default:
      throw new TypeError(`${fn}: label ${JSON.stringify(key)} must be a string, number, bigint or boolean, got ${typeof value}`);
  }
  if (value.length > MAX_VALUE_LENGTH) {
    throw new RangeError(`${fn}: label ${JSON.stringify(key)} is ${value.length} characters; at most ${MAX_VALUE_LENGTH}`);
  }
  return value;
}

/** A store for `labels` merged over `current`'s (null/undefined values remove a key).
 * Labels `current` derives from a span, and that `labels` leave alone, stay derived from
 * it. `fn` names the caller in errors. */
function storeWith(fn, labels, current) {
  if (labels === null || typeof labels !== 'object' || Array.isArray(labels)) {
    throw new TypeError(`${fn}: labels must be an object like { endpoint: 'GET /users/:id' }`);
  }
  const base = labelsOf(current);
  const out = base === EMPTY.labels ? {} : { ...base };
  for (const key in labels) {
    if (!Object.hasOwn(labels, key)) continue;
    if (key.length === 0 || key.length > MAX_KEY_LENGTH) {
      throw new RangeError(`${fn}: label keys must be 1 to ${MAX_KEY_LENGTH} characters, got ${key.length}`);
    }
    // Assigning it would set the object's prototype instead of a label.
    if (key === '__proto__') throw new TypeError(`${fn}: "__proto__" cannot be a label key`);
    const value = labels[key];
    if (value === undefined || value === null) delete out[key];
    else out[key] = labelValue(fn, key, value);
  }
  const from = current.derived;
  const keys = from === undefined ? undefined : current.derivedKeys.filter((k) => !Object.hasOwn(labels, k));
  let count = 0;
  // eslint-disable-next-line no-unused-vars -- counts the keys without building Object.keys' array
  for (const key in out) if (++count > MAX_KEYS) {
    throw new RangeError(`${fn}: at most ${MAX_KEYS} labels per set, got ${Object.keys(out).length}`);
  }
  if (count === 0) return EMPTY;
  // `id` first: the signal handler reads it as the object's first in-object property.
  const store = { id: newId(), labels: Object.freeze(out), flat: null, savedFor: -1 };
  if (from !== undefined && keys.length > 0) {
    store.derived = from;
    store.derivedKeys = keys;
    store.derivedVersion = from.version;
  }
  return store;
}

// --- sets worked out later ---------------------------------------------------------
//
// A lazy store (`{ id, labels: null, base, of, resolve, ... }`) stands for `base`'s labels
// with those of a tracer's span or context (`of`) over them, worked out only when needed
// (a sample took it, the labels are asked for, labels are merged over it): `resolve(of)`
// gives `{ labels, derived, under }` (`under`: the base was set inside this very request,
// so its own keys win) or null (no request: the base's labels).

/** A lazy store of `of` over `base` (see above). `spanKey` and `spans`: those of a
 * request span's store (spans.js), in the literal so that setting them adds no property. */
function lazyStore(base, of, resolve, id = newId()) {
  return { id, labels: null, flat: null, savedFor: -1, base, of, resolve, spanKey: undefined, spans: undefined };
}

/** `store` derives its labels from the span `from` derives from, if any. */
function deriveAs(store, from) {
  if (from.derived === undefined) return;
  store.derived = from.derived;
  store.derivedKeys = from.derivedKeys;
  store.derivedVersion = from.derivedVersion;
}

function resolveLazy(store) {
  const base = labelsOf(store.base);
  let found = null;
  try {
    found = store.resolve(store.of);
  } catch (err) {
    warnOnce('labels-derived', `selfprof: could not read a span's labels: ${err.message}`);
  }
  if (found === null) {
    store.labels = base;
    deriveAs(store, store.base);
    return;
  }
  const { labels, derived, under } = found;
  // The base's own keys win where it was set inside this request, but for those it takes
  // from this very request (derived from it), which stay the request's.
  const from = store.base;
  const own = (key) => under === true && Object.hasOwn(base, key) && !(from.derived === derived && from.derivedKeys.includes(key));
  const out = base === EMPTY.labels ? {} : { ...base };
  const keys = derived.keys.filter((key) => !own(key));
  for (const key of keys) delete out[key];
  for (const key in labels) {
    if (own(key)) continue;
    const value = derivedValue(labels[key]);
    if (value === undefined) delete out[key];
    else out[key] = value;
  }
  for (const key of keys) if (derived.values[key] !== undefined) out[key] = derived.values[key];
  store.labels = Object.freeze(out);
  store.derived = derived;
  store.derivedKeys = keys;
  store.derivedVersion = derived.version;
}

/** `store`'s labels, with the current values of the span it derives from. */
function labelsOf(store) {
  if (store.labels === null) resolveLazy(store);
  const derived = store.derived;
  if (derived === undefined) return store.labels;
  if (derived.stale) updateDerived(derived);
  if (store.derivedVersion === derived.version) return store.labels;
  const out = { ...store.labels };
  for (const key of store.derivedKeys) {
    const value = derived.values[key];
    if (value === undefined) delete out[key];
    else out[key] = value;
  }
  store.labels = Object.freeze(out);
  store.flat = null;
  store.derivedVersion = derived.version;
  return store.labels;
}

// --- labels derived from a span --------------------------------------------------------

/** Spans in flight whose labels were sampled: brought up to date when a trace is built. */
const openDerived = new Set();
/** Past this many, the oldest is left with what it had (a span that never ends). */
const MAX_OPEN_DERIVED = 16384;

/** A label value a span gives: a non-empty string, or nothing ("undefined" is nothing). */
function derivedValue(value) {
  if (typeof value !== 'string' || value === '' || value === 'undefined') return undefined;
  return value.length > MAX_VALUE_LENGTH ? value.slice(0, MAX_VALUE_LENGTH) : value;
}

/** Labels of a span, read with `current()` now and whenever `updateDerived` is called. */
function derivedLabels(keys, current) {
  const derived = { keys, current, values: null, version: 0, saved: [], open: true, stale: false };
  derived.values = readDerived(derived) ?? {};
  return derived;
}

function readDerived(derived) {
  let read;
  try {
    read = derived.current();
  } catch (err) {
    warnOnce('labels-derived', `selfprof: could not read a span's labels: ${err.message}`);
    return null;
  }
  const values = {};
  for (const key of derived.keys) {
    const value = derivedValue(read?.[key]);
    if (value !== undefined) values[key] = value;
  }
  return values;
}

/** The span changed: its stores' labels follow, those already sampled amended natively. */
function updateDerived(derived) {
  if (!derived?.open) return;
  derived.stale = false;
  const values = readDerived(derived);
  if (values === null || derived.keys.every((k) => values[k] === derived.values[k])) return;
  derived.values = values;
  derived.version++;
  for (const store of derived.saved) {
    const before = store.labels;
    labelsOf(store);
    if (store.labels === before) continue;
    store.flat = flatOf(store.labels);
    try {
      native.amendLabels(store.id, store.flat);
    } catch (err) {
      warnOnce('labels-save', `selfprof: a label set could not be kept: ${err.message}`);
    }
  }
}

/**
 * The span may have changed: it is read again when its labels are next needed (a sampled
 * set saved, the labels asked for, a trace built, the span's end), not at each of the
 * many changes a tracer makes to a request's span.
 */
function markDerived(derived) {
  if (derived?.open) derived.stale = true;
}

/** The span ended: its final state is what its samples carry. */
function closeDerived(derived, update = true) {
  if (!derived?.open) return;
  if (update) updateDerived(derived);
  derived.open = false;
  derived.saved = [];
  openDerived.delete(derived);
}

/** A sampled `store` was saved: if it derives from a span in flight, it is amended as the
 * span changes, and brought up to date when a trace is built. */
function noteSavedDerived(store) {
  const derived = store.derived;
  if (derived?.open && !derived.saved.includes(store)) {
    derived.saved.push(store);
    openDerived.add(derived);
    if (openDerived.size > MAX_OPEN_DERIVED) closeDerived(openDerived.values().next().value, false);
  }
}

/** Brings the sampled labels of spans still in flight up to what is known now. */
function updateOpenDerived() {
  for (const derived of openDerived) updateDerived(derived);
}

/** The labels a request's record derives from its span: its endpoint, and its HTTP route
 * where an operation names the endpoint (integrations/operations.js). */
const REQUEST_KEYS = ['endpoint', 'http_route'];

/** A request's labels as `labelsOf` read them (REQUEST_KEYS), as a span's values are kept:
 * once a request, so literals of one shape, not a loop over the keys. */
function requestValues(read) {
  const endpoint = derivedValue(read?.endpoint);
  const route = derivedValue(read?.http_route);
  if (route === undefined) return endpoint === undefined ? {} : { endpoint };
  return endpoint === undefined ? { http_route: route } : { endpoint, http_route: route };
}

/**
 * The derived labels of an integration's request record (`{ derived, ended, final }`),
 * made the first time its labels are needed: `labelsOf(root)` reads them from the span
 * while the request runs (`{ endpoint, http_route }`); once it ended, those it ended with
 * (`root.final`, read from the ended span where the integration left it undefined).
 */
function requestDerived(root, labelsOf) {
  if (root.derived === null) {
    // One that ended before anything needed its labels (an integration leaves them to
    // here): those it ended with, read from its ended span now.
    if (root.ended && root.final === undefined) root.final = requestValues(labelsOf(root));
    root.derived = derivedLabels(REQUEST_KEYS, () => (root.ended ? root.final : labelsOf(root)));
    if (root.ended) closeDerived(root.derived, false);
  }
  return root.derived;
}

/** The request's span ended: its samples carry the labels it ended with (`root.final`).
 * Returns its endpoint. */
function endRequestDerived(root, labelsOf) {
  closeDerived(root.derived);
  root.final = root.derived !== null ? root.derived.values : requestValues(labelsOf(root));
  root.ended = true;
  return root.final.endpoint;
}

module.exports = {
  MAX_KEYS,
  MAX_KEY_LENGTH,
  MAX_VALUE_LENGTH,
  flatOf,
  storeWith,
  lazyStore,
  labelsOf,
  derivedValue,
  derivedLabels,
  updateDerived,
  markDerived,
  closeDerived,
  noteSavedDerived,
  updateOpenDerived,
  requestValues,
  requestDerived,
  endRequestDerived,
};
