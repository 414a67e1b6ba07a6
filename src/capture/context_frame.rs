//! Setting up the signal handler to read a thread's label set from its async context frame
//! (`signal::frame_context`), on Node ≥ 24: no hook at every async hop.
//!
//! What the handler needs, found here on the JS thread, never in signal context:
//! - the isolate (`v8::Isolate::GetCurrent`) and where it keeps the continuation-preserved
//!   embedder data, a per-V8-version offset (`LAYOUTS`, checked against each Node's headers
//!   by `scripts/node-matrix.js`);
//! - selfprof's AsyncLocalStorage, the key in the frame's Map: its identity hash
//!   (`v8::Object::GetIdentityHash`) and a global handle to it (the GC moves the object and
//!   updates the handle's slot, which the handler reads);
//! - a JS Map's instance type, read from a Map JS passes;
//! - GC prologue and epilogue callbacks: while objects move, the handler uses the id read
//!   when the collection began;
//! - a tracer's AsyncLocalStorage per tracer key (`set_tracer_key`): its stores are the
//!   tracer's contexts, and a sample in one takes a pair id (`signal::read_context`).
//!
//! The handler queues each id it records with where its store object is; JS drains the
//! queue (`drain`) and gets the stores themselves, to save their labels. A store's address
//! holds until a collection moves objects, so a collection's start first turns each queued
//! address into a global handle (which the collector keeps current), and keeps the store
//! read at its start in one too, for the ids samples take during it.
//!
//! The V8 functions are the node executable's own exports, found with `dlsym` (`capture::v8_symbols`), so one
//! Node-API build serves every Node version; where a symbol or the version's layout is
//! missing, set-up fails and JS keeps its hooks. JS then proves the reader on the running
//! Node before it is enabled (lib/capture/labels/frame.js: `checkFrame`), and each tracer's key
//! before its contexts are read (`readTracerKeys`).

use super::signal::{self, slot, ThreadContext, FRAME_LAYOUT, GC_STORE, KEYS, QUEUE_LEN, SELF_KEY};
use super::v8_symbols::{function, GetCurrent, GET_CURRENT};
use std::ffi::c_void;
use std::sync::atomic::Ordering;
use std::sync::OnceLock;

/// V8's layouts by V8 version (`major.minor`, as in `process.versions.v8`): the offset of
/// the continuation-preserved embedder data in the isolate, a Map's instance type, a
/// JSObject's header and a FixedArray's header (v8-internal.h's `Internals` constants,
/// 64-bit without pointer compression, as Node's own builds are).
pub const LAYOUTS: &[Layout] = &[
  // Node 22 (with --experimental-async-context-frame).
  Layout {
    v8: "12.4",
    cped: 576,
    map_instance_type: 12,
    js_object_header: 24,
    fixed_array_header: 16,
  },
  // Node 24.
  Layout {
    v8: "13.6",
    cped: 632,
    map_instance_type: 12,
    js_object_header: 24,
    fixed_array_header: 16,
  },
  // Node 26.
  Layout {
    v8: "14.6",
    cped: 680,
    map_instance_type: 12,
    js_object_header: 24,
    fixed_array_header: 16,
  },
];

#[derive(Debug, Clone, Copy)]
pub struct Layout {
  pub v8: &'static str,
  pub cped: usize,
  pub map_instance_type: usize,
  pub js_object_header: usize,
  pub fixed_array_header: usize,
}

/// The layout for V8 version `version` (`"13.6.233.17-node.53"`), if known.
pub fn layout_for(version: &str) -> Option<&'static Layout> {
  let mut parts = version.split('.');
  let major_minor = format!("{}.{}", parts.next()?, parts.next()?);
  LAYOUTS.iter().find(|l| l.v8 == major_minor)
}

type GcCallback = extern "C" fn(isolate: *mut c_void, gc_type: i32, flags: i32, data: *mut c_void);

/// The V8 functions used, from the node executable.
struct V8 {
  get_current: GetCurrent,
  identity_hash: extern "C" fn(object: *const c_void) -> i32,
  globalize: extern "C" fn(isolate: *mut c_void, value: usize) -> *mut usize,
  dispose_global: extern "C" fn(slot: *mut usize),
  add_prologue: extern "C" fn(isolate: *mut c_void, cb: GcCallback, data: *mut c_void, filter: i32),
  add_epilogue: extern "C" fn(isolate: *mut c_void, cb: GcCallback, data: *mut c_void, filter: i32),
  remove_prologue: extern "C" fn(isolate: *mut c_void, cb: GcCallback, data: *mut c_void),
  remove_epilogue: extern "C" fn(isolate: *mut c_void, cb: GcCallback, data: *mut c_void),
}

