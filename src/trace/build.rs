//! A recording's trace built at its stop, off the main thread (`buildTrace*` in
//! `src/lib.rs`): its V8 profiles joined to the handler's brackets (`trace::join`, on from
//! the segments joined while it ran: `trace::segments`), selfprof's frames hidden, frames
//! source-mapped, other threads merged in, then encoded in each format asked for (JSON,
//! json-gzip, pprof, a backend's dialect) or as the columns JS makes its trace object from
//! (`Trace::columns`).

use super::join::{Join, LabelSource};
use super::profiler_frames::{self, ProfilerFiles};
use super::segments::SegmentJoiner;
use super::v8_profile::CpuProfile;
use super::{LabelPath, Labels, Trace, Window};
use crate::formats::{self, dialect::Dialect, pprof, threads::ThreadTrace};
use crate::{capture, invalid, parallel, symbolize};
use napi::{Error, Result};
use std::sync::Arc;

/// One V8 recording to build from: its profile's JSON, the stride to take its samples at
/// (the profiler's interval / the sampler's), and its samples when they came apart from
/// the JSON (as typed arrays: parsing them out of JSON costs more than the rest of it).
pub struct ProfileInput {
  pub json: String,
  pub stride: usize,
  pub samples: Option<(Vec<u32>, Vec<f64>)>,
}

impl ProfileInput {
  /// The recording's profile (its samples moved out of the input).
  pub fn profile(&mut self) -> Result<CpuProfile> {
    let mut profile = CpuProfile::from_json(&self.json).map_err(invalid)?;
    if let Some((samples, time_deltas)) = self.samples.take() {
      profile.samples = samples;
      profile.time_deltas = time_deltas;
    }
    Ok(profile)
  }
}

/// An encoding of the trace.
#[derive(Clone, Copy)]
pub enum Format {
  Json,
  JsonGzip,
  Pprof(pprof::Timing),
}

impl Format {
  /// The format named `name` (`json` when None), with `timing` for pprof.
  pub fn parse(name: Option<&str>, timing: pprof::Timing) -> Result<Format> {
    match name {
      None | Some("json") => Ok(Format::Json),
      Some("json-gzip") => Ok(Format::JsonGzip),
      Some("pprof") => Ok(Format::Pprof(timing)),
      Some(other) => Err(invalid(format!(
        "unknown trace format {other:?}: expected \"json\", \"json-gzip\" or \"pprof\""
      ))),
    }
  }
}

/// The recording's own thread, and the other threads' traces to merge its trace with.
pub struct ThreadMerge {
  pub name: String,
  pub id: String,
  pub os_id: Option<String>,
  pub others: Vec<ThreadTrace>,
}

/// One build: what it reads, how it joins, what it makes.
pub struct TraceBuild {
  /// The recording's profiles (the ones not joined as segments), in time order.
  pub profiles: Vec<ProfileInput>,
  pub window: Window,
  pub formats: Vec<Format>,
  pub labels: Option<LabelSource>,
  /// The segments of the recording joined while it ran, if any.
  pub segments: Option<Arc<SegmentJoiner>>,
  pub dialects: Vec<(Dialect, pprof::Timing)>,
  /// When merging: this thread and the others.
  pub threads: Option<ThreadMerge>,
  /// Map frames through source maps (with these runtime maps), or not (None).
  pub source_maps: Option<Vec<symbolize::RuntimeMap>>,
  /// Where the hot lines' text may come from.
  pub text: symbolize::TextFrom,
  /// Hide selfprof's own frames (None: keep them).
  pub hide: Option<ProfilerFiles>,
  /// The longest JSON this build may hand JS as one string (`json_string_limit`).
  pub json_limit: usize,
}

