//! The label sets samples may reference, kept natively (not signal context: JS threads and
//! the trace builders use this, under a mutex).
//!
//! JS publishes a label set's id in its thread's cell; the SIGPROF handler records that id
//! with each sample and tells JS so; JS then saves the set's labels here (`save`), so only
//! sampled sets are kept. A trace build looks the ids of its samples up here: nothing is
//! serialized at stop, and a trace holds exactly the sets its samples reference.
//!
//! - Ids come from one process-wide counter (`reserve_ids`), so copies of the JS module
//!   loaded side by side (jest's registry, hot reload) can never give two sets one id.
//! - Kept sets are bounded by count and by bytes (oldest saved dropped first; a sample
//!   whose set was dropped is counted in the trace's `labelsLostSamples`).
//! - A set is dropped once no unbuilt recording of its thread can reference it: it was
//!   last saved before the oldest unbuilt recording of its thread started.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};

/// A label set: `(key, value)` pairs, sorted by key.
pub type LabelSet = Vec<(String, String)>;

/// Label sets kept at most, process-wide.
pub const MAX_SETS: usize = 1 << 16;
/// Bytes of label keys and values kept at most, process-wide.
pub const MAX_BYTES: usize = 64 << 20;

/// The next label-set id to hand out (0 means "no labels").
static NEXT_ID: AtomicU32 = AtomicU32::new(1);

/// Reserves `count` consecutive ids and returns the first. After 2³² − 1 ids the counter
/// wraps to 1 (a set is kept for seconds to minutes; ids come back after billions).
pub fn reserve_ids(count: u32) -> u32 {
  let count = count.max(1);
  let mut first = NEXT_ID.load(Ordering::Relaxed);
  loop {
    let (start, next) = match first.checked_add(count) {
      Some(next) if first != 0 => (first, next),
      _ => (1, 1 + count),
    };
    match NEXT_ID.compare_exchange_weak(first, next, Ordering::Relaxed, Ordering::Relaxed) {
      Ok(_) => return start,
      Err(seen) => first = seen,
    }
  }
}

struct Saved {
  labels: Arc<LabelSet>,
  tid: i32,
  saved_ns: u64,
  seq: u64,
  bytes: usize,
}

#[derive(Default)]
struct Store {
  sets: HashMap<u32, Saved>,
  /// `(id, seq)` in save order; an entry whose seq is not its set's is stale.
  order: VecDeque<(u32, u64)>,
  /// Unbuilt recordings per thread: `(token, start_ns)`.
  unbuilt: HashMap<i32, Vec<(u32, u64)>>,
  bytes: usize,
  dropped: u64,
  next_seq: u64,
  next_token: u32,
}

impl Store {
  fn remove(&mut self, id: u32) -> bool {
    match self.sets.remove(&id) {
      Some(s) => {
        self.bytes -= s.bytes;
        true
      }
      None => false,
    }
  }

  /// Drops the oldest saved sets until within the bounds (counted as dropped).
  fn evict(&mut self) {
    while self.sets.len() > MAX_SETS || self.bytes > MAX_BYTES {
      let Some((id, seq)) = self.order.pop_front() else { break };
      if self.sets.get(&id).is_some_and(|s| s.seq == seq) && self.remove(id) {
        self.dropped += 1;
      }
    }
  }

  /// Forgets stale order entries once they outnumber the live ones.
  fn compact(&mut self) {
    if self.order.len() > 2 * self.sets.len() + 1024 {
      let sets = &self.sets;
      self
        .order
        .retain(|(id, seq)| sets.get(id).is_some_and(|s| s.seq == *seq));
    }
  }

  /// Drops thread `tid`'s sets that no unbuilt recording of it can reference.
  fn prune(&mut self, tid: i32) {
    let cutoff = self
      .unbuilt
      .get(&tid)
      .and_then(|r| r.iter().map(|(_, start)| *start).min())
      .unwrap_or(u64::MAX);
    let before = self.bytes;
    let mut freed = 0;
    self.sets.retain(|_, s| {
      let keep = s.tid != tid || s.saved_ns >= cutoff;
      if !keep {
        freed += s.bytes;
      }
      keep
    });
    self.bytes = before - freed;
    self.compact();
  }
}

static STORE: Mutex<Option<Store>> = Mutex::new(None);

fn with_store<T>(f: impl FnOnce(&mut Store) -> T) -> T {
  let mut guard = STORE.lock().unwrap_or_else(|e| e.into_inner());
  f(guard.get_or_insert_with(Store::default))
}