/// Every kind of collection (kGCTypeAll).
const GC_TYPE_ALL: i32 = 0x1f;

fn v8() -> Result<&'static V8, String> {
  if cfg!(windows) {
    // V8 samples without a signal there: no handler reads a frame.
    return Err("no signal handler reads the context frame on Windows".into());
  }
  static V8_FNS: OnceLock<Result<V8, String>> = OnceLock::new();
  V8_FNS
    .get_or_init(|| {
      // SAFETY: each symbol is the C++ function the mangled name spells, whose ABI is a C
      // function taking `this` first (Itanium ABI, non-virtual members); enums are ints.
      unsafe {
        Ok(V8 {
          get_current: function(&[GET_CURRENT])?,
          identity_hash: function(&[c"_ZN2v86Object15GetIdentityHashEv"])?,
          globalize: function(&[c"_ZN2v812api_internal18GlobalizeReferenceEPNS_8internal7IsolateEm"])?,
          dispose_global: function(&[c"_ZN2v812api_internal13DisposeGlobalEPm"])?,
          add_prologue: function(&[
            c"_ZN2v87Isolate21AddGCPrologueCallbackEPFvPS0_NS_6GCTypeENS_15GCCallbackFlagsEPvES4_S2_",
          ])?,
          add_epilogue: function(&[
            c"_ZN2v87Isolate21AddGCEpilogueCallbackEPFvPS0_NS_6GCTypeENS_15GCCallbackFlagsEPvES4_S2_",
          ])?,
          remove_prologue: function(&[
            c"_ZN2v87Isolate24RemoveGCPrologueCallbackEPFvPS0_NS_6GCTypeENS_15GCCallbackFlagsEPvES4_",
          ])?,
          remove_epilogue: function(&[
            c"_ZN2v87Isolate24RemoveGCEpilogueCallbackEPFvPS0_NS_6GCTypeENS_15GCCallbackFlagsEPvES4_",
          ])?,
        })
      }
    })
    .as_ref()
    .map_err(Clone::clone)
}

extern "C" fn gc_prologue(isolate: *mut c_void, _gc_type: i32, _flags: i32, data: *mut c_void) {
  // SAFETY: `data` is the static ThreadContext of the thread the callbacks were added for.
  let t = unsafe { &*(data as *const ThreadContext) };
  let f = &t.frame;
  if f.gc_depth.load(Ordering::Relaxed) > 0 {
    f.gc_depth.fetch_add(1, Ordering::Release);
    return;
  }
  // The heap is whole at a collection's start: read as the handler would, and give the
  // read its id as the handler would (a pair's own, or a fresh one).
  let read = signal::frame_read_now(f).unwrap_or_default();
  let id = signal::pair_id(t, &read);
  // Objects move from here: no address read before matches one read after.
  for s in f.last_stores.iter() {
    s.store(0, Ordering::Relaxed);
  }
  let Ok(v8) = v8() else {
    f.gc_context.store(id, Ordering::Relaxed);
    f.gc_depth.fetch_add(1, Ordering::Release);
    return;
  };
  let enabled = id != 0 && f.enabled.load(Ordering::Acquire);
  let held: [usize; KEYS] = std::array::from_fn(|k| {
    if enabled && read.stores[k] != 0 {
      (v8.globalize)(isolate, read.stores[k]) as usize
    } else {
      0
    }
  });
  // What the handler queued keeps its stores in global handles, which the collector
  // updates as it moves them: addresses read outside a collection, and ids read during
  // the last one (whose stores `gc_stores` hold until now).
  let old: [usize; KEYS] = std::array::from_fn(|k| f.gc_stores[k].load(Ordering::Relaxed));
  let tail = t.cell[slot::QUEUE_TAIL].load(Ordering::Relaxed);
  let seen = hold_queued(t, v8, isolate, tail, Some(&old));
  f.gc_context.store(id, Ordering::Relaxed);
  for (k, &h) in held.iter().enumerate() {
    f.gc_stores[k].store(h, Ordering::Relaxed);
  }
  // From here the handler queues ids with GC_STORE (this collection's stores).
  f.gc_depth.fetch_add(1, Ordering::Release);
  // Any address a signal queued meanwhile, before the line above (what it queued after
  // is this collection's).
  hold_queued(t, v8, isolate, seen, None);
  for h in old {
    if h != 0 {
      (v8.dispose_global)(h as *mut usize);
    }
  }
}

