//! The bindings of a JS thread's own state: the SIGPROF handler's install and counters,
//! the thread's context cell (`capture::threads`), the reader of its async context frame
//! (`capture::context_frame`), the cap on profiled workers, and the sampling heap
//! profiler of its isolate (`capture::heap_sampler`) and its profile (`capture::heap_profile`). Each is a few lines calling into
//! `capture`; the rest of the bindings are in `src/lib.rs`.

use super::objects::{CellSlots, FrameLayoutInfo, HeapLayoutInfo, HeapRead};
use crate::capture::install::{self, Install};
use crate::capture::{self, signal, signal::slot, threads};
use napi::bindgen_prelude::{Array, Float64Array, JsValue, Null, Object, Uint32Array};
use napi::{Env, Error, Result};
use napi_derive::napi;
use std::sync::atomic::Ordering;

/// Puts selfprof's SIGPROF handler in front of V8's. Call after every V8 profiler start.
/// Returns `"chained"`, `"already-installed"`, `"behind-another"` or `"no-sampler"`, or
/// `"no-signals"` where V8 samples without a signal (Windows).
#[napi]
pub fn install_signal_handler() -> Result<&'static str> {
  match install::install() {
    Ok(Install::Chained) => Ok("chained"),
    Ok(Install::AlreadyInstalled) => Ok("already-installed"),
    Ok(Install::BehindAnother) => Ok("behind-another"),
    Ok(Install::NoSampler) => Ok("no-sampler"),
    Ok(Install::NoSignals) => Ok("no-signals"),
    Err(e) => Err(Error::from_reason(format!("sigaction(SIGPROF) failed: {e}"))),
  }
}

#[napi]
pub fn signal_handler_installed() -> bool {
  install::installed()
}

/// Times our handler was re-entered on one thread (a chain that looped; should be 0).
#[napi]
pub fn signal_reentries() -> f64 {
  signal::REENTERED.load(Ordering::Relaxed) as f64
}

/// Records the SIGPROF ring holds (older ones are overwritten).
#[napi]
pub fn ring_capacity() -> u32 {
  signal::RING_CAPACITY as u32
}

/// SIGPROFs our handler has taken (= ring entries written).
#[napi]
pub fn signal_count() -> f64 {
  signal::SIGNALS.load(Ordering::Relaxed) as f64
}

/// Claims the calling thread's context cell and returns a view of it, `[context id,
/// generation, sampled, recordings]` (see `signal::ThreadContext`). Where Node refuses
/// external buffers the view is a copy: `readThreadContext` tells, and
/// `setThreadContext` is the fallback. The cell is freed when the thread's environment
/// is torn down (a worker's end), so workers that come and go never run out of cells.
#[napi]
pub fn register_thread(env: Env) -> Result<Uint32Array> {
  let (index, fresh) = threads::register_thread()
    .ok_or_else(|| Error::from_reason(format!("more than {} threads are profiled", signal::MAX_THREADS)))?;
  if fresh {
    let tid = signal::gettid();
    capture::switches::reset(index);
    env.add_env_cleanup_hook((index, tid), |(index, tid)| {
      threads::unregister_thread(index, tid);
      capture::switches::reset(index);
      capture::labels::forget_thread(tid);
      capture::drain::forget_thread(tid);
    })?;
  }
  let cell = threads::context_cell(index).ok_or_else(|| Error::from_reason("thread slot out of range"))?;
  // SAFETY: the cell is in static memory, so it outlives every view; the notify is a no-op.
  Ok(unsafe { Uint32Array::with_external_data(cell, signal::CELL_LEN, |_, _| {}) })
}

/// The calling thread's published context id.
#[napi]
pub fn read_thread_context() -> u32 {
  threads::this_thread().map_or(0, |t| t.context())
}

/// Publishes the calling thread's context id with a call (fallback for the view).
#[napi]
pub fn set_thread_context(id: u32) {
  if let Some(t) = threads::this_thread() {
    t.cell[slot::CONTEXT].store(id, Ordering::Relaxed);
    t.cell[slot::GENERATION].fetch_add(1, Ordering::Relaxed);
  }
}

