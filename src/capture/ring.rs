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
mod tests;
