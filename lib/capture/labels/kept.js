'use strict';
// Keeping the labels of sampled sets. Most label sets are never sampled: only those a
// signal recorded are saved, natively (src/capture/labels.rs), where trace builds look them
// up by id. Nothing is serialized at stop.

const { native } = require('../../native');
const { warnOnce } = require('../../log');
const { available, recordingsStarted } = require('./thread');
const { labelsOf, flatOf, noteSavedDerived } = require('./sets');

/** Keeps a sampled store's labels for the traces that may reference it. */
function save(store) {
  saveEach([store]);
}

/** Keeps the labels of sampled `stores` (one native call for all of them). */
function saveEach(stores) {
  if (!available) return;
  const stamp = recordingsStarted();
  const taken = [];
  const ids = [];
  const lengths = [];
  const flat = [];
  for (const store of stores) {
    // Marked now: a store queued twice in one drain goes once.
    if (store.id === 0 || store.savedFor === stamp) continue;
    labelsOf(store);
    store.flat ??= flatOf(store.labels);
    taken.push([store, store.savedFor]);
    store.savedFor = stamp;
    ids.push(store.id);
    lengths.push(store.flat.length);
    for (let i = 0; i < store.flat.length; i++) flat.push(store.flat[i]);
  }
  if (ids.length === 0) return;
  try {
    native.saveLabelSets(ids, lengths, flat);
  } catch (err) {
    for (const [store, before] of taken) store.savedFor = before;
    warnOnce('labels-save', `selfprof: a label set could not be kept: ${err.message}`);
    return;
  }
  for (const [store] of taken) noteSavedDerived(store);
}

/**
 * Keeps each `[store, of]`'s labels as those of `of`, a store saved before it with the same
 * labels (samples of one request under several pair ids, tracers.js): natively an alias of
 * `of`'s set, nothing encoded again. A store whose `of` is no longer kept is saved itself.
 */
function saveAliases(pairs) {
  if (!available || pairs.length === 0) return;
  const stamp = recordingsStarted();
  const todo = pairs.filter(([store, of]) => store.id !== 0 && store.savedFor !== stamp && of.savedFor === stamp);
  let kept = [];
  try {
    kept = native.aliasLabelSets(
      todo.map(([store]) => store.id),
      todo.map(([, of]) => of.id),
    );
  } catch (err) {
    warnOnce('labels-save', `selfprof: a label set could not be kept: ${err.message}`);
  }
  const unsaved = [];
  todo.forEach(([store, of], i) => {
    if (!kept[i]) return unsaved.push(store);
    // The same labels, derived from the same span: amended with it.
    store.labels = of.labels;
    store.flat = of.flat;
    if (of.derived !== undefined) {
      store.derived = of.derived;
      store.derivedKeys = of.derivedKeys;
      store.derivedVersion = of.derivedVersion;
    }
    store.savedFor = stamp;
    noteSavedDerived(store);
  });
  saveEach(unsaved);
}

/** Counts for tests and diagnostics (process-wide). */
function labelStats() {
  return available ? native.labelStats() : { saved: 0, bytes: 0, dropped: 0, unbuilt: 0, prefetched: 0, prefetchHits: 0, records: 0 };
}

module.exports = { save, saveEach, saveAliases, labelStats };
