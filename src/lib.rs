//! selfprof's native side. This file holds only the napi bindings; the work is in
//! the modules it names.

pub mod trace;
pub mod v8_profile;

use napi::bindgen_prelude::{AsyncTask, Buffer, Either};
use napi::{Env, Error, Result, Status, Task};
use napi_derive::napi;
use trace::{TraceBuilder, Window};
use v8_profile::CpuProfile;

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
  /// `"json"` (default) or `"json-gzip"`.
  pub format: Option<String>,
}

pub struct BuildTrace {
  profile_json: String,
  window: Window,
  gzip: bool,
}

impl Task for BuildTrace {
  type Output = Vec<u8>;
  type JsValue = Either<String, Buffer>;

  fn compute(&mut self) -> Result<Self::Output> {
    let invalid = |e: &dyn std::fmt::Display| Error::new(Status::InvalidArg, e.to_string());
    let profile = CpuProfile::from_json(&self.profile_json).map_err(|e| invalid(&e))?;
    let mut builder = TraceBuilder::new();
    builder.add_profile(&profile, &self.window).map_err(|e| invalid(&e))?;
    let trace = builder.finish();
    if self.gzip {
      trace.to_json_gzip().map_err(|e| Error::from_reason(e.to_string()))
    } else {
      Ok(trace.to_json().into_bytes())
    }
  }

  fn resolve(&mut self, _env: Env, output: Self::Output) -> Result<Self::JsValue> {
    if self.gzip {
      Ok(Either::B(output.into()))
    } else {
      String::from_utf8(output)
        .map(Either::A)
        .map_err(|e| Error::from_reason(e.to_string()))
    }
  }
}

/// Converts a V8 CPU profile (the JSON of `Profiler.stop`'s `profile`) into a
/// JS Self-Profiling trace, off the main thread. Resolves to the trace's JSON
/// text, or to gzip'd JSON bytes for `format: "json-gzip"`.
#[napi(ts_return_type = "Promise<string | Buffer>")]
pub fn build_trace(profile_json: String, options: TraceOptions) -> Result<AsyncTask<BuildTrace>> {
  let gzip = match options.format.as_deref() {
    None | Some("json") => false,
    Some("json-gzip") => true,
    Some(other) => {
      return Err(Error::new(
        Status::InvalidArg,
        format!("unknown trace format {other:?}: expected \"json\" or \"json-gzip\""),
      ))
    }
  };
  let defaults = Window::default();
  let window = Window {
    origin_us: options.origin_us,
    from_ms: options.from_ms.unwrap_or(defaults.from_ms),
    until_ms: options.until_ms.unwrap_or(defaults.until_ms),
    max_samples: options.max_samples.map_or(defaults.max_samples, |n| n as usize),
  };
  Ok(AsyncTask::new(BuildTrace {
    profile_json,
    window,
    gzip,
  }))
}
