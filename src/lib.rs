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
pub mod parallel;
pub mod symbolize;
pub mod trace;

use capture::signal;

use formats::pprof;

use napi::bindgen_prelude::{
  AsyncTask, Buffer, ClassInstance, Either, Either3, Float64Array, Int32Array, JsValue, Object, Uint32Array, Uint8Array,
};
use napi::{Env, Error, Result, Status, Task};
use napi_derive::napi;
use std::sync::atomic::Ordering;
use trace::v8_profile::CpuProfile;

/// A HashMap with a fast hasher that is seeded per map (foldhash), for maps that may hold
/// data from outside files: fast, and no crafted input can force collisions.
pub type FastMap<K, V> = std::collections::HashMap<K, V, foldhash::fast::RandomState>;
use std::sync::{Arc, Mutex};
use trace::join::{bracket_range_ns, Join, LabelSource};
use trace::Window;

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
  /// The recording's token (`labelsRecordingStarted`): once its samples are joined, the
  /// build lets go of the label sets and records only it could reference, on the thread
  /// pool rather than in JS's `labelsRecordingBuilt` on the event loop.
  pub recording: Option<u32>,
  /// Service mode: the same trace for each backend, as JSON `[{ name: 'datadog' |
  /// 'pyroscope' | 'otlp' | 'pprof', ... }]` (see `formats::dialect`), each appended to
  /// the result's buffers, with the `"pprof"` timing.
  pub dialects: Option<String>,
  /// Every thread in one trace (`formats::threads`): this recording's thread (its `thread
  /// name`, `thread id`, `os thread id` labels) and the traces of other threads to merge in.
  pub thread_name: Option<String>,
  pub thread_id: Option<String>,
  pub os_thread_id: Option<String>,
  pub threads: Option<Vec<ThreadInput>>,
  /// How the recording's thread told the handler its label set: `"async-hooks"` or
  /// `"context-frame"` (the trace's `metadata.labelPath`).
  pub label_path: Option<String>,
  /// Map frames through their scripts' source maps (default true).
  pub source_maps: Option<bool>,
  /// Source maps Node holds for scripts compiled in memory (`module.findSourceMap`).
  pub script_maps: Option<Vec<ScriptMap>>,
  /// The hot lines' text in the trace (`trace.sourceText`): `"scripts"` (from the files of
  /// the recording's scripts, which V8 loaded in this process, and maps' `sourcesContent`),
  /// `"maps"` (only maps' `sourcesContent`: a profile from elsewhere), else none.
  pub source_text: Option<String>,
  /// Keep selfprof's own frames as V8 gave them (default false: hidden, see
  /// `trace::profiler_frames`), and the package roots selfprof was loaded from here.
  pub profiler_frames: Option<bool>,
  pub profiler_roots: Option<Vec<String>>,
}

/// What hides selfprof's own frames, unless `show` (the `profilerFrames` option).
fn profiler_files(show: Option<bool>, roots: Option<Vec<String>>) -> Option<trace::profiler_frames::ProfilerFiles> {
  (!show.unwrap_or(false)).then(|| trace::profiler_frames::ProfilerFiles::new(roots.unwrap_or_default()))
}

/// A source map Node holds for a script: its URL and the map's JSON.
#[napi(object)]
pub struct ScriptMap {
  pub url: String,
  pub map: String,
}

/// Another thread's trace to merge in: its json or json-gzip, who it is, and its time
/// origin minus this thread's (ms).
#[napi(object)]
pub struct ThreadInput {
  pub trace: Buffer,
  pub name: String,
  pub id: String,
  pub os_id: Option<String>,
  pub offset_ms: Option<f64>,
}

fn thread_trace(t: ThreadInput) -> Result<formats::threads::ThreadTrace> {
  let trace = formats::read_input(&t.trace).map_err(invalid)?.trace;
  Ok(formats::threads::ThreadTrace {
    trace,
    name: t.name,
    id: t.id,
    os_id: t.os_id,
    offset_ms: t.offset_ms.unwrap_or(0.0),
  })
}

