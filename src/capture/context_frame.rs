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
//!   when the collection began.
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
//! Node before it is enabled (lib/capture/labels.js: `frameCheck`).

use super::signal::{self, slot, ThreadContext, FRAME_LAYOUT, GC_STORE, QUEUE_LEN};
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
  // The heap is whole at a collection's start: read as the handler would.
  let (id, store) = signal::frame_store_now(f).unwrap_or((0, 0));
  let Ok(v8) = v8() else {
    f.gc_context.store(id, Ordering::Relaxed);
    f.gc_depth.fetch_add(1, Ordering::Release);
    return;
  };
  let held = if id != 0 && f.enabled.load(Ordering::Acquire) {
    (v8.globalize)(isolate, store) as usize
  } else {
    0
  };
  // What the handler queued keeps its store in a global handle, which the collector
  // updates as it moves it: addresses read outside a collection, and ids read during the
  // last one (whose store `gc_store` holds until now).
  let old = f.gc_store.load(Ordering::Relaxed);
  let tail = t.cell[slot::QUEUE_TAIL].load(Ordering::Relaxed);
  let seen = hold_queued(t, v8, isolate, tail, Some(old));
  f.gc_context.store(id, Ordering::Relaxed);
  f.gc_store.store(held, Ordering::Relaxed);
  // From here the handler queues ids with GC_STORE (this collection's store).
  f.gc_depth.fetch_add(1, Ordering::Release);
  // Any address a signal queued meanwhile, before the line above (what it queued after
  // is this collection's).
  hold_queued(t, v8, isolate, seen, None);
  if old != 0 {
    (v8.dispose_global)(old as *mut usize);
  }
}

