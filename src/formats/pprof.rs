//! The pprof encoder: a trace as a gzip'd `profile.proto` (github.com/google/pprof,
//! proto/profile.proto), the format Datadog's agent, Pyroscope and `go tool pprof` read.
//!
//! Messages are declared by hand with prost's derive (only the fields selfprof writes;
//! field numbers as in profile.proto). Each trace frame is one function and one
//! location; each sample becomes a pprof sample with values `[sample/count,
//! wall/nanoseconds, cpu/nanoseconds]` and its labels as pprof labels. V8's pseudo-frames
//! come back as frames named `(idle)`, `(garbage collector)` and `(program)` so that wall
//! time adds up to the recording's duration.
//!
//! One trace is encoded once per backend: a [`Dialect`] says how that backend names the
//! count sample type and which label keys and values it joins on (see `dialect.rs`).

pub use crate::formats::dialect::Dialect;
use crate::trace::{Marker, Metadata, Trace};
use prost::Message;
use std::collections::HashMap;
use std::io::Write;

#[derive(Clone, PartialEq, Message)]
pub struct Profile {
  #[prost(message, repeated, tag = "1")]
  pub sample_type: Vec<ValueType>,
  #[prost(message, repeated, tag = "2")]
  pub sample: Vec<Sample>,
  #[prost(message, repeated, tag = "4")]
  pub location: Vec<Location>,
  #[prost(message, repeated, tag = "5")]
  pub function: Vec<Function>,
  #[prost(string, repeated, tag = "6")]
  pub string_table: Vec<String>,
  #[prost(int64, tag = "9")]
  pub time_nanos: i64,
  #[prost(int64, tag = "10")]
  pub duration_nanos: i64,
  #[prost(message, optional, tag = "11")]
  pub period_type: Option<ValueType>,
  #[prost(int64, tag = "12")]
  pub period: i64,
  /// String ids of free-form comments (`go tool pprof -comments`).
  #[prost(int64, repeated, tag = "13")]
  pub comment: Vec<i64>,
  #[prost(int64, tag = "14")]
  pub default_sample_type: i64,
}

#[derive(Clone, PartialEq, Message)]
pub struct ValueType {
  #[prost(int64, tag = "1")]
  pub r#type: i64,
  #[prost(int64, tag = "2")]
  pub unit: i64,
}

#[derive(Clone, PartialEq, Message)]
pub struct Sample {
  #[prost(uint64, repeated, tag = "1")]
  pub location_id: Vec<u64>,
  #[prost(int64, repeated, tag = "2")]
  pub value: Vec<i64>,
  #[prost(message, repeated, tag = "3")]
  pub label: Vec<Label>,
}

#[derive(Clone, PartialEq, Message)]
pub struct Label {
  #[prost(int64, tag = "1")]
  pub key: i64,
  #[prost(int64, tag = "2")]
  pub str: i64,
  /// Numeric labels (Datadog's span ids and sample end times).
  #[prost(int64, tag = "3")]
  pub num: i64,
  #[prost(int64, tag = "4")]
  pub num_unit: i64,
}

#[derive(Clone, PartialEq, Message)]
pub struct Location {
  #[prost(uint64, tag = "1")]
  pub id: u64,
  #[prost(message, repeated, tag = "4")]
  pub line: Vec<Line>,
}

#[derive(Clone, PartialEq, Message)]
pub struct Line {
  #[prost(uint64, tag = "1")]
  pub function_id: u64,
  #[prost(int64, tag = "2")]
  pub line: i64,
  #[prost(int64, tag = "3")]
  pub column: i64,
}

#[derive(Clone, PartialEq, Message)]
pub struct Function {
  #[prost(uint64, tag = "1")]
  pub id: u64,
  #[prost(int64, tag = "2")]
  pub name: i64,
  #[prost(int64, tag = "3")]
  pub system_name: i64,
  #[prost(int64, tag = "4")]
  pub filename: i64,
  #[prost(int64, tag = "5")]
  pub start_line: i64,
}

