//! Reading the SIGPROF ring (written by `signal.rs`) and joining V8's samples to it.

use crate::capture::signal::Slot;
use std::sync::atomic::{fence, Ordering};

/// One whole ring entry: a SIGPROF bracket on one thread.
pub use crate::capture::signal::Record as Entry;

/// Copies the whole entries of thread `tid` whose bracket starts in `[from_ns, until_ns]`,
/// sorted by time. `write` is the ring's write count; entries still being written, or
/// overwritten while read, are skipped.
pub fn snapshot(slots: &[Slot], write: u64, tid: i32, from_ns: u64, until_ns: u64) -> Vec<Entry> {
  let cap = slots.len() as u64;
  debug_assert!(cap.is_power_of_two());
  let mut out: Vec<Entry> = (write.saturating_sub(cap)..write)
    .filter_map(|index| read(slots, index))
    .filter(|e| e.tid == tid && e.before_ns >= from_ns && e.before_ns <= until_ns)
    .collect();
  out.sort_by_key(|e| e.before_ns);
  out
}

/// Reads ring record `index` if it is whole (not being written, not overwritten): the
/// seqlock read shared by `snapshot` and the drain thread.
pub fn read(slots: &[Slot], index: u64) -> Option<Entry> {
  let slot = &slots[(index as usize) & (slots.len() - 1)];
  let seq = slot.seq.load(Ordering::Acquire);
  if seq != index + 1 {
    return None;
  }
  let e = Entry {
    before_ns: slot.before_ns.load(Ordering::Relaxed),
    after_ns: slot.after_ns.load(Ordering::Relaxed),
    cpu_ns: slot.cpu_ns.load(Ordering::Relaxed),
    context: slot.context.load(Ordering::Relaxed),
    generation: slot.generation.load(Ordering::Relaxed),
    tid: slot.tid.load(Ordering::Relaxed),
  };
  fence(Ordering::Acquire);
  (slot.seq.load(Ordering::Relaxed) == seq).then_some(e)
}

/// How long after our handler's second clock read V8's stamp of the same sample may be.
///
/// Measured on Node 20 and 24 (x86-64 Linux, under CPU and allocation load, 1 ms
/// interval): V8's stamp lies within 1 µs after our `after` read for every sample that
/// came through a signal (V8 takes it as its handler finishes, just after our read).
/// Samples V8 records without a signal (at profile start, on deoptimization) lie tens to
/// hundreds of µs after the previous bracket and must not match it.
pub const MATCH_SLACK_NS: u64 = 20_000;

/// A V8 sample stamp (µs) as a whole number of µs, or None if it cannot be one.
fn stamp(t_us: f64) -> Option<u64> {
  (t_us.is_finite() && t_us >= 0.0).then_some(t_us as u64)
}

/// Where stamp `t` (whole µs) falls among the brackets: the number of brackets starting at
/// or before it.
fn point(entries: &[Entry], t: u64) -> usize {
  entries.partition_point(|e| e.before_ns / 1000 <= t)
}

/// `point` for a recording's samples, which come in time order: amortized O(1) per
/// sample rather than a binary search each (a stamp out of order still gets one).
#[derive(Default)]
pub struct Cursor {
  at: usize,
  last: u64,
}

impl Cursor {
  /// How many of `entries` lie wholly behind the cursor: all before the bracket of the
  /// last stamp sought (a later stamp finds its bracket, or the one before it, at or after
  /// that one).
  pub fn passed(&self, entries: &[Entry]) -> usize {
    self.at.min(entries.len()).saturating_sub(1)
  }

  fn seek(&mut self, entries: &[Entry], t: u64) -> usize {
    if t < self.last || self.at > entries.len() {
      self.at = point(entries, t);
    } else {
      while entries.get(self.at).is_some_and(|e| e.before_ns / 1000 <= t) {
        self.at += 1;
      }
    }
    self.last = t;
    self.at
  }
}

/// Finds the ring entry of the signal that produced a V8 sample stamped `t_us` (whole
/// microseconds of CLOCK_MONOTONIC): the latest bracket starting at or before the stamp,
/// if the stamp is no later than `MATCH_SLACK_NS` after the bracket's end. (The builder
/// joins through `match_sample`; this and `context_between` state the rule it keeps.)
#[cfg(test)]
pub fn find(entries: &[Entry], t_us: f64) -> Option<&Entry> {
  let t = stamp(t_us)?;
  found(entries, point(entries, t), t)
}

