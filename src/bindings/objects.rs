//! The objects JS hands the bindings and gets back (`#[napi(object)]`; their TypeScript
//! shapes are in `binding.d.ts`), and their conversion into the modules' own types.

use crate::formats::heap::build::{HeapBuild, HeapData, HeapInput};
use crate::formats::{self, pprof, threads::ThreadTrace};
use crate::trace::build::{Format, ProfileInput, ThreadMerge, TraceBuild};
use crate::trace::join::LabelSource;
use crate::trace::profiler_frames::ProfilerFiles;
use crate::trace::segments::SegmentJoiner;
use crate::trace::{self, Window};
use crate::{capture, invalid, symbolize};
use napi::bindgen_prelude::{Buffer, Either, Float64Array, Int32Array, Uint32Array, Uint8Array};
use napi::Result;
use napi_derive::napi;
use std::sync::Arc;

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

/// One V8 recording of a trace: the JSON of `Profiler.stop`'s `profile`, and the
/// stride to take its samples at (the profiler's interval / the sampler's).
#[napi(object)]
pub struct TraceChunk {
  /// V8's profile as JSON; its `samples` and `timeDeltas` may come apart, as typed arrays
  /// (a recording's are nearly all of its JSON: making and parsing them is most of it).
  pub profile: String,
  pub stride: Option<u32>,
  pub samples: Option<Uint32Array>,
  pub time_deltas: Option<Float64Array>,
}

/// A trace as `trace::columns::TraceColumns`: what JS builds its trace object from in slices (the samples
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

impl From<trace::columns::TraceColumns> for TraceParts {
  fn from(p: trace::columns::TraceColumns) -> TraceParts {
    TraceParts {
      head: p.tables,
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
    }
  }
}

