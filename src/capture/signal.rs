//! Everything that runs inside the SIGPROF handler, and the state it touches.
//!
//! ASYNC-SIGNAL-SAFETY: `handle_sigprof` and every function it calls run in signal
//! context, interrupting arbitrary code on the JS thread (possibly inside malloc, a lock,
//! or V8's GC). They therefore only: read clocks and the thread id (`clock_gettime` and
//! `gettid` on Linux; `mach_absolute_time`, `clock_gettime` and `pthread_threadid_np` on
//! macOS: see `os` below for why each is safe there), load and store atomics in
//! statically allocated memory, and call the handler V8 installed. They never allocate,
//! lock, panic (no indexing that can fail, no unwrap, no formatting), touch thread-locals
//! (glibc may allocate them lazily), or call napi; errno is saved and restored. Keep it
//! that way: anything else belongs in another file (installing the handler is
//! `capture::install`, claiming and freeing threads' cells `capture::threads`; the statics
//! the handler reads stay here).
//!
//! Platforms: Linux (glibc and musl) and macOS. V8's sampler signals the JS thread with
//! SIGPROF on both, so the chain is the same; only the clock V8 stamps samples with, the
//! thread id and errno's location differ (module `os`). On Windows V8's sampler suspends
//! the thread instead (`SuspendThread`) and no handler runs: nothing here is installed,
//! and labels are joined to samples by time (`capture::switches`); the ring, the thread
//! cells and the clock (`os`: V8's QueryPerformanceCounter ticks) serve it too.
//!
//! The chain: V8 installs its SIGPROF handler when its sampler starts and puts its
//! predecessor back when its last sampler stops. After every profiler start we install
//! `handle_sigprof` in front of V8's handler (`capture::install`); it reads the clock, calls
//! V8's handler (which takes the sample and stamps it with V8's clock), reads the clock
//! again, and writes `{ before, after, context, generation, cpu }` into the ring (the
//! context: the label-set id JS published, or the one read from the thread's async context
//! frame: `frame_context`). Because V8's stop
//! puts back the handler that preceded V8's, ours drops out of the chain with V8's, and
//! the handler we chain to is re-read at every install, never kept from an older chain.
//!
//! Over 600 lines on purpose: every line that runs in signal context is in this one file, so a review of signal safety reads one file.

use crossbeam_utils::CachePadded;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU32, AtomicU64, AtomicUsize, Ordering};

/// Ring capacity in entries (a power of two). At a 1 ms interval this holds a little
/// over a minute of samples; older entries are overwritten.
pub const RING_CAPACITY: usize = 1 << 16;
/// How many threads (isolates) can publish a label context at once.
pub const MAX_THREADS: usize = 64;

/// What the handler records for one SIGPROF.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Record {
  /// V8's sample clock before and after V8's handler ran, in ns (CLOCK_MONOTONIC on
  /// Linux; on macOS the Mach clock, the start truncated as V8 truncates: see `os`).
  pub before_ns: u64,
  pub after_ns: u64,
  /// The thread's CPU time (CLOCK_THREAD_CPUTIME_ID).
  pub cpu_ns: u64,
  /// The context id the thread had published.
  pub context: u32,
  /// How many context switches the thread had published.
  pub generation: u32,
  pub tid: i32,
}

/// A ring slot. Every field is an atomic so that a reader racing with the handler sees
/// either a whole record or a torn one it can detect (`seq`), never UB.
pub struct Slot {
  /// 0 while being written; `index + 1` once the record at ring position `index` is whole.
  pub seq: AtomicU64,
  pub before_ns: AtomicU64,
  pub after_ns: AtomicU64,
  pub cpu_ns: AtomicU64,
  pub context: AtomicU32,
  pub generation: AtomicU32,
  pub tid: AtomicI32,
}

#[allow(clippy::declare_interior_mutable_const)]
pub const EMPTY_SLOT: Slot = Slot {
  seq: AtomicU64::new(0),
  before_ns: AtomicU64::new(0),
  after_ns: AtomicU64::new(0),
  cpu_ns: AtomicU64::new(0),
  context: AtomicU32::new(0),
  generation: AtomicU32::new(0),
  tid: AtomicI32::new(0),
};

impl Slot {
  /// Writes ring record `index`, seqlock-style: `seq` is 0 while the fields change and
  /// `index + 1` once they are whole.
  #[inline(always)]
  pub fn write(&self, index: u64, r: &Record) {
    self.seq.store(0, Ordering::Relaxed);
    std::sync::atomic::fence(Ordering::Release);
    self.before_ns.store(r.before_ns, Ordering::Relaxed);
    self.after_ns.store(r.after_ns, Ordering::Relaxed);
    self.cpu_ns.store(r.cpu_ns, Ordering::Relaxed);
    self.context.store(r.context, Ordering::Relaxed);
    self.generation.store(r.generation, Ordering::Relaxed);
    self.tid.store(r.tid, Ordering::Relaxed);
    self.seq.store(index + 1, Ordering::Release);
  }
}

/// The ring: preallocated (zeroed .bss), written by handlers, read by `ring.rs`.
pub static RING: [Slot; RING_CAPACITY] = [EMPTY_SLOT; RING_CAPACITY];
/// Total entries ever claimed; `index & (RING_CAPACITY - 1)` is the slot.
pub static RING_WRITE: CachePadded<AtomicU64> = CachePadded::new(AtomicU64::new(0));

