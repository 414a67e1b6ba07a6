use super::*;

/// A frame laid out as V8 lays one out (see tests/signal_safety.rs), in a thread of its own:
/// selfprof's key to a store with an id, and a tracer's key to a store of the tracer's; the
/// table's words (for a test to corrupt), and the buffers they point into, owned here (the
/// Vecs' heap buffers stay where they are as the struct moves; nothing is leaked).
struct FakeFrame {
  thread: Box<ThreadContext>,
  table: Vec<usize>,
  /// The tagged addresses of selfprof's store and of the tracer's.
  store: usize,
  tracer_store: usize,
  _buffers: Vec<Vec<usize>>,
}

const SELF_HASH: u32 = 0x10;
const TRACER_HASH: u32 = 0x11;

fn new_thread() -> Box<ThreadContext> {
  Box::new(ThreadContext::empty(true))
}

/// A frame holding selfprof's store of `id` (none if `id` is None) and, if `tracer`, a
/// tracer's store; the reader knows the tracer's key only if `tracer`.
fn fake_frame(id: Option<u32>, tracer: bool) -> FakeFrame {
  let smi = |v: i64| (v << 32) as usize;
  let tag = |a: &[usize]| a.as_ptr() as usize + 1;
  FRAME_LAYOUT.map_instance_type.store(12, Ordering::Relaxed);
  FRAME_LAYOUT.js_object_header.store(24, Ordering::Relaxed);
  FRAME_LAYOUT.fixed_array_header.store(16, Ordering::Relaxed);
  FRAME_LAYOUT.js_map_type.store(0x4321, Ordering::Relaxed);
  FRAME_LAYOUT.oddball_type.store(0x83, Ordering::Relaxed);
  let hidden = vec![0, 0x4321usize << 32, 0, 0];
  let key = vec![tag(&hidden), 0, 0, 0];
  let tracer_key = vec![tag(&hidden), 0, 0, 1];
  let store = vec![tag(&hidden), 0, 0, smi(i64::from(id.unwrap_or(0)))];
  let tracer_store = vec![tag(&hidden), 0, 0, 0x2001];
  // [map, length, elements, deleted, buckets, head 0, head 1, entries (key, value, chain) × 4]
  let mut table = vec![0usize; 2 + 3 + 2 + 3 * 4];
  table[1] = smi(17);
  table[2] = smi(0);
  table[3] = smi(0);
  table[4] = smi(2);
  table[5] = smi(-1);
  table[6] = smi(-1);
  let entry = |t: &mut Vec<usize>, hash: u32, k: usize, v: usize| {
    let n = (smi_value(t[2]) + smi_value(t[3])) as usize;
    let at = 7 + n * 3;
    t[at] = k;
    t[at + 1] = v;
    t[at + 2] = t[5 + (hash as usize & 1)];
    t[5 + (hash as usize & 1)] = smi(n as i64);
    t[2] = smi(smi_value(t[2]) + 1);
  };
  if id.is_some() {
    entry(&mut table, SELF_HASH, tag(&key), tag(&store));
  }
  if tracer {
    entry(&mut table, TRACER_HASH, tag(&tracer_key), tag(&tracer_store));
  }
  let map = vec![tag(&hidden), 0, 0, tag(&table)];
  let cped = vec![tag(&map)];
  let key_slot = vec![tag(&key)];
  let tracer_slot = vec![tag(&tracer_key)];
  let thread = new_thread();
  let f = &thread.frame;
  f.cped.store(cped.as_ptr() as usize, Ordering::Relaxed);
  f.keys[SELF_KEY].store(key_slot.as_ptr() as usize, Ordering::Relaxed);
  f.hashes[SELF_KEY].store(SELF_HASH, Ordering::Relaxed);
  if tracer {
    f.keys[1].store(tracer_slot.as_ptr() as usize, Ordering::Relaxed);
    f.hashes[1].store(TRACER_HASH, Ordering::Relaxed);
  }
  FakeFrame {
    thread,
    table,
    store: if id.unwrap_or(0) == 0 { 0 } else { tag(&store) },
    tracer_store: if tracer { tag(&tracer_store) } else { 0 },
    _buffers: vec![
      hidden,
      key,
      tracer_key,
      store,
      tracer_store,
      map,
      cped,
      key_slot,
      tracer_slot,
    ],
  }
}

fn smi_value(w: usize) -> i64 {
  (w as i64) >> 32
}

fn smi_word(v: i64) -> usize {
  (v << 32) as usize
}

/// Gives thread `t` the ids `first..first + count` for pairs, as JS reserves them.
fn reserve(t: &ThreadContext, first: u32, count: u32) {
  t.cell[slot::FRESH_END].store(0, Ordering::Relaxed);
  t.cell[slot::FRESH_NEXT].store(first, Ordering::Relaxed);
  t.cell[slot::FRESH_END].store(first + count, Ordering::Relaxed);
}