/// Where the trace sits in time and how it was sampled.
#[derive(Debug, Clone, Copy)]
pub struct Timing {
  /// `performance.timeOrigin`: Unix time in ms.
  pub time_origin_unix_ms: f64,
  /// When the recording started and stopped, in ms since the time origin.
  pub start_ms: f64,
  pub end_ms: f64,
  /// The sampling interval in ns.
  pub period_ns: i64,
  /// Whether to write the `cpu/nanoseconds` sample type.
  pub cpu: bool,
}

#[derive(Default)]
pub(crate) struct Strings {
  table: Vec<String>,
  ids: HashMap<String, i64>,
}

impl Strings {
  pub(crate) fn new() -> Self {
    let mut s = Strings::default();
    s.id("");
    s
  }

  pub(crate) fn id(&mut self, s: &str) -> i64 {
    if let Some(id) = self.ids.get(s) {
      return *id;
    }
    let id = self.table.len() as i64;
    self.table.push(s.to_owned());
    self.ids.insert(s.to_owned(), id);
    id
  }
}

fn ms_to_ns(ms: f64) -> i64 {
  (ms * 1e6).round() as i64
}

/// Builds the pprof profile of a trace, labels as selfprof names them.
pub fn profile(trace: &Trace, timing: &Timing) -> Profile {
  profile_for(trace, timing, &Dialect::Plain)
}

/// Builds the pprof profile of a trace in a backend's dialect.
pub fn profile_for(trace: &Trace, timing: &Timing, dialect: &Dialect) -> Profile {
  let mut strings = Strings::new();
  let value_type = |strings: &mut Strings, t: &str, u: &str| ValueType {
    r#type: strings.id(t),
    unit: strings.id(u),
  };
  let mut sample_type = vec![
    value_type(&mut strings, dialect.count_type(), "count"),
    value_type(&mut strings, "wall", "nanoseconds"),
  ];
  if timing.cpu {
    sample_type.push(value_type(&mut strings, "cpu", "nanoseconds"));
  }
  let period_type = Some(value_type(&mut strings, "wall", "nanoseconds"));

  // One function and one location per frame, ids = frame index + 1; pseudo-frames after.
  let mut function = Vec::with_capacity(trace.frames.len() + 4);
  let mut location = Vec::with_capacity(trace.frames.len() + 4);
  let mut add = |strings: &mut Strings, name: &str, file: &str, line: Option<u32>, column: Option<u32>| {
    let id = function.len() as u64 + 1;
    let name = strings.id(if name.is_empty() { "(anonymous)" } else { name });
    function.push(Function {
      id,
      name,
      system_name: name,
      filename: strings.id(file),
      start_line: line.map_or(0, i64::from),
    });
    location.push(Location {
      id,
      line: vec![Line {
        function_id: id,
        line: line.map_or(0, i64::from),
        column: column.map_or(0, i64::from),
      }],
    });
    id
  };
  for f in &trace.frames {
    let file = f
      .resource_id
      .and_then(|r| trace.resources.get(r as usize))
      .map_or("", String::as_str);
    add(&mut strings, &f.name, file, f.line, f.column);
  }
  let idle = add(&mut strings, "(idle)", "", None, None);
  let gc = add(&mut strings, "(garbage collector)", "", None, None);
  let program = add(&mut strings, "(program)", "", None, None);
  let root = add(&mut strings, "(root)", "", None, None);

  // Label keys and values, per context, as the dialect names them.
  let labels: Vec<Vec<Label>> = trace
    .contexts
    .iter()
    .map(|c| {
      dialect
        .labels(&c.labels)
        .into_iter()
        .map(|l| l.encode(&mut strings))
        .collect()
    })
    .collect();
  // Labels every sample carries (a thread's name and id).
  let every: Vec<Label> = dialect
    .every_sample()
    .into_iter()
    .map(|l| l.encode(&mut strings))
    .collect();
  let end_timestamp = dialect
    .end_timestamp_key()
    .map(|k| (strings.id(k), strings.id("nanoseconds")));
  let unix_ns = |strings_ms: f64| {
    (timing.time_origin_unix_ms.trunc() as i64) * 1_000_000 + ms_to_ns(timing.time_origin_unix_ms.fract() + strings_ms)
  };

  let mut sample = Vec::with_capacity(trace.samples.len());
  let mut prev_ms = timing.start_ms;
  for s in &trace.samples {
    // Wall time: the time since the previous sample, so that wall time adds up to the
    // time the samples cover even when V8 sampled late.
    let wall_ns = ms_to_ns((s.timestamp - prev_ms).max(0.0));
    prev_ms = s.timestamp;
    let mut location_id = Vec::new();
    let mut at = s.stack_id;
    while let Some(id) = at {
      match trace.stacks.get(id as usize) {
        Some(st) => {
          location_id.push(u64::from(st.frame_id) + 1);
          at = st.parent_id;
        }
        None => break,
      }
    }
    match s.marker {
      Some(Marker::Idle) => location_id.insert(0, idle),
      Some(Marker::Gc) => location_id.insert(0, gc),
      Some(Marker::Other) => location_id.insert(0, program),
      None if location_id.is_empty() => location_id.push(root),
      None => {}
    }
    let mut value = vec![1, wall_ns];
    if timing.cpu {
      value.push(s.cpu_time.map_or(0, ms_to_ns));
    }
    let mut label: Vec<Label> = s
      .context_id
      .and_then(|c| labels.get(c as usize))
      .cloned()
      .unwrap_or_default();
    label.extend(every.iter().cloned());
    if let Some((key, unit)) = end_timestamp {
      label.push(Label {
        key,
        num: unix_ns(s.timestamp),
        num_unit: unit,
        ..Label::default()
      });
    }
    sample.push(Sample {
      location_id,
      value,
      label,
    });
  }

  // How many samples the SIGPROF join labeled, so that a reader of the pprof alone can
  // tell "no labels by design" (V8 sampled without a signal) from labels lost.
  let comment = trace
    .metadata
    .iter()
    .map(|m| strings.id(&metadata_comment(m)))
    .collect();

  Profile {
    sample_type,
    sample,
    location,
    function,
    string_table: strings.table,
    // Whole ms as integers, so the ns are not lost to f64 rounding at 1.7e18.
    time_nanos: unix_ns(timing.start_ms),
    duration_nanos: ms_to_ns((timing.end_ms - timing.start_ms).max(0.0)),
    period_type,
    period: timing.period_ns,
    default_sample_type: 1,
    comment,
  }
}

