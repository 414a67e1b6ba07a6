//! A heap profile built off the main thread (`buildHeapProfile` in `src/lib.rs`): each
//! thread's flattened sampling heap profile as a weighted trace, selfprof's frames hidden,
//! source-mapped, the threads merged, then encoded as a pprof heap profile, the trace
//! (json-gzip) if asked, and one profile per backend dialect.

use super::HeapTiming;
use crate::formats::{self, dialect::Dialect, pprof, threads::ThreadTrace};
use crate::trace::profiler_frames::{self, ProfilerFiles};
use crate::{invalid, symbolize};
use napi::{Error, Result};

/// One thread's sampling heap profile, flattened (`lib/capture/heap.js`), and who it is.
pub struct HeapInput {
  pub profile: String,
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
    for c in &self.inputs {
      let mut trace = super::from_flat_json(&c.profile, c.at_ms).map_err(invalid)?;
      if let Some(files) = &self.hide {
        profiler_frames::hide(&mut trace, files);
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
    let io = |e: std::io::Error| Error::from_reason(e.to_string());
    let mut out = vec![super::encode_gzip(&trace, &self.timing, &Dialect::Plain).map_err(io)?];
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
        d => super::encode_gzip(&trace, &self.timing, d).map_err(io)?,
      });
    }
    Ok(out)
  }
}
