//! Draining the SIGPROF ring into per-thread logs while recordings run, so that a
//! recording longer than the ring holds (65,536 records shared by every sampling thread:
//! 6.5 s at 0.1 ms, ~65 s at 1 ms) keeps every bracket, hence its labels and CPU time.
//!
//! A background thread (not signal context: it reads the ring like any reader, through
//! the slots' seqlocks) copies new records, every `PERIOD`, into the log of their thread,
//! for threads that have an unbuilt recording; it needs no event loop, so a thread whose JS
//! is blocked keeps its brackets too. A trace build drains once more and takes its thread's
//! records from the log. A thread's records are dropped once no unbuilt recording of it
//! can reference them, and a log holds at most `MAX_PER_THREAD` records (oldest dropped).
//!
//! Where samples are joined by time (Windows), the records are label switches
//! (`switches`), which the drain moves from their pending lists to the same logs. A
//! record there rules until the next, so pruning keeps the last one before the cut.

use super::ring::{read, snapshot, Entry};
use super::signal::{Slot, RING, RING_CAPACITY, RING_WRITE};
use super::switches;
use std::collections::{HashMap, VecDeque};
use std::sync::atomic::Ordering;
use std::sync::{Condvar, Mutex};
use std::time::Duration;

/// How often the background thread drains while recordings run.
const PERIOD: Duration = Duration::from_millis(100);
/// Records a thread's log keeps at most (40 bytes each: 160 MiB).
pub const MAX_PER_THREAD: usize = 1 << 22;
/// Records are kept from this long before a recording's start (a sample at the window's
/// edge was bracketed by a signal that began just before it).
const SLACK_NS: u64 = 1_000_000_000;

#[derive(Default)]
struct ThreadLog {
  records: VecDeque<Entry>,
  /// Unbuilt recordings: `(token, start_ns)`.
  unbuilt: Vec<(u32, u64)>,
}

impl ThreadLog {
  fn oldest_start(&self) -> Option<u64> {
    self.unbuilt.iter().map(|(_, start)| *start).min()
  }

  /// Drops the records no unbuilt recording can reference: those more than the slack
  /// before the oldest one's start, but the last of them (a label switch rules on).
  fn prune(&mut self) {
    if let Some(start) = self.oldest_start() {
      while self.records.get(1).is_some_and(|e| e.before_ns + SLACK_NS < start) {
        self.records.pop_front();
      }
    }
  }

  fn keep(&mut self, e: Entry) {
    if self.oldest_start().is_some_and(|start| e.before_ns + SLACK_NS >= start) {
      if self.records.len() >= MAX_PER_THREAD {
        self.records.pop_front();
      }
      self.records.push_back(e);
    }
  }
}

#[derive(Default)]
struct Logs {
  /// The ring index to read next.
  next: u64,
  threads: HashMap<i32, ThreadLog>,
  /// Whether the background thread was started.
  running: bool,
}

static LOGS: Mutex<Option<Logs>> = Mutex::new(None);
static WAKE: Condvar = Condvar::new();

fn with_logs<T>(f: impl FnOnce(&mut Logs) -> T) -> T {
  let mut guard = LOGS.lock().unwrap_or_else(|e| e.into_inner());
  f(guard.get_or_insert_with(Logs::default))
}

/// Copies the ring's new records (from `logs.next` to `write`) into the logs of threads
/// that have unbuilt recordings. A record still being written near the end is left for
/// the next drain; older unreadable ones were overwritten before this drain got to them.
fn drain_into(logs: &mut Logs, slots: &[Slot], write: u64) {
  let cap = slots.len() as u64;
  let mut index = logs.next.max(write.saturating_sub(cap));
  while index < write {
    match read(slots, index) {
      Some(e) => {
        if let Some(log) = logs.threads.get_mut(&e.tid) {
          log.keep(e);
        }
      }
      // A handler finishes its record within microseconds of claiming it.
      None
        if write - index <= 64 && slots[(index as usize) & (slots.len() - 1)].seq.load(Ordering::Acquire) <= index =>
      {
        break
      }
      None => {}
    }
    index += 1;
  }
  logs.next = index;
}

/// Drains the real ring, and the label switches logged where samples are joined by time.
fn drain_all(logs: &mut Logs) {
  drain_into(logs, &RING, RING_WRITE.load(Ordering::Acquire));
  switches::take_all(|e| {
    if let Some(log) = logs.threads.get_mut(&e.tid) {
      log.keep(e);
    }
  });
}

/// Drains now.
pub fn drain() {
  with_logs(drain_all);
}

fn background() {
  let mut guard = LOGS.lock().unwrap_or_else(|e| e.into_inner());
  loop {
    let busy = guard
      .as_ref()
      .is_some_and(|l| l.threads.values().any(|t| !t.unbuilt.is_empty()));
    if busy {
      drain_all(guard.get_or_insert_with(Logs::default));
      guard = WAKE.wait_timeout(guard, PERIOD).unwrap_or_else(|e| e.into_inner()).0;
    } else {
      guard = WAKE.wait(guard).unwrap_or_else(|e| e.into_inner());
    }
  }
}