fn found(entries: &[Entry], i: usize, t: u64) -> Option<&Entry> {
  let e = entries.get(i.checked_sub(1)?)?;
  (t.saturating_mul(1000) <= e.after_ns.saturating_add(MATCH_SLACK_NS)).then_some(e)
}

/// For a sample V8 took without a signal (`find` found no bracket): the context in effect,
/// if it is certain — the signals just before and just after it saw the same context and
/// no context switch happened between them (same generation).
#[cfg(test)]
pub fn context_between(entries: &[Entry], t_us: f64) -> Option<u32> {
  let t = stamp(t_us)?;
  between(entries, point(entries, t))
}

fn between(entries: &[Entry], i: usize) -> Option<u32> {
  let (a, b) = (entries.get(i.checked_sub(1)?)?, entries.get(i)?);
  (a.generation == b.generation && a.context == b.context).then_some(a.context)
}

/// How a V8 sample joins the brackets.
pub enum Match<'a> {
  /// The signal that produced it.
  Signal(&'a Entry),
  /// No signal of its own, but the context in effect is certain (`context_between`).
  Between(u32),
  None,
}

/// `find`, or else `context_between`, for samples in time order (`cursor` keeps the
/// place); a bracket starting at `taken` (the previous sample's) is not matched again.
pub fn match_sample<'a>(entries: &'a [Entry], cursor: &mut Cursor, t_us: f64, taken: Option<u64>) -> Match<'a> {
  let Some(t) = stamp(t_us) else {
    return Match::None;
  };
  let i = cursor.seek(entries, t);
  if let Some(e) = found(entries, i, t).filter(|e| taken != Some(e.before_ns)) {
    return Match::Signal(e);
  }
  between(entries, i).map_or(Match::None, Match::Between)
}

/// Where samples are joined by time (`capture::switches`: the entries are the thread's
/// label switches, in time order): the label-set id in effect at V8's stamp `t_us`, if it
/// is certain. The thread cannot switch while V8 samples it (it is suspended from before
/// the stack walk until after the stamp), so a switch stamped before the sample's µs
/// happened before the sample and one after it after; the last one before rules, unless
/// a switch in the same µs (which may be on either side) changes the set, or a switch is
/// missing between it and the next one kept (their sequence numbers are not consecutive),
/// or it stands for switches that were lost (`switches::LOST`): then the sample has none.
pub fn switch_context(entries: &[Entry], cursor: &mut Cursor, t_us: f64) -> Option<u32> {
  let t = stamp(t_us)?;
  // The switches stamped before the sample's µs.
  let i = cursor.seek(entries, t.checked_sub(1)?);
  let rules = entries.get(i.checked_sub(1)?)?;
  if rules.context == crate::capture::switches::LOST {
    return None;
  }
  let mut seq = rules.generation;
  for e in entries.get(i..).unwrap_or_default() {
    if e.generation != seq.wrapping_add(1) {
      return None;
    }
    if e.before_ns / 1000 > t {
      break;
    }
    if e.context != rules.context {
      return None;
    }
    seq = e.generation;
  }
  Some(rules.context)
}

#[cfg(test)]
mod tests {
  use super::*;
  use std::sync::atomic::AtomicU64;

  use crate::capture::signal::EMPTY_SLOT;

  fn ring(n: usize) -> Vec<Slot> {
    (0..n).map(|_| EMPTY_SLOT).collect()
  }

  fn write(slots: &[Slot], index: u64, before: u64, after: u64, context: u32, tid: i32) {
    let slot = &slots[(index as usize) & (slots.len() - 1)];
    let record = Entry {
      before_ns: before,
      after_ns: after,
      cpu_ns: before / 2,
      context,
      generation: context * 3,
      tid,
    };
    slot.write(index, &record);
  }

  #[test]
  fn snapshot_keeps_whole_entries_of_one_thread_in_the_window() {
    let slots = ring(8);
    for i in 0..6u64 {
      write(
        &slots,
        i,
        1000 * (10 - i),
        1000 * (10 - i) + 5,
        i as u32,
        if i == 2 { 7 } else { 1 },
      );
    }
    // Entry 4 is being written.
    slots[4].seq.store(0, Ordering::Relaxed);
    let got = snapshot(&slots, 6, 1, 5_000, 9_000);
    let ctx: Vec<u32> = got.iter().map(|e| e.context).collect();
    assert_eq!(
      ctx,
      vec![5, 3, 1],
      "sorted by time, thread 7 and the torn entry left out"
    );
  }