/// One thread's sampling heap profile and who it is: flattened JSON from the inspector
/// (`lib/capture/heap.js`), or the bytes `heapProfileRead` gave with its scripts' URLs.
#[napi(object)]
pub struct HeapChunk {
  pub profile: Either<String, Uint8Array>,
  /// For bytes: the URL of each script they name by index.
  pub urls: Option<Vec<String>>,
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
  pub fresh_next: u32,
  pub fresh_end: u32,
  pub signals: u32,
  pub queue: u32,
  pub queue_len: u32,
  pub depths: u32,
  pub depth_count: u32,
  pub depth_words: u32,
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

/// A sampling heap profile read through V8's C++ API (`heapProfileRead`): the bytes of its
/// flat form (`formats::heap::flat`) and the names V8 gave the scripts they index.
#[napi(object)]
pub struct HeapRead {
  pub profile: Buffer,
  pub scripts: Vec<String>,
}

/// Where this build reads V8's `AllocationProfile` (`capture::heap_profile::LAYOUT`, bytes
/// and vtable slots), and the V8 versions it reads it on, for the check against each
/// Node's headers (`scripts/check-v8-layouts.js`).
#[napi(object)]
pub struct HeapLayoutInfo {
  pub v8: Vec<String>,
  pub node_size: u32,
  pub name: u32,
  pub script_name: u32,
  pub script_id: u32,
  pub line_number: u32,
  pub column_number: u32,
  pub children: u32,
  pub allocations: u32,
  pub allocation_size: u32,
  pub allocation_count: u32,
  pub vector_size: u32,
  pub vtable_root: u32,
  pub vtable_delete: u32,
}

impl HeapLayoutInfo {
  pub fn of_build() -> HeapLayoutInfo {
    let l = capture::heap_profile::LAYOUT;
    HeapLayoutInfo {
      v8: capture::heap_profile::V8_VERSIONS
        .iter()
        .map(|v| v.to_string())
        .collect(),
      node_size: l.node_size as u32,
      name: l.name as u32,
      script_name: l.script_name as u32,
      script_id: l.script_id as u32,
      line_number: l.line_number as u32,
      column_number: l.column_number as u32,
      children: l.children as u32,
      allocations: l.allocations as u32,
      allocation_size: l.allocation_size as u32,
      allocation_count: l.allocation_count as u32,
      vector_size: l.vector_size as u32,
      vtable_root: l.vtable_root as u32,
      vtable_delete: l.vtable_delete as u32,
    }
  }
}

impl LabelStats {
  /// The label store's, the prefetches' and the drained logs' figures now.
  pub fn now() -> LabelStats {
    let store = capture::labels::stats();
    LabelStats {
      saved: store.sets as u32,
      bytes: store.bytes as f64,
      dropped: store.dropped as f64,
      unbuilt: store.unbuilt as u32,
      prefetched: capture::prefetch::pending() as u32,
      prefetch_hits: capture::prefetch::hits() as f64,
      records: capture::drain::records_held() as f64,
    }
  }
}

impl From<symbolize::CacheStats> for SourceMapCacheStats {
  fn from(s: symbolize::CacheStats) -> SourceMapCacheStats {
    SourceMapCacheStats {
      maps: s.maps as u32,
      bytes: s.bytes as f64,
      others: s.others as u32,
      evicted: s.evicted as f64,
      parsed: s.parsed as f64,
    }
  }
}

impl CellSlots {
  /// The slots as `signal::slot` numbers them.
  pub fn from_signal() -> CellSlots {
    use capture::signal::{slot, DEPTH_COUNT, DEPTH_WORDS, QUEUE_LEN};
    CellSlots {
      context: slot::CONTEXT as u32,
      generation: slot::GENERATION as u32,
      sampled: slot::SAMPLED as u32,
      recordings: slot::RECORDINGS as u32,
      queue_head: slot::QUEUE_HEAD as u32,
      queue_tail: slot::QUEUE_TAIL as u32,
      last_pushed: slot::LAST_PUSHED as u32,
      logging: slot::LOGGING as u32,
      fresh_next: slot::FRESH_NEXT as u32,
      fresh_end: slot::FRESH_END as u32,
      signals: slot::SIGNALS as u32,
      queue: slot::QUEUE as u32,
      queue_len: QUEUE_LEN as u32,
      depths: slot::DEPTHS as u32,
      depth_count: DEPTH_COUNT as u32,
      depth_words: DEPTH_WORDS as u32,
    }
  }
}

impl From<&capture::context_frame::Layout> for FrameLayoutInfo {
  fn from(l: &capture::context_frame::Layout) -> FrameLayoutInfo {
    FrameLayoutInfo {
      v8: l.v8.to_string(),
      cped: l.cped as u32,
      map_instance_type: l.map_instance_type as u32,
      js_object_header: l.js_object_header as u32,
      fixed_array_header: l.fixed_array_header as u32,
    }
  }
}

/// What hides selfprof's own frames, unless `show` (the `profilerFrames` option).
pub fn profiler_files(show: Option<bool>, roots: Option<Vec<String>>) -> Option<ProfilerFiles> {
  (!show.unwrap_or(false)).then(|| ProfilerFiles::new(roots.unwrap_or_default()))
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

/// The backend dialects of a `dialects` option (none when absent).
fn dialects(json: Option<&str>) -> Result<Vec<formats::dialect::Dialect>> {
  match json {
    Some(json) => formats::dialect::parse(json).map_err(invalid),
    None => Ok(Vec::new()),
  }
}

impl ThreadInput {
  /// The thread's trace, read.
  pub fn read(self) -> Result<ThreadTrace> {
    let trace = formats::read_input(&self.trace).map_err(invalid)?.trace;
    Ok(ThreadTrace {
      trace,
      name: self.name,
      id: self.id,
      os_id: self.os_id,
      offset_ms: self.offset_ms.unwrap_or(0.0),
    })
  }
}

/// The recordings to build from, checked: samples and time deltas come together.
pub fn profile_inputs(chunks: Vec<TraceChunk>) -> Result<Vec<ProfileInput>> {
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
      Ok(ProfileInput {
        json: c.profile,
        stride: c.stride.unwrap_or(1).max(1) as usize,
        samples,
      })
    })
    .collect()
}

impl TraceOptions {
  /// The window of the build these options describe (every recording's stride is its own).
  pub fn window(&self) -> Window {
    let defaults = Window::default();
    Window {
      origin_us: self.origin_us,
      from_ms: self.from_ms.unwrap_or(defaults.from_ms),
      until_ms: self.until_ms.unwrap_or(defaults.until_ms),
      max_samples: self.max_samples.map_or(defaults.max_samples, |n| n as usize),
      stride: 1,
    }
  }

