//! A recording's label sets looked up ahead of its build, on the thread pool while its
//! stop waits for V8 (`labelsPrefetch`): the build then finds most of its sets here rather
//! than in the label store (`capture::labels`), whose lookups are a large part of a
//! labeled build. Kept only while the recording is unbuilt.

use super::labels::{self, Packed};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

/// Ids looked up per hold of the store's mutex in `prefetch`: the main thread's label saves
/// wait for at most one batch (tens of µs), not for all of a recording's lookups.
const LOOKUP_BATCH: usize = 1024;

/// Label sets looked up ahead of recordings' builds (`prefetch`), as
/// `(thread, recording token, sets)`.
static PREFETCHED: Mutex<Vec<(i32, u32, Prefetched)>> = Mutex::new(Vec::new());

/// Sets builds found prefetched (for `hits`).
static PREFETCH_HITS: AtomicU64 = AtomicU64::new(0);

/// The sets `prefetch` found for one recording, by id, each for its build to take once.
/// Ascending ids in a vector (smaller than a hash map of them): a build
/// asks for them in about that order, so the next one asked is mostly the next one here.
#[derive(Default)]
pub struct Prefetched {
  sets: Vec<(u32, Option<Packed>)>,
  /// Where the next id asked for most likely is.
  next: usize,
  taken: u64,
}

impl Prefetched {
  /// Set `id`'s labels, if found and not taken yet.
  pub fn take(&mut self, id: u32) -> Option<Packed> {
    let at = match self.sets.get(self.next) {
      Some((next, _)) if *next == id => self.next,
      _ => self.sets.binary_search_by_key(&id, |(id, _)| *id).ok()?,
    };
    self.next = at + 1;
    let found = self.sets[at].1.take();
    self.taken += u64::from(found.is_some());
    found
  }
}

impl Drop for Prefetched {
  fn drop(&mut self) {
    PREFETCH_HITS.fetch_add(self.taken, Ordering::Relaxed);
  }
}

/// Looks up, ahead of the build of recording `token` of thread `tid`, the sets of `ids`
/// (its brackets' contexts), for `take_prefetched`. A long labeled recording's lookups are
/// a large part of its build; done while V8's own stop holds the main thread and the
/// thread pool waits, they are off the build's path. Kept only
/// while the recording is unbuilt: one built (or given up) before this ends keeps nothing.
pub fn prefetch(tid: i32, token: u32, ids: impl IntoIterator<Item = u32>) {
  let mut wanted: Vec<u32> = ids.into_iter().filter(|id| *id != 0).collect();
  // Nearly sorted already (ids are handed out in order): cheap, and the store's map keeps
  // ascending ids together.
  wanted.sort_unstable();
  wanted.dedup();
  let mut sets = Vec::with_capacity(wanted.len());
  for batch in wanted.chunks(LOOKUP_BATCH) {
    labels::lookup_each(batch, &mut sets);
  }
  let found = Prefetched {
    sets,
    ..Default::default()
  };
  // PREFETCHED, then the store: `recording_built` lets go of the token in the store first,
  // then of what is here, so either it sees this or this sees the token gone.
  let mut pre = PREFETCHED.lock().unwrap_or_else(|e| e.into_inner());
  let unbuilt = labels::unbuilt(tid, token);
  pre.retain(|(_, t, _)| *t != token);
  if unbuilt {
    pre.push((tid, token, found));
  }
}

/// Recordings whose prefetched sets no build has taken yet.
pub fn pending() -> usize {
  PREFETCHED.lock().unwrap_or_else(|e| e.into_inner()).len()
}

/// Sets builds found prefetched, since the process started.
pub fn hits() -> u64 {
  PREFETCH_HITS.load(Ordering::Relaxed)
}

/// What `prefetch` found for recording `token` (once: the build takes it). A set it did not
/// find (saved after it ran) is for `lookup`.
pub fn take_prefetched(token: u32) -> Option<Prefetched> {
  let mut pre = PREFETCHED.lock().unwrap_or_else(|e| e.into_inner());
  let at = pre.iter().position(|(_, t, _)| *t == token)?;
  Some(pre.swap_remove(at).2)
}

/// Looks up the sets of recording `token` of thread `tid` from `from_ns` on: the records
/// its build will read (`drain::records`), as their label-set ids.
pub fn prefetch_recording(tid: i32, token: u32, from_ns: u64) {
  let ids = super::drain::contexts(tid, from_ns, u64::MAX);
  prefetch(tid, token, ids);
}

/// Recording `token` was built (or never will be): what was found for it goes.
pub fn forget_recording(token: u32) {
  drop(take_prefetched(token));
}

/// Thread `tid` is gone: what was found for its recordings goes.
pub fn forget_thread(tid: i32) {
  PREFETCHED
    .lock()
    .unwrap_or_else(|e| e.into_inner())
    .retain(|(t, _, _)| *t != tid);
}

#[cfg(test)]
mod tests;
