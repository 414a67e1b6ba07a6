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
//! The objects JS passes and gets, the thread-pool tasks and the bindings of a thread's own
//! state (its cell, its context frame, the signal handler, the heap sampler) are in
//! `bindings`.

pub mod bindings;
pub mod capture;
pub mod formats;
pub mod parallel;
pub mod symbolize;
pub mod trace;

use bindings::objects::{
  self, HeapChunk, HeapOptions, LabelStats, SourceMapCacheStats, ThreadInput, TraceChunk, TraceOptions,
};
use bindings::tasks::{BuildHeap, BuildTrace, BuildTraceColumns, JoinSegments, Prefetch};
use capture::signal;
use napi::bindgen_prelude::{AsyncTask, Buffer, ClassInstance, Either};
use napi::{Error, Result, Status};
use napi_derive::napi;
use std::sync::Arc;
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
    self.segments.queue(objects::profile_inputs(chunks)?);
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
) -> Result<AsyncTask<BuildTraceColumns>> {
  let build = options.build(chunks, join.as_deref().map(|j| &j.segments))?;
  Ok(AsyncTask::new(BuildTraceColumns(build)))
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

/// Reserves `count` label-set ids, unique in the process (every copy of the JS module and
/// every thread draws from one counter); returns the first.
#[napi]
pub fn reserve_label_ids(count: u32) -> u32 {
  capture::labels::reserve_ids(count)
}

/// Keeps the labels of the calling thread's sets `ids` (samples reference them): set
/// `ids[i]`'s are the next `lengths[i]` strings of `flat`, as `[key, value, key, value,
/// ...]`. One call for all the sets a drain found. Strings arrive as UTF-8: a lone
/// surrogate is U+FFFD.
#[napi]
pub fn save_label_sets(ids: Vec<u32>, lengths: Vec<u32>, flat: Vec<String>) -> Result<()> {
  let sets = capture::labels::label_sets(ids, lengths, flat).map_err(|e| invalid(&e))?;
  capture::labels::save_each(signal::gettid(), sets, signal::bracket_clock_ns());
  Ok(())
}

/// Keeps set `ids[i]` of the calling thread with the labels of kept set `of[i]`, for each
/// `i` (a drain's samples of one request, each pair under an id of its own): nothing is
/// encoded again. Returns, for each, whether `of[i]` was kept.
#[napi]
pub fn alias_label_sets(ids: Vec<u32>, of: Vec<u32>) -> Result<Vec<bool>> {
  if ids.len() != of.len() {
    return Err(invalid(format!("{} ids but {} sets to alias", ids.len(), of.len())));
  }
  let pairs: Vec<(u32, u32)> = ids.into_iter().zip(of).collect();
  Ok(capture::labels::alias_each(
    signal::gettid(),
    &pairs,
    signal::bracket_clock_ns(),
  ))
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
  if let Some(t) = capture::threads::this_thread() {
    t.cell[signal::slot::RECORDINGS].fetch_add(1, std::sync::atomic::Ordering::Relaxed);
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
  LabelStats::now()
}

#[napi]
pub fn source_map_cache_stats() -> SourceMapCacheStats {
  symbolize::cache_stats().into()
}

/// Why source maps could not be used because they were over a bound, since the last call
/// (each map once: its failure is then cached). JS logs them as a warning.
#[napi]
pub fn source_map_warnings() -> Vec<String> {
  symbolize::take_warnings()
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
  if let Some(files) = objects::profiler_files(profiler_frames, profiler_roots) {
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

/// The event-loop blocks of a profile over `threshold_ms` (default 50): found from a
/// trace's samples (`trace::blocks`), or read from a pprof's comments. The input is read as
/// `convert_profile` reads it (frames hidden and mapped alike). JSON of `formats::FoundBlocks`.
#[napi]
pub fn event_loop_blocks(
  input: Buffer,
  threshold_ms: Option<f64>,
  source_maps: Option<bool>,
  profiler_frames: Option<bool>,
  profiler_roots: Option<Vec<String>>,
) -> Result<String> {
  let mut profile = formats::read_input(&input).map_err(invalid)?;
  if let Some(files) = objects::profiler_files(profiler_frames, profiler_roots) {
    trace::profiler_frames::hide(&mut profile.trace, &files);
  }
  if source_maps.unwrap_or(false) {
    symbolize::build(&mut profile.trace, Some(&[]), symbolize::TextFrom::Maps);
  }
  let options = trace::blocks::BlockOptions {
    threshold_ms: threshold_ms
      .filter(|t| t.is_finite() && *t >= 0.0)
      .unwrap_or(trace::blocks::DEFAULT_THRESHOLD_MS),
    ..Default::default()
  };
  serde_json::to_string(&formats::event_loop_blocks(&profile, &options)).map_err(invalid)
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
