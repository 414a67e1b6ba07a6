//! selfprof's native side. This file holds only the napi bindings, each a few lines that
//! call into the module of its concern, one folder per concern:
//!
//! - `capture`: the SIGPROF handler (the only signal-context code) and its ring, and the
//!   join of V8's samples to what the handler recorded;
//! - `trace`: V8's CPU profile in, the spec's trace out (built off the main thread:
//!   `trace::build`, `trace::segments`);
//! - `formats`: reading and writing pprof, `.cpuprofile`, folded stacks and trace files;
//! - `symbolize`: frames of generated code through their source maps.
//!
//! The objects JS passes and gets are in `js_objects`, the thread-pool tasks in `tasks`.

pub mod capture;
pub mod formats;
pub mod js_objects;
pub mod parallel;
pub mod symbolize;
pub mod tasks;
pub mod trace;

use capture::signal;
use js_objects::{
  CellSlots, FrameLayoutInfo, HeapChunk, HeapOptions, LabelStats, SourceMapCacheStats, ThreadInput, TraceChunk,
  TraceOptions,
};
use napi::bindgen_prelude::{AsyncTask, Buffer, ClassInstance, Either, JsValue, Object, Uint32Array};
use napi::{Env, Error, Result, Status};
use napi_derive::napi;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use tasks::{BuildHeap, BuildParts, BuildTrace, JoinSegments, Prefetch};
use trace::join::bracket_range_ns;
use trace::segments::SegmentJoiner;

/// A HashMap with a fast hasher that is seeded per map (foldhash), for maps that may hold
/// data from outside files: fast, and no crafted input can force collisions.
pub type FastMap<K, V> = std::collections::HashMap<K, V, foldhash::fast::RandomState>;

/// The error for a bad argument (napi's `InvalidArg`), with `e`'s text.
pub(crate) fn invalid(e: impl std::fmt::Display) -> Error {
  Error::new(Status::InvalidArg, e.to_string())
}

/// A labeled recording's trace, built as the recording runs: `add` takes each segment
/// the profiler group hands over and joins it on the thread pool; `buildTrace*(…, join)`
/// builds on from it at the stop. Segments of one recording, in time order.
#[napi]
pub struct TraceJoin {
  segments: Arc<SegmentJoiner>,
}

#[napi]
impl TraceJoin {
  /// For the recording the build `options` (its window's start, its labels) describe.
  #[napi(constructor)]
  pub fn new(options: TraceOptions) -> Result<TraceJoin> {
    let segments = SegmentJoiner::new(options.window(), options.label_source());
    Ok(TraceJoin {
      segments: Arc::new(segments),
    })
  }

  /// Queues segments (in time order) and joins them on the thread pool. Rejects if one
  /// cannot be joined (the build then fails with the same error).
  #[napi(ts_return_type = "Promise<void>")]
  pub fn add(&self, chunks: Vec<TraceChunk>) -> Result<AsyncTask<JoinSegments>> {
    self.segments.queue(js_objects::profile_inputs(chunks)?);
    Ok(AsyncTask::new(JoinSegments(Arc::clone(&self.segments))))
  }
}

/// Converts V8 CPU profiles (the recordings of one profiler, in time order) into a
/// JS Self-Profiling trace, off the main thread. Resolves to the trace's JSON
/// text, or to bytes: gzip'd JSON for `format: "json-gzip"`, gzip'd pprof for "pprof". With `labels`, samples
/// are joined to the SIGPROF ring for labels and CPU time. With `join`, the trace builds on
/// from the segments it joined (`chunks` are the recording's rest).
#[napi(ts_return_type = "Promise<string | Buffer | Buffer[]>")]
pub fn build_trace(
  chunks: Vec<TraceChunk>,
  options: TraceOptions,
  join: Option<ClassInstance<TraceJoin>>,
) -> Result<AsyncTask<BuildTrace>> {
  let build = options.build(chunks, join.as_deref().map(|j| &j.segments))?;
  Ok(AsyncTask::new(BuildTrace(build)))
}

