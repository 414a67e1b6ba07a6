//! The pprof encoder: a trace as a gzip'd `profile.proto` (github.com/google/pprof,
//! proto/profile.proto), the format Datadog's agent, Pyroscope and `go tool pprof` read.
//!
//! Messages are declared by hand with prost's derive (only the fields selfprof writes;
//! field numbers as in profile.proto). Each trace frame is one function and one
//! location; each sample becomes a pprof sample with values `[sample/count,
//! wall/nanoseconds, cpu/nanoseconds]` and its labels as pprof labels. V8's pseudo-frames
//! come back as frames named `(idle)`, `(garbage collector)` and `(program)` so that wall
//! time adds up to the recording's duration.

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
  /// Numeric labels: read by the decoder, never written.
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
struct Strings {
  table: Vec<String>,
  ids: HashMap<String, i64>,
}

impl Strings {
  fn new() -> Self {
    let mut s = Strings::default();
    s.id("");
    s
  }

  fn id(&mut self, s: &str) -> i64 {
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

/// Builds the pprof profile of a trace.
pub fn profile(trace: &Trace, timing: &Timing) -> Profile {
  let mut strings = Strings::new();
  let value_type = |strings: &mut Strings, t: &str, u: &str| ValueType {
    r#type: strings.id(t),
    unit: strings.id(u),
  };
  let mut sample_type = vec![
    value_type(&mut strings, "sample", "count"),
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

  // Line-level locations, after those: one per (frame, line) that a sample's leaf is dealt
  // (`sample_lines`), holding the line in its frame's function.
  let first_line_location = location.len() as u64 + 1;
  let sample_line = sample_lines(trace);
  let mut line_location: HashMap<(u32, u32), u64> = HashMap::new();

  // Label keys and values, per context.
  let labels: Vec<Vec<Label>> = trace
    .contexts
    .iter()
    .map(|c| {
      c.labels
        .iter()
        .map(|(k, v)| Label {
          key: strings.id(k),
          str: strings.id(v),
          ..Label::default()
        })
        .collect()
    })
    .collect();

  let mut sample = Vec::with_capacity(trace.samples.len());
  let mut prev_ms = timing.start_ms;
  for (n, s) in trace.samples.iter().enumerate() {
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
    if let (Some(line), Some(leaf)) = (sample_line[n], location_id.first_mut()) {
      let frame = (*leaf - 1) as u32;
      *leaf = *line_location.entry((frame, line)).or_insert_with(|| {
        let id = location.len() as u64 + 1;
        location.push(Location {
          id,
          line: vec![Line {
            function_id: u64::from(frame) + 1,
            line: i64::from(line),
            column: 0,
          }],
        });
        id
      });
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
    sample.push(Sample {
      location_id,
      value,
      label: s
        .context_id
        .and_then(|c| labels.get(c as usize))
        .cloned()
        .unwrap_or_default(),
    });
  }

  // How many samples the SIGPROF join labeled, so that a reader of the pprof alone can
  // tell "no labels by design" (V8 sampled without a signal) from labels lost.
  let mut comment: Vec<i64> = trace
    .metadata
    .iter()
    .map(|m| strings.id(&metadata_comment(m)))
    .collect();
  if !line_location.is_empty() {
    comment.push(strings.id(&format!("{LINES_COMMENT}{first_line_location}")));
  }

  Profile {
    sample_type,
    sample,
    location,
    function,
    string_table: strings.table,
    // Whole ms as integers, so the ns are not lost to f64 rounding at 1.7e18.
    time_nanos: (timing.time_origin_unix_ms.trunc() as i64) * 1_000_000
      + ms_to_ns(timing.time_origin_unix_ms.fract() + timing.start_ms),
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

/// Says from which location id on locations are lines within their function (selfprof's
/// line-level locations), so that a reader can tell them from the function's own location.
const LINES_COMMENT: &str = "selfprof-lines: locations from id ";

/// The first line-level location id of a comment `profile` wrote, if `comment` is one.
pub fn parse_lines_comment(comment: &str) -> Option<u64> {
  comment.strip_prefix(LINES_COMMENT)?.parse().ok()
}

/// The source line each sample's innermost frame is put at in pprof, from the trace's line
/// ticks (`None`: no line; the frame's own location).
///
/// V8 counts lines per stack, not per sample, so the line of one sample is not known. Each
/// stack's samples (in time order) are dealt to its lines, and to "no line" for the samples
/// V8 gave none, so that the per-line counts equal the trace's line ticks exactly and each
/// line's samples are spread evenly over the stack's samples: every sample goes to the line
/// furthest behind its share so far. So per-line totals are V8's, while the line of a
/// single sample (and the lines per label) are an apportionment.
pub fn sample_lines(trace: &Trace) -> Vec<Option<u32>> {
  let mut out = vec![None; trace.samples.len()];
  if trace.line_ticks.is_empty() {
    return out;
  }
  let mut by_stack: HashMap<u32, Vec<usize>> = HashMap::new();
  for (i, s) in trace.samples.iter().enumerate() {
    if let (Some(stack), None) = (s.stack_id, s.marker) {
      by_stack.entry(stack).or_default().push(i);
    }
  }
  let mut lines: HashMap<u32, Vec<(u32, u64)>> = HashMap::new();
  for l in &trace.line_ticks {
    lines.entry(l.stack_id).or_default().push((l.line, l.ticks));
  }
  for (stack, ticks) in lines {
    let Some(samples) = by_stack.get(&stack) else {
      continue;
    };
    let n = samples.len() as u64;
    let sum: u64 = ticks.iter().map(|t| t.1).sum();
    let mut buckets: Vec<(Option<u32>, u64)> = if sum > n {
      crate::trace::scale_ticks(&ticks, n, sum)
        .into_iter()
        .map(|(l, t)| (Some(l), t))
        .collect()
    } else {
      ticks.iter().map(|&(l, t)| (Some(l), t)).collect()
    };
    let dealt: u64 = buckets.iter().map(|b| b.1).sum();
    buckets.push((None, n - dealt));
    let mut given = vec![0u64; buckets.len()];
    for (k, &i) in samples.iter().enumerate() {
      // How far behind its share each bucket is, times n.
      let behind = |b: usize| i128::from(buckets[b].1) * (k as i128 + 1) - i128::from(given[b]) * i128::from(n);
      let b = (0..buckets.len())
        .max_by(|&a, &b| behind(a).cmp(&behind(b)).then(b.cmp(&a)))
        .unwrap_or(0);
      given[b] += 1;
      out[i] = buckets[b].0;
    }
  }
  out
}

/// The trace as a gzip'd pprof profile.
pub fn encode_gzip(trace: &Trace, timing: &Timing) -> std::io::Result<Vec<u8>> {
  let bytes = profile(trace, timing).encode_to_vec();
  let mut gz = flate2::write::GzEncoder::new(Vec::with_capacity(bytes.len() / 4), flate2::Compression::default());
  gz.write_all(&bytes)?;
  gz.finish()
}

#[cfg(test)]
mod tests;
