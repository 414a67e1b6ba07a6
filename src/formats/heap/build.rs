//! A heap profile built off the main thread (`buildHeapProfile` in `src/lib.rs`): each
//! thread's flattened sampling heap profile as a weighted trace, selfprof's frames hidden,
//! source-mapped, the threads merged, then encoded as a pprof heap profile, the trace
//! (json-gzip) if asked, and one profile per backend dialect. Each pprof says in a comment
//! how the profiles were read and what hiding selfprof's own allocations left out.

use super::HeapTiming;
use crate::formats::{self, dialect::Dialect, pprof, threads::ThreadTrace};
use crate::trace::profiler_frames::{self, ProfilerFiles};
use crate::{invalid, symbolize};
use napi::{Error, Result};

/// The start of the comment that says how a heap profile was read.
pub const HEAP_COMMENT: &str = "selfprof-heap:";

/// A thread's sampling heap profile as JS hands it over (`super::flat`).
pub enum HeapData {
  /// Flattened from the inspector's profile (`lib/capture/heap.js`).
  Json(String),
  /// Read through V8's C++ API (`capture::heap_profile`); its scripts' URLs beside.
  Binary { bytes: Vec<u8>, urls: Vec<String> },
}

impl HeapData {
  /// How it was read, as the profile's comment says.
  fn read(&self) -> &'static str {
    match self {
      HeapData::Json(_) => "inspector",
      HeapData::Binary { .. } => "v8-api",
    }
  }

  fn flat(&self) -> std::result::Result<super::FlatHeap, formats::ConvertError> {
    match self {
      HeapData::Json(json) => super::FlatHeap::from_json(json),
      HeapData::Binary { bytes, urls } => super::FlatHeap::from_binary(bytes, urls),
    }
  }
}

/// One thread's sampling heap profile and who it is.
pub struct HeapInput {
  pub profile: HeapData,
  /// When it was taken, in ms since the thread's time origin.
  pub at_ms: f64,
  pub name: Option<String>,
  pub id: Option<String>,
  pub os_id: Option<String>,
  /// The thread's time origin minus the first input's (ms).
  pub offset_ms: f64,
}

/// One build: the threads' profiles and what to make of them.
pub struct HeapBuild {
  pub inputs: Vec<HeapInput>,
  pub timing: HeapTiming,
  /// Also the weighted trace, as json-gzip (after the pprof).
  pub trace: bool,
  pub dialects: Vec<Dialect>,
  /// Map frames through source maps (with these runtime maps), or not (None).
  pub source_maps: Option<Vec<symbolize::RuntimeMap>>,
  /// Hide selfprof's own frames (None: keep them).
  pub hide: Option<ProfilerFiles>,
}

impl HeapBuild {
  /// `[pprof, trace?, ...one per dialect]`.
  pub fn encoded(&self) -> Result<Vec<Vec<u8>>> {
    let named = self.inputs.len() > 1 || self.inputs.iter().any(|c| c.name.is_some());
    let mut threads = Vec::with_capacity(self.inputs.len());
    let mut hidden_bytes = 0.0;
    for c in &self.inputs {
      let flat = c.profile.flat().map_err(invalid)?;
      let mut trace = super::from_flat(&flat, c.at_ms).map_err(invalid)?;
      if let Some(files) = &self.hide {
        hidden_bytes += profiler_frames::hide(&mut trace, files).hidden_weight;
      }
      if let Some(runtime) = &self.source_maps {
        symbolize::symbolize(&mut trace, runtime);
      }
      threads.push(ThreadTrace {
        trace,
        name: c.name.clone().unwrap_or_else(|| "Main Event Loop".into()),
        id: c.id.clone().unwrap_or_else(|| "0".into()),
        os_id: c.os_id.clone(),
        offset_ms: c.offset_ms,
      });
    }
    let trace = if named {
      formats::threads::merge(threads)
    } else {
      threads.pop().map(|t| t.trace).unwrap_or_default()
    };
    let comments = [self.comment(hidden_bytes)];
    let io = |e: std::io::Error| Error::from_reason(e.to_string());
    let mut out = vec![super::encode_gzip(&trace, &self.timing, &Dialect::Plain, &comments).map_err(io)?];
    if self.trace {
      out.push(trace.to_json_gzip().map_err(io)?);
    }
    for d in &self.dialects {
      out.push(match d {
        Dialect::Otlp(options) => {
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
        d => super::encode_gzip(&trace, &self.timing, d, &comments).map_err(io)?,
      });
    }
    Ok(out)
  }

  /// `selfprof-heap: read=v8-api|inspector[,…][ hiddenBytes=N]`: how the threads' profiles
  /// were read (through V8's C++ API, or the inspector where it could not be), and the
  /// bytes of selfprof's own allocations left out.
  fn comment(&self, hidden_bytes: f64) -> String {
    let mut read: Vec<&str> = Vec::new();
    for c in &self.inputs {
      if !read.contains(&c.profile.read()) {
        read.push(c.profile.read());
      }
    }
    let mut s = format!("{HEAP_COMMENT} read={}", read.join(","));
    if hidden_bytes > 0.0 {
      s.push_str(&format!(" hiddenBytes={}", hidden_bytes.round()));
    }
    s
  }
}
