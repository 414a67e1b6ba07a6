//! The SIGPROF handler is async-signal-safe, checked on the real handler with real signals:
//!
//! - **Allocation tripwire.** This test binary's global allocator counts every
//!   allocation made on a thread while that thread is inside our handler. The handler is
//!   called the way a real chain calls it: an outer handler (standing for a profiler that
//!   chained in front of us) arms the tripwire and calls ours; ours calls the inner one
//!   (standing for V8's). Thousands of signals must allocate nothing.
//! - **Interrupting malloc and locks.** Signals are sent from another thread, as V8's
//!   sampler does, at a thread that does nothing but allocate, free and take a mutex. A
//!   handler that allocated or locked would sooner or later re-enter malloc or the lock
//!   it interrupted and deadlock (the test would hang: it has a deadline) or corrupt the
//!   heap.
//! - **errno** survives the handler, and every signal reaches the inner handler once.
//!
//! Each integration test file is its own process, so installing handlers here touches
//! no other test.

// No signal handler exists on Windows (V8 samples without a signal there).
#![cfg(unix)]

use selfprof::capture::{self, signal};
use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// The thread whose allocations count (0: none), and the count.
static ARMED_TID: AtomicI32 = AtomicI32::new(0);
static ALLOCATIONS_WHILE_ARMED: AtomicU64 = AtomicU64::new(0);

struct Tripwire;

unsafe impl GlobalAlloc for Tripwire {
  unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
    note_allocation();
    System.alloc(layout)
  }
  unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
    note_allocation();
    System.dealloc(ptr, layout)
  }
  unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
    note_allocation();
    System.realloc(ptr, layout, new_size)
  }
}

fn note_allocation() {
  let armed = ARMED_TID.load(Ordering::Relaxed);
  if armed != 0 && armed == signal::gettid() {
    ALLOCATIONS_WHILE_ARMED.fetch_add(1, Ordering::Relaxed);
  }
}

#[global_allocator]
static GLOBAL: Tripwire = Tripwire;

/// Calls to the inner ("V8's") handler.
static INNER_CALLS: AtomicU64 = AtomicU64::new(0);
/// Our handler, read back from sigaction after `capture::install::install`.
static OURS: AtomicUsize = AtomicUsize::new(0);

extern "C" fn inner(_sig: libc::c_int, _info: *mut libc::siginfo_t, _uctx: *mut libc::c_void) {
  INNER_CALLS.fetch_add(1, Ordering::Relaxed);
  // Like V8's handler, it may clobber errno: ours must restore it.
  unsafe { *signal::errno_location() = libc::EINTR };
}

extern "C" fn outer(sig: libc::c_int, info: *mut libc::siginfo_t, uctx: *mut libc::c_void) {
  let tid = signal::gettid();
  let was = ARMED_TID.swap(tid, Ordering::Relaxed);
  let ours: extern "C" fn(libc::c_int, *mut libc::siginfo_t, *mut libc::c_void) =
    unsafe { std::mem::transmute(OURS.load(Ordering::Relaxed)) };
  ours(sig, info, uctx);
  ARMED_TID.store(was, Ordering::Relaxed);
}

fn set_handler(f: usize) {
  unsafe {
    let mut sa: libc::sigaction = std::mem::zeroed();
    sa.sa_sigaction = f;
    sa.sa_flags = libc::SA_SIGINFO | libc::SA_RESTART;
    assert_eq!(libc::sigaction(libc::SIGPROF, &sa, std::ptr::null_mut()), 0);
  }
}

fn current_handler() -> usize {
  unsafe {
    let mut sa: libc::sigaction = std::mem::zeroed();
    assert_eq!(libc::sigaction(libc::SIGPROF, std::ptr::null(), &mut sa), 0);
    sa.sa_sigaction
  }
}

