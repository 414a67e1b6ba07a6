use super::*;

fn set(k: &str, v: &str) -> LabelSet {
  vec![(k.to_owned(), v.to_owned())]
}

impl Store {
  /// `labels` encoded on their own.
  fn encode(&mut self, labels: &LabelSet) -> Arc<[u8]> {
    let mut out = Vec::new();
    self.keys.encode(labels, &mut out);
    out.into()
  }

  /// The labels of an encoding `encode` wrote.
  fn decode(&self, data: &Arc<[u8]>) -> LabelSet {
    Packed {
      data: Arc::clone(data),
      at: 0,
      len: data.len() as u32,
      keys: Arc::clone(&self.keys.table),
    }
    .to_set()
  }
}

#[test]
fn sets_round_trip_through_their_encoding() {
  let mut s = Store::default();
  let sets = [
    vec![
      ("endpoint".to_string(), "GET /users/:id".to_string()),
      ("span_id".to_string(), "00f067aa0ba902b7".to_string()),
    ],
    vec![
      ("é🎉".to_string(), "\u{fffd} ünïcode".to_string()),
      ("k".to_string(), "v".repeat(4096)),
    ],
    Vec::new(),
  ];
  for set in &sets {
    let data = s.encode(set);
    assert_eq!(&s.decode(&data), set);
  }
  // Past the key table's bound, keys are stored inline and still come back.
  for i in 0..MAX_KEYS + 10 {
    let set = vec![(format!("key{i}"), format!("{i}"))];
    let data = s.encode(&set);
    assert_eq!(s.decode(&data), set);
  }
  let typical = s.encode(&sets[0]);
  assert!(
    typical.len() + OVERHEAD <= 90,
    "a typical set costs {} bytes",
    typical.len() + OVERHEAD
  );
}

#[test]
fn a_kept_set_is_read_in_place_and_keeps_its_keys_when_more_are_added() {
  let mut s = Store::default();
  s.save(1, 1, &set("endpoint", "GET /a"), 10);
  s.save(1, 2, &set("endpoint", "GET /b"), 11);
  let held = s.lookup(1).unwrap(); // as a trace build holds it
  let next = s.lookup(2).unwrap();
  // A key added while a trace holds the key table: the trace's copy still reads.
  s.save(1, 3, &set("tenant", "acme"), 12);
  assert_eq!(held.iter().collect::<Vec<_>>(), vec![("endpoint", "GET /a")]);
  assert_eq!(s.lookup(3).unwrap().to_set(), set("tenant", "acme"));
  assert_eq!(held.len(), 1);
  // Sets saved together share their chunk: held once, not copied per set.
  assert!(Arc::ptr_eq(&held.data, &next.data));
  assert_eq!(next.to_set(), set("endpoint", "GET /b"));
  // The chunk a build read from is sealed: the thread's next set went to another.
  assert!(!Arc::ptr_eq(&held.data, &s.lookup(3).unwrap().data));
}

#[test]
fn chunks_go_with_their_last_set_and_traces_keep_what_they_hold() {
  let mut s = Store::default();
  // Two threads' sets, interleaved, over several chunks each; some read mid-way.
  let mut held = Vec::new();
  for id in 1..=20_000u32 {
    let tid = 1 + (id % 2) as i32;
    s.save(
      tid,
      id,
      &vec![
        ("endpoint".into(), format!("GET /{}", id % 4)),
        ("span_id".into(), format!("{id:016x}")),
      ],
      u64::from(id),
    );
    if id % 3_001 == 0 {
      held.push((id, s.lookup(id).unwrap()));
    }
  }
  let of = |s: &Store, tid: i32| s.chunks.values().filter(|c| c.tid == tid).count();
  assert!(
    of(&s, 1) >= 3 && of(&s, 2) >= 3,
    "{} and {} chunks",
    of(&s, 1),
    of(&s, 2)
  );
  for id in [1u32, 2, 9_999, 20_000] {
    assert_eq!(s.lookup(id).unwrap().to_set()[1].1, format!("{id:016x}"));
  }
  // Refreshing a set moves it to its thread's newest chunk.
  s.save(1, 4, &set("endpoint", "again"), 30_000);
  assert_eq!(s.lookup(4).unwrap().to_set(), set("endpoint", "again"));
  // Thread 2 gone (no unbuilt recording): its sets and chunks go, thread 1's stay.
  s.prune(2);
  assert_eq!(of(&s, 2), 0);
  assert!(s.lookup(3).is_none() && s.lookup(6).is_some());
  assert_eq!(s.lookup(4).unwrap().to_set(), set("endpoint", "again"));
  s.prune(1);
  assert!(s.sets.is_empty() && s.chunks.is_empty() && s.open.is_empty());
  assert_eq!(s.bytes, 0, "every byte counted in is counted out");
  // What traces held still reads.
  for (id, p) in &held {
    assert_eq!(p.to_set()[1].1, format!("{id:016x}"));
  }
}

