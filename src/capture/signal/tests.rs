use super::*;

/// A frame laid out as V8 lays one out (see tests/signal_safety.rs): the reader, the
/// table's words (for a test to corrupt), and the buffers they point into, owned here (the
/// Vecs' heap buffers stay where they are as the struct moves; nothing is leaked).
struct FakeFrame {
  reader: FrameReader,
  table: Vec<usize>,
  _buffers: Vec<Vec<usize>>,
}

fn fake_frame(id: u32) -> FakeFrame {
  let smi = |v: i64| (v << 32) as usize;
  let tag = |a: &[usize]| a.as_ptr() as usize + 1;
  FRAME_LAYOUT.map_instance_type.store(12, Ordering::Relaxed);
  FRAME_LAYOUT.js_object_header.store(24, Ordering::Relaxed);
  FRAME_LAYOUT.fixed_array_header.store(16, Ordering::Relaxed);
  FRAME_LAYOUT.js_map_type.store(0x4321, Ordering::Relaxed);
  let hidden = vec![0, 0x4321usize << 32, 0, 0];
  let key = vec![tag(&hidden), 0, 0, 0];
  let store = vec![tag(&hidden), 0, 0, smi(i64::from(id))];
  let mut table = vec![0usize; 2 + 3 + 2 + 3 * 4];
  table[1] = smi(17);
  table[2] = smi(1);
  table[3] = smi(0);
  table[4] = smi(2);
  table[5] = smi(0);
  table[6] = smi(-1);
  table[7] = tag(&key);
  table[8] = tag(&store);
  table[9] = smi(-1);
  let map = vec![tag(&hidden), 0, 0, tag(&table)];
  let cped = vec![tag(&map)];
  let key_slot = vec![tag(&key)];
  let reader = FrameReader {
    enabled: AtomicBool::new(true),
    cped: AtomicUsize::new(cped.as_ptr() as usize),
    key: AtomicUsize::new(key_slot.as_ptr() as usize),
    hash: AtomicU32::new(0x10),
    gc_depth: AtomicU32::new(0),
    gc_context: AtomicU32::new(0),
    objects: [const { AtomicUsize::new(0) }; QUEUE_LEN],
    gc_store: AtomicUsize::new(0),
  };
  FakeFrame {
    reader,
    table,
    _buffers: vec![hidden, key, store, map, cped, key_slot],
  }
}

fn smi_word(v: i64) -> usize {
  (v << 32) as usize
}

#[test]
fn a_frame_reads_its_store_id_and_a_broken_one_reads_none_or_nothing() {
  let f = fake_frame(77);
  assert_eq!(frame_context(&f.reader), Some(77));
  // Where the store is: its tagged address, or during a collection the marker for the store
  // held since the collection's start.
  let store = f._buffers[2].as_ptr() as usize + 1;
  assert_eq!(frame_store(&f.reader), Some((77, store)));
  f.reader.gc_context.store(77, Ordering::Relaxed);
  f.reader.gc_depth.store(1, Ordering::Release);
  assert_eq!(frame_store(&f.reader), Some((77, GC_STORE)));
  f.reader.gc_depth.store(0, Ordering::Release);
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
    let mut f = fake_frame(77);
    corrupt(&mut f.table);
    let got = frame_context(&f.reader);
    assert!(got.is_none() || got == Some(0), "{what}: {got:?}");
  }
  // Another key in the frame: not ours, no labels.
  let mut f = fake_frame(77);
  f.table[7] = 0x1001; // a tagged address that is not the key's
  assert_eq!(frame_context(&f.reader), Some(0));
  // A store id that is not a Smi: nothing.
  let f = fake_frame(77);
  f.reader.key.store(0, Ordering::Relaxed);
  assert_eq!(frame_context(&f.reader), None, "not set up");
}