  #[test]
  fn snapshot_after_wrap_reads_only_the_newest_capacity() {
    let slots = ring(4);
    for i in 0..10u64 {
      write(&slots, i, 1000 * i, 1000 * i + 1, i as u32, 1);
    }
    let got = snapshot(&slots, 10, 1, 0, u64::MAX);
    assert_eq!(got.iter().map(|e| e.context).collect::<Vec<_>>(), vec![6, 7, 8, 9]);
    // A reader that thinks fewer were written sees the overwritten slots as stale.
    assert!(snapshot(&slots, 5, 1, 0, u64::MAX).is_empty());
  }

  fn e(before_ns: u64, after_ns: u64, context: u32, generation: u32) -> Entry {
    Entry {
      before_ns,
      after_ns,
      cpu_ns: 0,
      context,
      generation,
      tid: 1,
    }
  }

  #[test]
  fn context_between_signals_only_when_no_switch_happened() {
    let entries = [
      e(1_000_000, 1_001_000, 5, 10),
      e(2_000_000, 2_001_000, 5, 10),
      e(3_000_000, 3_001_000, 5, 11),
    ];
    assert_eq!(
      context_between(&entries, 1500.0),
      Some(5),
      "same context, same generation"
    );
    assert_eq!(
      context_between(&entries, 2500.0),
      None,
      "a switch (and back) happened between"
    );
    assert_eq!(context_between(&entries, 3500.0), None, "no signal after it");
    assert_eq!(context_between(&entries, 500.0), None, "no signal before it");
    let changed = [e(1_000_000, 1_001_000, 5, 10), e(2_000_000, 2_001_000, 6, 10)];
    assert_eq!(
      context_between(&changed, 1500.0),
      None,
      "different contexts are never bridged"
    );
  }

  #[test]
  fn find_matches_the_latest_bracket_just_before_a_microsecond_stamp() {
    let entries = [
      e(1_000_100, 1_004_900, 1, 0),
      e(2_000_000, 2_000_999, 2, 1),
      e(3_000_500, 3_001_500, 3, 2),
    ];
    let ctx = |t: f64| find(&entries, t).map(|e| e.context);
    assert_eq!(ctx(1000.0), Some(1), "stamp truncated to the µs the bracket starts in");
    assert_eq!(ctx(1004.0), Some(1));
    assert_eq!(ctx(1005.0), Some(1), "V8 stamps just after our second read");
    assert_eq!(ctx(1024.0), Some(1), "within the slack");
    assert_eq!(ctx(1025.0), None, "a sample V8 took without a signal");
    assert_eq!(ctx(999.0), None, "before any bracket");
    assert_eq!(ctx(2000.0), Some(2));
    assert_eq!(ctx(3000.0), Some(3));
    assert_eq!(ctx(3002.0), Some(3));
    assert_eq!(ctx(5000.0), None);
    assert_eq!(ctx(f64::NAN), None);
    assert_eq!(find(&[], 1.0), None);
  }

  #[test]
  fn the_cursor_joins_as_the_binary_search_does_in_order_or_not() {
    // Brackets every ~1 ms with context switches, stamps in time order, then a few out
    // of order (a cursor must still answer as `find`/`context_between` would).
    let entries: Vec<Entry> = (0..400u64)
      .map(|i| {
        e(
          i * 1_000_000 + (i * 7919) % 300_000,
          i * 1_000_000 + 400_000,
          (i / 3) as u32,
          (i / 5) as u32,
        )
      })
      .collect();
    let mut stamps: Vec<f64> = (0..2_000u64).map(|k| (k * 211 + (k * 7) % 97) as f64).collect();
    stamps.extend([150_000.0, 3.0, 399_500.0, -1.0, f64::NAN, 10.0, 10.0, 1e12]);
    let mut cursor = Cursor::default();
    for (k, &t) in stamps.iter().enumerate() {
      let taken = (k % 4 == 0).then(|| find(&entries, t).map(|e| e.before_ns)).flatten();
      let want = match find(&entries, t).filter(|e| taken != Some(e.before_ns)) {
        Some(e) => (Some(e.before_ns), None),
        None => (None, context_between(&entries, t)),
      };
      let got = match match_sample(&entries, &mut cursor, t, taken) {
        Match::Signal(e) => (Some(e.before_ns), None),
        Match::Between(c) => (None, Some(c)),
        Match::None => (None, None),
      };
      assert_eq!(got, want, "stamp {t} (#{k})");
    }
  }