/// A thread whose samples carry labels: `tid` (0 = free), the cell its JS reads and writes
/// through a Uint32Array view (`slot`), and, where the thread's labels are read from its
/// async context frame, how (`FrameReader`).
///
/// Two ways to know the thread's label set when a signal lands:
/// - published (async_hooks): JS writes the set's id to `CONTEXT` and bumps `GENERATION`
///   (a count of switches) at every switch; the handler stores the id it recorded in
///   `SAMPLED`, and JS saves that set's labels and zeroes it at its next switch. Where the
///   handler can read where Node is in its async id stack (`AsyncPosition`), JS publishes
///   at each callback's start only, one entry per depth of that stack (`DEPTHS`), and the
///   handler takes the entry of the depth running now, if the callback it was written in
///   is the one running (`published_here`);
/// - read (Node >= 24): the handler reads the id from the AsyncLocalStorage store of the
///   thread's current async context frame (`frame_context`) and pushes each id it records
///   to `QUEUE` (a ring JS drains to save the labels).
///
/// `RECORDINGS` counts the recordings started on the thread (written outside signal
/// context): a set saved since the last start need not be saved again.
#[repr(C)]
pub struct ThreadContext {
  pub cell: [AtomicU32; CELL_LEN],
  pub tid: AtomicI32,
  pub frame: FrameReader,
  pub position: AsyncPosition,
}

/// Where Node keeps the thread's place in its async id stack (Node < 24; set up from JS,
/// outside signal context, all zero while not): the address of the stack's depth (a u32
/// of `async_hook_fields`) and of the execution async id (an f64 of `async_id_fields`).
/// Both live as long as the thread's environment, whose cleanup zeroes them first
/// (`threads::unregister_thread`); only the thread itself writes them.
pub struct AsyncPosition {
  pub depth_at: AtomicUsize,
  pub exec_id_at: AtomicUsize,
}

/// The elements of a thread's cell (lib/capture/labels/thread.js gets them from `cellSlots()`).
pub mod slot {
  /// Published: the id of the thread's current label set.
  pub const CONTEXT: usize = 0;
  /// Published: switches so far.
  pub const GENERATION: usize = 1;
  /// Published: the id the handler last recorded (JS zeroes it once it saved the set).
  pub const SAMPLED: usize = 2;
  /// Recordings started on the thread.
  pub const RECORDINGS: usize = 3;
  /// Read: ids the handler pushed to `QUEUE` (it increments this after the write).
  pub const QUEUE_HEAD: usize = 4;
  /// Read: ids JS took from `QUEUE`.
  pub const QUEUE_TAIL: usize = 5;
  /// Read: the id the handler pushed last (not pushed again until JS zeroes this).
  pub const LAST_PUSHED: usize = 6;
  /// Recordings of the thread not built yet (`capture::switches::set_logging`): where
  /// samples are joined by time (Windows), JS logs its switches while this is not 0.
  pub const LOGGING: usize = 7;
  /// Read: ids the handler may give pairs with a tracer's store (`read_context`), from
  /// `FRESH_NEXT` up to `FRESH_END` (excluded). JS reserves them (zeroing `FRESH_END`
  /// first, then `FRESH_NEXT`, then `FRESH_END` again: a signal between sees no ids).
  pub const FRESH_NEXT: usize = 8;
  pub const FRESH_END: usize = 9;
  /// Signals the handler took on the thread (wrapping): V8's samples of this thread, where
  /// the process-wide count (`SIGNALS`) has every profiled thread's.
  pub const SIGNALS: usize = 10;
  /// Read: the ring of ids, `QUEUE_LEN` of them.
  pub const QUEUE: usize = 11;
  /// Published by depth (`AsyncPosition` set): `DEPTH_COUNT` entries of `DEPTH_WORDS`
  /// words, the execution async id (its low 32 bits) the entry was written in, the set's
  /// id, and whether the handler recorded it (JS zeroes that once it saved the set). JS
  /// writes the id 0 first, then the async id, then the id.
  pub const DEPTHS: usize = QUEUE + super::QUEUE_LEN;
}

/// Depths of Node's async id stack with an entry (deeper callbacks carry no labels).
pub const DEPTH_COUNT: usize = 64;
/// Words per depth entry (`slot::DEPTHS`).
pub const DEPTH_WORDS: usize = 3;

/// Ids the queue holds (a power of two). JS drains it once 64 are queued (at the next
/// label change), every second and before a trace is built; a full queue drops ids (their
/// samples' labels then count as lost).
pub const QUEUE_LEN: usize = 1024;
/// Elements of a thread's cell.
pub const CELL_LEN: usize = slot::DEPTHS + DEPTH_COUNT * DEPTH_WORDS;

impl ThreadContext {
  pub fn context(&self) -> u32 {
    self.cell[slot::CONTEXT].load(Ordering::Relaxed)
  }
  pub fn generation(&self) -> u32 {
    self.cell[slot::GENERATION].load(Ordering::Relaxed)
  }

  /// Where JS publishes by depth: the set published at the depth running now, if it was
  /// published in the callback running now (0 if not, or none), marked as recorded. None
  /// where JS publishes around every callback instead (no `AsyncPosition`).
  #[inline(always)]
  pub fn published_here(&self) -> Option<u32> {
    let depth_at = self.position.depth_at.load(Ordering::Relaxed);
    let exec_id_at = self.position.exec_id_at.load(Ordering::Relaxed);
    if depth_at == 0 || exec_id_at == 0 {
      return None;
    }
    // SAFETY: JS set them to elements of its environment's `async_hook_fields` (a u32) and
    // `async_id_fields` (an f64), aligned and alive until that environment's cleanup, which
    // zeroes them first (`threads::unregister_thread`); this thread alone writes them, and
    // the handler runs on it.
    let (depth, exec) = unsafe {
      (
        std::ptr::read_volatile(depth_at as *const u32),
        std::ptr::read_volatile(exec_id_at as *const f64),
      )
    };
    // Past the last depth (or the cell), no entry: no labels, and no index that could panic.
    let at = slot::DEPTHS + (depth as usize).min(DEPTH_COUNT) * DEPTH_WORDS;
    let Some([stamp, id, recorded]) = self
      .cell
      .get(at..at + DEPTH_WORDS)
      .and_then(|w| <&[AtomicU32; DEPTH_WORDS]>::try_from(w).ok())
    else {
      return Some(0);
    };
    let id = id.load(Ordering::Relaxed);
    // `as` saturates (no panic); ids past 2^32 compare by their low bits, as JS wrote them.
    if id == 0 || stamp.load(Ordering::Relaxed) != exec as u64 as u32 {
      return Some(0);
    }
    recorded.store(1, Ordering::Relaxed);
    Some(id)
  }
}