/// One V8 recording of a trace: the JSON of `Profiler.stop`'s `profile`, and the
/// stride to take its samples at (the profiler's interval / the sampler's).
#[napi(object)]
pub struct TraceChunk {
  /// V8's profile as JSON; its `samples` and `timeDeltas` may come apart, as typed arrays
  /// (a recording's are nearly all of its JSON: made and parsed, they took ~8 ms of a
  /// ~127k-sample stop).
  pub profile: String,
  pub stride: Option<u32>,
  pub samples: Option<Uint32Array>,
  pub time_deltas: Option<Float64Array>,
}

/// A recording to build from: its profile's JSON, and its samples when apart from it.
struct Chunk {
  json: String,
  stride: usize,
  samples: Option<(Vec<u32>, Vec<f64>)>,
}

impl Chunk {
  fn all(chunks: Vec<TraceChunk>) -> Result<Vec<Chunk>> {
    chunks
      .into_iter()
      .map(|c| {
        let samples = match (c.samples, c.time_deltas) {
          (None, None) => None,
          (Some(samples), Some(deltas)) => Some((samples.to_vec(), deltas.to_vec())),
          _ => {
            return Err(invalid(
              "a recording's samples and timeDeltas come together or not at all",
            ))
          }
        };
        Ok(Chunk {
          json: c.profile,
          stride: c.stride.unwrap_or(1).max(1) as usize,
          samples,
        })
      })
      .collect()
  }

  /// The recording's profile (its samples moved out of the chunk).
  fn profile(&mut self) -> Result<CpuProfile> {
    let mut profile = CpuProfile::from_json(&self.json).map_err(invalid)?;
    if let Some((samples, time_deltas)) = self.samples.take() {
      profile.samples = samples;
      profile.time_deltas = time_deltas;
    }
    Ok(profile)
  }
}

/// Segments of a recording still running, joined as they arrive (`trace::join`); its stop
/// builds on from them. The queue has a lock of its own: the event loop's thread only ever
/// appends to it, and never waits for a join under way on the thread pool.
#[derive(Default)]
struct Joined {
  /// Segments handed over, not joined yet (in time order).
  queue: Mutex<std::collections::VecDeque<Chunk>>,
  state: Mutex<JoinState>,
}

#[derive(Default)]
struct JoinState {
  join: Option<Join>,
  /// Why a segment could not be joined: the build fails with it.
  error: Option<String>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
  m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Joined {
  /// Joins the segments queued so far, under the state's lock (`state`): one joiner at a
  /// time, so they are joined in the order they were queued.
  fn catch_up(&self, state: &mut JoinState) -> Result<()> {
    loop {
      let Some(mut chunk) = lock(&self.queue).pop_front() else {
        break;
      };
      let Some(join) = state.join.as_mut() else {
        lock(&self.queue).clear();
        break;
      };
      if state.error.is_some() {
        continue;
      }
      // Every segment ends before the stop: all of its samples are in the window's end.
      let added = chunk
        .profile()
        .and_then(|p| join.add(&p, chunk.stride, f64::INFINITY).map_err(invalid));
      if let Err(e) = added {
        state.error = Some(e.reason.clone());
      }
    }
    match &state.error {
      Some(e) => Err(invalid(e)),
      None => Ok(()),
    }
  }
}

/// A labeled recording's trace, built as the recording runs: `add` takes each segment
/// the profiler group hands over and joins it on the thread pool; `buildTrace*(…, join)`
/// builds on from it at the stop. Segments of one recording, in time order.
#[napi]
pub struct TraceJoin {
  shared: Arc<Joined>,
}

#[napi]
impl TraceJoin {
  /// For the recording the build `options` (its window's start, its labels) describe.
  #[napi(constructor)]
  pub fn new(options: TraceOptions) -> Result<TraceJoin> {
    let window = window_of(&options);
    let labels = label_source(&options);
    Ok(TraceJoin {
      shared: Arc::new(Joined {
        state: Mutex::new(JoinState {
          join: Some(Join::new(window, labels)),
          error: None,
        }),
        ..Joined::default()
      }),
    })
  }