  /// A label switch at `ns` to `context`, the `seq`-th of its thread.
  fn switch(ns: u64, context: u32, seq: u32) -> Entry {
    e(ns, ns, context, seq)
  }

  #[test]
  fn by_time_a_sample_takes_the_last_switch_before_its_microsecond_and_only_when_certain() {
    let log = [
      switch(1_000_500, 7, 0),
      switch(3_000_200, 8, 1),
      // Two switches in µs 5000: 8 -> 9 -> 8.
      switch(5_000_100, 9, 2),
      switch(5_000_900, 8, 3),
      switch(7_000_000, 8, 4),
      // Switch 6 is missing: between 5 and 7 nothing is certain.
      switch(9_000_000, 10, 5),
      switch(12_000_000, 11, 7),
      switch(14_000_000, crate::capture::switches::LOST, 8),
      switch(16_000_000, 12, 11),
    ];
    let at = |t: f64| switch_context(&log, &mut Cursor::default(), t);
    assert_eq!(at(999.0), None, "before the first switch");
    assert_eq!(at(1000.0), None, "in the first switch's µs: it may be after");
    assert_eq!(at(1001.0), Some(7));
    assert_eq!(at(2999.0), Some(7));
    assert_eq!(at(3000.0), None, "7 or 8");
    assert_eq!(at(3001.0), Some(8));
    assert_eq!(at(4999.0), Some(8));
    assert_eq!(at(5000.0), None, "8, 9 or 8 again");
    assert_eq!(at(5001.0), Some(8));
    assert_eq!(at(7000.0), Some(8), "a switch to the same set changes nothing");
    assert_eq!(at(8000.0), Some(8));
    assert_eq!(at(9500.0), None, "a switch was lost after 10's");
    assert_eq!(at(12_500.0), Some(11));
    assert_eq!(at(14_500.0), None, "switches were lost from here");
    assert_eq!(at(16_500.0), Some(12), "until the next one kept");
    assert_eq!(at(99_000.0), Some(12), "the last switch rules on");
    assert_eq!(at(f64::NAN), None);
    assert_eq!(at(0.0), None);
    assert_eq!(switch_context(&[], &mut Cursor::default(), 5.0), None);
    // In time order through one cursor, as a build asks: the same answers.
    let mut cursor = Cursor::default();
    let stamps = [
      999.0, 1000.0, 1001.0, 2999.0, 3000.0, 3001.0, 5000.0, 5001.0, 7000.0, 9500.0, 12_500.0, 14_500.0, 16_500.0,
    ];
    for t in stamps {
      assert_eq!(switch_context(&log, &mut cursor, t), at(t), "stamp {t}");
    }
    // What a cursor has passed keeps the switch that rules at its place.
    assert_eq!(log.get(cursor.passed(&log)).map(|e| e.context), Some(12));
  }

  #[test]
  fn concurrent_writer_never_yields_a_torn_entry() {
    // A writer thread fills entries whose fields are all derived from the index; the
    // reader must only ever see consistent ones.
    let slots = ring(16);
    let slots = &slots[..];
    let written = AtomicU64::new(0);
    let n = if cfg!(miri) { 200 } else { 200_000 };
    std::thread::scope(|scope| {
      scope.spawn(|| {
        for i in 0..n {
          write(slots, i, i * 10, i * 10 + 3, i as u32, 1);
          written.store(i + 1, Ordering::Release);
        }
      });
      while written.load(Ordering::Acquire) < n {
        for e in snapshot(slots, written.load(Ordering::Acquire), 1, 0, u64::MAX) {
          assert_eq!(e.after_ns, e.before_ns + 3);
          assert_eq!(e.context as u64, e.before_ns / 10);
          assert_eq!(e.cpu_ns, e.before_ns / 2);
        }
      }
    });
  }
}