/// `build_trace` for the trace object: resolves to `TraceParts`, built off the main thread.
#[napi(ts_return_type = "Promise<TraceParts>")]
pub fn build_trace_parts(
  chunks: Vec<TraceChunk>,
  options: TraceOptions,
  join: Option<ClassInstance<TraceJoin>>,
) -> Result<AsyncTask<BuildParts>> {
  let build = options.build(chunks, join.as_deref().map(|j| &j.segments))?;
  Ok(AsyncTask::new(BuildParts(build)))
}

/// `build_trace` on the calling thread, for process exit (`'exit'` handlers cannot
/// wait for the thread pool). Returns each format's bytes (`format`, then `alsoFormat`).
#[napi]
pub fn build_trace_sync(
  chunks: Vec<TraceChunk>,
  options: TraceOptions,
  join: Option<ClassInstance<TraceJoin>>,
) -> Result<Vec<Buffer>> {
  let mut build = options.build(chunks, join.as_deref().map(|j| &j.segments))?;
  Ok(build.encoded()?.into_iter().map(Buffer::from).collect())
}

/// Puts selfprof's SIGPROF handler in front of V8's. Call after every V8 profiler start.
/// Returns `"chained"`, `"already-installed"`, `"behind-another"` or `"no-sampler"`, or
/// `"no-signals"` where V8 samples without a signal (Windows).
#[napi]
pub fn install_signal_handler() -> Result<&'static str> {
  match signal::install() {
    Ok(signal::Install::Chained) => Ok("chained"),
    Ok(signal::Install::AlreadyInstalled) => Ok("already-installed"),
    Ok(signal::Install::BehindAnother) => Ok("behind-another"),
    Ok(signal::Install::NoSampler) => Ok("no-sampler"),
    Ok(signal::Install::NoSignals) => Ok("no-signals"),
    Err(e) => Err(Error::from_reason(format!("sigaction(SIGPROF) failed: {e}"))),
  }
}

#[napi]
pub fn signal_handler_installed() -> bool {
  signal::installed()
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
  let (index, fresh) = signal::register_thread()
    .ok_or_else(|| Error::from_reason(format!("more than {} threads are profiled", signal::MAX_THREADS)))?;
  if fresh {
    let tid = signal::gettid();
    capture::switches::reset(index);
    env.add_env_cleanup_hook((index, tid), |(index, tid)| {
      signal::unregister_thread(index, tid);
      capture::switches::reset(index);
      capture::labels::forget_thread(tid);
      capture::drain::forget_thread(tid);
    })?;
  }
  let cell = signal::context_cell(index).ok_or_else(|| Error::from_reason("thread slot out of range"))?;
  // SAFETY: the cell is in static memory, so it outlives every view; the notify is a no-op.
  Ok(unsafe { Uint32Array::with_external_data(cell, signal::CELL_LEN, |_, _| {}) })
}

fn this_thread() -> Option<&'static signal::ThreadContext> {
  let tid = signal::gettid();
  signal::THREADS
    .iter()
    .find(|t| t.tid.load(Ordering::Acquire) == tid)
    .map(|t| &**t)
}

/// The calling thread's published context id.
#[napi]
pub fn read_thread_context() -> u32 {
  this_thread().map_or(0, |t| t.context())
}

/// Publishes the calling thread's context id with a call (fallback for the view).
#[napi]
pub fn set_thread_context(id: u32) {
  if let Some(t) = this_thread() {
    t.cell[0].store(id, Ordering::Relaxed);
    t.cell[1].fetch_add(1, Ordering::Relaxed);
  }
}

/// The id the handler last recorded on the calling thread, cleared (the fallback for the
/// cell's `sampled` element where JS has no view of the cell).
#[napi]
pub fn take_sampled_context() -> u32 {
  this_thread().map_or(0, |t| t.cell[2].swap(0, Ordering::Relaxed))
}

/// Where JS finds what in a thread's cell (see `signal::slot`).
#[napi]
pub fn cell_slots() -> CellSlots {
  use signal::slot;
  CellSlots {
    context: slot::CONTEXT as u32,
    generation: slot::GENERATION as u32,
    sampled: slot::SAMPLED as u32,
    recordings: slot::RECORDINGS as u32,
    queue_head: slot::QUEUE_HEAD as u32,
    queue_tail: slot::QUEUE_TAIL as u32,
    last_pushed: slot::LAST_PUSHED as u32,
    logging: slot::LOGGING as u32,
    queue: slot::QUEUE as u32,
    queue_len: signal::QUEUE_LEN as u32,
  }
}