  /// Queues segments (in time order) and joins them on the thread pool. Rejects if one
  /// cannot be joined (the build then fails with the same error).
  #[napi(ts_return_type = "Promise<void>")]
  pub fn add(&self, chunks: Vec<TraceChunk>) -> Result<AsyncTask<JoinQueued>> {
    let chunks = Chunk::all(chunks)?;
    lock(&self.shared.queue).extend(chunks);
    Ok(AsyncTask::new(JoinQueued(Arc::clone(&self.shared))))
  }
}

pub struct JoinQueued(Arc<Joined>);

impl Task for JoinQueued {
  type Output = ();
  type JsValue = ();

  fn compute(&mut self) -> Result<()> {
    let joined = self.0.catch_up(&mut lock(&self.0.state));
    // A segment's parse and join free a few MB of short-lived buffers on this pool
    // thread's malloc arena, which glibc keeps: while the recording runs, that showed as
    // ~8 MiB more RSS at ~100k samples. Give the free pages back.
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only returns free memory to the system.
    unsafe {
      libc::malloc_trim(0);
    }
    joined
  }

  fn resolve(&mut self, _env: Env, _output: ()) -> Result<()> {
    Ok(())
  }
}

#[derive(Clone, Copy)]
enum Format {
  Json,
  JsonGzip,
  Pprof(pprof::Timing),
}

pub struct BuildTrace {
  chunks: Vec<Chunk>,
  window: Window,
  formats: Vec<Format>,
  labels: Option<LabelSource>,
  /// The segments of the recording joined while it ran, if any.
  joined: Option<Arc<Joined>>,
  dialects: Vec<(formats::dialect::Dialect, pprof::Timing)>,
  /// This thread's (name, id, os id) and the other threads' traces, when merging.
  threads: Option<((String, String, Option<String>), Vec<formats::threads::ThreadTrace>)>,
  /// Map frames through source maps (with these runtime maps), or not (None).
  source_maps: Option<Vec<symbolize::RuntimeMap>>,
  /// Where the hot lines' text may come from.
  text: symbolize::TextFrom,
  /// Hide selfprof's own frames (None: keep them).
  hide: Option<trace::profiler_frames::ProfilerFiles>,
  /// The longest JSON this build may hand JS as one string (`json_string_limit`).
  json_limit: usize,
}

/// The longest JSON a build hands JS as one string: what V8's strings hold, or less when
/// SELFPROF_TEST_JS_STRING_BYTES says so (a test-only knob: the tests reach the bound
/// without building a 512 MiB trace). Read on the main thread, as a build is set up.
fn json_string_limit() -> usize {
  std::env::var("SELFPROF_TEST_JS_STRING_BYTES")
    .ok()
    .and_then(|v| v.parse::<usize>().ok())
    .map_or(formats::limits::JS_STRING_BYTES, |n| {
      n.min(formats::limits::JS_STRING_BYTES)
    })
}

/// The error for JSON longer than a JS string holds: it names the formats that give it whole.
fn json_too_long(what: &str, bytes: usize) -> Error {
  Error::from_reason(format!(
    "{what} is {:.1} MiB of JSON, more than a JS string holds: stop({{ format: 'json-gzip' }}) or 'pprof' gives it whole",
    bytes as f64 / f64::from(1 << 20)
  ))
}

impl BuildTrace {
  fn build(&mut self) -> Result<trace::Trace> {
    let mut join = match self.joined.take() {
      Some(shared) => {
        let mut state = lock(&shared.state);
        shared.catch_up(&mut state)?;
        state
          .join
          .take()
          .ok_or_else(|| Error::from_reason("this recording's trace was already built"))?
      }
      None => Join::new(self.window, self.labels),
    };
    // Sets looked up while V8 stopped (`labels_prefetch`), then the store for the rest.
    let prefetched = self
      .labels
      .as_ref()
      .and_then(|src| src.recording)
      .and_then(capture::labels::take_prefetched);
    if let Some(mut prefetched) = prefetched {
      join.set_lookup(Box::new(move |id| {
        prefetched
          .take(id)
          .or_else(|| capture::labels::lookup(id))
          .map(trace::Labels::from)
      }));
    }
    for chunk in &mut self.chunks {
      let profile = chunk.profile()?;
      join
        .add(&profile, chunk.stride, self.window.until_ms)
        .map_err(invalid)?;
    }
    let mut trace = join.finish();
    if let (Some(meta), Some(path)) = (trace.metadata.as_mut(), self.labels.and_then(|l| l.path)) {
      meta.label_path = Some(path);
    }
    Ok(trace)
  }
}

impl Task for BuildTrace {
  type Output = Vec<Vec<u8>>;
  type JsValue = Either3<String, Buffer, Vec<Buffer>>;