#[test]
fn the_handler_allocates_nothing_and_survives_malloc_and_lock_pressure() {
  // The chain: outer -> ours -> inner, as with V8 and a second profiler in front of us.
  set_handler(inner as *const () as usize);
  assert_eq!(capture::install::install().unwrap(), capture::install::Install::Chained);
  OURS.store(current_handler(), Ordering::Relaxed);
  set_handler(outer as *const () as usize);
  // Reinstalling with `outer` in front (which calls ours) must not chain again.
  assert_eq!(
    capture::install::install().unwrap(),
    capture::install::Install::BehindAnother
  );
  assert_eq!(current_handler(), outer as *const () as usize);

  // A thread with a published label context, so the handler walks the thread cells too.
  let (slot, fresh) = capture::threads::register_thread().unwrap();
  assert!(fresh);
  signal::THREADS[slot].cell[signal::slot::CONTEXT].store(7, Ordering::Relaxed);

  // 1. Synchronous signals on this thread: nothing allocated, errno kept.
  let signals_before = signal::SIGNALS.load(Ordering::Relaxed);
  for _ in 0..5_000 {
    unsafe {
      *signal::errno_location() = libc::ENOENT;
      libc::raise(libc::SIGPROF);
      assert_eq!(*signal::errno_location(), libc::ENOENT, "errno restored");
    }
  }
  assert_eq!(
    INNER_CALLS.load(Ordering::Relaxed),
    5_000,
    "each signal reached V8's handler once"
  );
  assert_eq!(signal::SIGNALS.load(Ordering::Relaxed) - signals_before, 5_000);
  assert_eq!(signal::REENTERED.load(Ordering::Relaxed), 0);
  let write = signal::RING_WRITE.load(Ordering::Acquire);
  let entries = selfprof::capture::ring::snapshot(&signal::RING, write, signal::gettid(), 0, u64::MAX);
  assert_eq!(entries.len(), 5_000);
  assert!(entries
    .iter()
    .all(|e| e.context == 7 && e.after_ns >= e.before_ns && e.cpu_ns > 0));
  assert_eq!(
    signal::THREADS[slot].cell[signal::slot::SAMPLED].load(Ordering::Relaxed),
    7,
    "the sampled id is published"
  );
  assert_eq!(
    ALLOCATIONS_WHILE_ARMED.load(Ordering::Relaxed),
    0,
    "the handler allocated (or freed) memory"
  );

  // 2. Signals from another thread at a thread that only allocates and locks.
  let victim_tid = std::sync::Arc::new(AtomicI32::new(0));
  let victim_thread = std::sync::Arc::new(AtomicUsize::new(0));
  let stop = std::sync::Arc::new(AtomicBool::new(false));
  let progress = std::sync::Arc::new(AtomicU64::new(0));
  let (v_tid, v_thread, v_stop, v_progress) = (
    victim_tid.clone(),
    victim_thread.clone(),
    stop.clone(),
    progress.clone(),
  );
  let victim = std::thread::spawn(move || {
    // SAFETY: pthread_self has no preconditions.
    v_thread.store(unsafe { libc::pthread_self() } as usize, Ordering::Release);
    v_tid.store(signal::gettid(), Ordering::Release);
    let lock = std::sync::Mutex::new(Vec::<Box<[u8]>>::new());
    let mut rounds = 0u64;
    while !v_stop.load(Ordering::Acquire) {
      let mut held = lock.lock().unwrap();
      held.push(vec![rounds as u8; 16 + (rounds as usize % 4096)].into_boxed_slice());
      if held.len() > 64 {
        held.clear();
      }
      drop(held);
      rounds += 1;
      v_progress.store(rounds, Ordering::Relaxed);
    }
    rounds
  });
  while victim_tid.load(Ordering::Acquire) == 0 {
    std::thread::yield_now();
  }
  // pthread_kill: what V8's sampler uses to signal the JS thread (tgkill on Linux).
  let thread = victim_thread.load(Ordering::Acquire) as libc::pthread_t;
  let inner_before = INNER_CALLS.load(Ordering::Relaxed);
  // The victim must keep making progress: a handler that took a lock or called malloc
  // would sooner or later deadlock it in the middle of one.
  let keeps_going = |what: &str| {
    let seen = progress.load(Ordering::Relaxed);
    let deadline = Instant::now() + Duration::from_secs(10);
    while progress.load(Ordering::Relaxed) == seen {
      assert!(
        Instant::now() < deadline,
        "the victim made no progress for 10 s {what}: deadlocked in the handler"
      );
      std::thread::sleep(Duration::from_millis(1));
    }
  };
  let mut sent = 0u64;
  while sent < 20_000 {
    // SAFETY: the victim thread runs until `stop`, so its pthread_t is valid.
    let rc = unsafe { libc::pthread_kill(thread, libc::SIGPROF) };
    assert_eq!(rc, 0);
    sent += 1;
    if sent.is_multiple_of(4) {
      std::thread::sleep(Duration::from_micros(20));
    }
    if sent.is_multiple_of(2_000) {
      keeps_going("while signaled");
    }
  }
  keeps_going("after the signals");
  // Signals may coalesce while one is pending; wait for the last ones to land.
  let settle = Instant::now();
  while INNER_CALLS.load(Ordering::Relaxed) == inner_before && settle.elapsed() < Duration::from_secs(5) {
    std::thread::sleep(Duration::from_millis(1));
  }
  stop.store(true, Ordering::Release);
  let rounds = victim.join().expect("the victim thread survived");
  let handled = INNER_CALLS.load(Ordering::Relaxed) - inner_before;
  assert!(rounds > 0);
  assert!(
    handled > 1_000,
    "{handled} of {sent} signals handled while the victim allocated and locked"
  );
  assert_eq!(
    ALLOCATIONS_WHILE_ARMED.load(Ordering::Relaxed),
    0,
    "the handler allocated (or freed) memory"
  );
  assert_eq!(signal::REENTERED.load(Ordering::Relaxed), 0);
  eprintln!("{sent} signals sent, {handled} handled, while the victim did {rounds} allocate/lock rounds: 0 allocations in the handler");
  reading_the_context_frame_allocates_nothing_and_reads_the_store_id();
}