/// Turns thread `t`'s queued stores from `from` to the queue's head into global handles:
/// addresses, and with `gc_stores` (the slots of the last collection's stores, 0 where
/// none) `GC_STORE` entries into handles of their own on what those hold. Returns the head
/// it went to.
fn hold_queued(t: &ThreadContext, v8: &V8, isolate: *mut c_void, from: u32, gc_stores: Option<&[usize; KEYS]>) -> u32 {
  let head = t.cell[slot::QUEUE_HEAD].load(Ordering::Acquire);
  let mut at = from;
  while at != head {
    if let Some(entry) = t.frame.objects.get(at as usize & (QUEUE_LEN - 1)) {
      for (k, o) in entry.iter().enumerate() {
        let queued = o.load(Ordering::Relaxed);
        if is_address(queued) {
          o.store((v8.globalize)(isolate, queued) as usize, Ordering::Relaxed);
        } else if let (GC_STORE, Some(gc)) = (queued, gc_stores) {
          // SAFETY: `gc[k]` is a live global handle's slot (disposed only after this).
          // Without one the store was there but is lost: it stays GC_STORE, which JS
          // gets as null (a set it cannot be certain of), never as "no store".
          if gc[k] != 0 {
            o.store(
              (v8.globalize)(isolate, unsafe { *(gc[k] as *const usize) }) as usize,
              Ordering::Relaxed,
            );
          }
        }
      }
    }
    at = at.wrapping_add(1);
  }
  head
}

extern "C" fn gc_epilogue(_isolate: *mut c_void, _gc_type: i32, _flags: i32, data: *mut c_void) {
  // SAFETY: as in gc_prologue.
  let t = unsafe { &*(data as *const ThreadContext) };
  let _ = t
    .frame
    .gc_depth
    .fetch_update(Ordering::Release, Ordering::Relaxed, |d| d.checked_sub(1));
}

/// A heap object's tagged address (as the handler queues one), not a global's slot.
fn is_address(v: usize) -> bool {
  v & 3 == 1
}

/// One queued id and, by key, a global handle's slot holding its store (0 where there is
/// none; `GC_STORE` where there was one that is not known: the collection it was read in
/// has been followed by another).
pub type Drained = (u32, [usize; KEYS]);

/// The ids queued on thread `t`, each with its stores (`Drained`). `drain_end` must follow
/// on the same thread, with no JS run in between that could drain. Called on the JS thread
/// outside a collection; nothing here allocates on V8's heap, so no collection can move a
/// queued address before it is held.
pub fn drain_begin(t: &ThreadContext) -> Vec<Drained> {
  let Ok(v8) = v8() else { return Vec::new() };
  // SAFETY: called on a JS thread (from a napi call), where V8 has entered its isolate.
  let isolate = unsafe { (v8.get_current)() };
  if isolate.is_null() {
    return Vec::new();
  }
  // As a collection's start does, with the current collection's stores: every entry is
  // then a handle of its own (or 0), which the collector keeps current while JS takes them.
  let tail = t.cell[slot::QUEUE_TAIL].load(Ordering::Relaxed);
  let gc: [usize; KEYS] = std::array::from_fn(|k| t.frame.gc_stores[k].load(Ordering::Relaxed));
  let head = hold_queued(t, v8, isolate, tail, Some(&gc));
  (0..head.wrapping_sub(tail))
    .map(|n| {
      let i = tail.wrapping_add(n) as usize & (QUEUE_LEN - 1);
      let stores = std::array::from_fn(|k| t.frame.objects[i][k].load(Ordering::Relaxed));
      (t.cell[slot::QUEUE + i].load(Ordering::Relaxed), stores)
    })
    .collect()
}