/// The queue's entries from position `from`: (id, stores).
fn queued(t: &ThreadContext, from: usize) -> Vec<(u32, [usize; KEYS])> {
  let head = t.cell[slot::QUEUE_HEAD].load(Ordering::Relaxed) as usize;
  (from..head)
    .map(|i| {
      let stores = std::array::from_fn(|k| t.frame.objects[i][k].load(Ordering::Relaxed));
      (t.cell[slot::QUEUE + i].load(Ordering::Relaxed), stores)
    })
    .collect()
}

#[test]
fn a_frame_reads_its_store_id_and_a_broken_one_reads_none_or_nothing() {
  let f = fake_frame(Some(77), false);
  let reader = &f.thread.frame;
  assert_eq!(frame_context(reader), Some(77));
  // Where the store is: its tagged address, or during a collection the marker for the store
  // held since the collection's start.
  assert_eq!(frame_store(reader), Some((77, f.store)));
  reader.gc_context.store(77, Ordering::Relaxed);
  reader.gc_stores[SELF_KEY].store(0x5000, Ordering::Relaxed);
  reader.gc_depth.store(1, Ordering::Release);
  assert_eq!(frame_store(reader), Some((77, GC_STORE)));
  reader.gc_depth.store(0, Ordering::Release);
  // Each corruption: the read ends, with no labels, in bounded time.
  type Corruption = (&'static str, fn(&mut [usize]));
  let broken: [Corruption; 7] = [
    ("length not a Smi", |t| t[1] = 0x11),
    ("too short for its buckets", |t| t[1] = smi_word(6)),
    ("buckets not a power of two", |t| t[4] = smi_word(3)),
    ("more entries than capacity", |t| t[2] = smi_word(9)),
    ("a chain that loops without the key", |t| {
      t[7] = 0x1001;
      t[9] = smi_word(0);
    }),
    ("an entry out of range", |t| t[5] = smi_word(5)),
    ("a negative count", |t| t[3] = smi_word(-1)),
  ];
  for (what, corrupt) in broken {
    let mut f = fake_frame(Some(77), false);
    corrupt(&mut f.table);
    let got = frame_context(&f.thread.frame);
    assert!(got.is_none() || got == Some(0), "{what}: {got:?}");
  }
  // Another key in the frame: not ours, no labels.
  let mut f = fake_frame(Some(77), false);
  f.table[7] = 0x1001; // a tagged address that is not the key's
  assert_eq!(frame_context(&f.thread.frame), Some(0));
  let f = fake_frame(Some(77), false);
  f.thread.frame.keys[SELF_KEY].store(0, Ordering::Relaxed);
  assert_eq!(frame_context(&f.thread.frame), None, "not set up");
  // `undefined` as the store (run() from a context with none puts it back on its way out):
  // no store, not an unreadable frame.
  let mut f = fake_frame(Some(77), true);
  let oddball_map = vec![0, 0x83usize << 32, 0, 0];
  let undefined = vec![oddball_map.as_ptr() as usize + 1, 0, 0, 0x1234_5678];
  f.table[8] = undefined.as_ptr() as usize + 1;
  let read = frame_read(&f.thread.frame).unwrap();
  assert_eq!((read.id, read.stores), (0, [0, f.tracer_store, 0]));
  f._buffers.extend([oddball_map, undefined]);
}

#[test]
fn a_tracers_store_is_read_under_its_own_key_and_only_when_the_reader_knows_it() {
  let f = fake_frame(Some(77), true);
  let read = frame_read(&f.thread.frame).unwrap();
  assert_eq!(read.id, 77);
  assert_eq!(read.stores, [f.store, f.tracer_store, 0]);
  assert!(read.has_tracer());
  // The tracer's store alone.
  let f = fake_frame(None, true);
  let read = frame_read(&f.thread.frame).unwrap();
  assert_eq!((read.id, read.stores), (0, [0, f.tracer_store, 0]));
  // A key the reader was not given is not read.
  let f = fake_frame(Some(77), true);
  f.thread.frame.keys[1].store(0, Ordering::Relaxed);
  let read = frame_read(&f.thread.frame).unwrap();
  assert_eq!((read.id, read.stores), (77, [f.store, 0, 0]));
  assert!(!read.has_tracer());
}

#[test]
fn a_pair_takes_a_fresh_id_once_and_keeps_it_until_the_pair_changes_a_drain_or_a_collection() {
  let f = fake_frame(Some(77), true);
  let t = &*f.thread;
  // No ids reserved: the pair gets none (no labels), and nothing is queued.
  assert_eq!(read_context(t), 0);
  assert_eq!(queued(t, 0), vec![]);
  reserve(t, 1000, 3);
  // Its first sample takes an id and queues it with both stores; the next ones take the same.
  assert_eq!(read_context(t), 1000);
  assert_eq!(read_context(t), 1000);
  assert_eq!(queued(t, 0), vec![(1000, [f.store, f.tracer_store, 0])]);
  // A sample of selfprof's store alone: its own id, queued.
  let key = t.frame.keys[1].swap(0, Ordering::Relaxed);
  assert_eq!(read_context(t), 77);
  t.frame.keys[1].store(key, Ordering::Relaxed);
  // The pair again: a new id (the last pushed was not the pair).
  assert_eq!(read_context(t), 1001);
  // A collection's start zeroes the stores kept (objects move): the same pair after it
  // takes a new id.
  for s in t.frame.last_stores.iter() {
    s.store(0, Ordering::Relaxed);
  }
  assert_eq!(read_context(t), 1002);
  // The reserved ids are used up: none.
  for s in t.frame.last_stores.iter() {
    s.store(0, Ordering::Relaxed);
  }
  let out = FRESH_OUT.load(Ordering::Relaxed);
  assert_eq!(read_context(t), 0);
  assert!(FRESH_OUT.load(Ordering::Relaxed) > out);
  assert_eq!(
    queued(t, 0).iter().map(|(id, _)| *id).collect::<Vec<_>>(),
    vec![1000, 77, 1001, 1002]
  );
  // During a collection: the id its start read, queued with markers for the stores held.
  let f = fake_frame(None, true);
  let t = &*f.thread;
  t.frame.gc_context.store(555, Ordering::Relaxed);
  t.frame.gc_stores[1].store(0x7000, Ordering::Relaxed);
  t.frame.gc_depth.store(1, Ordering::Release);
  assert_eq!(read_context(t), 555);
  assert_eq!(read_context(t), 555);
  assert_eq!(queued(t, 0), vec![(555, [0, GC_STORE, 0])]);
}

/// Writes thread `t`'s entry for `depth` as JS does (`switching.js` `publishAtDepth`).
fn publish_at(t: &ThreadContext, depth: usize, exec: u32, id: u32) {
  let at = slot::DEPTHS + depth * DEPTH_WORDS;
  t.cell[at + 1].store(0, Ordering::Relaxed);
  t.cell[at].store(exec, Ordering::Relaxed);
  t.cell[at + 2].store(0, Ordering::Relaxed);
  t.cell[at + 1].store(id, Ordering::Relaxed);
}

#[test]
fn by_depth_a_set_holds_only_while_the_callback_it_was_published_in_runs_at_its_depth() {
  let t = Box::new(ThreadContext::empty(false));
  // Node's two fields, as the thread's environment keeps them.
  let depth = Box::new(0u32);
  let exec = Box::new(0f64);
  let (depth_at, exec_at) = (&*depth as *const u32 as usize, &*exec as *const f64 as usize);
  // Not set up: the published context, as before.
  assert_eq!(t.published_here(), None);
  t.position.depth_at.store(depth_at, Ordering::Relaxed);
  t.position.exec_id_at.store(exec_at, Ordering::Relaxed);
  let set = |d: u32, e: f64| unsafe {
    std::ptr::write_volatile(depth_at as *mut u32, d);
    std::ptr::write_volatile(exec_at as *mut f64, e);
  };
  // An outer callback (depth 1, async id 7) and an inner one (depth 2, async id 9).
  publish_at(&t, 1, 7, 100);
  publish_at(&t, 2, 9, 200);
  set(2, 9.0);
  assert_eq!(t.published_here(), Some(200));
  assert_eq!(
    t.cell[slot::DEPTHS + 2 * DEPTH_WORDS + 2].load(Ordering::Relaxed),
    1,
    "marked as recorded"
  );
  // The inner one ended: the outer one's set again.
  set(1, 7.0);
  assert_eq!(t.published_here(), Some(100));
  // At the outer's depth under another async id (JS entered with no hook), or none: nothing.
  set(1, 8.0);
  assert_eq!(t.published_here(), Some(0));
  set(1, 0.0);
  assert_eq!(t.published_here(), Some(0));
  // A depth with no entry, or past the last one.
  set(3, 9.0);
  assert_eq!(t.published_here(), Some(0));
  set(DEPTH_COUNT as u32, 7.0);
  assert_eq!(t.published_here(), Some(0));
  // Async ids past 2^32 compare by their low 32 bits, as JS writes them.
  publish_at(&t, 1, 5, 300);
  set(1, (1u64 << 32) as f64 + 5.0);
  assert_eq!(t.published_here(), Some(300));
  // Midway through JS's writes (the id zeroed first): nothing, never the old set.
  t.cell[slot::DEPTHS + DEPTH_WORDS + 1].store(0, Ordering::Relaxed);
  assert_eq!(t.published_here(), Some(0));
  // Cleared (the thread goes): nothing read.
  t.position.clear();
  assert_eq!(t.published_here(), None);
  drop((depth, exec));
}
