use super::*;

#[test]
fn switches_come_out_in_order_with_a_lost_record_for_those_not_kept() {
  std::thread::spawn(|| {
    let (i, _) = crate::capture::threads::register_thread().expect("a cell");
    reset(i);
    let tid = signal::gettid();
    for k in 0..3u32 {
      log_at(i, tid, 10 + k, 1_000 + u64::from(k));
    }
    let mut got = Vec::new();
    take(i, |e| got.push(e));
    let ours: Vec<(u64, u32, u32)> = got
      .iter()
      .filter(|e| e.tid == tid)
      .map(|e| (e.before_ns, e.context, e.generation))
      .collect();
    assert_eq!(ours, vec![(1_000, 10, 0), (1_001, 11, 1), (1_002, 12, 2)]);

    // A full list: what comes after is lost, and says so once, where it began.
    lock(i).unwrap().records.resize(
      MAX_PENDING,
      Entry {
        before_ns: 0,
        after_ns: 0,
        cpu_ns: 0,
        context: 1,
        generation: 0,
        tid,
      },
    );
    log_at(i, tid, 20, 5_000);
    log_at(i, tid, 21, 5_001);
    let mut last = None;
    let mut n = 0;
    take(i, |e| {
      if e.tid == tid {
        n += 1;
        last = Some(e);
      }
    });
    let last = last.unwrap();
    assert_eq!(n, MAX_PENDING + 1);
    assert_eq!((last.before_ns, last.context, last.generation), (5_000, LOST, 3));
    log_at(i, tid, 22, 6_000);
    let mut after = Vec::new();
    take(i, |e| after.push(e));
    assert_eq!(
      after
        .iter()
        .filter(|e| e.tid == tid)
        .map(|e| e.generation)
        .collect::<Vec<_>>(),
      vec![5],
      "the numbering goes on past the lost ones"
    );
    crate::capture::threads::unregister_thread(i, tid);
    reset(i);
  })
  .join()
  .unwrap();
}