#[test]
fn an_alias_reads_as_its_set_outlives_it_and_is_amended_apart() {
  let mut s = Store::default();
  let labels = vec![
    ("endpoint".to_string(), "GET /a".to_string()),
    ("span_id".to_string(), "01".to_string()),
  ];
  s.save(1, 10, &labels, 1);
  let before = s.bytes;
  assert!(s.alias(1, 11, 10, 2));
  assert!(s.alias(1, 12, 10, 3));
  assert_eq!(s.bytes, before + 2 * OVERHEAD, "no encoding copied");
  assert_eq!(s.lookup(11).unwrap().to_set(), labels);
  // Not kept: no alias.
  assert!(!s.alias(1, 13, 99, 4));
  assert!(s.lookup(13).is_none());
  // Amending the set leaves its aliases' labels as they were, and the other way round.
  assert!(s.amend(1, 10, &set("endpoint", "GET /b"), 5));
  assert_eq!(s.lookup(11).unwrap().to_set(), labels);
  assert!(s.amend(1, 12, &set("endpoint", "GET /c"), 6));
  assert_eq!(s.lookup(12).unwrap().to_set(), set("endpoint", "GET /c"));
  assert_eq!(s.lookup(11).unwrap().to_set(), labels);
  // The shared chunk lives while an alias does.
  s.remove(10);
  assert_eq!(s.lookup(11).unwrap().to_set(), labels);
  s.remove(11);
  s.remove(12);
  assert!(s.sets.is_empty() && s.chunks.is_empty());
  assert_eq!(s.bytes, 0, "every byte counted in is counted out");
}

#[test]
fn a_set_larger_than_a_chunk_is_kept_whole() {
  let mut s = Store::default();
  let big: LabelSet = (0..40).map(|i| (format!("k{i:02}"), "x".repeat(4096))).collect();
  s.save(1, 1, &set("a", "1"), 1);
  s.save(1, 2, &big, 2);
  s.save(1, 3, &set("c", "3"), 3);
  assert_eq!(s.lookup(2).unwrap().to_set(), big);
  assert_eq!(s.lookup(1).unwrap().to_set(), set("a", "1"));
  assert_eq!(s.lookup(3).unwrap().to_set(), set("c", "3"));
  assert!(s.bytes >= 40 * 4096);
}

#[test]
fn a_malformed_encoding_ends_the_pairs_instead_of_reading_past_it() {
  let keys = Arc::new(vec![Arc::<str>::from("k")]);
  for data in [
    &[3u8, 0, 0, 1, 0, b'v'][..],       // claims 3 pairs, holds 1
    &[1, 0, 0, 9, 0, b'v'],             // value longer than the bytes
    &[1, 7, 0, 1, 0, b'v'],             // key id not in the table
    &[1, 0xff, 0xff, 2, 0, 0xc3, 0x28], // inline key that is not UTF-8
    &[2, 0, 0, 1, 0, 0xff, 0, 0, 0, 0], // value that is not UTF-8
    &[],
  ] {
    let p = Packed {
      data: Arc::from(data),
      at: 0,
      len: data.len() as u32,
      keys: Arc::clone(&keys),
    };
    let pairs: Vec<_> = p.iter().collect();
    assert!(pairs.len() <= 1, "{data:?}: {pairs:?}");
    assert!(pairs.iter().all(|(k, v)| *k == "k" && *v == "v"), "{data:?}: {pairs:?}");
  }
  // A place outside its chunk reads as no labels.
  let p = Packed {
    data: Arc::from(&[1u8, 0, 0, 1, 0, b'v'][..]),
    at: 4,
    len: 9,
    keys,
  };
  assert!(p.is_empty() && p.iter().next().is_none());
}

#[test]
fn strings_past_the_encodings_bound_are_cut_at_a_character() {
  let mut s = Store::default();
  let long = "é".repeat(40_000); // 80,000 bytes
  let data = s.encode(&vec![("k".to_string(), long.clone())]);
  let set = s.decode(&data);
  assert_eq!(set.len(), 1);
  let v = &set[0].1;
  assert!(
    v.len() <= u16::MAX as usize && v.len() > u16::MAX as usize - 2,
    "{}",
    v.len()
  );
  assert!(long.starts_with(v.as_str()));
}

#[test]
fn past_a_bound_the_oldest_sets_go_first() {
  let mut s = Store {
    max_sets: 80,
    ..Store::default()
  };
  for id in 1..=100u32 {
    s.save(1, id, &set("span_id", &id.to_string()), u64::from(id));
    s.evict();
  }
  assert!(s.sets.len() <= 80 && s.dropped >= 20);
  assert!(
    s.sets.contains_key(&100) && !s.sets.contains_key(&1),
    "the newest stay, the oldest went"
  );
  let min_kept = s.sets.values().map(|x| x.saved_ns).min().unwrap();
  assert!(s.sets.values().all(|x| x.saved_ns >= min_kept) && min_kept > 10);
}