  fn compute(&mut self) -> Result<Self::Output> {
    self.build_into(|task, trace| task.encode(trace))?
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
/// are joined to the SIGPROF ring for labels and CPU time. With `join`, the trace builds on
/// from the segments it joined (`chunks` are the recording's rest).
#[napi(ts_return_type = "Promise<string | Buffer | Buffer[]>")]
pub fn build_trace(
  chunks: Vec<TraceChunk>,
  options: TraceOptions,
  join: Option<ClassInstance<TraceJoin>>,
) -> Result<AsyncTask<BuildTrace>> {
  Ok(AsyncTask::new(BuildTrace::new(chunks, options, join.as_deref())?))
}

/// A trace as `trace::Parts`: what JS builds its trace object from in slices (the samples
/// and the contexts' label values as columns, the small tables as JSON).
#[napi(object)]
pub struct TraceParts {
  pub head: String,
  pub key_sets: String,
  pub context_keys: Uint32Array,
  pub values: Vec<String>,
  pub value_ends: Int32Array,
  pub shared: Vec<String>,
  pub piece_contexts: Uint32Array,
  pub timestamp: Float64Array,
  pub stack: Int32Array,
  pub marker: Uint8Array,
  pub context: Int32Array,
  pub cpu_time: Float64Array,
}

pub struct BuildParts(BuildTrace);

impl Task for BuildParts {
  type Output = trace::Parts;
  type JsValue = TraceParts;

  fn compute(&mut self) -> Result<Self::Output> {
    // The trace object's samples and labels come as arrays; its frames, stacks and the
    // rest as one JSON string.
    self.0.build_into(|task, trace| {
      let parts = trace.parts();
      if parts.head.len() > task.json_limit {
        return Err(json_too_long(
          "the trace's frames, stacks and line ticks",
          parts.head.len(),
        ));
      }
      Ok(parts)
    })?
  }

  fn resolve(&mut self, _env: Env, p: Self::Output) -> Result<Self::JsValue> {
    Ok(TraceParts {
      head: p.head,
      key_sets: p.key_sets,
      context_keys: Uint32Array::new(p.context_keys),
      values: p.values,
      value_ends: Int32Array::new(p.value_ends),
      shared: p.shared,
      piece_contexts: Uint32Array::new(p.piece_contexts),
      timestamp: Float64Array::new(p.timestamp),
      stack: Int32Array::new(p.stack),
      marker: Uint8Array::new(p.marker),
      context: Int32Array::new(p.context),
      cpu_time: Float64Array::new(p.cpu_time),
    })
  }
}

/// `build_trace` for the trace object: resolves to `TraceParts`, built off the main thread.
#[napi(ts_return_type = "Promise<TraceParts>")]
pub fn build_trace_parts(
  chunks: Vec<TraceChunk>,
  options: TraceOptions,
  join: Option<ClassInstance<TraceJoin>>,
) -> Result<AsyncTask<BuildParts>> {
  Ok(AsyncTask::new(BuildParts(BuildTrace::new(
    chunks,
    options,
    join.as_deref(),
  )?)))
}

/// `build_trace` on the calling thread, for process exit (`'exit'` handlers cannot
/// wait for the thread pool). Returns each format's bytes (`format`, then `alsoFormat`).
#[napi]
pub fn build_trace_sync(
  chunks: Vec<TraceChunk>,
  options: TraceOptions,
  join: Option<ClassInstance<TraceJoin>>,
) -> Result<Vec<Buffer>> {
  let mut task = BuildTrace::new(chunks, options, join.as_deref())?;
  Ok(task.compute()?.into_iter().map(Buffer::from).collect())
}

impl BuildTrace {
  /// Builds the trace (source-mapped and merged as asked) and makes `out` of it. The
  /// event loop waits for that with nothing to do, so of a large trace the label sets only
  /// this recording could reference are let go on a thread beside it (3.5–6 ms at ~80k
  /// sets), and the trace is dropped on another once `out` is made (~1.5 ms at ~100k
  /// samples). The trace holds what it needs of the label sets (shared buffers).
  fn build_into<T>(&mut self, out: impl FnOnce(&BuildTrace, &trace::Trace) -> T) -> Result<T> {
    let trace = self.build()?;
    let release = self.release_labels();
    if trace.contexts.len() < parallel::PARALLEL_CONTEXTS {
      release();
      let trace = self.completed(trace);
      return Ok(out(self, &trace));
    }
    let made = || {
      let trace = self.completed(trace);
      let made = out(self, &trace);
      (trace, made)
    };
    let ((trace, made), ()) = parallel::both(made, "selfprof-release", release);
    // A thread that could not start drops it here, with the closure.
    let _ = std::thread::Builder::new()
      .name("selfprof-drop".into())
      .spawn(move || drop(trace));
    Ok(made)
  }

  /// The trace in each format asked for, then in each backend dialect.
  fn encode(&self, trace: &trace::Trace) -> Result<Vec<Vec<u8>>> {
    let io = |e: std::io::Error| Error::from_reason(e.to_string());
    self
      .formats
      .iter()
      .map(|format| match format {
        Format::Json => {
          let json = trace.to_json().into_bytes();
          if json.len() > self.json_limit {
            return Err(json_too_long("the trace", json.len()));
          }
          Ok(json)
        }
        Format::JsonGzip => trace.to_json_gzip().map_err(io),
        Format::Pprof(timing) => pprof::encode_gzip(trace, timing).map_err(io),
      })
      .chain(
        self
          .dialects
          .iter()
          .map(|(dialect, timing)| formats::dialect::encode(trace, timing, dialect).map_err(io)),
      )
      .collect()
  }

  /// What lets go of the label sets and drained records only this recording could
  /// reference, once its trace is built (which holds what it needs of them).
  fn release_labels(&self) -> impl FnOnce() + Clone + Send + 'static {
    let recording = match self.labels {
      Some(LabelSource {
        tid,
        recording: Some(token),
        ..
      }) => Some((tid, token)),
      _ => None,
    };
    move || {
      if let Some((tid, token)) = recording {
        capture::labels::recording_built(tid, token);
        capture::drain::recording_built(tid, token);
      }
    }
  }

  /// The built trace source-mapped and merged with the other threads', as asked.
  fn completed(&mut self, mut trace: trace::Trace) -> trace::Trace {
    // Before mapping: selfprof's files have no maps, and their lines' text is not wanted.
    if let Some(files) = &self.hide {
      trace::profiler_frames::hide(&mut trace, files);
    }
    symbolize::build(&mut trace, self.source_maps.as_deref(), self.text);
    if let Some(((name, id, os_id), others)) = self.threads.take() {
      let mut all = vec![formats::threads::ThreadTrace {
        trace,
        name,
        id,
        os_id,
        offset_ms: 0.0,
      }];
      all.extend(others);
      trace = formats::threads::merge(all);
    }
    trace
  }

  fn new(chunks: Vec<TraceChunk>, options: TraceOptions, joined: Option<&TraceJoin>) -> Result<BuildTrace> {
    let timing = pprof::Timing {
      time_origin_unix_ms: options.time_origin_unix_ms.unwrap_or(0.0),
      start_ms: options.from_ms.unwrap_or(0.0),
      end_ms: options.until_ms.unwrap_or(0.0),
      period_ns: options.period_ns.unwrap_or(0.0) as i64,
      // Joined by time, samples have no CPU time of their own: no cpu sample type (rather
      // than one of zeros).
      cpu: options.cpu_time.unwrap_or(true) && !capture::BY_TIME,
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
    let window = window_of(&options);
    let chunks = Chunk::all(chunks)?;
    let labels = label_source(&options);
    let dialects = match options.dialects.as_deref() {
      Some(json) => formats::dialect::parse(json).map_err(invalid)?,
      None => Vec::new(),
    };
    let threads = match (options.thread_name, options.threads) {
      (None, None) => None,
      (name, others) => Some((
        (
          name.unwrap_or_else(|| "Main Event Loop".into()),
          options.thread_id.unwrap_or_else(|| "0".into()),
          options.os_thread_id,
        ),
        others
          .unwrap_or_default()
          .into_iter()
          .map(thread_trace)
          .collect::<Result<Vec<_>>>()?,
      )),
    };
    let source_maps = runtime_maps(options.source_maps, options.script_maps);
    let hide = profiler_files(options.profiler_frames, options.profiler_roots);
    let text = match options.source_text.as_deref() {
      Some("scripts") => symbolize::TextFrom::MapsAndScripts,
      Some("maps") => symbolize::TextFrom::Maps,
      _ => symbolize::TextFrom::Nothing,
    };
    Ok(BuildTrace {
      chunks,
      window,
      formats,
      labels,
      joined: joined.map(|j| Arc::clone(&j.shared)),
      dialects: dialects.into_iter().map(|d| (d, timing)).collect(),
      threads,
      source_maps,
      text,
      hide,
      json_limit: json_string_limit(),
    })
  }
}

/// The window of the build `options` describe (every recording's stride is its own).
fn window_of(options: &TraceOptions) -> Window {
  let defaults = Window::default();
  Window {
    origin_us: options.origin_us,
    from_ms: options.from_ms.unwrap_or(defaults.from_ms),
    until_ms: options.until_ms.unwrap_or(defaults.until_ms),
    max_samples: options.max_samples.map_or(defaults.max_samples, |n| n as usize),
    stride: 1,
  }
}

/// Where the build `options` describe takes labels from, if it does.
fn label_source(options: &TraceOptions) -> Option<LabelSource> {
  options.labels.unwrap_or(false).then(|| LabelSource {
    tid: options.tid.unwrap_or_else(signal::gettid),
    cpu_start_ns: options.cpu_start_ns.map(|n| n as u64),
    recording: options.recording,
    path: match options.label_path.as_deref() {
      Some("context-frame") => Some(trace::LabelPath::ContextFrame),
      Some("async-hooks") => Some(trace::LabelPath::AsyncHooks),
      Some("switch-log") => Some(trace::LabelPath::SwitchLog),
      _ => None,
    },
  })
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

/// The indices of a thread cell's elements (`signal::slot`), and its queue's length.
#[napi(object)]
pub struct CellSlots {
  pub context: u32,
  pub generation: u32,
  pub sampled: u32,
  pub recordings: u32,
  pub queue_head: u32,
  pub queue_tail: u32,
  pub last_pushed: u32,
  pub logging: u32,
  pub queue: u32,
  pub queue_len: u32,
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

/// One V8 version's layouts the frame reader uses (`capture::context_frame::LAYOUTS`).
#[napi(object)]
pub struct FrameLayoutInfo {
  pub v8: String,
  pub cped: u32,
  pub map_instance_type: u32,
  pub js_object_header: u32,
  pub fixed_array_header: u32,
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
/// while the caller stops V8 (see `capture::labels::prefetch`). Its build takes what it
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

pub struct Prefetch {
  tid: i32,
  token: u32,
  from_ns: u64,
}

impl Task for Prefetch {
  type Output = ();
  type JsValue = ();

  fn compute(&mut self) -> Result<()> {
    // The records the build will read (`drain::records`), as their label-set ids.
    let ids = capture::drain::contexts(self.tid, self.from_ns, u64::MAX);
    capture::labels::prefetch(self.tid, self.token, ids);
    Ok(())
  }

  fn resolve(&mut self, _env: Env, _output: ()) -> Result<()> {
    Ok(())
  }
}

/// `{ saved, bytes, dropped, unbuilt, prefetched, prefetchHits, records }`: label sets
/// kept, their bytes, sets dropped to the bounds, unbuilt recordings, recordings with
/// prefetched sets not yet taken, sets builds found prefetched, brackets in the drained
/// logs (process-wide; for tests and diagnostics).
#[napi(object)]
pub struct LabelStats {
  pub saved: u32,
  pub bytes: f64,
  pub dropped: f64,
  pub unbuilt: u32,
  /// Recordings whose prefetched sets (`labelsPrefetch`) no build has taken yet.
  pub prefetched: u32,
  /// Sets builds found prefetched, since the process started.
  pub prefetch_hits: f64,
  /// Brackets the drained logs hold (every thread's), for recordings not built yet.
  pub records: f64,
}

#[napi]
pub fn label_stats() -> LabelStats {
  let (saved, bytes, dropped, unbuilt) = capture::labels::stats();
  let (prefetched, prefetch_hits) = capture::labels::prefetch_stats();
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

/// `{ maps, bytes, others, evicted, parsed }`: parsed source maps cached process-wide, the
/// memory they hold, scripts remembered without a usable map, entries dropped to the
/// bounds, maps parsed so far.
#[napi(object)]
pub struct SourceMapCacheStats {
  pub maps: u32,
  pub bytes: f64,
  pub others: u32,
  pub evicted: f64,
  pub parsed: f64,
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
  if let Some(files) = profiler_files(profiler_frames, profiler_roots) {
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
  let threads = threads.into_iter().map(thread_trace).collect::<Result<Vec<_>>>()?;
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

/// One thread's sampling heap profile, flattened (`lib/capture/heap.js`), and who it is.
#[napi(object)]
pub struct HeapChunk {
  pub profile: String,
  /// When it was taken, in ms since the thread's time origin.
  pub at_ms: Option<f64>,
  pub name: Option<String>,
  pub id: Option<String>,
  pub os_id: Option<String>,
  /// The thread's time origin minus the first chunk's (ms).
  pub offset_ms: Option<f64>,
}

#[napi(object)]
pub struct HeapOptions {
  /// The period the profile closes: Unix ms of its start, and its length in ms.
  pub start_unix_ms: f64,
  pub duration_ms: f64,
  pub interval_bytes: f64,
  /// Also the weighted trace, as json-gzip (after the pprof).
  pub trace: Option<bool>,
  /// As `TraceOptions::dialects`: one more pprof per backend (an OTLP one is empty).
  pub dialects: Option<String>,
  /// As `TraceOptions`: map frames through source maps (default true), with the maps Node
  /// holds for scripts compiled in memory.
  pub source_maps: Option<bool>,
  pub script_maps: Option<Vec<ScriptMap>>,
  /// As `TraceOptions`: keep selfprof's own frames (default false: its allocations are
  /// `(selfprof)`'s), and the package roots selfprof was loaded from.
  pub profiler_frames: Option<bool>,
  pub profiler_roots: Option<Vec<String>>,
}

pub struct BuildHeap {
  chunks: Vec<HeapChunk>,
  timing: formats::heap::HeapTiming,
  trace: bool,
  dialects: Vec<formats::dialect::Dialect>,
  source_maps: Option<Vec<symbolize::RuntimeMap>>,
  hide: Option<trace::profiler_frames::ProfilerFiles>,
}

/// The runtime maps to symbolize with, or None when mapping is off.
fn runtime_maps(on: Option<bool>, maps: Option<Vec<ScriptMap>>) -> Option<Vec<symbolize::RuntimeMap>> {
  on.unwrap_or(true).then(|| {
    maps
      .unwrap_or_default()
      .into_iter()
      .map(|m| symbolize::RuntimeMap {
        url: m.url,
        json: m.map,
      })
      .collect()
  })
}

impl BuildHeap {
  fn new(chunks: Vec<HeapChunk>, options: HeapOptions) -> Result<BuildHeap> {
    let dialects = match options.dialects.as_deref() {
      Some(json) => formats::dialect::parse(json).map_err(invalid)?,
      None => Vec::new(),
    };
    Ok(BuildHeap {
      chunks,
      timing: formats::heap::HeapTiming {
        time_nanos: (options.start_unix_ms * 1e6) as i64,
        duration_nanos: (options.duration_ms.max(0.0) * 1e6) as i64,
        interval_bytes: options.interval_bytes as i64,
      },
      trace: options.trace.unwrap_or(false),
      dialects,
      source_maps: runtime_maps(options.source_maps, options.script_maps),
      hide: profiler_files(options.profiler_frames, options.profiler_roots),
    })
  }

  fn compute_all(&self) -> Result<Vec<Vec<u8>>> {
    let named = self.chunks.len() > 1 || self.chunks.iter().any(|c| c.name.is_some());
    let mut threads = Vec::with_capacity(self.chunks.len());
    for c in &self.chunks {
      let mut trace = formats::heap::from_flat_json(&c.profile, c.at_ms.unwrap_or(0.0)).map_err(invalid)?;
      if let Some(files) = &self.hide {
        trace::profiler_frames::hide(&mut trace, files);
      }
      if let Some(runtime) = &self.source_maps {
        symbolize::symbolize(&mut trace, runtime);
      }
      threads.push(formats::threads::ThreadTrace {
        trace,
        name: c.name.clone().unwrap_or_else(|| "Main Event Loop".into()),
        id: c.id.clone().unwrap_or_else(|| "0".into()),
        os_id: c.os_id.clone(),
        offset_ms: c.offset_ms.unwrap_or(0.0),
      });
    }
    let trace = if named {
      formats::threads::merge(threads)
    } else {
      threads.pop().map(|t| t.trace).unwrap_or_default()
    };
    let io = |e: std::io::Error| Error::from_reason(e.to_string());
    let mut out =
      vec![formats::heap::encode_gzip(&trace, &self.timing, &formats::dialect::Dialect::Plain).map_err(io)?];
    if self.trace {
      out.push(trace.to_json_gzip().map_err(io)?);
    }
    for d in &self.dialects {
      out.push(match d {
        formats::dialect::Dialect::Otlp(options) => {
          // OTLP's request: the period from its Unix start, the interval in bytes as period.
          let start_ms = self.timing.time_nanos as f64 / 1e6;
          let timing = pprof::Timing {
            time_origin_unix_ms: start_ms,
            start_ms: 0.0,
            end_ms: self.timing.duration_nanos as f64 / 1e6,
            period_ns: self.timing.interval_bytes,
            cpu: false,
            lines: false,
          };
          formats::otlp::encode(&trace, &timing, options)
        }
        d => formats::heap::encode_gzip(&trace, &self.timing, d).map_err(io)?,
      });
    }
    Ok(out)
  }
}

impl Task for BuildHeap {
  type Output = Vec<Vec<u8>>;
  type JsValue = Vec<Buffer>;

  fn compute(&mut self) -> Result<Self::Output> {
    self.compute_all()
  }

  fn resolve(&mut self, _env: Env, output: Self::Output) -> Result<Self::JsValue> {
    Ok(output.into_iter().map(Buffer::from).collect())
  }
}

/// Encodes the sampling heap profiles of one or more threads as one pprof heap profile
/// (`inuse_objects/count`, `inuse_space/bytes`), off the main thread: resolves to
/// `[pprof, trace?, ...one per dialect]`.
#[napi(ts_return_type = "Promise<Buffer[]>")]
pub fn build_heap_profile(chunks: Vec<HeapChunk>, options: HeapOptions) -> Result<AsyncTask<BuildHeap>> {
  Ok(AsyncTask::new(BuildHeap::new(chunks, options)?))
}

/// `build_heap_profile` on the calling thread (process exit).
#[napi]
pub fn build_heap_profile_sync(chunks: Vec<HeapChunk>, options: HeapOptions) -> Result<Vec<Buffer>> {
  let task = BuildHeap::new(chunks, options)?;
  Ok(task.compute_all()?.into_iter().map(Buffer::from).collect())
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