/// The keys the handler looks up in a thread's async context frame: selfprof's
/// AsyncLocalStorage (`SELF_KEY`), whose stores carry their label set's id, and up to two
/// tracers' (dd-trace's storage, OpenTelemetry's context manager), whose stores are the
/// tracers' own context objects (`capture::context_frame::set_up_tracer`).
pub const KEYS: usize = 3;
/// selfprof's own key: `FrameReader::keys[SELF_KEY]`.
pub const SELF_KEY: usize = 0;

/// How the handler reads a thread's label set from its async context frame (set up by
/// `capture::context_frame`, outside signal context; all zero while not set up). On
/// Node >= 24 AsyncLocalStorage keeps its stores in V8's continuation-preserved embedder
/// data: a JS Map (Node's AsyncContextFrame) from each AsyncLocalStorage to its store,
/// which V8 swaps at every continuation. selfprof's store is an object whose first
/// in-object property is its set's id, a Smi. A tracer's store carries no id: where one is
/// in the frame, the sample's set is the pair (selfprof's set, the tracers' stores), which
/// the handler gives an id of its own (`read_context`) and JS resolves when it drains.
pub struct FrameReader {
  /// The handler reads the frame (else the published id).
  pub enabled: AtomicBool,
  /// The address of the isolate's continuation-preserved embedder data slot.
  pub cped: AtomicUsize,
  /// Per key: the address of a global handle holding the AsyncLocalStorage (the GC keeps
  /// the object's current address there; 0: no such key), and that object's identity hash.
  pub keys: [AtomicUsize; KEYS],
  pub hashes: [AtomicU32; KEYS],
  /// While the isolate collects garbage (objects move): how deep, and the id read at the
  /// collection's start, which samples during it carry.
  pub gc_depth: AtomicU32,
  pub gc_context: AtomicU32,
  /// Where the stores of each queued id are (by queue position, then key): the tagged
  /// address the handler read (valid until the next collection moves objects; a
  /// collection's start turns each into a global handle, `capture::context_frame`), a
  /// global handle's slot once turned, `GC_STORE` for an id read during a collection (its
  /// store is the one `gc_stores` holds for that key), or 0. JS gets the stores themselves
  /// (`context_frame::drain`), so no set needs keeping by id for later.
  pub objects: [[AtomicUsize; KEYS]; QUEUE_LEN],
  /// Per key, a global handle's slot holding the store read at the last collection's start
  /// (0 if none); only the JS thread touches them, outside signal context.
  pub gc_stores: [AtomicUsize; KEYS],
  /// The selfprof id and the tracers' stores (tagged addresses) of the pair pushed last:
  /// a sample of the same pair takes its id (`LAST_PUSHED`). A collection's start zeroes
  /// the stores (objects move, and a freed address may hold another object after it).
  pub last_self: AtomicU32,
  pub last_stores: [AtomicUsize; KEYS],
}

/// `FrameReader::objects`: the id was read during a collection (see `gc_stores`), or,
/// once a drain or a later collection has looked, its store was there but could not be
/// kept (the collection it was read in was followed by another).
pub const GC_STORE: usize = 2;

impl ThreadContext {
  /// A slot with nothing in it: no thread, every cell and frame word zero; the frame
  /// reader on only if `frame_enabled` (the tests' fake frames).
  pub const fn empty(frame_enabled: bool) -> ThreadContext {
    ThreadContext {
      cell: [const { AtomicU32::new(0) }; CELL_LEN],
      tid: AtomicI32::new(0),
      position: AsyncPosition {
        depth_at: AtomicUsize::new(0),
        exec_id_at: AtomicUsize::new(0),
      },
      frame: FrameReader {
        enabled: AtomicBool::new(frame_enabled),
        cped: AtomicUsize::new(0),
        keys: [const { AtomicUsize::new(0) }; KEYS],
        hashes: [const { AtomicU32::new(0) }; KEYS],
        gc_depth: AtomicU32::new(0),
        gc_context: AtomicU32::new(0),
        objects: [const { [const { AtomicUsize::new(0) }; KEYS] }; QUEUE_LEN],
        gc_stores: [const { AtomicUsize::new(0) }; KEYS],
        last_self: AtomicU32::new(0),
        last_stores: [const { AtomicUsize::new(0) }; KEYS],
      },
    }
  }
}

#[allow(clippy::declare_interior_mutable_const)]
const EMPTY_THREAD: CachePadded<ThreadContext> = CachePadded::new(ThreadContext::empty(false));

/// V8's object layouts the frame reader needs (byte offsets and a type), the same for
/// every thread; from `capture::context_frame`'s per-version table. All zero until set.
pub struct FrameLayout {
  /// `Internals::kMapInstanceTypeOffset`: where a Map (hidden class) keeps its instance type.
  pub map_instance_type: AtomicUsize,
  /// `Internals::kJSObjectHeaderSize`: a JSObject's first in-object property (and a
  /// JSMap's table: JSCollection's first field).
  pub js_object_header: AtomicUsize,
  /// `Internals::kFixedArrayHeaderSize`: a FixedArray's first element.
  pub fixed_array_header: AtomicUsize,
  /// The instance type of a JS Map (read from a Map at set-up).
  pub js_map_type: AtomicU32,
  /// The instance type of an Oddball (`undefined`, `null`, booleans; read from `undefined`
  /// at set-up): a store that is one stands for none. (`run()` from a context with no store
  /// puts `undefined` back as the store on its way out.)
  pub oddball_type: AtomicU32,
}

pub static FRAME_LAYOUT: FrameLayout = FrameLayout {
  map_instance_type: AtomicUsize::new(0),
  js_object_header: AtomicUsize::new(0),
  fixed_array_header: AtomicUsize::new(0),
  js_map_type: AtomicU32::new(0),
  oddball_type: AtomicU32::new(0),
};

