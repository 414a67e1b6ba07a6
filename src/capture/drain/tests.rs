use super::*;
use crate::capture::signal::{Record, EMPTY_SLOT};

fn ring(n: usize) -> Vec<Slot> {
  (0..n).map(|_| EMPTY_SLOT).collect()
}

fn write(slots: &[Slot], index: u64, tid: i32) {
  let r = Record {
    before_ns: 1_000_000_000 + index * 1000,
    after_ns: 1_000_000_000 + index * 1000 + 5,
    cpu_ns: index,
    context: index as u32,
    generation: 0,
    tid,
  };
  slots[(index as usize) & (slots.len() - 1)].write(index, &r);
}

#[test]
fn draining_often_keeps_more_than_the_ring_holds() {
  let slots = ring(16);
  let mut logs = Logs::default();
  logs.threads.entry(7).or_default().unbuilt.push((1, 0));
  for index in 0..100u64 {
    write(&slots, index, if index % 2 == 0 { 7 } else { 8 });
    if index % 10 == 9 {
      drain_into(&mut logs, &slots, index + 1);
    }
  }
  let log = &logs.threads[&7];
  assert_eq!(
    log.records.len(),
    50,
    "every record of thread 7, though the ring holds 16"
  );
  assert!(log
    .records
    .iter()
    .zip(log.records.iter().skip(1))
    .all(|(a, b)| a.before_ns < b.before_ns));
  assert!(
    !logs.threads.contains_key(&8),
    "threads without recordings are not logged"
  );
}

#[test]
fn a_record_being_written_is_read_on_the_next_drain() {
  let slots = ring(16);
  let mut logs = Logs::default();
  logs.threads.entry(7).or_default().unbuilt.push((1, 0));
  write(&slots, 0, 7);
  // Record 1 is claimed but not yet written; record 2 is whole.
  write(&slots, 2, 7);
  drain_into(&mut logs, &slots, 3);
  assert_eq!(logs.threads[&7].records.len(), 1);
  assert_eq!(logs.next, 1, "it waits at the record being written");
  write(&slots, 1, 7);
  drain_into(&mut logs, &slots, 3);
  let contexts: Vec<u32> = logs.threads[&7].records.iter().map(|e| e.context).collect();
  assert_eq!(contexts, vec![0, 1, 2]);
}

#[test]
fn pruning_keeps_the_last_record_before_the_cut_and_a_read_with_prior_starts_there() {
  let at = |k: u64| k * 1_000_000_000 + 10;
  let switch = |k: u64| Entry {
    before_ns: at(k),
    after_ns: at(k),
    cpu_ns: 0,
    context: k as u32 + 1,
    generation: k as u32,
    tid: -7_001,
  };
  let mut log = ThreadLog::default();
  log.unbuilt.push((1, 0));
  (0..6).for_each(|k| log.keep(switch(k)));
  // Records more than the slack before 4.5 s go, but the last of them rules on.
  log.unbuilt[0].1 = at(4) + SLACK_NS / 2;
  log.prune();
  let kept: Vec<u32> = log.records.iter().map(|e| e.context).collect();
  assert_eq!(kept, vec![4, 5, 6]);

  with_logs(|logs| logs.threads.insert(-7_001, log));
  let contexts = |from: u64, prior: bool| {
    records(-7_001, from, u64::MAX, prior)
      .iter()
      .map(|e| e.context)
      .collect::<Vec<_>>()
  };
  assert_eq!(contexts(at(4) + 1, false), vec![6]);
  assert_eq!(
    contexts(at(4) + 1, true),
    vec![5, 6],
    "the switch that rules at the window's start comes first"
  );
  assert_eq!(contexts(at(2), true), vec![4, 5, 6], "none before the first");
  forget_thread(-7_001);
}

#[test]
fn overwritten_records_are_skipped_not_waited_for() {
  let slots = ring(16);
  let mut logs = Logs::default();
  logs.threads.entry(7).or_default().unbuilt.push((1, 0));
  for index in 0..40u64 {
    write(&slots, index, 7);
  }
  drain_into(&mut logs, &slots, 40);
  assert_eq!(logs.threads[&7].records.len(), 16, "what the ring still held");
  assert_eq!(logs.next, 40);
}
