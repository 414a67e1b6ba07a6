//! The table of profiled threads (`signal::THREADS`) as JS threads manage it: a thread
//! claims its cell, finds it, and frees it when its environment goes; and the cap on
//! profiled workers. Never in signal
//! context; the handler only reads the table (`signal::context_of`).

use super::signal::{gettid, AsyncPosition, FrameReader, ThreadContext, THREADS};
use std::sync::atomic::{AtomicU32, Ordering};

/// The calling thread's cell, if it registered (`register_thread`).
pub fn this_thread() -> Option<&'static ThreadContext> {
  of_thread(gettid())
}

/// Thread `tid`'s cell, if it holds one.
pub fn of_thread(tid: i32) -> Option<&'static ThreadContext> {
  THREADS
    .iter()
    .find(|t| t.tid.load(Ordering::Acquire) == tid)
    .map(|t| &**t)
}

/// How many threads hold a cell now (of `MAX_THREADS`).
pub fn registered() -> usize {
  THREADS.iter().filter(|t| t.tid.load(Ordering::Acquire) != 0).count()
}

/// Workers profiled at once, process-wide (every copy of the JS module shares it).
static PROFILED_WORKERS: AtomicU32 = AtomicU32::new(0);

/// Claims one of `max` places for a worker to be profiled; false past the cap. The
/// caller gives it back with `release_worker` when the worker goes.
pub fn claim_worker(max: u32) -> bool {
  PROFILED_WORKERS
    .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| (n < max).then_some(n + 1))
    .is_ok()
}

/// Gives back a place `claim_worker` gave.
pub fn release_worker() {
  PROFILED_WORKERS.fetch_sub(1, Ordering::AcqRel);
}

/// Claims the thread-context slot for the calling thread (or finds the one it has).
/// Returns its index and whether it was newly claimed, or None when all `MAX_THREADS`
/// are taken.
pub fn register_thread() -> Option<(usize, bool)> {
  let tid = gettid();
  if let Some(i) = THREADS.iter().position(|t| t.tid.load(Ordering::Acquire) == tid) {
    return Some((i, false));
  }
  for (i, t) in THREADS.iter().enumerate() {
    if t
      .tid
      .compare_exchange(0, tid, Ordering::AcqRel, Ordering::Relaxed)
      .is_ok()
    {
      for c in t.cell.iter() {
        c.store(0, Ordering::Relaxed);
      }
      t.position.clear();
      t.frame.clear();
      return Some((i, true));
    }
  }
  None
}

/// Frees slot `index` if thread `tid` still holds it (its isolate is going away: a
/// worker that ended). A signal racing with this reads either the old tid's context or
/// none; both are about a thread that runs no more JS.
pub fn unregister_thread(index: usize, tid: i32) {
  // Only the holder's own cleanup frees a slot, so nobody else changes it meanwhile.
  if let Some(t) = THREADS.get(index).filter(|t| t.tid.load(Ordering::Acquire) == tid) {
    // Cleared before release: the next holder never sees this thread's context, and
    // nothing reads its environment's async ids once they are freed.
    t.position.clear();
    t.frame.clear();
    for c in t.cell.iter() {
      c.store(0, Ordering::Relaxed);
    }
    t.tid.store(0, Ordering::Release);
  }
}

impl AsyncPosition {
  /// Not set: the handler reads no async ids (a thread that goes, or one that starts over).
  pub fn clear(&self) {
    self.depth_at.store(0, Ordering::Relaxed);
    self.exec_id_at.store(0, Ordering::Relaxed);
  }
}

impl FrameReader {
  /// Off, and nothing left to read (a thread that goes, or one that starts over).
  pub fn clear(&self) {
    self.enabled.store(false, Ordering::Release);
    self.cped.store(0, Ordering::Relaxed);
    self.gc_depth.store(0, Ordering::Relaxed);
    self.gc_context.store(0, Ordering::Relaxed);
    self.last_self.store(0, Ordering::Relaxed);
    // Global handles left here belong to an isolate that is gone (`context_frame::tear_down`
    // disposes them while it lives).
    for o in self.objects.iter().flatten() {
      o.store(0, Ordering::Relaxed);
    }
    for a in self.keys.iter().chain(&self.gc_stores).chain(&self.last_stores) {
      a.store(0, Ordering::Relaxed);
    }
    for h in self.hashes.iter() {
      h.store(0, Ordering::Relaxed);
    }
  }
}

/// Pointer to a thread slot's `CELL_LEN`-element cell, for the JS typed-array view.
pub fn context_cell(index: usize) -> Option<*mut u32> {
  // The cell's first element: the view covers all `CELL_LEN` from there.
  THREADS.get(index).map(|t| t.cell[0].as_ptr())
}

#[cfg(test)]
mod tests;