/// A word of V8's heap at `addr`. SAFETY: the caller got `addr` from V8's heap structures
/// it checked (tags, types, bounds), outside a garbage collection.
#[inline(always)]
unsafe fn word(addr: usize) -> usize {
  std::ptr::read_volatile(addr as *const usize)
}

/// V8's heap-object tag (64-bit, no pointer compression, as Node's builds are).
const HEAP_OBJECT_TAG: usize = 1;
/// OrderedHashMap: entries are (key, value, chain); capacity is buckets × load factor.
const ENTRY_SIZE: usize = 3;
const LOAD_FACTOR: usize = 2;

#[inline(always)]
fn is_heap_object(v: usize) -> bool {
  v & 3 == HEAP_OBJECT_TAG
}

/// A Smi's value (32-bit Smis in the upper half), if `v` is one.
#[inline(always)]
fn smi(v: usize) -> Option<i64> {
  (v & 0xffff_ffff == 0).then_some((v as i64) >> 32)
}

/// What a thread's frame holds for the handler: selfprof's label-set id (0 if none) and,
/// by key, each store's tagged address (0 if none; `GC_STORE` during a collection).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct FrameRead {
  pub id: u32,
  pub stores: [usize; KEYS],
}

impl FrameRead {
  /// Whether a tracer's store is in the frame (the sample's set is then a pair).
  #[inline(always)]
  pub fn has_tracer(&self) -> bool {
    self.stores[SELF_KEY + 1..].iter().any(|&s| s != 0)
  }
}

/// The label-set id of the store that selfprof's AsyncLocalStorage holds in the thread's
/// current async context frame: `Some(0)` when it holds none, `None` when the frame cannot
/// be read. During a garbage collection (objects move) it answers the id read when the
/// collection began.
#[inline(always)]
pub fn frame_context(f: &FrameReader) -> Option<u32> {
  frame_store(f).map(|(id, _)| id)
}

/// `frame_context` with where selfprof's store is: its tagged address (0 with no store),
/// or `GC_STORE` during a collection.
#[inline(always)]
pub fn frame_store(f: &FrameReader) -> Option<(u32, usize)> {
  frame_read(f).map(|r| (r.id, r.stores[SELF_KEY]))
}

/// What the thread's frame holds for each key; during a collection, the id read at its
/// start, with `GC_STORE` for each key whose store was held then.
#[inline(always)]
pub fn frame_read(f: &FrameReader) -> Option<FrameRead> {
  if f.gc_depth.load(Ordering::Acquire) > 0 {
    let mut stores = [0; KEYS];
    for (k, s) in stores.iter_mut().enumerate() {
      if f.gc_stores[k].load(Ordering::Relaxed) != 0 {
        *s = GC_STORE;
      }
    }
    return Some(FrameRead {
      id: f.gc_context.load(Ordering::Relaxed),
      stores,
    });
  }
  frame_read_now(f)
}

/// `frame_read` outside a collection (also what a collection's start reads). Plain loads
/// only; every pointer is checked (tag, instance type, table bounds, bounded chain walk)
/// before it is followed.
#[inline(always)]
pub fn frame_read_now(f: &FrameReader) -> Option<FrameRead> {
  let cped_slot = f.cped.load(Ordering::Relaxed);
  let map_type_at = FRAME_LAYOUT.map_instance_type.load(Ordering::Relaxed);
  let header = FRAME_LAYOUT.js_object_header.load(Ordering::Relaxed);
  let array_header = FRAME_LAYOUT.fixed_array_header.load(Ordering::Relaxed);
  let js_map = FRAME_LAYOUT.js_map_type.load(Ordering::Relaxed);
  let oddball = FRAME_LAYOUT.oddball_type.load(Ordering::Relaxed);
  let self_slot = f.keys[SELF_KEY].load(Ordering::Relaxed);
  if cped_slot == 0 || self_slot == 0 || header == 0 || array_header == 0 || js_map == 0 || oddball == 0 {
    return None;
  }
  // SAFETY: set up by context_frame: the isolate's CPED slot.
  let frame = unsafe { word(cped_slot) };
  if !is_heap_object(frame) {
    // No frame yet (undefined is a heap object too: its type is not a Map's).
    return Some(FrameRead::default());
  }
  let frame = frame - HEAP_OBJECT_TAG;
  // SAFETY: `frame` is a tagged heap object: its first word is its Map (hidden class).
  let hidden = unsafe { word(frame) };
  if !is_heap_object(hidden) {
    return None;
  }
  // SAFETY: a Map's instance type is a u16 at its fixed offset.
  let instance_type = unsafe { std::ptr::read_volatile((hidden - HEAP_OBJECT_TAG + map_type_at) as *const u16) };
  if u32::from(instance_type) != js_map {
    return Some(FrameRead::default());
  }
  // SAFETY: a JSMap's table (OrderedHashMap) is its first field after the header.
  let table = unsafe { word(frame + header) };
  if !is_heap_object(table) {
    return None;
  }
  let table = Table::read(table - HEAP_OBJECT_TAG, array_header)?;
  let mut read = FrameRead::default();
  for k in 0..KEYS {
    let slot = f.keys[k].load(Ordering::Relaxed);
    if slot == 0 {
      continue;
    }
    // SAFETY: a global handle's slot, set up by context_frame.
    let key = unsafe { word(slot) };
    if !is_heap_object(key) {
      continue;
    }
    let store = table.find(key, f.hashes[k].load(Ordering::Relaxed) as usize)?;
    if !is_heap_object(store) {
      continue;
    }
    // SAFETY: `store` is a tagged heap object: its first word is its Map (hidden class).
    let store_map = unsafe { word(store - HEAP_OBJECT_TAG) };
    if !is_heap_object(store_map) {
      return None;
    }
    // SAFETY: a Map's instance type is a u16 at its fixed offset.
    let store_type = unsafe { std::ptr::read_volatile((store_map - HEAP_OBJECT_TAG + map_type_at) as *const u16) };
    if u32::from(store_type) == oddball {
      continue;
    }
    if k == SELF_KEY {
      // SAFETY: selfprof's stores are objects whose first in-object property is the id.
      let id = smi(unsafe { word(store - HEAP_OBJECT_TAG + header) })?;
      read.id = u32::try_from(id).ok()?;
      // A store with id 0 stands for no labels (withLabels of none).
      read.stores[k] = if read.id == 0 { 0 } else { store };
    } else {
      read.stores[k] = store;
    }
  }
  Some(read)
}

