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