/// Ends a drain: the handles `drain_begin` gave are disposed and their ids taken off the
/// queue. The next sample of the same store is queued again (it may be a new recording's).
pub fn drain_end(t: &ThreadContext, drained: &[Drained]) {
  let Ok(v8) = v8() else { return };
  let tail = t.cell[slot::QUEUE_TAIL].load(Ordering::Relaxed);
  for (n, (_, held)) in drained.iter().enumerate() {
    let i = tail.wrapping_add(n as u32) as usize & (QUEUE_LEN - 1);
    for (k, &h) in held.iter().enumerate() {
      t.frame.objects[i][k].store(0, Ordering::Relaxed);
      if h != 0 && h != GC_STORE {
        (v8.dispose_global)(h as *mut usize);
      }
    }
  }
  t.cell[slot::QUEUE_TAIL].store(tail.wrapping_add(drained.len() as u32), Ordering::Release);
  t.cell[slot::LAST_PUSHED].store(0, Ordering::Relaxed);
}

/// A global handle's slot holding thread `t`'s current async context frame (the frame's
/// Map, or whatever the isolate holds there), or 0 if the reader is not set up or holds
/// none. The caller disposes it with `release`. Called on the JS thread.
pub fn hold_current(t: &ThreadContext) -> usize {
  let Ok(v8) = v8() else { return 0 };
  let slot = t.frame.cped.load(Ordering::Relaxed);
  // SAFETY: called on a JS thread (from a napi call), where V8 has entered its isolate.
  let isolate = unsafe { (v8.get_current)() };
  if slot == 0 || isolate.is_null() {
    return 0;
  }
  // SAFETY: the isolate's CPED slot (set up by `set_up`), read outside a collection.
  let frame = unsafe { *(slot as *const usize) };
  if !is_address(frame) {
    return 0;
  }
  (v8.globalize)(isolate, frame) as usize
}

/// Disposes a global handle `hold_current` gave.
pub fn release(held: usize) {
  if let (Ok(v8), true) = (v8(), held != 0) {
    (v8.dispose_global)(held as *mut usize);
  }
}

/// What a thread's set-up made, to undo when the thread goes.
pub struct Installed {
  isolate: usize,
  frame: usize,
}

/// Sets thread `t`'s frame reader up (not enabled: JS checks it first). `v8_version` is
/// `process.versions.v8`; `store_key`, `map` and `undefined` are the napi values (handle
/// slots) of selfprof's AsyncLocalStorage, of a JS Map and of `undefined`.
///
/// # Safety
/// `store_key`, `map` and `undefined` must be live `napi_value`s of the calling thread's
/// current handle scope (Node-API's values are pointers to V8 handle slots).
pub unsafe fn set_up(
  t: &'static ThreadContext,
  v8_version: &str,
  store_key: *const c_void,
  map: *const c_void,
  undefined: *const c_void,
) -> Result<Installed, String> {
  if t.frame.keys[SELF_KEY].load(Ordering::Relaxed) != 0 {
    // Another copy of the JS module (jest's registry, a hot reload) reads this thread's
    // frame for its own AsyncLocalStorage: this one publishes its sets with hooks instead.
    return Err("another copy of selfprof reads this thread's context frame".into());
  }
  let layout = layout_for(v8_version).ok_or_else(|| format!("V8 {v8_version}'s layout is not known to this build"))?;
  let v8 = v8()?;
  let isolate = (v8.get_current)();
  if isolate.is_null() {
    return Err("no V8 isolate on this thread".into());
  }
  // The handle slot Node-API's value points to holds the object's tagged address.
  let (map_addr, undefined_addr) = (*(map as *const usize), *(undefined as *const usize));
  if map_addr & 3 != 1 || undefined_addr & 3 != 1 {
    return Err("Node-API values are not V8 handle slots here".into());
  }
  let type_of = |addr: usize| *((*((addr - 1) as *const usize) - 1 + layout.map_instance_type) as *const u16);
  let (js_map_type, oddball_type) = (type_of(map_addr), type_of(undefined_addr));
  if js_map_type == oddball_type {
    return Err("a Map and undefined have one instance type here".into());
  }
  let (global, hash) = hold_key(v8, isolate, store_key)?;
  FRAME_LAYOUT
    .map_instance_type
    .store(layout.map_instance_type, Ordering::Relaxed);
  FRAME_LAYOUT
    .js_object_header
    .store(layout.js_object_header, Ordering::Relaxed);
  FRAME_LAYOUT
    .fixed_array_header
    .store(layout.fixed_array_header, Ordering::Relaxed);
  FRAME_LAYOUT
    .js_map_type
    .store(u32::from(js_map_type), Ordering::Relaxed);
  FRAME_LAYOUT
    .oddball_type
    .store(u32::from(oddball_type), Ordering::Relaxed);
  let f = &t.frame;
  f.enabled.store(false, Ordering::Release);
  f.gc_depth.store(0, Ordering::Relaxed);
  for s in f.gc_stores.iter().chain(f.last_stores.iter()) {
    s.store(0, Ordering::Relaxed);
  }
  f.hashes[SELF_KEY].store(hash, Ordering::Relaxed);
  f.keys[SELF_KEY].store(global, Ordering::Relaxed);
  f.cped.store(isolate as usize + layout.cped, Ordering::Release);
  let data = t as *const ThreadContext as *mut c_void;
  (v8.add_prologue)(isolate, gc_prologue, data, GC_TYPE_ALL);
  (v8.add_epilogue)(isolate, gc_epilogue, data, GC_TYPE_ALL);
  Ok(Installed {
    isolate: isolate as usize,
    frame: data as usize,
  })
}