/// Words laid out as V8 lays out what the handler reads on the context-frame path (Node ≥
/// 24): an isolate's CPED slot pointing at a JS Map (an AsyncContextFrame) whose table maps
/// a key (selfprof's AsyncLocalStorage, held by a "global handle" slot) to a store object
/// whose first in-object property is a Smi id. Leaked: the handler may read it at any time.
struct FakeFrame {
  cped_slot: usize,
  key_slot: usize,
  hash: u32,
  /// The store's tagged address.
  store: usize,
  /// A tracer's key (in a slot) and store: another AsyncLocalStorage's entry in the frame.
  tracer_slot: usize,
  tracer_hash: u32,
  tracer_store: usize,
  /// The objects the addresses point into, freed with the frame (after the test cleared
  /// the thread's frame), so LeakSanitizer sees no leak.
  _objects: Vec<Box<[usize]>>,
}

const JS_MAP_TYPE: u16 = 0x4321;

/// `words` kept in `objects` (a boxed slice never moves), and its address.
fn keep(objects: &mut Vec<Box<[usize]>>, words: Vec<usize>) -> usize {
  let words = words.into_boxed_slice();
  let addr = words.as_ptr() as usize;
  objects.push(words);
  addr
}

fn smi(v: i64) -> usize {
  (v << 32) as usize
}

fn fake_frame(id: u32) -> FakeFrame {
  let mut objects = Vec::new();
  let mut object = |words: Vec<usize>| keep(&mut objects, words);
  let tag = |addr: usize| addr + 1;
  // A hidden class whose instance type (a u16 at byte 12) is JS_MAP_TYPE's.
  let mut hidden = vec![0usize; 4];
  hidden[1] = (JS_MAP_TYPE as usize) << 32;
  let hidden = object(hidden);
  let key = object(vec![tag(hidden), 0, 0, 0]);
  let store = object(vec![tag(hidden), 0, 0, smi(i64::from(id))]);
  // OrderedHashMap: [map, length, elements, deleted, buckets, heads.., entries (key, value, chain)..]
  let (buckets, capacity) = (2usize, 4usize);
  let hash = 0x2d2f_u32;
  let mut table = vec![0usize; 2 + 3 + buckets + 3 * capacity];
  table[1] = smi((table.len() - 2) as i64);
  table[2] = smi(1);
  table[3] = smi(0);
  table[4] = smi(buckets as i64);
  table[5] = smi(-1);
  table[6] = smi(-1);
  table[5 + (hash as usize & (buckets - 1))] = smi(0);
  table[7] = tag(key);
  table[8] = tag(store);
  table[9] = smi(-1);
  // The tracer's entry, in the other bucket.
  let tracer_hash = hash + 1;
  let tracer_key = object(vec![tag(hidden), 0, 0, 1]);
  let tracer_store = object(vec![tag(hidden), 0, 0, 0x2001]);
  table[2] = smi(2);
  table[5 + (tracer_hash as usize & (buckets - 1))] = smi(1);
  table[10] = tag(tracer_key);
  table[11] = tag(tracer_store);
  table[12] = smi(-1);
  let table = object(table);
  let map = object(vec![tag(hidden), 0, 0, tag(table)]);
  let cped_slot = object(vec![tag(map)]);
  let key_slot = object(vec![tag(key)]);
  let tracer_slot = object(vec![tag(tracer_key)]);
  FakeFrame {
    cped_slot,
    key_slot,
    hash,
    store: tag(store),
    tracer_slot,
    tracer_hash,
    tracer_store: tag(tracer_store),
    _objects: objects,
  }
}