/// An OrderedHashMap's table, checked: [map, length, elements, deleted, buckets, ...].
struct Table {
  at: usize,
  array_header: usize,
  buckets: usize,
  entries: usize,
}

impl Table {
  #[inline(always)]
  fn read(table: usize, array_header: usize) -> Option<Table> {
    let t = Table {
      at: table,
      array_header,
      buckets: 0,
      entries: 0,
    };
    // SAFETY: the FixedArray's length follows its map.
    let length = smi(unsafe { word(table + 8) })?;
    let (elements, deleted, buckets) = (smi(t.word(0))?, smi(t.word(1))?, smi(t.word(2))?);
    if length < 3 || buckets <= 0 || buckets & (buckets - 1) != 0 || elements < 0 || deleted < 0 {
      return None;
    }
    let (buckets, entries) = (buckets as usize, (elements + deleted) as usize);
    let capacity = buckets * LOAD_FACTOR;
    if entries > capacity || (length as usize) < 3 + buckets + ENTRY_SIZE * capacity {
      return None;
    }
    Some(Table { buckets, entries, ..t })
  }

  /// Element `i` of the table. SAFETY (of the read): `i` is within the length checked.
  #[inline(always)]
  fn word(&self, i: usize) -> usize {
    // SAFETY: see above; every caller's index is bounded by the checked length.
    unsafe { word(self.at + self.array_header + i * 8) }
  }

  /// The value of `key` (a tagged address) whose identity hash is `hash`: `Some(0)` if the
  /// table does not hold it, `None` if the table is inconsistent.
  #[inline(always)]
  fn find(&self, key: usize, hash: usize) -> Option<usize> {
    let mut entry = smi(self.word(3 + (hash & (self.buckets - 1))))?;
    // A chain never has more links than entries: a cycle cannot hold the handler.
    for _ in 0..self.entries {
      if entry < 0 || entry as usize >= self.entries {
        return Some(0);
      }
      let index = 3 + self.buckets + entry as usize * ENTRY_SIZE;
      if self.word(index) == key {
        return Some(self.word(index + 1));
      }
      entry = smi(self.word(index + 2))?;
    }
    Some(0)
  }
}

pub static THREADS: [CachePadded<ThreadContext>; MAX_THREADS] = [EMPTY_THREAD; MAX_THREADS];

/// The handler we chain to (V8's), as `sa_sigaction`, and its `sa_flags`.
#[cfg(unix)]
pub(super) static NEXT_ACTION: AtomicUsize = AtomicUsize::new(libc::SIG_DFL);
#[cfg(unix)]
pub(super) static NEXT_FLAGS: AtomicI32 = AtomicI32::new(0);
/// SIGPROFs handled, for tests and stats.
pub static SIGNALS: AtomicU64 = AtomicU64::new(0);
/// While `install` probes whether our handler is still in the chain: the probing
/// thread's tid (0 otherwise), and whether the probe signal reached us.
#[cfg(unix)]
pub(super) static PROBE_TID: AtomicI32 = AtomicI32::new(0);
#[cfg(unix)]
pub(super) static PROBE_HIT: AtomicBool = AtomicBool::new(false);
/// Re-entry guard, by tid: a thread's tid while it runs our handler. Slots are shared by
/// tids equal modulo `GUARDS` (then that thread runs unguarded, as before).
#[cfg(unix)]
const GUARDS: usize = 256;
#[cfg(unix)]
#[allow(clippy::declare_interior_mutable_const)]
const NO_GUARD: AtomicI32 = AtomicI32::new(0);
#[cfg(unix)]
static IN_HANDLER: [AtomicI32; GUARDS] = [NO_GUARD; GUARDS];
/// Times the handler found itself re-entered on one thread (a chain that loops).
pub static REENTERED: AtomicU64 = AtomicU64::new(0);

#[cfg(not(any(target_os = "linux", target_os = "macos", all(windows, target_arch = "x86_64"))))]
compile_error!(
  "selfprof supports Linux and macOS (V8 samples with signals there) and Windows x64 (labels joined by time)"
);

#[cfg(unix)]
#[inline(always)]
fn clock_ns(clock: libc::clockid_t) -> u64 {
  let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
  // SAFETY: clock_gettime writes into `ts` and is async-signal-safe.
  if unsafe { libc::clock_gettime(clock, &mut ts) } != 0 {
    return 0;
  }
  (ts.tv_sec as u64)
    .wrapping_mul(1_000_000_000)
    .wrapping_add(ts.tv_nsec as u64)
}

/// Now, on the clock the brackets are read on (V8's sample clock: CLOCK_MONOTONIC on
/// Linux, the Mach clock on macOS), in ns: what recordings' starts and the label store's
/// save times are compared with brackets on. Outside signal context too.
pub fn bracket_clock_ns() -> u64 {
  os::bracket_end_ns()
}

/// The calling thread's CPU time in ns (CLOCK_THREAD_CPUTIME_ID: Linux, and macOS ≥ 10.12,
/// where it is one `thread_selfusage` system call; on Windows `GetThreadTimes`, which
/// counts in scheduler ticks).
pub fn thread_cpu_ns() -> u64 {
  os::thread_cpu_ns()
}

#[cfg(unix)]
pub use os::errno_location;
pub use os::gettid;
pub(super) use os::init_clock;
#[cfg(windows)]
pub use os::v8_clock_is_qpc;

/// What differs between the platforms: the thread id, errno, and V8's sample clock.
#[cfg(target_os = "linux")]
mod os {
  /// The kernel's id of the calling thread.
  pub fn gettid() -> i32 {
    // SAFETY: gettid has no arguments and cannot fail.
    unsafe { libc::syscall(libc::SYS_gettid) as i32 }
  }