/// Sets the calling thread's handler up to read its label-set id from the async context
/// frame (`capture::context_frame`), not enabled yet: JS checks it with `frameRead`, then
/// `frameEnable`s it. `storeKey` is selfprof's AsyncLocalStorage, `map` any JS Map. Throws
/// why it cannot (an unknown V8 version, a missing symbol).
#[napi]
pub fn frame_set_up(env: Env, v8_version: String, store_key: Object, map: Object) -> Result<()> {
  let t = this_thread().ok_or_else(|| Error::from_reason("this thread has no cell (registerThread first)"))?;
  // SAFETY: both are this call's arguments, live in its handle scope.
  let installed = unsafe {
    capture::context_frame::set_up(
      t,
      &v8_version,
      store_key.raw() as *const std::ffi::c_void,
      map.raw() as *const std::ffi::c_void,
    )
  }
  .map_err(Error::from_reason)?;
  let tid = signal::gettid();
  env.add_env_cleanup_hook((installed, tid), |(installed, tid)| {
    if let Some(t) = signal::THREADS.iter().find(|t| t.tid.load(Ordering::Acquire) == tid) {
      capture::context_frame::tear_down(t, installed);
    }
  })?;
  Ok(())
}

/// The label-set id the handler would read on the calling thread now, through the same
/// code (`signal::frame_context`): -1 if the frame cannot be read.
#[napi]
pub fn frame_read() -> i64 {
  this_thread()
    .and_then(|t| signal::frame_context(&t.frame))
    .map_or(-1, i64::from)
}

/// The V8 versions whose layouts this build knows (checked against each Node's headers
/// by `scripts/check-frame-layouts.js`).
#[napi]
pub fn frame_layouts() -> Vec<FrameLayoutInfo> {
  capture::context_frame::LAYOUTS
    .iter()
    .map(|l| FrameLayoutInfo {
      v8: l.v8.to_string(),
      cped: l.cped as u32,
      map_instance_type: l.map_instance_type as u32,
      js_object_header: l.js_object_header as u32,
      fixed_array_header: l.fixed_array_header as u32,
    })
    .collect()
}

/// Ids the handler could not queue for JS (a thread's queue was full), process-wide.
#[napi]
pub fn frame_queue_full() -> f64 {
  signal::QUEUE_FULL.load(Ordering::Relaxed) as f64
}

/// Makes the handler read (or stop reading) the calling thread's frame.
#[napi]
pub fn frame_enable(on: bool) {
  if let Some(t) = this_thread() {
    t.frame.enabled.store(on, Ordering::Release);
  }
}

/// Reserves `count` label-set ids, unique in the process (every copy of the JS module and
/// every thread draws from one counter); returns the first.
#[napi]
pub fn reserve_label_ids(count: u32) -> u32 {
  capture::labels::reserve_ids(count)
}

/// Keeps the labels of set `id` of the calling thread, as `[key, value, key, value, ...]`
/// (a sample references it). Strings arrive as UTF-8: a lone surrogate is U+FFFD.
#[napi]
pub fn save_labels(id: u32, flat: Vec<String>) -> Result<()> {
  let set = capture::labels::label_set(flat).ok_or_else(|| invalid("labels must come as key, value pairs"))?;
  capture::labels::save(signal::gettid(), id, set, signal::bracket_clock_ns());
  Ok(())
}

/// Replaces kept set `id` of the calling thread with `[key, value, ...]`: its labels
/// completed after it was sampled (a request's route). Traces not built yet get the new
/// labels. Returns false if the set is no longer kept.
#[napi]
pub fn amend_labels(id: u32, flat: Vec<String>) -> Result<bool> {
  let set = capture::labels::label_set(flat).ok_or_else(|| invalid("labels must come as key, value pairs"))?;
  Ok(capture::labels::amend(
    signal::gettid(),
    id,
    set,
    signal::bracket_clock_ns(),
  ))
}