/// A global handle on the AsyncLocalStorage `key` (a napi value), and its identity hash.
///
/// # Safety
/// `key` must be a live `napi_value` of the calling thread's current handle scope.
unsafe fn hold_key(v8: &V8, isolate: *mut c_void, key: *const c_void) -> Result<(usize, u32), String> {
  let addr = *(key as *const usize);
  if addr & 3 != 1 {
    return Err("Node-API values are not V8 handle slots here".into());
  }
  let hash = (v8.identity_hash)(key);
  let global = (v8.globalize)(isolate, addr);
  if global.is_null() {
    return Err("no global handle for the AsyncLocalStorage".into());
  }
  Ok((global as usize, hash as u32))
}

/// Makes the handler also read tracer key `k` (1 or 2) of thread `t`'s frame: the
/// tracer's AsyncLocalStorage `store_key` (a napi value), or none (null). The reader must
/// be set up (`set_up`). What was queued under the key before stays queued.
///
/// # Safety
/// `store_key`, where given, must be a live `napi_value` of the calling thread's current
/// handle scope.
pub unsafe fn set_tracer_key(t: &ThreadContext, k: usize, store_key: Option<*const c_void>) -> Result<(), String> {
  if k == SELF_KEY || k >= KEYS {
    return Err(format!("no tracer key {k}: 1 to {}", KEYS - 1));
  }
  let f = &t.frame;
  if f.keys[SELF_KEY].load(Ordering::Relaxed) == 0 {
    return Err("the frame reader is not set up on this thread".into());
  }
  let v8 = v8()?;
  let isolate = (v8.get_current)();
  if isolate.is_null() {
    return Err("no V8 isolate on this thread".into());
  }
  let held = match store_key {
    Some(key) => Some(hold_key(v8, isolate, key)?),
    None => None,
  };
  // The handler sees the key go before its hash changes (a signal between reads no key).
  let old = f.keys[k].swap(0, Ordering::AcqRel);
  if let Some((global, hash)) = held {
    f.hashes[k].store(hash, Ordering::Relaxed);
    f.keys[k].store(global, Ordering::Release);
  }
  if old != 0 {
    (v8.dispose_global)(old as *mut usize);
  }
  Ok(())
}

/// Undoes `set_up` on the thread that made it (its isolate still alive): the reader off,
/// the GC callbacks removed, the global handles disposed.
pub fn tear_down(t: &ThreadContext, installed: Installed) {
  t.frame.enabled.store(false, Ordering::Release);
  // The global handles of stores still queued, of the last collection's stores and of
  // the keys.
  let f = &t.frame;
  let held: Vec<usize> = f
    .objects
    .iter()
    .flatten()
    .chain(f.gc_stores.iter())
    .chain(f.keys.iter())
    .map(|o| o.swap(0, Ordering::Relaxed))
    .filter(|&h| h != 0 && h != GC_STORE && !is_address(h))
    .collect();
  f.clear();
  if let Ok(v8) = v8() {
    for h in held {
      (v8.dispose_global)(h as *mut usize);
    }
    let isolate = installed.isolate as *mut c_void;
    let data = installed.frame as *mut c_void;
    (v8.remove_prologue)(isolate, gc_prologue, data);
    (v8.remove_epilogue)(isolate, gc_epilogue, data);
  }
}

#[cfg(test)]
mod tests;