/// A label set from `[key, value, key, value, ...]`, sorted by key (the last of a
/// repeated key wins); `None` for an odd-length list.
pub fn label_set(flat: Vec<String>) -> Option<LabelSet> {
  if flat.len() % 2 != 0 {
    return None;
  }
  let mut set: LabelSet = Vec::with_capacity(flat.len() / 2);
  let mut it = flat.into_iter();
  while let (Some(k), Some(v)) = (it.next(), it.next()) {
    set.push((k, v));
  }
  set.reverse();
  set.sort_by(|a, b| a.0.cmp(&b.0));
  set.dedup_by(|a, b| a.0 == b.0);
  Some(set)
}

/// Saves (or refreshes) label set `id` of thread `tid`, sampled by time `now_ns`.
pub fn save(tid: i32, id: u32, labels: LabelSet, now_ns: u64) {
  if id == 0 {
    return;
  }
  let bytes = labels.iter().map(|(k, v)| k.len() + v.len() + 16).sum::<usize>() + 64;
  with_store(|s| {
    s.remove(id);
    let seq = s.next_seq;
    s.next_seq += 1;
    s.sets.insert(
      id,
      Saved {
        labels: Arc::new(labels),
        tid,
        saved_ns: now_ns,
        seq,
        bytes,
      },
    );
    s.bytes += bytes;
    s.order.push_back((id, seq));
    s.evict();
    s.compact();
  });
}

/// The labels of set `id`, if kept.
pub fn lookup(id: u32) -> Option<Arc<LabelSet>> {
  with_store(|s| s.sets.get(&id).map(|set| set.labels.clone()))
}

/// A recording of thread `tid` started at `start_ns`; returns its token.
pub fn recording_started(tid: i32, start_ns: u64) -> u32 {
  with_store(|s| {
    s.next_token = s.next_token.wrapping_add(1).max(1);
    let token = s.next_token;
    s.unbuilt.entry(tid).or_default().push((token, start_ns));
    token
  })
}

/// The trace of recording `token` was built (or never will be): its sets may go.
pub fn recording_built(tid: i32, token: u32) {
  with_store(|s| {
    if let Some(list) = s.unbuilt.get_mut(&tid) {
      list.retain(|(t, _)| *t != token);
      if list.is_empty() {
        s.unbuilt.remove(&tid);
      }
    }
    s.prune(tid);
  });
}

/// Thread `tid` is gone (a worker ended): everything it kept goes.
pub fn forget_thread(tid: i32) {
  with_store(|s| {
    s.unbuilt.remove(&tid);
    s.prune(tid);
  });
}

/// `(sets kept, bytes kept, sets dropped to the bounds, unbuilt recordings)`.
pub fn stats() -> (usize, usize, u64, usize) {
  with_store(|s| (s.sets.len(), s.bytes, s.dropped, s.unbuilt.values().map(Vec::len).sum()))
}

#[cfg(test)]
mod tests {
  use super::*;

  fn set(k: &str, v: &str) -> LabelSet {
    vec![(k.to_owned(), v.to_owned())]
  }

  #[test]
  fn ids_are_unique_and_never_zero() {
    let a = reserve_ids(10);
    let b = reserve_ids(10);
    assert!(a != 0 && b != 0);
    assert!(b >= a + 10 || b < a, "blocks do not overlap");
  }

  #[test]
  fn flat_lists_become_sorted_sets() {
    let flat = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    assert_eq!(
      label_set(flat(&["b", "2", "a", "1", "b", "3"])),
      Some(vec![("a".into(), "1".into()), ("b".into(), "3".into())])
    );
    assert_eq!(label_set(flat(&["a"])), None);
  }

  #[test]
  fn sets_live_while_an_unbuilt_recording_can_reference_them() {
    let tid = -7; // not a real thread: this test's own slice of the store
    let id = reserve_ids(3);
    save(tid, id, set("endpoint", "GET /a"), 100);
    let token = recording_started(tid, 150);
    save(tid, id + 1, set("endpoint", "GET /b"), 200);
    recording_built(tid, 0); // not a recording of this thread: only prunes
    assert!(lookup(id).is_none(), "saved before every unbuilt recording started");
    assert!(lookup(id + 1).is_some(), "saved while a recording runs");
    let later = recording_started(tid, 300);
    recording_built(tid, token);
    assert!(lookup(id + 1).is_none(), "saved before the remaining recording started");
    save(tid, id + 2, set("endpoint", "GET /c"), 400);
    assert_eq!(lookup(id + 2).unwrap()[0].1, "GET /c");
    recording_built(tid, later);
    assert!(lookup(id + 2).is_none(), "no recording left to reference it");
  }
}