  /// This thread's errno (glibc and musl).
  #[inline(always)]
  pub fn errno_location() -> *mut libc::c_int {
    // SAFETY: __errno_location returns this thread's errno, always valid.
    unsafe { libc::__errno_location() }
  }

  /// Nothing to prepare: CLOCK_MONOTONIC needs no set-up.
  pub fn init_clock() {}

  pub fn thread_cpu_ns() -> u64 {
    super::clock_ns(libc::CLOCK_THREAD_CPUTIME_ID)
  }

  /// V8's TimeTicks clock on Linux is CLOCK_MONOTONIC (stamps in whole µs of it); both
  /// ends of the bracket are read from it in ns.
  #[inline(always)]
  pub fn bracket_start_ns() -> u64 {
    super::clock_ns(libc::CLOCK_MONOTONIC)
  }

  #[inline(always)]
  pub fn bracket_end_ns() -> u64 {
    super::clock_ns(libc::CLOCK_MONOTONIC)
  }
}

#[cfg(target_os = "macos")]
mod os {
  use std::sync::atomic::{AtomicU64, Ordering};

  #[repr(C)]
  struct MachTimebase {
    numer: u32,
    denom: u32,
  }

  extern "C" {
    // libSystem. mach_absolute_time reads the commpage (no system call, no lock);
    // mach_timebase_info is only called outside signal context (`init_clock`).
    fn mach_absolute_time() -> u64;
    fn mach_timebase_info(info: *mut MachTimebase) -> libc::c_int;
  }

  /// `numer << 32 | denom` of the Mach timebase; 0 until `init_clock` ran.
  static TIMEBASE: AtomicU64 = AtomicU64::new(0);

  /// A 32-bit id of the calling thread, never 0 (0 marks a free thread cell).
  ///
  /// `pthread_threadid_np(NULL, ..)` asks for the calling thread: libpthread then reads
  /// the id from the thread's own `pthread_t` (found through its TSD register), set
  /// when the thread started: no lock, no allocation, no system call, so it is as safe
  /// in a signal handler as `gettid` is on Linux. (For another thread it would take
  /// libpthread's list lock: never ask that here.) `pthread_mach_thread_np` is lock-free
  /// for the calling thread too, but its port names are recycled with a small
  /// generation count in the low bits; `pthread_threadid_np` is the system-wide,
  /// never-reused 64-bit id, of which the low 32 bits are kept (two live threads clash
  /// only if 2³² threads were created between them).
  pub fn gettid() -> i32 {
    let mut id: u64 = 0;
    // SAFETY: a null thread means the calling thread; `id` is a valid out-parameter.
    unsafe { libc::pthread_threadid_np(0, &mut id) };
    match id as u32 as i32 {
      0 => i32::MIN,
      tid => tid,
    }
  }

  /// This thread's errno (`__error()` in libSystem).
  #[inline(always)]
  pub fn errno_location() -> *mut libc::c_int {
    // SAFETY: __error returns this thread's errno, always valid.
    unsafe { libc::__error() }
  }

  pub fn thread_cpu_ns() -> u64 {
    super::clock_ns(libc::CLOCK_THREAD_CPUTIME_ID)
  }

  /// Reads the Mach timebase, once, before our handler can run (`install`).
  pub fn init_clock() {
    if TIMEBASE.load(Ordering::Acquire) != 0 {
      return;
    }
    let mut tb = MachTimebase { numer: 0, denom: 0 };
    // SAFETY: mach_timebase_info fills `tb`.
    if unsafe { mach_timebase_info(&mut tb) } == 0 && tb.numer != 0 && tb.denom != 0 {
      TIMEBASE.store((tb.numer as u64) << 32 | tb.denom as u64, Ordering::Release);
    }
  }

  #[inline(always)]
  fn timebase() -> (u64, u64) {
    let tb = TIMEBASE.load(Ordering::Relaxed);
    (tb >> 32, tb & 0xffff_ffff)
  }

  /// V8's TimeTicks::Now() on Darwin is `mach_absolute_time() / 1000 * numer / denom` µs,
  /// not CLOCK_MONOTONIC (which counts sleep): whole µs on Intel, and on Apple silicon
  /// (24 MHz ticks, numer/denom = 125/3) steps of 41.67 µs. The bracket's start is read
  /// the same way, in ns, so that it is never later than V8's stamp of a sample taken
  /// inside the bracket, whatever the step.
  #[inline(always)]
  pub fn bracket_start_ns() -> u64 {
    let (numer, denom) = timebase();
    if denom == 0 {
      return 0;
    }
    // SAFETY: no arguments; reads the commpage.
    let ticks = unsafe { mach_absolute_time() };
    (ticks / 1000).wrapping_mul(numer) / denom * 1000
  }

  /// The bracket's end, exact (V8's truncated stamp can only be earlier than this).
  #[inline(always)]
  pub fn bracket_end_ns() -> u64 {
    let (numer, denom) = timebase();
    if denom == 0 {
      return 0;
    }
    // SAFETY: as above.
    let ticks = unsafe { mach_absolute_time() };
    ticks.wrapping_mul(numer) / denom
  }
}

#[cfg(windows)]
mod os {
  use std::sync::atomic::{AtomicU64, Ordering};

  #[link(name = "kernel32")]
  extern "system" {
    fn QueryPerformanceCounter(count: *mut i64) -> i32;
    fn QueryPerformanceFrequency(frequency: *mut i64) -> i32;
    fn GetCurrentThreadId() -> u32;
    fn GetCurrentThread() -> isize;
    fn GetThreadTimes(thread: isize, creation: *mut u64, exit: *mut u64, kernel: *mut u64, user: *mut u64) -> i32;
  }

  /// QueryPerformanceCounter's ticks per second; 0 until read (or if there is none).
  static FREQUENCY: AtomicU64 = AtomicU64::new(0);

  /// The calling thread's id (never 0: a Windows thread id is a nonzero multiple of 4).
  pub fn gettid() -> i32 {
    // SAFETY: no arguments; cannot fail.
    unsafe { GetCurrentThreadId() as i32 }
  }