/// A recording starts on the calling thread: returns its token for `labelsRecordingBuilt`,
/// and counts it in the thread's cell.
#[napi]
pub fn labels_recording_started() -> u32 {
  if let Some(t) = this_thread() {
    t.cell[3].fetch_add(1, Ordering::Relaxed);
  }
  let (tid, now) = (signal::gettid(), signal::bracket_clock_ns());
  let token = capture::labels::recording_started(tid, now);
  capture::drain::recording_started(tid, token, now);
  if capture::BY_TIME {
    // The set in effect as the recording starts, which may have been switched to long before.
    capture::switches::log_current();
  }
  token
}

/// How samples get their labels here: `"signal"` (the SIGPROF handler: Linux, macOS),
/// `"time"` (label switches logged with their time: Windows, where V8's clock is the
/// performance counter), or `"none"` (Windows where V8 stamps samples with a millisecond
/// clock: no switch can be placed certainly against them).
#[napi]
pub fn label_join() -> &'static str {
  match (capture::BY_TIME, capture::switches::enabled()) {
    (false, _) => "signal",
    (true, true) => "time",
    (true, false) => "none",
  }
}

/// Logs that the calling thread switched to label set `id` now (where samples are joined
/// by time: JS calls it at each switch while its cell's `logging` element is not 0).
/// Whether it was logged (a recording of the thread is unbuilt).
#[napi]
pub fn log_switch(id: u32) -> bool {
  capture::switches::log(id)
}

/// The trace of recording `token` was built (or never will be): label sets only it could
/// reference are dropped.
#[napi]
pub fn labels_recording_built(token: u32) {
  let tid = signal::gettid();
  capture::labels::recording_built(tid, token);
  capture::drain::recording_built(tid, token);
}

/// Looks up the label sets of recording `token`'s brackets so far, on the thread pool,
/// while the caller stops V8 (see `capture::prefetch`). Its build takes what it
/// found; a set saved after is looked up by the build.
#[napi]
pub fn labels_prefetch(token: u32, origin_us: f64, from_ms: f64) -> AsyncTask<Prefetch> {
  AsyncTask::new(Prefetch {
    tid: signal::gettid(),
    token,
    // The build's brackets start there too.
    from_ns: bracket_range_ns(origin_us, from_ms, f64::INFINITY).0,
  })
}

#[napi]
pub fn label_stats() -> LabelStats {
  let (saved, bytes, dropped, unbuilt) = capture::labels::stats();
  let (prefetched, prefetch_hits) = capture::prefetch::prefetch_stats();
  LabelStats {
    saved: saved as u32,
    bytes: bytes as f64,
    dropped: dropped as f64,
    unbuilt: unbuilt as u32,
    prefetched: prefetched as u32,
    prefetch_hits: prefetch_hits as f64,
    records: capture::drain::stats().1 as f64,
  }
}

#[napi]
pub fn source_map_cache_stats() -> SourceMapCacheStats {
  let s = symbolize::cache_stats();
  SourceMapCacheStats {
    maps: s.maps as u32,
    bytes: s.bytes as f64,
    others: s.others as u32,
    evicted: s.evicted as f64,
    parsed: s.parsed as f64,
  }
}

