//! The label switches of threads whose samples are joined by time (Windows), logged with
//! the time they happened on V8's sample clock.
//!
//! On Windows V8's sampler suspends the JS thread (`SuspendThread`), walks its stack and
//! stamps the sample while the thread is suspended: no code of ours runs at sample time.
//! So each switch JS publishes while a recording of its thread is unbuilt is logged here,
//! `{ time, context, sequence number }`, by a call from JS (`log`), and a build gives each
//! sample the set of the last switch before its stamp (`ring::switch_context`): as the
//! thread cannot switch while it is suspended, a switch before the stamp happened before
//! the sample, one after it after. V8 stamps whole µs, so a switch in the sample's own µs
//! leaves it unlabeled unless it changes nothing.
//!
//! A thread's switches wait in its pending list (only that thread adds to it, under a
//! lock nobody holds for long) until the drain (`drain::drain_into`) moves them to the
//! thread's log with its other records. The records are the ring's `Entry`: `before_ns`
//! and `after_ns` the switch's time, `generation` its sequence number on the thread, so
//! that a switch that could not be kept (a full pending list) shows as a gap, and no sample
//! after it is labeled until the next switch that was kept.

use super::ring::Entry;
use super::signal::{self, MAX_THREADS, THREADS};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

/// The context of a record that stands for switches that could not be kept: samples it
/// rules have no labels. (Label-set ids stay below `labels::ID_LIMIT`.)
pub const LOST: u32 = u32::MAX;
/// Switches a thread's pending list holds; past that they are lost until the drain runs.
pub const MAX_PENDING: usize = 1 << 20;

#[derive(Default)]
struct Pending {
  records: Vec<Entry>,
  /// The sequence number of the thread's next switch.
  next: u32,
  /// The first switch lost since the last drain: its time and number.
  lost: Option<(u64, u32)>,
}

#[allow(clippy::declare_interior_mutable_const)]
const NO_PENDING: Mutex<Pending> = Mutex::new(Pending {
  records: Vec::new(),
  next: 0,
  lost: None,
});
/// Pending switches, by thread cell (`signal::THREADS`).
static PENDING: [Mutex<Pending>; MAX_THREADS] = [NO_PENDING; MAX_THREADS];
/// Whether any switch was ever logged (the drain looks at the lists only then).
static USED: AtomicBool = AtomicBool::new(false);

fn lock(i: usize) -> Option<std::sync::MutexGuard<'static, Pending>> {
  PENDING.get(i).map(|m| m.lock().unwrap_or_else(|e| e.into_inner()))
}

/// The calling thread's cell, if it has one.
fn this_cell() -> Option<(usize, i32)> {
  let tid = signal::gettid();
  THREADS
    .iter()
    .position(|t| t.tid.load(Ordering::Acquire) == tid)
    .map(|i| (i, tid))
}

/// Whether switches are logged in this process: samples are joined by time, and V8's
/// sample clock is the one read here (`signal::v8_clock_is_qpc`). Otherwise nothing is
/// logged and no sample is labeled.
pub fn enabled() -> bool {
  #[cfg(windows)]
  {
    static QPC: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *QPC.get_or_init(signal::v8_clock_is_qpc)
  }
  #[cfg(not(windows))]
  {
    false
  }
}

/// Logs that the calling thread switched to label set `context` (0: none) now, if a
/// recording of the thread is unbuilt. Whether it was logged.
pub fn log(context: u32) -> bool {
  let Some((i, tid)) = this_cell() else {
    return false;
  };
  if !enabled() || THREADS[i].cell[signal::slot::LOGGING].load(Ordering::Relaxed) == 0 {
    return false;
  }
  log_at(i, tid, context, signal::bracket_clock_ns());
  true
}

/// Logs a switch of thread `tid` (cell `i`) to `context` at `now_ns`.
pub fn log_at(i: usize, tid: i32, context: u32, now_ns: u64) {
  let Some(mut p) = lock(i) else {
    return;
  };
  USED.store(true, Ordering::Relaxed);
  let seq = p.next;
  p.next = seq.wrapping_add(1);
  if p.records.len() >= MAX_PENDING {
    p.lost.get_or_insert((now_ns, seq));
    return;
  }
  p.records.push(Entry {
    before_ns: now_ns,
    after_ns: now_ns,
    cpu_ns: 0,
    context,
    generation: seq,
    tid,
  });
}

/// Logs the calling thread's published context as a switch now: what rules from a
/// recording's start (its thread may have switched long before).
pub fn log_current() {
  if !enabled() {
    return;
  }
  if let Some((i, tid)) = this_cell() {
    let context = THREADS[i].context();
    log_at(i, tid, context, signal::bracket_clock_ns());
  }
}

/// Takes the pending switches of every thread that has unbuilt recordings (its cell's
/// `LOGGING`), in time order per thread; `visit` gets each.
pub fn take_all(mut visit: impl FnMut(Entry)) {
  if !USED.load(Ordering::Relaxed) {
    return;
  }
  for (i, thread) in THREADS.iter().enumerate() {
    if thread.cell[signal::slot::LOGGING].load(Ordering::Relaxed) != 0 {
      take(i, &mut visit);
    }
  }
}

/// Takes cell `i`'s pending switches, in time order, and a `LOST` record after them where
/// some could not be kept.
pub fn take(i: usize, mut visit: impl FnMut(Entry)) {
  let Some(mut p) = lock(i) else {
    return;
  };
  if p.records.is_empty() && p.lost.is_none() {
    return;
  }
  let records = std::mem::take(&mut p.records);
  let lost = p.lost.take();
  drop(p);
  let tid = THREADS[i].tid.load(Ordering::Acquire);
  let tid = records.first().map_or(tid, |e| e.tid);
  records.into_iter().for_each(&mut visit);
  if let Some((at, seq)) = lost {
    visit(Entry {
      before_ns: at,
      after_ns: at,
      cpu_ns: 0,
      context: LOST,
      generation: seq,
      tid,
    });
  }
}

/// Cell `i` changes hands (a thread claims it, or its thread goes): its pending switches
/// are not the next thread's.
pub fn reset(i: usize) {
  if let Some(mut p) = lock(i) {
    *p = Pending::default();
  }
}

/// Tells the JS of thread `tid` how many of its recordings are unbuilt (it logs switches
/// while any is): the cell's `LOGGING` element. At none, its pending switches go.
pub fn set_logging(tid: i32, unbuilt: usize) {
  if let Some(i) = THREADS.iter().position(|t| t.tid.load(Ordering::Acquire) == tid) {
    THREADS[i].cell[signal::slot::LOGGING].store(unbuilt.min(u32::MAX as usize) as u32, Ordering::Relaxed);
    if unbuilt == 0 {
      if let Some(mut p) = lock(i) {
        p.records = Vec::new();
        p.lost = None;
      }
    }
  }
}

#[cfg(test)]
mod tests;