/// Where the calling thread's place in Node's async id stack is: element `depth_index` of
/// `hook_fields` (Node's `async_hook_fields`: the stack's depth) and element `exec_index`
/// of `id_fields` (`async_id_fields`: the execution async id), both kept by the thread's
/// environment until its cleanup, which forgets them first. From then on JS publishes by
/// depth (`signal::slot::DEPTHS`). With neither given, the handler reads them no more.
/// False where the thread has no cell, or an element is not there.
#[napi]
pub fn thread_async_position(
  hook_fields: Option<Uint32Array>,
  depth_index: u32,
  id_fields: Option<Float64Array>,
  exec_index: u32,
) -> bool {
  let Some(t) = threads::this_thread() else {
    return false;
  };
  let (Some(hooks), Some(ids)) = (hook_fields, id_fields) else {
    t.position.clear();
    return true;
  };
  let (Some(depth), Some(exec)) = (hooks.get(depth_index as usize), ids.get(exec_index as usize)) else {
    return false;
  };
  t.position
    .depth_at
    .store(depth as *const u32 as usize, Ordering::Relaxed);
  t.position
    .exec_id_at
    .store(exec as *const f64 as usize, Ordering::Relaxed);
  true
}

/// The id the handler last recorded on the calling thread, cleared (the fallback for the
/// cell's `sampled` element where JS has no view of the cell).
#[napi]
pub fn take_sampled_context() -> u32 {
  threads::this_thread().map_or(0, |t| t.cell[slot::SAMPLED].swap(0, Ordering::Relaxed))
}

/// Where JS finds what in a thread's cell (see `signal::slot`).
#[napi]
pub fn cell_slots() -> CellSlots {
  CellSlots::from_signal()
}

/// Sets the calling thread's handler up to read its label-set id from the async context
/// frame (`capture::context_frame`), not enabled yet: JS checks it with `frameRead`, then
/// `frameEnable`s it. `storeKey` is selfprof's AsyncLocalStorage, `map` any JS Map. Throws
/// why it cannot (an unknown V8 version, a missing symbol).
#[napi]
pub fn frame_set_up(env: Env, v8_version: String, store_key: Object, map: Object) -> Result<()> {
  let t = threads::this_thread().ok_or_else(|| Error::from_reason("this thread has no cell (registerThread first)"))?;
  let mut undefined = std::ptr::null_mut();
  // SAFETY: a plain Node-API call on this call's env.
  napi::check_status!(unsafe { napi::sys::napi_get_undefined(env.raw(), &mut undefined) })?;
  // SAFETY: the values are this call's arguments and a value it got, live in its handle scope.
  let installed = unsafe {
    capture::context_frame::set_up(
      t,
      &v8_version,
      store_key.raw() as *const std::ffi::c_void,
      map.raw() as *const std::ffi::c_void,
      undefined as *const std::ffi::c_void,
    )
  }
  .map_err(Error::from_reason)?;
  let tid = signal::gettid();
  env.add_env_cleanup_hook((installed, tid), |(installed, tid)| {
    if let Some(t) = threads::of_thread(tid) {
      capture::context_frame::tear_down(t, installed);
    }
  })?;
  Ok(())
}

/// The label-set id the handler would read on the calling thread now, through the same
/// code (`signal::frame_context`): -1 if the frame cannot be read.
#[napi]
pub fn frame_read() -> i64 {
  threads::this_thread()
    .and_then(|t| signal::frame_context(&t.frame))
    .map_or(-1, i64::from)
}