/// Turns thread `t`'s queued stores from `from` to the queue's head into global handles:
/// addresses, and with `gc_store` (the slot of the last collection's store, 0 if none)
/// `GC_STORE` entries into handles of their own on what it holds. Returns the head it
/// went to.
fn hold_queued(t: &ThreadContext, v8: &V8, isolate: *mut c_void, from: u32, gc_store: Option<usize>) -> u32 {
  let head = t.cell[slot::QUEUE_HEAD].load(Ordering::Acquire);
  let mut at = from;
  while at != head {
    if let Some(o) = t.frame.objects.get(at as usize & (QUEUE_LEN - 1)) {
      let queued = o.load(Ordering::Relaxed);
      if is_address(queued) {
        o.store((v8.globalize)(isolate, queued) as usize, Ordering::Relaxed);
      } else if let (GC_STORE, Some(gc)) = (queued, gc_store) {
        // SAFETY: `gc` is a live global handle's slot (disposed only after this).
        let held = if gc != 0 {
          (v8.globalize)(isolate, unsafe { *(gc as *const usize) }) as usize
        } else {
          0
        };
        o.store(held, Ordering::Relaxed);
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

/// The ids queued on thread `t`, each with a global handle's slot holding its store (0
/// if its store is not known: the collection it was read in has been followed by another).
/// `drain_end` must follow on the same thread, with no JS run in between that could drain.
/// Called on the JS thread outside a collection; nothing here allocates on V8's heap, so
/// no collection can move a queued address before it is held.
pub fn drain_begin(t: &ThreadContext) -> Vec<(u32, usize)> {
  let Ok(v8) = v8() else { return Vec::new() };
  // SAFETY: called on a JS thread (from a napi call), where V8 has entered its isolate.
  let isolate = unsafe { (v8.get_current)() };
  if isolate.is_null() {
    return Vec::new();
  }
  // As a collection's start does, with the current collection store: every entry is then a
  // handle of its own (or 0), which the collector keeps current while JS takes them.
  let tail = t.cell[slot::QUEUE_TAIL].load(Ordering::Relaxed);
  let gc = t.frame.gc_store.load(Ordering::Relaxed);
  let head = hold_queued(t, v8, isolate, tail, Some(gc));
  (0..head.wrapping_sub(tail))
    .map(|n| {
      let i = tail.wrapping_add(n) as usize & (QUEUE_LEN - 1);
      (
        t.cell[slot::QUEUE + i].load(Ordering::Relaxed),
        t.frame.objects[i].load(Ordering::Relaxed),
      )
    })
    .collect()
}

/// Ends a drain: the handles `drain_begin` gave are disposed and their ids taken off the
/// queue. The next sample of the same store is queued again (it may be a new recording's).
pub fn drain_end(t: &ThreadContext, drained: &[(u32, usize)]) {
  let Ok(v8) = v8() else { return };
  let tail = t.cell[slot::QUEUE_TAIL].load(Ordering::Relaxed);
  for (n, &(_, held)) in drained.iter().enumerate() {
    let i = tail.wrapping_add(n as u32) as usize & (QUEUE_LEN - 1);
    t.frame.objects[i].store(0, Ordering::Relaxed);
    if held != 0 {
      (v8.dispose_global)(held as *mut usize);
    }
  }
  t.cell[slot::QUEUE_TAIL].store(tail.wrapping_add(drained.len() as u32), Ordering::Release);
  t.cell[slot::LAST_PUSHED].store(0, Ordering::Relaxed);
}

/// What a thread's set-up made, to undo when the thread goes.
pub struct Installed {
  isolate: usize,
  global: usize,
  frame: usize,
}

/// Sets thread `t`'s frame reader up (not enabled: JS checks it first). `v8_version` is
/// `process.versions.v8`; `store_key` and `map` are the napi values (handle slots) of
/// selfprof's AsyncLocalStorage and of a JS Map.
///
/// # Safety
/// `store_key` and `map` must be live `napi_value`s of the calling thread's current
/// handle scope (Node-API's values are pointers to V8 handle slots).
pub unsafe fn set_up(
  t: &'static ThreadContext,
  v8_version: &str,
  store_key: *const c_void,
  map: *const c_void,
) -> Result<Installed, String> {
  if t.frame.key.load(Ordering::Relaxed) != 0 {
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
  // The handle slots Node-API's values point to hold the objects' tagged addresses.
  let (key, map_addr) = (*(store_key as *const usize), *(map as *const usize));
  if key & 3 != 1 || map_addr & 3 != 1 {
    return Err("Node-API values are not V8 handle slots here".into());
  }
  let hidden = *((map_addr - 1) as *const usize);
  let js_map_type = *((hidden - 1 + layout.map_instance_type) as *const u16);
  let hash = (v8.identity_hash)(store_key);
  let global = (v8.globalize)(isolate, key);
  if global.is_null() {
    return Err("no global handle for the AsyncLocalStorage".into());
  }
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
  let f = &t.frame;
  f.enabled.store(false, Ordering::Release);
  f.gc_depth.store(0, Ordering::Relaxed);
  f.gc_store.store(0, Ordering::Relaxed);
  f.hash.store(hash as u32, Ordering::Relaxed);
  f.key.store(global as usize, Ordering::Relaxed);
  f.cped.store(isolate as usize + layout.cped, Ordering::Release);
  let data = t as *const ThreadContext as *mut c_void;
  (v8.add_prologue)(isolate, gc_prologue, data, GC_TYPE_ALL);
  (v8.add_epilogue)(isolate, gc_epilogue, data, GC_TYPE_ALL);
  Ok(Installed {
    isolate: isolate as usize,
    global: global as usize,
    frame: data as usize,
  })
}

/// Undoes `set_up` on the thread that made it (its isolate still alive): the reader off,
/// the GC callbacks removed, the global handle disposed.
pub fn tear_down(t: &ThreadContext, installed: Installed) {
  t.frame.enabled.store(false, Ordering::Release);
  // The global handles of stores still queued, and of the last collection's store.
  let held: Vec<usize> = t
    .frame
    .objects
    .iter()
    .chain([&t.frame.gc_store])
    .map(|o| o.swap(0, Ordering::Relaxed))
    .filter(|&h| h != 0 && h != GC_STORE && !is_address(h))
    .collect();
  t.frame.clear();
  if let Ok(v8) = v8() {
    for h in held {
      (v8.dispose_global)(h as *mut usize);
    }
    let isolate = installed.isolate as *mut c_void;
    let data = installed.frame as *mut c_void;
    (v8.remove_prologue)(isolate, gc_prologue, data);
    (v8.remove_epilogue)(isolate, gc_epilogue, data);
    (v8.dispose_global)(installed.global as *mut usize);
  }
}

#[cfg(test)]
mod tests;