/// A recording of thread `tid` started at `start_ns`: its records are kept from now on.
pub fn recording_started(tid: i32, token: u32, start_ns: u64) {
  let start_thread = with_logs(|logs| {
    // Records written before now are older than this recording (and its slack is covered
    // by the ring itself): start reading where the ring is, unless a drain is under way.
    if logs.threads.values().all(|t| t.unbuilt.is_empty()) {
      logs.next = RING_WRITE.load(Ordering::Acquire).saturating_sub(RING_CAPACITY as u64);
    }
    let log = logs.threads.entry(tid).or_default();
    log.unbuilt.push((token, start_ns));
    switches::set_logging(tid, log.unbuilt.len());
    !std::mem::replace(&mut logs.running, true)
  });
  if start_thread {
    let spawned = std::thread::Builder::new()
      .name("selfprof-drain".into())
      .spawn(background);
    if spawned.is_err() {
      with_logs(|logs| logs.running = false);
    }
  }
  WAKE.notify_all();
}

/// The trace of recording `token` of thread `tid` was built (or never will be): records
/// only it could reference are dropped.
pub fn recording_built(tid: i32, token: u32) {
  with_logs(|logs| {
    if let Some(log) = logs.threads.get_mut(&tid) {
      log.unbuilt.retain(|(t, _)| *t != token);
      switches::set_logging(tid, log.unbuilt.len());
      if log.unbuilt.is_empty() {
        logs.threads.remove(&tid);
      } else {
        log.prune();
      }
    }
  });
}

/// Recording `token` of thread `tid` was joined up to its records from `from_ns` on (a
/// long recording's segments, `trace::join`): those before (less the slack) go, unless an
/// older unbuilt recording of the thread still needs them.
pub fn recording_joined(tid: i32, token: u32, from_ns: u64) {
  with_logs(|logs| {
    let Some(log) = logs.threads.get_mut(&tid) else {
      return;
    };
    for (t, start) in log.unbuilt.iter_mut() {
      if *t == token {
        *start = (*start).max(from_ns);
      }
    }
    log.prune();
  });
}

/// Thread `tid` is gone (a worker ended): its log goes.
pub fn forget_thread(tid: i32) {
  with_logs(|logs| {
    logs.threads.remove(&tid);
  });
}

/// Visits thread `tid`'s records whose bracket starts in `[from_ns, until_ns]`, in time
/// order, after a last drain: those of its log, or, if the log has none (a recording the
/// drain was not told of), those the ring still holds. Both a build and its look-ahead
/// read a recording's records this way. With `prior`, the last record before `from_ns`
/// comes first (a label switch that rules at `from_ns`).
pub fn each_record(tid: i32, from_ns: u64, until_ns: u64, prior: bool, mut visit: impl FnMut(&Entry)) {
  let in_window = |e: &&Entry| e.before_ns >= from_ns && e.before_ns <= until_ns;
  let logged = with_logs(|logs| {
    drain_all(logs);
    let mut logged = false;
    if let Some(log) = logs.threads.get(&tid) {
      // A thread's records are in time order (its signals never overlap): a build that
      // joins a long recording in segments reads from where the last one ended, not the
      // whole log again.
      let first = log.records.partition_point(|e| e.before_ns < from_ns);
      if let Some(e) = first.checked_sub(1).filter(|_| prior).and_then(|i| log.records.get(i)) {
        logged = true;
        visit(e);
      }
      for e in log
        .records
        .range(first..)
        .take_while(|e| e.before_ns <= until_ns)
        .filter(in_window)
      {
        logged = true;
        visit(e);
      }
    }
    logged
  });
  if !logged {
    let ring = snapshot(
      &RING,
      RING_WRITE.load(Ordering::Acquire),
      tid,
      if prior { 0 } else { from_ns },
      until_ns,
    );
    let first = ring.partition_point(|e| e.before_ns < from_ns);
    let from = if prior { first.saturating_sub(1) } else { first };
    ring[from..].iter().for_each(visit);
  }
}

/// Thread `tid`'s records whose bracket starts in `[from_ns, until_ns]`, as `each_record`
/// visits them.
pub fn records(tid: i32, from_ns: u64, until_ns: u64, prior: bool) -> Vec<Entry> {
  let mut out = Vec::new();
  each_record(tid, from_ns, until_ns, prior, |e| out.push(*e));
  out
}

/// The contexts of the records `records` returns, without copying the records (a long
/// recording has ~128k: 5 MB): in time order, "no context" and repeats in a row left out.
pub fn contexts(tid: i32, from_ns: u64, until_ns: u64) -> Vec<u32> {
  let mut out: Vec<u32> = Vec::new();
  each_record(tid, from_ns, until_ns, crate::capture::BY_TIME, |e| {
    if e.context != 0 && out.last() != Some(&e.context) {
      out.push(e.context);
    }
  });
  out
}

/// The brackets the drained logs hold, every thread's, for tests and diagnostics.
pub fn records_held() -> usize {
  with_logs(|logs| logs.threads.values().map(|t| t.records.len()).sum())
}

#[cfg(test)]
mod tests;