  fn frequency() -> u64 {
    let f = FREQUENCY.load(Ordering::Relaxed);
    if f != 0 {
      return f;
    }
    let mut f: i64 = 0;
    // SAFETY: writes the frequency into `f`.
    if unsafe { QueryPerformanceFrequency(&mut f) } == 0 || f <= 0 {
      return 0;
    }
    FREQUENCY.store(f as u64, Ordering::Relaxed);
    f as u64
  }

  pub fn init_clock() {
    frequency();
  }

  /// Now in ns of QueryPerformanceCounter: V8's TimeTicks on Windows (where the CPU has an
  /// invariant TSC, `v8_clock_is_qpc`) are whole µs of the same counter, `ticks * 10⁶ /
  /// frequency` rounded down, which is this value's µs rounded down.
  pub fn bracket_end_ns() -> u64 {
    let f = frequency();
    let mut ticks: i64 = 0;
    // SAFETY: writes the counter into `ticks`.
    if f == 0 || unsafe { QueryPerformanceCounter(&mut ticks) } == 0 || ticks < 0 {
      return 0;
    }
    (u128::from(ticks as u64) * 1_000_000_000 / u128::from(f)) as u64
  }

  /// The calling thread's CPU time (kernel and user) in ns.
  pub fn thread_cpu_ns() -> u64 {
    let (mut creation, mut exit, mut kernel, mut user) = (0u64, 0u64, 0u64, 0u64);
    // SAFETY: the pseudo-handle of the calling thread; four FILETIMEs (two u32 halves,
    // little-endian: the layout of a u64) to write.
    if unsafe { GetThreadTimes(GetCurrentThread(), &mut creation, &mut exit, &mut kernel, &mut user) } == 0 {
      return 0;
    }
    kernel.saturating_add(user).saturating_mul(100)
  }

  /// Whether V8's TimeTicks read QueryPerformanceCounter in this process, as V8 decides
  /// it (`TimeTicks::Now` on Windows): a performance counter, and a CPU with an
  /// invariant TSC (CPUID 0x80000007, EDX bit 8), or, in a VM that hides the bit,
  /// Microsoft's hypervisor. Otherwise V8 reads a millisecond clock that nothing here can
  /// join to, and samples carry no labels.
  pub fn v8_clock_is_qpc() -> bool {
    if frequency() == 0 {
      return false;
    }
    use std::arch::x86_64::__cpuid;
    // SAFETY: CPUID exists on every x86-64 CPU; leaves past the maximum are not asked.
    // (Older compilers have `__cpuid` unsafe.)
    #[allow(unused_unsafe)]
    unsafe {
      let max_extended = __cpuid(0x8000_0000).eax;
      if max_extended >= 0x8000_0007 && __cpuid(0x8000_0007).edx & (1 << 8) != 0 {
        return true;
      }
      let in_vm = __cpuid(1).ecx & (1 << 31) != 0;
      let hv = __cpuid(0x4000_0000);
      in_vm && hv.ebx == 0x7263_694D && hv.ecx == 0x666F_736F && hv.edx == 0x7648_2074
    }
  }
}

/// The label-set id and generation of thread `tid` (zeros if none), and tells JS the id
/// was sampled; counts the signal in the thread's cell.
#[cfg(any(unix, test))]
#[inline(always)]
pub(super) fn context_of(tid: i32) -> (u32, u32) {
  for t in THREADS.iter() {
    if t.tid.load(Ordering::Relaxed) == tid {
      t.cell[slot::SIGNALS].fetch_add(1, Ordering::Relaxed);
      if t.frame.enabled.load(Ordering::Acquire) {
        // Another copy of the JS module on this thread may publish its own sets (with
        // hooks): where selfprof's store is not in the frame, that is the context.
        let id = read_context(t);
        if id != 0 || t.context() == 0 {
          return (id, 0);
        }
      }
      // Published by depth: switches are not counted (a callback's end is one), so two
      // signals never vouch for a sample between them (generation 0, see `sample`).
      if let Some(context) = t.published_here() {
        if context != 0 {
          t.cell[slot::SAMPLED].store(context, Ordering::Relaxed);
        }
        return (context, 0);
      }
      // JS writes the id, then bumps the generation: a signal between the two records
      // the new id under the old generation, which only makes the record look older.
      let generation = t.generation();
      let context = t.context();
      if context != 0 {
        t.cell[slot::SAMPLED].store(context, Ordering::Relaxed);
      }
      return (context, generation);
    }
  }
  (0, 0)
}

/// The id read from thread `t`'s async context frame (0 if none or unreadable), pushed to
/// its queue for JS with its stores unless it was the last one pushed. The record's
/// generation is the signal's number: no switches are counted on this path, so two
/// signals never vouch for a sample between them (`ring::Match::Between`).
#[cfg(any(unix, test))]
#[inline(always)]
pub(crate) fn read_context(t: &ThreadContext) -> u32 {
  let read = frame_read(&t.frame).unwrap_or_default();
  let id = if t.frame.gc_depth.load(Ordering::Acquire) > 0 {
    // The collection's start gave the id of what it read (`context_frame::gc_prologue`).
    read.id
  } else {
    pair_id(t, &read)
  };
  if id != 0 && t.cell[slot::LAST_PUSHED].load(Ordering::Relaxed) != id {
    let head = t.cell[slot::QUEUE_HEAD].load(Ordering::Relaxed);
    let tail = t.cell[slot::QUEUE_TAIL].load(Ordering::Relaxed);
    if head.wrapping_sub(tail) < QUEUE_LEN as u32 {
      let at = head as usize & (QUEUE_LEN - 1);
      if let (Some(c), Some(o)) = (t.cell.get(slot::QUEUE + at), t.frame.objects.get(at)) {
        c.store(id, Ordering::Relaxed);
        for (slot, &store) in o.iter().zip(read.stores.iter()) {
          slot.store(store, Ordering::Relaxed);
        }
      }
      t.cell[slot::QUEUE_HEAD].store(head.wrapping_add(1), Ordering::Release);
      t.cell[slot::LAST_PUSHED].store(id, Ordering::Relaxed);
      remember_pair(t, &read);
    } else {
      QUEUE_FULL.fetch_add(1, Ordering::Relaxed);
    }
  }
  id
}

