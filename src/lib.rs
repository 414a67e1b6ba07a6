//! selfprof's native side. This file holds only the napi bindings; the work is in
//! the modules it names, one folder per concern:
//!
//! - `capture`: the SIGPROF handler (the only signal-context code) and its ring, and the
//!   join of V8's samples to what the handler recorded;
//! - `trace`: V8's CPU profile in, the spec's trace out (built off the main thread);
//! - `formats`: reading and writing pprof, `.cpuprofile`, folded stacks and trace files;
//! - `symbolize`: frames of generated code through their source maps.

pub mod capture;
pub mod formats;
pub mod symbolize;
pub mod trace;

use capture::{ring, signal};
use formats::pprof;

use napi::bindgen_prelude::{AsyncTask, Buffer, Either, Either3, Uint32Array};
use napi::{Env, Error, Result, Status, Task};
use napi_derive::napi;
use std::sync::atomic::Ordering;
use trace::v8_profile::CpuProfile;
use trace::{Labeler, TraceBuilder, Window};

fn invalid(e: impl std::fmt::Display) -> Error {
  Error::new(Status::InvalidArg, e.to_string())
}

/// Where a trace's samples come from and which of them it keeps.
#[napi(object)]
pub struct TraceOptions {
  /// `performance.timeOrigin` on V8's monotonic clock, in microseconds.
  pub origin_us: f64,
  /// Keep samples at or after this time (ms since the time origin).
  pub from_ms: Option<f64>,
  /// Keep samples at or before this time (ms since the time origin).
  pub until_ms: Option<f64>,
  /// The sample buffer size limit.
  pub max_samples: Option<u32>,
  /// `"json"` (default), `"json-gzip"` or `"pprof"` (gzip'd profile.proto).
  pub format: Option<String>,
  /// A second format of the same trace: the result is then `[Buffer, Buffer]`.
  pub also_format: Option<String>,
  /// For `"pprof"`: `performance.timeOrigin` (Unix ms) and the sampling interval (ns).
  pub time_origin_unix_ms: Option<f64>,
  pub period_ns: Option<f64>,
  /// For `"pprof"`: write the cpu/nanoseconds sample type (default true).
  pub cpu_time: Option<bool>,
  /// For `"pprof"`: put samples at line-level locations from the line ticks (default false).
  pub lines: Option<bool>,
  /// Join samples to the SIGPROF ring for labels and CPU time.
  pub labels: Option<bool>,
  /// The thread the recording sampled (default: the calling thread).
  pub tid: Option<i32>,
  /// The thread's CPU time when the recording started.
  pub cpu_start_ns: Option<f64>,
  /// Service mode: the same trace for each backend, as JSON `[{ name: 'datadog' |
  /// 'pyroscope' | 'otlp' | 'pprof', ... }]` (see `formats::dialect`), each appended to
  /// the result's buffers, with the `"pprof"` timing.
  pub dialects: Option<String>,
  /// Map frames through their scripts' source maps (default true).
  pub source_maps: Option<bool>,
  /// Source maps Node holds for scripts compiled in memory (`module.findSourceMap`).
  pub script_maps: Option<Vec<ScriptMap>>,
}

/// A source map Node holds for a script: its URL and the map's JSON.
#[napi(object)]
pub struct ScriptMap {
  pub url: String,
  pub map: String,
}

/// How to label a recording's samples (label sets come from `capture::labels`).
struct LabelSource {
  tid: i32,
  cpu_start_ns: Option<u64>,
}

/// One V8 recording of a trace: the JSON of `Profiler.stop`'s `profile`, and the
/// stride to take its samples at (the profiler's interval / the sampler's).
#[napi(object)]
pub struct TraceChunk {
  pub profile: String,
  pub stride: Option<u32>,
}

#[derive(Clone, Copy)]
enum Format {
  Json,
  JsonGzip,
  Pprof(pprof::Timing),
}

pub struct BuildTrace {
  chunks: Vec<(String, usize)>,
  window: Window,
  formats: Vec<Format>,
  labels: Option<LabelSource>,
  dialects: Vec<(formats::dialect::Dialect, pprof::Timing)>,
  /// Map frames through source maps (with these runtime maps), or not (None).
  source_maps: Option<Vec<symbolize::RuntimeMap>>,
}

impl BuildTrace {
  fn build(&self) -> Result<trace::Trace> {
    let lookup = capture::labels::lookup;
    let mut builder = match &self.labels {
      Some(src) => {
        // Brackets a little wider than the window: a sample at the window's edge was
        // bracketed by a signal that began just before it.
        let to_ns = |ms: f64| ((self.window.origin_us + ms * 1000.0) * 1000.0).max(0.0) as u64;
        let from_ns = to_ns(self.window.from_ms).saturating_sub(1_000_000);
        let until_ns = to_ns(self.window.until_ms).saturating_add(1_000_000);
        let write = signal::RING_WRITE.load(Ordering::Acquire);
        TraceBuilder::with_labeler(Labeler {
          entries: ring::snapshot(&signal::RING, write, src.tid, from_ns, until_ns),
          lookup: &lookup,
          cpu_start_ns: src.cpu_start_ns,
        })
      }
      None => TraceBuilder::new(),
    };
    for (json, stride) in &self.chunks {
      let profile = CpuProfile::from_json(json).map_err(invalid)?;
      let window = Window {
        stride: *stride,
        ..self.window
      };
      builder.add_profile(&profile, &window).map_err(invalid)?;
    }
    Ok(builder.finish())
  }
}