/// Part 3, the context-frame path (after 1 and 2, in the same chain): reading the frame
/// allocates nothing, reads the store's id, pushes it to the queue once with where the store
/// is, and during a collection answers the id read when it began.
fn reading_the_context_frame_allocates_nothing_and_reads_the_store_id() {
  let layout = &signal::FRAME_LAYOUT;
  layout.map_instance_type.store(12, Ordering::Relaxed);
  layout.js_object_header.store(24, Ordering::Relaxed);
  layout.fixed_array_header.store(16, Ordering::Relaxed);
  layout.js_map_type.store(u32::from(JS_MAP_TYPE), Ordering::Relaxed);
  layout.oddball_type.store(0x83, Ordering::Relaxed);
  let (slot, _) = capture::threads::register_thread().unwrap();
  let t = &signal::THREADS[slot];
  t.cell[signal::slot::CONTEXT].store(0, Ordering::Relaxed);
  let frame = fake_frame(4242);
  t.frame.cped.store(frame.cped_slot, Ordering::Relaxed);
  t.frame.keys[signal::SELF_KEY].store(frame.key_slot, Ordering::Relaxed);
  t.frame.hashes[signal::SELF_KEY].store(frame.hash, Ordering::Relaxed);
  t.frame.enabled.store(true, Ordering::Release);
  assert_eq!(signal::frame_context(&t.frame), Some(4242));

  let write = signal::RING_WRITE.load(Ordering::Acquire);
  let armed_before = ALLOCATIONS_WHILE_ARMED.load(Ordering::Relaxed);
  for _ in 0..5_000 {
    unsafe {
      *signal::errno_location() = libc::ENOENT;
      libc::raise(libc::SIGPROF);
      assert_eq!(*signal::errno_location(), libc::ENOENT, "errno restored");
    }
  }
  // A collection in progress: the id read when it began (its store held in a handle).
  t.frame.gc_context.store(17, Ordering::Relaxed);
  t.frame.gc_stores[signal::SELF_KEY].store(frame.key_slot, Ordering::Relaxed);
  t.frame.gc_depth.store(1, Ordering::Release);
  unsafe { libc::raise(libc::SIGPROF) };
  t.frame.gc_depth.store(0, Ordering::Release);
  assert_eq!(
    ALLOCATIONS_WHILE_ARMED.load(Ordering::Relaxed),
    armed_before,
    "the handler allocated (or freed) memory"
  );
  let end = signal::RING_WRITE.load(Ordering::Acquire);
  let entries = selfprof::capture::ring::snapshot(&signal::RING, end, signal::gettid(), 0, u64::MAX);
  let ours = &entries[entries.len() - (end - write) as usize..];
  assert_eq!(ours.len(), 5_001);
  assert!(ours[..5_000].iter().all(|e| e.context == 4242));
  assert_eq!(ours[5_000].context, 17);
  // Pushed to the queue once (then not again until JS takes it), and 17 once.
  use signal::slot;
  let head = t.cell[slot::QUEUE_HEAD].load(Ordering::Relaxed);
  assert_eq!(head, 2);
  assert_eq!(t.cell[slot::QUEUE].load(Ordering::Relaxed), 4242);
  assert_eq!(t.cell[slot::QUEUE + 1].load(Ordering::Relaxed), 17);
  // With where each store is: the address read, and during the collection the marker for
  // the store held since its start.
  assert_eq!(
    t.frame.objects[0][signal::SELF_KEY].load(Ordering::Relaxed),
    frame.store
  );
  assert_eq!(
    t.frame.objects[1][signal::SELF_KEY].load(Ordering::Relaxed),
    signal::GC_STORE
  );

  // A tracer's key too: each sample is the pair (selfprof's set, the tracer's store), which
  // takes a fresh id from those JS reserved, once, and the same id after, allocating nothing.
  t.frame.gc_stores[signal::SELF_KEY].store(0, Ordering::Relaxed);
  t.frame.hashes[1].store(frame.tracer_hash, Ordering::Relaxed);
  t.frame.keys[1].store(frame.tracer_slot, Ordering::Relaxed);
  t.cell[slot::FRESH_NEXT].store(9000, Ordering::Relaxed);
  t.cell[slot::FRESH_END].store(9010, Ordering::Relaxed);
  let write = signal::RING_WRITE.load(Ordering::Acquire);
  let armed_before = ALLOCATIONS_WHILE_ARMED.load(Ordering::Relaxed);
  for _ in 0..1_000 {
    unsafe { libc::raise(libc::SIGPROF) };
  }
  assert_eq!(
    ALLOCATIONS_WHILE_ARMED.load(Ordering::Relaxed),
    armed_before,
    "the handler allocated (or freed) memory"
  );
  let end = signal::RING_WRITE.load(Ordering::Acquire);
  let entries = selfprof::capture::ring::snapshot(&signal::RING, end, signal::gettid(), 0, u64::MAX);
  let ours = &entries[entries.len() - (end - write) as usize..];
  assert!(ours.iter().all(|e| e.context == 9000), "the pair's id");
  assert_eq!(t.cell[slot::QUEUE_HEAD].load(Ordering::Relaxed), 3);
  assert_eq!(t.cell[slot::QUEUE + 2].load(Ordering::Relaxed), 9000);
  assert_eq!(
    t.frame.objects[2][signal::SELF_KEY].load(Ordering::Relaxed),
    frame.store
  );
  assert_eq!(t.frame.objects[2][1].load(Ordering::Relaxed), frame.tracer_store);
  t.frame.clear();
}