/// The longest JSON a build hands JS as one string: what V8's strings hold, or less when
/// SELFPROF_TEST_JS_STRING_BYTES says so (a test-only knob: the tests reach the bound
/// without building a 512 MiB trace). Read on the main thread, as a build is set up.
pub fn json_string_limit() -> usize {
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

impl TraceBuild {
  /// The trace in each format asked for, then in each backend dialect.
  pub fn encoded(&mut self) -> Result<Vec<Vec<u8>>> {
    self.build_into(|build, trace| build.encode(trace))?
  }

  /// The trace as the columns JS makes its trace object from: its samples and labels as
  /// arrays, its frames, stacks and the rest as one JSON string.
  pub fn columns(&mut self) -> Result<super::columns::TraceColumns> {
    self.build_into(|build, trace| {
      let columns = trace.columns();
      if columns.tables.len() > build.json_limit {
        return Err(json_too_long(
          "the trace's frames, stacks and line ticks",
          columns.tables.len(),
        ));
      }
      Ok(columns)
    })?
  }

  /// The recording's samples joined to their labels.
  fn join(&mut self) -> Result<Trace> {
    let mut join = match self.segments.take() {
      Some(segments) => segments.take()?,
      None => Join::new(self.window, self.labels),
    };
    // Sets looked up while V8 stopped (`labels_prefetch`), then the store for the rest.
    let prefetched = self
      .labels
      .as_ref()
      .and_then(|src| src.recording)
      .and_then(capture::prefetch::take_prefetched);
    if let Some(mut prefetched) = prefetched {
      join.set_lookup(Box::new(move |id| {
        prefetched
          .take(id)
          .or_else(|| capture::labels::lookup(id))
          .map(Labels::from)
      }));
    }
    for input in &mut self.profiles {
      let profile = input.profile()?;
      join
        .add(&profile, input.stride, self.window.until_ms)
        .map_err(invalid)?;
    }
    let mut trace = join.finish();
    if let (Some(meta), Some(path)) = (trace.metadata.as_mut(), self.labels.and_then(|l| l.path)) {
      meta.label_path = Some::<LabelPath>(path);
    }
    Ok(trace)
  }

  /// Builds the trace (source-mapped and merged as asked) and makes `out` of it. The
  /// event loop waits for that with nothing to do, so of a large trace the label sets only
  /// this recording could reference are let go on a thread beside it, and the trace is
  /// dropped on another once `out` is made. The trace holds what it needs of the label
  /// sets (shared buffers).
  fn build_into<T>(&mut self, out: impl FnOnce(&TraceBuild, &Trace) -> T) -> Result<T> {
    let trace = self.join()?;
    let release = self.release_labels();
    if trace.contexts.len() < parallel::PARALLEL_CONTEXTS {
      release();
      let trace = self.completed(trace);
      return Ok(out(self, &trace));
    }
    let complete_and_make = || {
      let trace = self.completed(trace);
      let output = out(self, &trace);
      (trace, output)
    };
    let ((trace, output), ()) = parallel::both(complete_and_make, "selfprof-release", release);
    // A thread that could not start drops it here, with the closure.
    let _ = std::thread::Builder::new()
      .name("selfprof-drop".into())
      .spawn(move || drop(trace));
    Ok(output)
  }

  /// The trace in each format asked for, then in each backend dialect.
  fn encode(&self, trace: &Trace) -> Result<Vec<Vec<u8>>> {
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
  fn completed(&mut self, mut trace: Trace) -> Trace {
    // Before mapping: selfprof's files have no maps, and their lines' text is not wanted.
    if let Some(files) = &self.hide {
      profiler_frames::hide(&mut trace, files);
    }
    symbolize::build(&mut trace, self.source_maps.as_deref(), self.text);
    if let Some(merge) = self.threads.take() {
      let mut all = vec![ThreadTrace {
        trace,
        name: merge.name,
        id: merge.id,
        os_id: merge.os_id,
        offset_ms: 0.0,
      }];
      all.extend(merge.others);
      trace = formats::threads::merge(all);
    }
    trace
  }
}