impl Task for BuildTrace {
  type Output = Vec<Vec<u8>>;
  type JsValue = Either3<String, Buffer, Vec<Buffer>>;

  fn compute(&mut self) -> Result<Self::Output> {
    let mut trace = self.build()?;
    if let Some(runtime) = &self.source_maps {
      symbolize::symbolize(&mut trace, runtime);
    }
    let io = |e: std::io::Error| Error::from_reason(e.to_string());
    self
      .formats
      .iter()
      .map(|format| match format {
        Format::Json => {
          let json = trace.to_json().into_bytes();
          if json.len() > formats::limits::JS_STRING_BYTES {
            return Err(Error::from_reason(format!(
              "the trace's JSON is {} MiB, more than a JS string holds: stop({{ format: 'json-gzip' }}) or 'pprof' gives it whole",
              json.len() >> 20
            )));
          }
          Ok(json)
        }
        Format::JsonGzip => trace.to_json_gzip().map_err(io),
        Format::Pprof(timing) => pprof::encode_gzip(&trace, timing).map_err(io),
      })
      .chain(
        self
          .dialects
          .iter()
          .map(|(dialect, timing)| formats::dialect::encode(&trace, timing, dialect).map_err(io)),
      )
      .collect()
  }

  fn resolve(&mut self, _env: Env, mut output: Self::Output) -> Result<Self::JsValue> {
    if output.len() != 1 {
      return Ok(Either3::C(output.into_iter().map(Buffer::from).collect()));
    }
    let bytes = output.pop().unwrap_or_default();
    match self.formats.first() {
      Some(Format::Json) => String::from_utf8(bytes)
        .map(Either3::A)
        .map_err(|e| Error::from_reason(e.to_string())),
      _ => Ok(Either3::B(bytes.into())),
    }
  }
}

/// Converts V8 CPU profiles (the recordings of one profiler, in time order) into a
/// JS Self-Profiling trace, off the main thread. Resolves to the trace's JSON
/// text, or to bytes: gzip'd JSON for `format: "json-gzip"`, gzip'd pprof for "pprof". With `labels`, samples
/// are joined to the SIGPROF ring for labels and CPU time.
#[napi(ts_return_type = "Promise<string | Buffer | Buffer[]>")]
pub fn build_trace(chunks: Vec<TraceChunk>, options: TraceOptions) -> Result<AsyncTask<BuildTrace>> {
  Ok(AsyncTask::new(BuildTrace::new(chunks, options)?))
}

/// `build_trace` on the calling thread, for process exit (`'exit'` handlers cannot
/// wait for the thread pool). Returns each format's bytes (`format`, then `alsoFormat`).
#[napi]
pub fn build_trace_sync(chunks: Vec<TraceChunk>, options: TraceOptions) -> Result<Vec<Buffer>> {
  let mut task = BuildTrace::new(chunks, options)?;
  Ok(task.compute()?.into_iter().map(Buffer::from).collect())
}

impl BuildTrace {
  fn new(chunks: Vec<TraceChunk>, options: TraceOptions) -> Result<BuildTrace> {
    let timing = pprof::Timing {
      time_origin_unix_ms: options.time_origin_unix_ms.unwrap_or(0.0),
      start_ms: options.from_ms.unwrap_or(0.0),
      end_ms: options.until_ms.unwrap_or(0.0),
      period_ns: options.period_ns.unwrap_or(0.0) as i64,
      cpu: options.cpu_time.unwrap_or(true),
      lines: options.lines.unwrap_or(false),
    };
    let parse = |name: Option<&str>| match name {
      None | Some("json") => Ok(Format::Json),
      Some("json-gzip") => Ok(Format::JsonGzip),
      Some("pprof") => Ok(Format::Pprof(timing)),
      Some(other) => Err(invalid(format!(
        "unknown trace format {other:?}: expected \"json\", \"json-gzip\" or \"pprof\""
      ))),
    };
    let mut formats = vec![parse(options.format.as_deref())?];
    if let Some(also) = options.also_format.as_deref() {
      formats.push(parse(Some(also))?);
    }
    let defaults = Window::default();
    let window = Window {
      origin_us: options.origin_us,
      from_ms: options.from_ms.unwrap_or(defaults.from_ms),
      until_ms: options.until_ms.unwrap_or(defaults.until_ms),
      max_samples: options.max_samples.map_or(defaults.max_samples, |n| n as usize),
      stride: 1,
    };
    let chunks = chunks
      .into_iter()
      .map(|c| (c.profile, c.stride.unwrap_or(1).max(1) as usize))
      .collect();
    let labels = options.labels.unwrap_or(false).then(|| LabelSource {
      tid: options.tid.unwrap_or_else(signal::gettid),
      cpu_start_ns: options.cpu_start_ns.map(|n| n as u64),
    });
    let dialects = match options.dialects.as_deref() {
      Some(json) => formats::dialect::parse(json).map_err(invalid)?,
      None => Vec::new(),
    };
    let source_maps = options.source_maps.unwrap_or(true).then(|| {
      options
        .script_maps
        .unwrap_or_default()
        .into_iter()
        .map(|m| symbolize::RuntimeMap {
          url: m.url,
          json: m.map,
        })
        .collect()
    });
    Ok(BuildTrace {
      chunks,
      window,
      formats,
      labels,
      dialects: dialects.into_iter().map(|d| (d, timing)).collect(),
      source_maps,
    })
  }
}

