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

/** Counts for tests and diagnostics (process-wide). */
function labelStats() {
  return available ? native.labelStats() : { saved: 0, bytes: 0, dropped: 0, unbuilt: 0, prefetched: 0, prefetchHits: 0, records: 0 };
}

module.exports = { save, saveEach, labelStats };
