//! The bindings' work on the thread pool (`AsyncTask`s): each runs a module's work in
//! `compute` and hands its result to JS in `resolve`.

use super::objects::TraceParts;
use crate::formats::heap::build::HeapBuild;
use crate::trace::build::{Format, TraceBuild};
use crate::trace::segments::SegmentJoiner;
use napi::bindgen_prelude::{Buffer, Either3};
use napi::{Env, Error, Result, Task};
use std::sync::Arc;

/// A recording's trace in its formats (`buildTrace`).
pub struct BuildTrace(pub TraceBuild);

impl Task for BuildTrace {
  type Output = Vec<Vec<u8>>;
  type JsValue = Either3<String, Buffer, Vec<Buffer>>;

  fn compute(&mut self) -> Result<Self::Output> {
    self.0.encoded()
  }

  fn resolve(&mut self, _env: Env, mut output: Self::Output) -> Result<Self::JsValue> {
    if output.len() != 1 {
      return Ok(Either3::C(output.into_iter().map(Buffer::from).collect()));
    }
    let bytes = output.pop().unwrap_or_default();
    match self.0.formats.first() {
      Some(Format::Json) => String::from_utf8(bytes)
        .map(Either3::A)
        .map_err(|e| Error::from_reason(e.to_string())),
      _ => Ok(Either3::B(bytes.into())),
    }
  }
}

/// A recording's trace as the columns JS makes its trace object from (`buildTraceParts`).
pub struct BuildTraceColumns(pub TraceBuild);

impl Task for BuildTraceColumns {
  type Output = crate::trace::columns::TraceColumns;
  type JsValue = TraceParts;

  fn compute(&mut self) -> Result<Self::Output> {
    self.0.columns()
  }

  fn resolve(&mut self, _env: Env, parts: Self::Output) -> Result<Self::JsValue> {
    Ok(parts.into())
  }
}

/// The segments queued on a `TraceJoin`, joined (`TraceJoin.add`).
pub struct JoinSegments(pub Arc<SegmentJoiner>);

impl Task for JoinSegments {
  type Output = ();
  type JsValue = ();

  fn compute(&mut self) -> Result<()> {
    self.0.join_queued()
  }

  fn resolve(&mut self, _env: Env, _output: ()) -> Result<()> {
    Ok(())
  }
}

/// Threads' heap profiles as one pprof heap profile (`buildHeapProfile`).
pub struct BuildHeap(pub HeapBuild);

impl Task for BuildHeap {
  type Output = Vec<Vec<u8>>;
  type JsValue = Vec<Buffer>;

  fn compute(&mut self) -> Result<Self::Output> {
    self.0.encoded()
  }

  fn resolve(&mut self, _env: Env, output: Self::Output) -> Result<Self::JsValue> {
    Ok(output.into_iter().map(Buffer::from).collect())
  }
}

/// A recording's label sets looked up ahead of its build (`labelsPrefetch`).
pub struct Prefetch {
  pub tid: i32,
  pub token: u32,
  pub from_ns: u64,
}

impl Task for Prefetch {
  type Output = ();
  type JsValue = ();

  fn compute(&mut self) -> Result<()> {
    crate::capture::prefetch::prefetch_recording(self.tid, self.token, self.from_ns);
    Ok(())
  }

  fn resolve(&mut self, _env: Env, _output: ()) -> Result<()> {
    Ok(())
  }
}