/// Puts selfprof's SIGPROF handler in front of V8's. Call after every V8 profiler start.
/// Returns `"chained"`, `"already-installed"`, `"behind-another"` or `"no-sampler"`.
#[napi]
pub fn install_signal_handler() -> Result<&'static str> {
  match signal::install() {
    Ok(signal::Install::Chained) => Ok("chained"),
    Ok(signal::Install::AlreadyInstalled) => Ok("already-installed"),
    Ok(signal::Install::BehindAnother) => Ok("behind-another"),
    Ok(signal::Install::NoSampler) => Ok("no-sampler"),
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
    env.add_env_cleanup_hook((index, tid), |(index, tid)| {
      signal::unregister_thread(index, tid);
      capture::labels::forget_thread(tid);
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
  capture::labels::save(signal::gettid(), id, set, signal::monotonic_ns());
  Ok(())
}

/// A recording starts on the calling thread: returns its token for `labelsRecordingBuilt`,
/// and counts it in the thread's cell.
#[napi]
pub fn labels_recording_started() -> u32 {
  if let Some(t) = this_thread() {
    t.cell[3].fetch_add(1, Ordering::Relaxed);
  }
  capture::labels::recording_started(signal::gettid(), signal::monotonic_ns())
}

/// The trace of recording `token` was built (or never will be): label sets only it could
/// reference are dropped.
#[napi]
pub fn labels_recording_built(token: u32) {
  capture::labels::recording_built(signal::gettid(), token);
}

/// `{ saved, bytes, dropped, unbuilt }`: label sets kept, their bytes, sets dropped to the
/// bounds, unbuilt recordings (process-wide; for tests and diagnostics).
#[napi(object)]
pub struct LabelStats {
  pub saved: u32,
  pub bytes: f64,
  pub dropped: f64,
  pub unbuilt: u32,
}

#[napi]
pub fn label_stats() -> LabelStats {
  let (saved, bytes, dropped, unbuilt) = capture::labels::stats();
  LabelStats {
    saved: saved as u32,
    bytes: bytes as f64,
    dropped: dropped as f64,
    unbuilt: unbuilt as u32,
  }
}

/// `{ maps, bytes, others, evicted }`: parsed source maps cached process-wide, the memory
/// they hold, scripts remembered without a usable map, entries dropped to the bounds.
#[napi(object)]
pub struct SourceMapCacheStats {
  pub maps: u32,
  pub bytes: f64,
  pub others: u32,
  pub evicted: f64,
}

#[napi]
pub fn source_map_cache_stats() -> SourceMapCacheStats {
  let s = symbolize::cache_stats();
  SourceMapCacheStats {
    maps: s.maps as u32,
    bytes: s.bytes as f64,
    others: s.others as u32,
    evicted: s.evicted as f64,
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

/// Converts a trace (its JSON, or json-gzip) or a pprof profile (plain or gzip'd) to
/// `"cpuprofile"` (Chrome DevTools JSON), `"folded"` (folded stacks), `"trace"` (the
/// spec trace's JSON) or `"pprof"` (gzip'd profile.proto). Text formats come back as
/// strings, pprof as bytes. `source_maps`: map frames through the source maps found on
/// this machine first (default false: a file is taken as it was recorded).
#[napi(ts_return_type = "string | Buffer")]
pub fn convert_profile(
  input: Buffer,
  to: String,
  lines: Option<bool>,
  source_maps: Option<bool>,
) -> Result<Either<String, Buffer>> {
  let mut trace = formats::read_input(&input).map_err(invalid)?;
  if source_maps.unwrap_or(false) {
    symbolize::symbolize(&mut trace.trace, &[]);
  }
  let out = formats::to_format_with(&trace, &to, lines.unwrap_or(false)).map_err(invalid)?;
  if to == "pprof" {
    return Ok(Either::B(out.into()));
  }
  String::from_utf8(out).map(Either::A).map_err(invalid)
}