  /// Where the build these options describe takes labels from, if it does.
  pub fn label_source(&self) -> Option<LabelSource> {
    self.labels.unwrap_or(false).then(|| LabelSource {
      tid: self.tid.unwrap_or_else(capture::signal::gettid),
      cpu_start_ns: self.cpu_start_ns.map(|n| n as u64),
      recording: self.recording,
      path: match self.label_path.as_deref() {
        Some("context-frame") => Some(trace::LabelPath::ContextFrame),
        Some("async-hooks") => Some(trace::LabelPath::AsyncHooks),
        Some("switch-log") => Some(trace::LabelPath::SwitchLog),
        _ => None,
      },
    })
  }

  /// The build of `chunks` these options describe, on from the segments `joined` joined.
  pub fn build(self, chunks: Vec<TraceChunk>, joined: Option<&Arc<SegmentJoiner>>) -> Result<TraceBuild> {
    let timing = pprof::Timing {
      time_origin_unix_ms: self.time_origin_unix_ms.unwrap_or(0.0),
      start_ms: self.from_ms.unwrap_or(0.0),
      end_ms: self.until_ms.unwrap_or(0.0),
      period_ns: self.period_ns.unwrap_or(0.0) as i64,
      // Joined by time, samples have no CPU time of their own: no cpu sample type (rather
      // than one of zeros).
      cpu: self.cpu_time.unwrap_or(true) && !capture::BY_TIME,
      lines: self.lines.unwrap_or(false),
    };
    let mut formats = vec![Format::parse(self.format.as_deref(), timing)?];
    if let Some(also) = self.also_format.as_deref() {
      formats.push(Format::parse(Some(also), timing)?);
    }
    let window = self.window();
    let profiles = profile_inputs(chunks)?;
    let labels = self.label_source();
    let dialects = dialects(self.dialects.as_deref())?;
    let threads = match (self.thread_name, self.threads) {
      (None, None) => None,
      (name, others) => Some(ThreadMerge {
        name: name.unwrap_or_else(|| "Main Event Loop".into()),
        id: self.thread_id.unwrap_or_else(|| "0".into()),
        os_id: self.os_thread_id,
        others: others
          .unwrap_or_default()
          .into_iter()
          .map(ThreadInput::read)
          .collect::<Result<Vec<_>>>()?,
      }),
    };
    let source_maps = runtime_maps(self.source_maps, self.script_maps);
    let hide = profiler_files(self.profiler_frames, self.profiler_roots);
    let text = match self.source_text.as_deref() {
      Some("scripts") => symbolize::TextFrom::MapsAndScripts,
      Some("maps") => symbolize::TextFrom::Maps,
      _ => symbolize::TextFrom::Nothing,
    };
    Ok(TraceBuild {
      profiles,
      window,
      formats,
      labels,
      segments: joined.cloned(),
      dialects: dialects.into_iter().map(|d| (d, timing)).collect(),
      threads,
      source_maps,
      text,
      hide,
      json_limit: trace::build::json_string_limit(),
    })
  }
}

impl HeapOptions {
  /// The build of `chunks` these options describe.
  pub fn build(self, chunks: Vec<HeapChunk>) -> Result<HeapBuild> {
    Ok(HeapBuild {
      dialects: dialects(self.dialects.as_deref())?,
      inputs: chunks
        .into_iter()
        .map(|c| HeapInput {
          profile: match c.profile {
            Either::A(json) => HeapData::Json(json),
            Either::B(bytes) => HeapData::Binary {
              bytes: bytes.to_vec(),
              urls: c.urls.unwrap_or_default(),
            },
          },
          at_ms: c.at_ms.unwrap_or(0.0),
          name: c.name,
          id: c.id,
          os_id: c.os_id,
          offset_ms: c.offset_ms.unwrap_or(0.0),
        })
        .collect(),
      timing: formats::heap::HeapTiming {
        time_nanos: (self.start_unix_ms * 1e6) as i64,
        duration_nanos: (self.duration_ms.max(0.0) * 1e6) as i64,
        interval_bytes: self.interval_bytes as i64,
      },
      trace: self.trace.unwrap_or(false),
      source_maps: runtime_maps(self.source_maps, self.script_maps),
      hide: profiler_files(self.profiler_frames, self.profiler_roots),
    })
  }
}