/// Why source maps could not be used because they were over a bound, since the last call
/// (each map once: its failure is then cached). JS logs them as a warning.
#[napi]
pub fn source_map_warnings() -> Vec<String> {
  symbolize::take_warnings()
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

/// Converts a trace (its JSON, or json-gzip) or a pprof profile (plain or gzip'd) to
/// `"cpuprofile"` (Chrome DevTools JSON), `"folded"` (folded stacks), `"trace"` (the
/// spec trace's JSON) or `"pprof"` (gzip'd profile.proto). Text formats come back as
/// strings, pprof as bytes. `source_maps`: map frames through the source maps found on
/// this machine first (default false: a file is taken as it was recorded), with the hot
/// lines' text that the maps carry (`sourcesContent`; never a file the input names).
/// `profiler_frames`: keep selfprof's own frames (default false: hidden, with the package
/// roots `profiler_roots` and any `node_modules/selfprof`; `trace::profiler_frames`).
#[napi(ts_return_type = "string | Buffer")]
pub fn convert_profile(
  input: Buffer,
  to: String,
  lines: Option<bool>,
  source_maps: Option<bool>,
  profiler_frames: Option<bool>,
  profiler_roots: Option<Vec<String>>,
) -> Result<Either<String, Buffer>> {
  let mut trace = formats::read_input(&input).map_err(invalid)?;
  if let Some(files) = js_objects::profiler_files(profiler_frames, profiler_roots) {
    trace::profiler_frames::hide(&mut trace.trace, &files);
  }
  if source_maps.unwrap_or(false) {
    symbolize::build(&mut trace.trace, Some(&[]), symbolize::TextFrom::Maps);
  }
  let out = formats::to_format_with(&trace, &to, lines.unwrap_or(false)).map_err(invalid)?;
  if to == "pprof" {
    return Ok(Either::B(out.into()));
  }
  String::from_utf8(out).map(Either::A).map_err(invalid)
}

/// Merges the traces of a process's threads into one (`formats::threads`), each sample
/// labeled with its thread; returns it as `format` (`"json-gzip"`, default, or `"pprof"`).
#[napi]
pub fn merge_traces(threads: Vec<ThreadInput>, format: Option<String>) -> Result<Buffer> {
  let threads = threads.into_iter().map(ThreadInput::read).collect::<Result<Vec<_>>>()?;
  let trace = formats::threads::merge(threads);
  let io = |e: std::io::Error| Error::from_reason(e.to_string());
  let out = match format.as_deref() {
    None | Some("json-gzip") => trace.to_json_gzip().map_err(io)?,
    Some("pprof") => formats::to_format(&trace.into(), "pprof").map_err(invalid)?,
    Some(other) => return Err(invalid(format!("unknown format {other:?}"))),
  };
  Ok(out.into())
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

/// The parts of one thread's recording (`selfprof record`'s checkpoints, json or json-gzip,
/// in time order) as one trace, json-gzip (`formats::threads::concat`).
#[napi]
pub fn concat_traces(parts: Vec<Buffer>) -> Result<Buffer> {
  let parts = parts
    .iter()
    .map(|p| formats::read_input(p).map(|t| t.trace).map_err(invalid))
    .collect::<Result<Vec<_>>>()?;
  let trace = formats::threads::concat(parts);
  let out = trace.to_json_gzip().map_err(|e| Error::from_reason(e.to_string()))?;
  Ok(out.into())
}

/// Encodes the sampling heap profiles of one or more threads as one pprof heap profile
/// (`inuse_objects/count`, `inuse_space/bytes`), off the main thread: resolves to
/// `[pprof, trace?, ...one per dialect]`.
#[napi(ts_return_type = "Promise<Buffer[]>")]
pub fn build_heap_profile(chunks: Vec<HeapChunk>, options: HeapOptions) -> Result<AsyncTask<BuildHeap>> {
  Ok(AsyncTask::new(BuildHeap(options.build(chunks)?)))
}

/// `build_heap_profile` on the calling thread (process exit).
#[napi]
pub fn build_heap_profile_sync(chunks: Vec<HeapChunk>, options: HeapOptions) -> Result<Vec<Buffer>> {
  Ok(
    options
      .build(chunks)?
      .encoded()?
      .into_iter()
      .map(Buffer::from)
      .collect(),
  )
}

/// How many threads hold a label cell now (of `signal::MAX_THREADS`): workers past the
/// cap are not profiled.
#[napi]
pub fn registered_threads() -> u32 {
  signal::THREADS
    .iter()
    .filter(|t| t.tid.load(Ordering::Acquire) != 0)
    .count() as u32
}

/// Workers profiled at once, process-wide (every copy of the JS shares it).
static PROFILED_WORKERS: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);

/// Claims one of `max` places for the calling worker to be profiled; false past the cap.
/// The place is given back when the worker's environment is torn down.
#[napi]
pub fn claim_profiled_worker(env: Env, max: u32) -> Result<bool> {
  let claimed = PROFILED_WORKERS
    .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| (n < max).then_some(n + 1))
    .is_ok();
  if claimed {
    env.add_env_cleanup_hook((), |_| {
      PROFILED_WORKERS.fetch_sub(1, Ordering::AcqRel);
    })?;
  }
  Ok(claimed)
}
