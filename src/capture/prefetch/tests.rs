use super::*;
use crate::capture::labels::{forget_thread, recording_built, recording_started, reserve_ids, save, LabelSet};

fn set(k: &str, v: &str) -> LabelSet {
  vec![(k.to_owned(), v.to_owned())]
}

#[test]
fn prefetched_sets_go_to_their_build_once_and_never_outlive_their_recording() {
  let tid = -8; // this test's own slice of the store
  let n = LOOKUP_BATCH as u32 * 2 + 5;
  let first = reserve_ids(n + 1);
  let token = recording_started(tid, 0);
  for i in 0..n {
    save(tid, first + i, set("span_id", &format!("{i:016x}")), 10 + i as u64);
  }
  // As a recording's brackets give them: runs of one context, a context seen again
  // later, "no context" (0) and an id never saved; past a batch.
  let mut ids = vec![0, first + n];
  for i in 0..n {
    ids.extend([first + i, first + i, first + i]);
  }
  ids.extend([first, 0, first + 7]);
  prefetch(tid, token, ids);
  let mut found = take_prefetched(token).expect("prefetched for an unbuilt recording");
  assert_eq!(
    found.sets.len(),
    n as usize,
    "each kept set once; 0 and the unsaved id not at all"
  );
  // In about the order a build asks, then out of it.
  for i in [0, 1, 2, 5, 4, LOOKUP_BATCH as u32 - 1, LOOKUP_BATCH as u32, n - 1, 3] {
    assert_eq!(
      found.take(first + i).unwrap().to_set(),
      set("span_id", &format!("{i:016x}"))
    );
  }
  assert!(found.take(first + 1).is_none(), "each set taken once");
  assert!(found.take(first + n).is_none() && found.take(0).is_none() && found.take(u32::MAX).is_none());
  let before = hits();
  drop(found);
  assert!(hits() >= before + 9, "the sets taken are counted");
  assert!(take_prefetched(token).is_none(), "taken once");

  // Not taken: the recording's end lets go of it.
  prefetch(tid, token, [first]);
  recording_built(tid, token);
  assert!(take_prefetched(token).is_none(), "let go with its recording");
  // A prefetch that ends after its recording was built keeps nothing.
  prefetch(tid, token, [first]);
  assert!(take_prefetched(token).is_none(), "kept for a recording already built");
  // Nor does one of a thread that is gone.
  let other = recording_started(tid, 0);
  prefetch(tid, other, [first]);
  forget_thread(tid);
  assert!(take_prefetched(other).is_none(), "kept for a thread that is gone");
}
