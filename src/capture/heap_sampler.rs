//! V8's sampling heap profiler, started and stopped through V8's own C++ API, which the
//! Node executable exports (as @datadog/pprof's addon uses it). The inspector's
//! `HeapProfiler.startSampling` starts it with `kSamplingForceGC`, so that every
//! `getSamplingProfile` runs a full garbage collection on the calling thread first: on a
//! large heap that collection is nearly all of a snapshot's cost. Started here without
//! that flag, the inspector's `getSamplingProfile` (which reads whichever sampler runs)
//! returns the sampled objects V8 has not collected yet, with no collection.
//!
//! The functions are found at run time (`dlsym`: `capture::v8_symbols`), never linked: a host that does not
//! export them (another runtime, a Node built otherwise) gets `Unavailable`, and the
//! caller uses the inspector. Only functions whose arguments and results are pointers,
//! integers and a bool are called here (no V8 structs, strings or virtual calls), so their
//! ABI is the platform's C one with `this` first; `capture::heap_profile` reads the
//! profile `GetAllocationProfile` returns, whose structs have a layout per V8 version.

use super::v8_symbols::{function, GetCurrent, GET_CURRENT};
use std::ffi::{c_int, c_void};
use std::sync::OnceLock;

/// `v8::HeapProfiler::SamplingFlags::kSamplingNoFlags`.
const SAMPLING_NO_FLAGS: c_int = 0;
/// The stack depth the inspector's `startSampling` records.
const STACK_DEPTH: c_int = 128;

type GetHeapProfiler = unsafe extern "C" fn(isolate: *mut c_void) -> *mut c_void;
type Start = unsafe extern "C" fn(profiler: *mut c_void, interval: u64, depth: c_int, flags: c_int) -> bool;
type Stop = unsafe extern "C" fn(profiler: *mut c_void);
/// `v8::HeapProfiler::GetAllocationProfile()`: a `v8::AllocationProfile*` the caller owns,
/// or null when no sampler runs (`capture::heap_profile` reads it).
pub(super) type GetAllocationProfile = unsafe extern "C" fn(profiler: *mut c_void) -> *mut c_void;

pub(super) struct Api {
  get_current: GetCurrent,
  get_heap_profiler: GetHeapProfiler,
  start: Start,
  stop: Stop,
  /// Optional: without it the sampler still starts here, and JS reads its profile
  /// through the inspector.
  pub(super) get_allocation_profile: Option<GetAllocationProfile>,
}

pub(super) fn api() -> Option<&'static Api> {
  static API: OnceLock<Option<Api>> = OnceLock::new();
  API
    .get_or_init(|| {
      // SAFETY: each type alias spells its function's C++ signature in the C ABI.
      // uint64_t is `unsigned long` (m) on Linux and `unsigned long long` (y) on macOS;
      // the one the executable exports is its own.
      unsafe {
        Some(Api {
          get_current: function(&[GET_CURRENT]).ok()?,
          get_heap_profiler: function(&[c"_ZN2v87Isolate15GetHeapProfilerEv"]).ok()?,
          start: function(&[
            c"_ZN2v812HeapProfiler25StartSamplingHeapProfilerEmiNS0_13SamplingFlagsE",
            c"_ZN2v812HeapProfiler25StartSamplingHeapProfilerEyiNS0_13SamplingFlagsE",
          ])
          .ok()?,
          stop: function(&[c"_ZN2v812HeapProfiler24StopSamplingHeapProfilerEv"]).ok()?,
          get_allocation_profile: function(&[c"_ZN2v812HeapProfiler20GetAllocationProfileEv"]).ok(),
        })
      }
    })
    .as_ref()
}

/// This thread's isolate's `v8::HeapProfiler`, or None.
pub(super) fn profiler(api: &Api) -> Option<*mut c_void> {
  // SAFETY: called on a JS thread (from a napi call), where V8 has entered its isolate.
  let isolate = unsafe { (api.get_current)() };
  if isolate.is_null() {
    return None;
  }
  // SAFETY: `isolate` is this thread's live isolate.
  let profiler = unsafe { (api.get_heap_profiler)(isolate) };
  (!profiler.is_null()).then_some(profiler)
}

#[derive(Debug, PartialEq, Eq)]
pub enum Started {
  /// Sampling now, without forced collections.
  Started,
  /// A sampler already runs in this isolate (someone else's): nothing changed.
  Running,
  /// V8's API is not reachable here: use the inspector.
  Unavailable,
}

/// Starts this isolate's sampling heap profiler, one sample per about `interval` bytes,
/// without a forced collection per profile. Only on a JS thread. With `Started`, the
/// caller must see that the `Teardown` runs before the isolate goes (a sampler V8 disposes
/// with its isolate crashed Node 24 at exit).
pub fn start(interval: u64) -> (Started, Option<Teardown>) {
  let Some(api) = api() else {
    return (Started::Unavailable, None);
  };
  let Some(profiler) = profiler(api) else {
    return (Started::Unavailable, None);
  };
  // SAFETY: `profiler` is this isolate's; V8 refuses (false) if a sampler runs already.
  if unsafe { (api.start)(profiler, interval, STACK_DEPTH, SAMPLING_NO_FLAGS) } {
    (Started::Started, Some(Teardown(profiler)))
  } else {
    (Started::Running, None)
  }
}

/// Stops this isolate's sampling heap profiler (whoever started it). Only on a JS thread.
pub fn stop() -> bool {
  let Some(api) = api() else { return false };
  let Some(profiler) = profiler(api) else { return false };
  // SAFETY: `profiler` is this isolate's; stopping a stopped sampler does nothing.
  unsafe { (api.stop)(profiler) };
  true
}

/// An isolate's heap profiler, to stop its sampler as the isolate's Node environment is
/// torn down (from an env cleanup hook, which runs on its thread before the isolate goes).
pub struct Teardown(*mut c_void);

impl Teardown {
  pub fn stop_at_teardown(self) {
    if let Some(api) = api() {
      // SAFETY: the profiler's isolate lives while its environment's cleanup hooks run;
      // stopping a stopped sampler does nothing.
      unsafe { (api.stop)(self.0) };
    }
  }
}

#[cfg(test)]
mod tests;
