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

use selfprof::capture::signal;
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
/// Our handler, read back from sigaction after `signal::install`.
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
  assert_eq!(signal::install().unwrap(), signal::Install::Chained);
  OURS.store(current_handler(), Ordering::Relaxed);
  set_handler(outer as *const () as usize);
  // Reinstalling with `outer` in front (which calls ours) must not chain again.
  assert_eq!(signal::install().unwrap(), signal::Install::BehindAnother);
  assert_eq!(current_handler(), outer as *const () as usize);

  // A thread with a published label context, so the handler walks the thread cells too.
  let (slot, fresh) = signal::register_thread().unwrap();
  assert!(fresh);
  signal::THREADS[slot].cell[0].store(7, Ordering::Relaxed);

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
    signal::THREADS[slot].cell[2].load(Ordering::Relaxed),
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
    if sent % 4 == 0 {
      std::thread::sleep(Duration::from_micros(20));
    }
    if sent % 2_000 == 0 {
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
}