const METADATA_COMMENT: &str = "selfprof:";

/// `selfprof: matchedSamples=… betweenSignalsSamples=… unmatchedSamples=…`.
fn metadata_comment(m: &Metadata) -> String {
  let mut s = format!(
    "{METADATA_COMMENT} matchedSamples={} betweenSignalsSamples={} unmatchedSamples={}",
    m.matched_samples, m.between_signals_samples, m.unmatched_samples
  );
  if m.labels_lost_samples > 0 {
    s.push_str(&format!(" labelsLostSamples={}", m.labels_lost_samples));
  }
  s
}

/// The join counts of a comment `metadata_comment` wrote, if `comment` is one.
pub fn parse_metadata_comment(comment: &str) -> Option<Metadata> {
  let rest = comment.strip_prefix(METADATA_COMMENT)?;
  let mut m = Metadata::default();
  for pair in rest.split_whitespace() {
    let (key, value) = pair.split_once('=')?;
    let n: usize = value.parse().ok()?;
    match key {
      "matchedSamples" => m.matched_samples = n,
      "betweenSignalsSamples" => m.between_signals_samples = n,
      "unmatchedSamples" => m.unmatched_samples = n,
      "labelsLostSamples" => m.labels_lost_samples = n,
      _ => {}
    }
  }
  Some(m)
}

/// The trace as a gzip'd pprof profile.
pub fn encode_gzip(trace: &Trace, timing: &Timing) -> std::io::Result<Vec<u8>> {
  encode_gzip_for(trace, timing, &Dialect::Plain)
}

/// The trace as a gzip'd pprof profile in a backend's dialect.
pub fn encode_gzip_for(trace: &Trace, timing: &Timing, dialect: &Dialect) -> std::io::Result<Vec<u8>> {
  let bytes = profile_for(trace, timing, dialect).encode_to_vec();
  let mut gz = flate2::write::GzEncoder::new(Vec::with_capacity(bytes.len() / 4), flate2::Compression::default());
  gz.write_all(&bytes)?;
  gz.finish()
}

#[cfg(test)]
mod tests;