#[test]
fn ids_are_unique_and_never_zero() {
  let a = reserve_ids(10);
  let b = reserve_ids(10);
  assert!(a != 0 && b != 0);
  assert!(b >= a + 10 || b < a, "blocks do not overlap");
  // Near the limit the counter wraps before an id could leave the Smi range.
  NEXT_ID.store(ID_LIMIT - 5, Ordering::Relaxed);
  let c = reserve_ids(10);
  assert!(c >= 1 && c + 10 <= ID_LIMIT, "{c}");
}

#[test]
fn flat_lists_become_sorted_sets() {
  let flat = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
  assert_eq!(
    label_set(flat(&["b", "2", "a", "1", "b", "3"])),
    Some(vec![("a".into(), "1".into()), ("b".into(), "3".into())])
  );
  assert_eq!(label_set(flat(&["a"])), None);
}

#[test]
fn a_drains_sets_come_apart_by_their_lengths() {
  let flat = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
  assert_eq!(
    label_sets(vec![4, 9], vec![2, 4], flat(&["a", "1", "c", "3", "b", "2"])),
    Ok(vec![
      (4, vec![("a".into(), "1".into())]),
      (9, vec![("b".into(), "2".into()), ("c".into(), "3".into())]),
    ])
  );
  assert_eq!(label_sets(vec![], vec![], vec![]), Ok(vec![]));
  // Lengths that do not fit the strings, or an odd one, name the problem.
  let err = label_sets(vec![4], vec![2, 2], flat(&["a", "1"])).unwrap_err();
  assert!(err.contains("1 ids but 2 lengths"), "{err}");
  let err = label_sets(vec![4], vec![4], flat(&["a", "1"])).unwrap_err();
  assert!(err.contains("add up to 4, not the 2"), "{err}");
  let err = label_sets(vec![4, 5], vec![1, 1], flat(&["a", "1"])).unwrap_err();
  assert!(err.contains("set 4 has 1 strings"), "{err}");
}

#[test]
fn a_batch_saves_each_set_and_skips_id_zero() {
  let tid = -8; // not a real thread: this test's own slice of the store
  let id = reserve_ids(2);
  let token = recording_started(tid, 10);
  save_each(
    tid,
    vec![(0, set("k", "zero")), (id, set("k", "a")), (id + 1, set("k", "b"))],
    20,
  );
  assert_eq!(lookup(id).map(|p| p.to_set()), Some(set("k", "a")));
  assert_eq!(lookup(id + 1).map(|p| p.to_set()), Some(set("k", "b")));
  assert!(lookup(0).is_none());
  recording_built(tid, token);
}

#[test]
fn sets_live_while_an_unbuilt_recording_can_reference_them() {
  let tid = -7; // not a real thread: this test's own slice of the store
  let id = reserve_ids(3);
  let early = recording_started(tid, 50);
  save(tid, id, set("endpoint", "GET /a"), 100);
  let token = recording_started(tid, 150);
  save(tid, id + 1, set("endpoint", "GET /b"), 200);
  recording_built(tid, early);
  assert!(lookup(id).is_none(), "saved before every unbuilt recording started");
  assert!(lookup(id + 1).is_some(), "saved while a recording runs");
  // Once per token: the build let go, then JS says so again; an unknown token likewise.
  recording_built(tid, early);
  recording_built(tid, 0);
  assert!(lookup(id + 1).is_some(), "a repeated call lets go of nothing more");
  let later = recording_started(tid, 300);
  recording_built(tid, token);
  assert!(lookup(id + 1).is_none(), "saved before the remaining recording started");
  save(tid, id + 2, set("endpoint", "GET /c"), 400);
  assert_eq!(lookup(id + 2).unwrap().to_set()[0].1, "GET /c");
  recording_built(tid, later);
  assert!(lookup(id + 2).is_none(), "no recording left to reference it");
}

#[test]
fn an_amended_set_is_replaced_and_logged_for_the_builds_under_way() {
  let mut s = Store::default();
  let token = 1;
  s.unbuilt.entry(1).or_default().push(Unbuilt {
    token,
    start_ns: 0,
    amend_mark: s.amend_seq,
  });
  s.save(1, 10, &set("endpoint", "GET"), 10);
  s.save(1, 11, &set("endpoint", "POST"), 11);
  let held = s.lookup(10).unwrap(); // a segment joined before the route was known
  assert!(s.amend(1, 10, &set("endpoint", "GET /users/:id"), 20));
  assert!(
    !s.amend(1, 12, &set("endpoint", "GET /x"), 21),
    "a set not kept stays gone"
  );
  assert_eq!(s.lookup(10).unwrap().to_set(), set("endpoint", "GET /users/:id"));
  assert_eq!(held.to_set(), set("endpoint", "GET"), "what a build holds is unchanged");
  assert_eq!(s.amended_since(0), vec![10]);
  let mark = s.amend_seq;
  assert!(s.amend(1, 11, &set("endpoint", "POST /orders"), 22));
  assert_eq!(s.amended_since(mark), vec![11], "only those since a later mark");
  // The log goes with the last recording that could need it.
  s.unbuilt.clear();
  s.trim_amended();
  assert!(s.amended.is_empty());
}