/// The stores of the label sets the handler recorded on the calling thread since the last
/// drain, as `[id, store, tracer store 1, tracer store 2, id, ...]` (`frameDrainStride()`
/// elements each; a store is `undefined` where none was read, `null` where one was but it
/// could not be kept: JS checks each of selfprof's stores' id before trusting it).
/// `capture::context_frame::drain_begin`.
#[napi]
pub fn frame_drain<'env>(env: &'env Env) -> Result<Array<'env>> {
  let Some(t) = threads::this_thread() else {
    return env.create_array(0);
  };
  let drained = capture::context_frame::drain_begin(t);
  let stride = 1 + signal::KEYS as u32;
  let filled = (|| {
    let mut out = env.create_array(drained.len() as u32 * stride)?;
    for (n, (id, held)) in drained.iter().enumerate() {
      let at = n as u32 * stride;
      out.set(at, *id)?;
      for (k, &h) in held.iter().enumerate() {
        if h == 0 {
          continue;
        }
        if h == capture::signal::GC_STORE {
          // There, but lost (see `Drained`): null, never "none".
          out.set(at + 1 + k as u32, Null)?;
          continue;
        }
        // A global handle's slot is what a Node-API value is here (a pointer to a slot
        // holding the tagged address; the self-check proved it), and the collector keeps
        // it current if setting the element allocates.
        // SAFETY: `h` is a live global handle of this thread's isolate.
        napi::check_status!(unsafe {
          napi::sys::napi_set_element(env.raw(), out.raw(), at + 1 + k as u32, h as napi::sys::napi_value)
        })?;
      }
    }
    Ok(out)
  })();
  capture::context_frame::drain_end(t, &drained);
  filled
}

/// The calling thread's current async context frame (Node's AsyncContextFrame: a Map from
/// each AsyncLocalStorage to its store), as `[frame]`, or `[]` where the reader is not set
/// up or the frame is empty: how JS finds the AsyncLocalStorage a tracer keeps its
/// contexts in (integrations/ddtrace.js). Read it, never change it.
#[napi]
pub fn frame_current<'env>(env: &'env Env) -> Result<Array<'env>> {
  let held = threads::this_thread().map_or(0, capture::context_frame::hold_current);
  let filled = (|| {
    let out = env.create_array(0)?;
    if held != 0 {
      // SAFETY: `held` is a live global handle of this thread's isolate (see `frame_drain`).
      napi::check_status!(unsafe {
        napi::sys::napi_set_element(env.raw(), out.raw(), 0, held as napi::sys::napi_value)
      })?;
    }
    Ok(out)
  })();
  capture::context_frame::release(held);
  filled
}

/// Elements per queued id in `frameDrain`'s array: the id, then its store under each key.
#[napi]
pub fn frame_drain_stride() -> u32 {
  1 + signal::KEYS as u32
}

/// Makes the calling thread's handler also read tracer key `key` (1 or 2) of its frame:
/// the tracer's AsyncLocalStorage `store` (its stores are the tracer's contexts), or none
/// (`null`). The frame reader must be set up (`frameSetUp`).
#[napi]
pub fn frame_set_tracer(key: u32, store: Option<Object>) -> Result<()> {
  let t = threads::this_thread().ok_or_else(|| Error::from_reason("this thread has no cell (registerThread first)"))?;
  // SAFETY: the object is this call's argument, live in its handle scope.
  unsafe { capture::context_frame::set_tracer_key(t, key as usize, store.map(|s| s.raw() as *const std::ffi::c_void)) }
    .map_err(Error::from_reason)
}

/// Runs the handler's read of the calling thread's frame as a signal would, queueing what
/// it finds (the self-check's probe of `frameDrain`): the id read, 0 if none.
#[napi]
pub fn frame_sample() -> u32 {
  #[cfg(unix)]
  return threads::this_thread().map_or(0, signal::read_context);
  #[cfg(not(unix))]
  0
}

/// The V8 versions whose layouts this build knows (checked against each Node's headers
/// by `scripts/check-v8-layouts.js`).
#[napi]
pub fn frame_layouts() -> Vec<FrameLayoutInfo> {
  capture::context_frame::LAYOUTS
    .iter()
    .map(FrameLayoutInfo::from)
    .collect()
}

/// Ids the handler could not queue for JS (a thread's queue was full), process-wide.
#[napi]
pub fn frame_queue_full() -> f64 {
  signal::QUEUE_FULL.load(Ordering::Relaxed) as f64
}