/// The id of what the frame holds outside a collection: selfprof's set's own id where no
/// tracer's store is there; else the id of the pair pushed last if this is that pair,
/// else a fresh one from the thread's reserved ids (0, no labels, if none is left). Also
/// called at a collection's start (context_frame.rs), on every platform.
#[inline(always)]
pub(crate) fn pair_id(t: &ThreadContext, read: &FrameRead) -> u32 {
  if !read.has_tracer() {
    return read.id;
  }
  let f = &t.frame;
  let last = t.cell[slot::LAST_PUSHED].load(Ordering::Relaxed);
  let same = last != 0
    && f.last_self.load(Ordering::Relaxed) == read.id
    && (SELF_KEY + 1..KEYS).all(|k| f.last_stores[k].load(Ordering::Relaxed) == read.stores[k]);
  if same {
    return last;
  }
  let (next, end) = (
    t.cell[slot::FRESH_NEXT].load(Ordering::Relaxed),
    t.cell[slot::FRESH_END].load(Ordering::Relaxed),
  );
  if next == 0 || next >= end {
    FRESH_OUT.fetch_add(1, Ordering::Relaxed);
    return 0;
  }
  t.cell[slot::FRESH_NEXT].store(next + 1, Ordering::Relaxed);
  next
}

/// Notes the pair just pushed (see `FrameReader::last_stores`).
#[cfg(any(unix, test))]
#[inline(always)]
pub(crate) fn remember_pair(t: &ThreadContext, read: &FrameRead) {
  let f = &t.frame;
  f.last_self.store(read.id, Ordering::Relaxed);
  for k in SELF_KEY + 1..KEYS {
    // During a collection the stores are markers, never an address: nothing matches them.
    f.last_stores[k].store(
      if read.stores[k] == GC_STORE { 0 } else { read.stores[k] },
      Ordering::Relaxed,
    );
  }
}

/// Pairs with a tracer's store the handler could give no id (a thread's reserved ids ran out).
pub static FRESH_OUT: AtomicU64 = AtomicU64::new(0);

/// Ids the handler could not push because a thread's queue was full.
pub static QUEUE_FULL: AtomicU64 = AtomicU64::new(0);

#[cfg(unix)]
#[inline(always)]
fn call_next(sig: libc::c_int, info: *mut libc::siginfo_t, uctx: *mut libc::c_void) {
  let action = NEXT_ACTION.load(Ordering::Acquire);
  if action == libc::SIG_DFL || action == libc::SIG_IGN || action == our_action() {
    return;
  }
  if NEXT_FLAGS.load(Ordering::Relaxed) & libc::SA_SIGINFO != 0 {
    // SAFETY: `action` was read from sigaction() as the installed SA_SIGINFO handler.
    let f: extern "C" fn(libc::c_int, *mut libc::siginfo_t, *mut libc::c_void) = unsafe { std::mem::transmute(action) };
    f(sig, info, uctx);
  } else {
    // SAFETY: `action` was read from sigaction() as the installed plain handler.
    let f: extern "C" fn(libc::c_int) = unsafe { std::mem::transmute(action) };
    f(sig);
  }
}

/// The SIGPROF handler. See the module comment: async-signal-safe only.
#[cfg(unix)]
extern "C" fn handle_sigprof(sig: libc::c_int, info: *mut libc::siginfo_t, uctx: *mut libc::c_void) {
  // SAFETY: errno_location returns this thread's errno, always valid.
  let errno = unsafe { *errno_location() };
  let tid = gettid();
  if PROBE_TID.load(Ordering::Acquire) == tid {
    // `install` asking whether the chain still reaches us: answer, and take no sample.
    PROBE_HIT.store(true, Ordering::Release);
  } else {
    // A chain that reaches us again from inside our own call (someone chained to us and
    // we to them) must not recurse until the stack overflows: the inner call returns.
    let guard = &IN_HANDLER[(tid as u32 as usize) % GUARDS];
    match guard.compare_exchange(0, tid, Ordering::Acquire, Ordering::Relaxed) {
      Ok(_) => {
        sample(sig, info, uctx, tid);
        guard.store(0, Ordering::Release);
      }
      Err(holder) if holder == tid => {
        REENTERED.fetch_add(1, Ordering::Relaxed);
      }
      Err(_) => sample(sig, info, uctx, tid),
    }
  }
  // SAFETY: restores the errno the interrupted code may be about to read.
  unsafe { *errno_location() = errno };
}

/// One SIGPROF: the clock around V8's handler, the thread's context and CPU time, into
/// the ring.
#[cfg(unix)]
#[inline(always)]
fn sample(sig: libc::c_int, info: *mut libc::siginfo_t, uctx: *mut libc::c_void, tid: i32) {
  let before_ns = os::bracket_start_ns();
  call_next(sig, info, uctx);
  let after_ns = os::bracket_end_ns();
  let (context, generation) = context_of(tid);
  let index = RING_WRITE.fetch_add(1, Ordering::Relaxed);
  let record = Record {
    before_ns,
    after_ns,
    cpu_ns: thread_cpu_ns(),
    context,
    // Read from the frame or published by depth: a generation of its own (see
    // `read_context`, `context_of`).
    generation: if generation == 0 && context != 0 {
      !(index as u32)
    } else {
      generation
    },
    tid,
  };
  RING[(index as usize) & (RING_CAPACITY - 1)].write(index, &record);
  SIGNALS.fetch_add(1, Ordering::Relaxed);
}

/// Our handler, as `sa_sigaction`.
#[cfg(unix)]
#[inline(always)]
pub(super) fn our_action() -> usize {
  handle_sigprof as *const () as usize
}

#[cfg(test)]
mod tests;