/// Pairs with a tracer's store the handler could give no id (a thread's reserved ids ran
/// out before JS reserved more), process-wide.
#[napi]
pub fn frame_fresh_out() -> f64 {
  signal::FRESH_OUT.load(Ordering::Relaxed) as f64
}

/// Makes the handler read (or stop reading) the calling thread's frame.
#[napi]
pub fn frame_enable(on: bool) {
  if let Some(t) = threads::this_thread() {
    t.frame.enabled.store(on, Ordering::Release);
  }
}

/// The calling thread's CPU time in ns.
#[napi]
pub fn thread_cpu_ns() -> f64 {
  signal::thread_cpu_ns() as f64
}

/// The calling thread's id.
#[napi]
pub fn thread_id() -> i32 {
  signal::gettid()
}

/// Starts this thread's isolate's sampling heap profiler through V8's C++ API, without
/// the inspector's forced garbage collection per profile (`capture::heap_sampler`):
/// `"started"`, `"running"` (a sampler already ran: nothing changed) or `"unavailable"`
/// (this host does not export V8's API: use the inspector).
#[napi]
pub fn heap_sampler_start(env: Env, interval: u32) -> Result<&'static str> {
  thread_local! {
    /// Whether this thread's environment has the hook that stops the sampler at teardown.
    static HOOKED: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
  }
  let (started, teardown) = capture::heap_sampler::start(u64::from(interval));
  if let Some(teardown) = teardown {
    if !HOOKED.get() {
      if let Err(e) = env.add_env_cleanup_hook(teardown, |t| t.stop_at_teardown()) {
        capture::heap_sampler::stop();
        return Err(e);
      }
      HOOKED.set(true);
    }
  }
  Ok(match started {
    capture::heap_sampler::Started::Started => "started",
    capture::heap_sampler::Started::Running => "running",
    capture::heap_sampler::Started::Unavailable => "unavailable",
  })
}

/// Stops this thread's isolate's sampling heap profiler; false if V8's API is unavailable.
#[napi]
pub fn heap_sampler_stop() -> bool {
  capture::heap_sampler::stop()
}

/// This thread's isolate's sampling heap profile read through V8's C++ API, with no
/// inspector and no JSON (`capture::heap_profile`): null when no sampler runs; throws why
/// where it cannot be read here (another platform, a V8 version whose layout this build
/// was not checked against, a host without V8's API), and JS uses the inspector.
#[napi]
pub fn heap_profile_read(env: Env, v8_version: String) -> Result<Option<HeapRead>> {
  // SAFETY: a Node-API call on its JS thread, with its environment.
  let read = unsafe { capture::heap_profile::read(env.raw(), &v8_version) }.map_err(Error::from_reason)?;
  Ok(read.map(|r| HeapRead {
    profile: r.bytes.into(),
    scripts: r.scripts,
  }))
}

/// Why `heapProfileRead` cannot read the heap profile on this host and V8 version, or
/// null if it can.
#[napi]
pub fn heap_profile_unreadable(v8_version: String) -> Option<String> {
  capture::heap_profile::unreadable(&v8_version)
}

/// Where this build reads V8's heap profile, and on which V8 versions (checked against
/// each Node's headers by `scripts/check-v8-layouts.js`).
#[napi]
pub fn heap_profile_layout() -> HeapLayoutInfo {
  HeapLayoutInfo::of_build()
}

/// How many threads hold a label cell now (of `signal::MAX_THREADS`): workers past the
/// cap are not profiled.
#[napi]
pub fn registered_threads() -> u32 {
  threads::registered() as u32
}

/// Claims one of `max` places for the calling worker to be profiled; false past the cap.
/// The place is given back when the worker's environment is torn down.
#[napi]
pub fn claim_profiled_worker(env: Env, max: u32) -> Result<bool> {
  let claimed = threads::claim_worker(max);
  if claimed {
    env.add_env_cleanup_hook((), |_| threads::release_worker())?;
  }
  Ok(claimed)
}
