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
//!
//! The messages are in `proto`, the string table in `strings`, the comments selfprof
//! writes and reads back in `comments`, samples' source lines in `lines`.

pub use crate::formats::dialect::Dialect;
use crate::trace::columns::VALUES_TRIED;
use crate::trace::{Marker, Sample as TraceSample, Trace};
use prost::Message;
use std::collections::HashMap;

mod comments;
mod lines;
mod proto;
mod strings;

use comments::{block_comments, metadata_comment, LINES_COMMENT};
pub use comments::{parse_block_comments, parse_lines_comment, parse_metadata_comment};
pub use lines::LinePieces;
pub use proto::{Function, Label, Line, Location, Profile, Sample, ValueType};
use strings::intern_labels;
pub(crate) use strings::Strings;

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
  /// Whether to put samples at line-level locations from the trace's line ticks (per-line
  /// totals are V8's; the line of one sample is an apportionment, so it is asked for).
  pub lines: bool,
}

fn ms_to_ns(ms: f64) -> i64 {
  (ms * 1e6).round() as i64
}

/// Unix time in ns of `ms` after a time origin of `origin_unix_ms`: whole ms as integers,
/// so the ns are not lost to f64 rounding at 1.7e18.
fn unix_ns(origin_unix_ms: f64, ms: f64) -> i64 {
  (origin_unix_ms.trunc() as i64) * 1_000_000 + ms_to_ns(origin_unix_ms.fract() + ms)
}

/// What a pprof sample stands for when it is not one trace sample: a decoded pprof's
/// aggregates (its count, wall time and CPU time), so re-encoding never expands them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Weight {
  pub count: i64,
  pub wall_ns: i64,
  pub cpu_ns: i64,
}

/// Everything of a profile but its samples, and what encoding a sample needs.
struct Encoder<'a> {
  /// The profile but its samples and string table.
  header: Profile,
  strings: Strings<'a>,
  labels: Vec<Label>,
  /// Each context's labels: a range of `labels`.
  label_ranges: Vec<(u32, u32)>,
  idle: u64,
  gc: u64,
  program: u64,
  root: u64,
  cpu: bool,
  /// Line-level locations: (frame, line) -> location id (see `LinePieces`).
  line_location: HashMap<(u32, u32), u64>,
  /// Labels every sample carries in the dialect (a thread's name and id).
  every: Vec<Label>,
  /// The dialect's per-sample end time label: (key, unit) string ids.
  end_timestamp: Option<(i64, i64)>,
  /// Unix time in ns of a time in ms since the time origin.
  origin_unix_ms: f64,
}

impl<'a> Encoder<'a> {
  /// `blocks`: the trace's samples are points in time (not a pprof's aggregates): its
  /// event-loop blocks go in the comments.
  fn new(trace: &'a Trace, timing: &Timing, dialect: &Dialect, blocks: bool) -> Encoder<'a> {
    let label_strings: usize = trace.contexts.iter().map(|c| 2 * c.labels.len()).sum();
    // A label's key is one of a few; its value may be new (a span id per context), and
    // then it is appended, not looked up (`value_id`).
    let named = trace.frames.len() + trace.resources.len() + 32;
    let mut strings = Strings::with_capacities(named + label_strings / 2, named + VALUES_TRIED as usize);
    let value_type = |strings: &mut Strings<'a>, t: &'static str, u: &'static str| ValueType {
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
    let mut add = |strings: &mut Strings<'a>, name: &'a str, file: &'a str, line: Option<u32>, column: Option<u32>| {
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

    // Line-level locations, after those: one per (frame, line) of the trace's line ticks,
    // holding the line in its frame's function.
    let first_line_location = location.len() as u64 + 1;
    let mut line_location: HashMap<(u32, u32), u64> = HashMap::new();
    for l in trace.line_ticks.iter().filter(|_| timing.lines) {
      let Some(frame) = trace.stacks.get(l.stack_id as usize).map(|s| s.frame_id) else {
        continue;
      };
      line_location.entry((frame, l.line)).or_insert_with(|| {
        let id = location.len() as u64 + 1;
        location.push(Location {
          id,
          line: vec![Line {
            function_id: u64::from(frame) + 1,
            line: i64::from(l.line),
            column: 0,
          }],
        });
        id
      });
    }

    // Label keys and values, per context, as the dialect names them: one array, and each
    // context's range in it.
    let (labels, label_ranges) = intern_labels(&trace.contexts, label_strings / 2, dialect, &mut strings);
    let every: Vec<Label> = dialect
      .every_sample()
      .into_iter()
      .map(|l| l.encode(&mut strings))
      .collect();
    let end_timestamp = dialect
      .end_timestamp_key()
      .map(|k| (strings.id(k), strings.id("nanoseconds")));

    // How many samples the SIGPROF join labeled, so that a reader of the pprof alone can
    // tell "no labels by design" (V8 sampled without a signal) from labels lost.
    let mut comment: Vec<i64> = trace.metadata.iter().map(|m| strings.id(metadata_comment(m))).collect();
    if !line_location.is_empty() {
      comment.push(strings.id(format!("{LINES_COMMENT}{first_line_location}")));
    }
    if blocks {
      comment.extend(block_comments(trace, timing).into_iter().map(|c| strings.id(c)));
    }

    let header = Profile {
      sample_type,
      sample: Vec::new(),
      location,
      function,
      string_table: Vec::new(),
      time_nanos: unix_ns(timing.time_origin_unix_ms, timing.start_ms),
      duration_nanos: ms_to_ns((timing.end_ms - timing.start_ms).max(0.0)),
      period_type,
      period: timing.period_ns,
      default_sample_type: 1,
      comment,
    };
    Encoder {
      header,
      strings,
      labels,
      label_ranges,
      idle,
      gc,
      program,
      root,
      cpu: timing.cpu,
      line_location,
      every,
      end_timestamp,
      origin_unix_ms: timing.time_origin_unix_ms,
    }
  }

  /// The pprof sample of trace sample `s`, with values `[count, wall, cpu?]`.
  /// Fills `out` (reused from sample to sample: no allocation per sample once warm).
  /// Says which of its parts are the same for every sample of its stack and context.
  /// With `stacks_cached`, a sample whose locations are its stack's gets none: the
  /// `SampleWriter` has them.
  fn sample(&self, trace: &Trace, s: &TraceSample, weight: Weight, stacks_cached: bool, out: &mut Sample) -> Reuse {
    let Sample {
      location_id,
      value,
      label,
    } = out;
    location_id.clear();
    value.clear();
    label.clear();
    // A marker's sample is not its stack's: the marker's location comes first.
    let own_stack = s.stack_id.filter(|_| s.marker.is_none());
    if !(stacks_cached && own_stack.is_some()) {
      location_id.extend(trace.frames_leaf_first(s.stack_id).map(|f| u64::from(f) + 1));
    }
    match s.marker {
      Some(Marker::Idle) => location_id.insert(0, self.idle),
      Some(Marker::Gc) => location_id.insert(0, self.gc),
      Some(Marker::Other) => location_id.insert(0, self.program),
      None if location_id.is_empty() => location_id.push(self.root),
      None => {}
    }
    value.extend([weight.count, weight.wall_ns]);
    if self.cpu {
      value.push(weight.cpu_ns);
    }
    let mut reuse = Reuse {
      stack: own_stack,
      context: None,
    };
    if let Some(&(start, end)) = s.context_id.and_then(|c| self.label_ranges.get(c as usize)) {
      label.extend_from_slice(&self.labels[start as usize..end as usize]);
      reuse.context = s.context_id.map(|c| (c, (end - start) as usize));
    }
    // A merged trace's samples carry their own thread's labels: those win over `every`.
    let own = label.len();
    for l in &self.every {
      if !label[..own].iter().any(|o| o.key == l.key) {
        label.push(l.clone());
      }
    }
    if let Some((key, num_unit)) = self.end_timestamp {
      label.push(Label {
        key,
        num: unix_ns(self.origin_unix_ms, s.timestamp),
        num_unit,
        ..Label::default()
      });
    }
    reuse
  }

  /// Each sample with its weight: the given ones, or one trace sample each (count 1, the
  /// wall time since the previous sample, so that wall time adds up to the time the
  /// samples cover even when V8 sampled late, and its CPU time). A sample whose count is
  /// dealt to lines (`LinePieces`) becomes one pprof sample per line, at its line-level
  /// location, with its wall and CPU time split in proportion.
  /// With `stacks_cached`, as `sample` says.
  fn each(
    &self,
    trace: &Trace,
    start_ms: f64,
    weights: Option<&[Weight]>,
    stacks_cached: bool,
    mut f: impl FnMut(&Sample, Reuse),
  ) {
    let mut sample = Sample::default();
    let lines = if self.line_location.is_empty() {
      None
    } else {
      LinePieces::deal(trace, weights)
    };
    let mut prev_ms = start_ms;
    for (i, s) in trace.samples.iter().enumerate() {
      let weight = match weights.and_then(|w| w.get(i)) {
        Some(w) => *w,
        None => {
          let wall_ns = ms_to_ns((s.timestamp - prev_ms).max(0.0));
          prev_ms = s.timestamp;
          Weight {
            count: 1,
            wall_ns,
            cpu_ns: s.cpu_time.map_or(0, ms_to_ns),
          }
        }
      };
      let pieces = lines.as_ref().map_or(&[][..], |l| l.of(i));
      if pieces.is_empty() {
        let reuse = self.sample(trace, s, weight, stacks_cached, &mut sample);
        f(&sample, reuse);
        continue;
      }
      let (mut wall_left, mut cpu_left, mut count_left) = (weight.wall_ns, weight.cpu_ns, weight.count);
      for (k, &(line, count)) in pieces.iter().enumerate() {
        let last = k + 1 == pieces.len();
        let part = |total: i64, left: i64| {
          if last {
            left
          } else {
            (i128::from(total) * i128::from(count) / i128::from(weight.count.max(1))) as i64
          }
        };
        let piece = Weight {
          count: if last { count_left } else { count },
          wall_ns: part(weight.wall_ns, wall_left),
          cpu_ns: part(weight.cpu_ns, cpu_left),
        };
        wall_left -= piece.wall_ns;
        cpu_left -= piece.cpu_ns;
        count_left -= piece.count;
        let mut reuse = self.sample(trace, s, piece, false, &mut sample);
        if let (Some(line), Some(leaf), Some(stack)) = (line, sample.location_id.first_mut(), s.stack_id) {
          let frame = trace.stacks[stack as usize].frame_id;
          if let Some(id) = self.line_location.get(&(frame, line)) {
            *leaf = *id;
            reuse.stack = None;
          }
        }
        f(&sample, reuse);
      }
    }
  }
}

/// What of a pprof sample is the same for every sample that shares it: its locations are
/// exactly its stack's (`stack`), its first labels exactly its context's (`context`: the
/// context and how many labels).
#[derive(Clone, Copy, Default)]
struct Reuse {
  stack: Option<u32>,
  context: Option<(u32, usize)>,
}

/// Writes samples as `Profile.sample` (field 2) entries, byte for byte as prost encodes
/// them, but each stack's packed location ids and each context's labels encoded once and
/// copied after: a labeled recording's samples share few stacks, and a request's
/// samples share its labels, so most of a sample is a copy.
struct SampleWriter {
  /// Per stack id, where its encoded `location_id` field is in `stack_bytes` (`UNSET`).
  stacks: Vec<(u32, u32)>,
  stack_bytes: Vec<u8>,
  /// Per context, where its encoded labels are in `context_bytes` (`UNSET`).
  contexts: Vec<(u32, u32)>,
  context_bytes: Vec<u8>,
  body: Vec<u8>,
}

const UNSET: (u32, u32) = (u32::MAX, 0);

/// Appends a packed repeated varint field (nothing if empty, as prost does).
fn put_packed(tag: u32, values: impl Iterator<Item = u64> + Clone, out: &mut Vec<u8>) {
  let len: usize = values.clone().map(prost::encoding::encoded_len_varint).sum();
  if len == 0 {
    return;
  }
  prost::encoding::encode_key(tag, prost::encoding::WireType::LengthDelimited, out);
  prost::encoding::encode_varint(len as u64, out);
  for v in values {
    prost::encoding::encode_varint(v, out);
  }
}

/// Appends labels as `Sample.label` (field 3) entries.
fn put_labels(labels: &[Label], out: &mut Vec<u8>) {
  for l in labels {
    prost::encoding::message::encode(3, l, out);
  }
}

impl SampleWriter {
  fn new(trace: &Trace) -> SampleWriter {
    SampleWriter {
      stacks: vec![UNSET; trace.stacks.len()],
      stack_bytes: Vec::new(),
      contexts: vec![UNSET; trace.contexts.len()],
      context_bytes: Vec::new(),
      body: Vec::new(),
    }
  }

  /// The bytes cached at `range` in `bytes`, encoding them first with `fill` if unset.
  fn cached<'b>(
    ranges: &mut [(u32, u32)],
    bytes: &'b mut Vec<u8>,
    index: u32,
    fill: impl FnOnce(&mut Vec<u8>),
  ) -> &'b [u8] {
    let Some(range) = ranges.get_mut(index as usize) else {
      return &[];
    };
    if *range == UNSET {
      let at = bytes.len();
      fill(bytes);
      *range = (at as u32, (bytes.len() - at) as u32);
    }
    &bytes[range.0 as usize..(range.0 + range.1) as usize]
  }

  /// Writes sample `s` of `trace` (without its locations if they are its stack's: see
  /// `Encoder::sample`).
  fn write(&mut self, trace: &Trace, s: &Sample, reuse: Reuse, out: &mut Vec<u8>) {
    let body = &mut self.body;
    body.clear();
    match reuse.stack {
      Some(stack) if (stack as usize) < self.stacks.len() => {
        let frames =
          |out: &mut Vec<u8>| put_packed(1, trace.frames_leaf_first(Some(stack)).map(|f| u64::from(f) + 1), out);
        body.extend_from_slice(Self::cached(&mut self.stacks, &mut self.stack_bytes, stack, frames))
      }
      _ => put_packed(1, s.location_id.iter().copied(), body),
    }
    put_packed(2, s.value.iter().map(|&v| v as u64), body);
    let shared = match reuse.context {
      Some((c, n)) if (c as usize) < self.contexts.len() && n <= s.label.len() => {
        let labels = |out: &mut Vec<u8>| put_labels(&s.label[..n], out);
        body.extend_from_slice(Self::cached(&mut self.contexts, &mut self.context_bytes, c, labels));
        n
      }
      _ => 0,
    };
    put_labels(&s.label[shared..], body);
    prost::encoding::encode_key(2, prost::encoding::WireType::LengthDelimited, out);
    prost::encoding::encode_varint(body.len() as u64, out);
    out.extend_from_slice(body);
  }
}

/// Builds the pprof profile of a trace, samples and all (small profiles and tests;
/// `encode_gzip` streams instead), labels as selfprof names them.
pub fn profile(trace: &Trace, timing: &Timing) -> Profile {
  profile_for(trace, timing, &Dialect::Plain)
}

/// `profile` in a backend's dialect.
pub fn profile_for(trace: &Trace, timing: &Timing, dialect: &Dialect) -> Profile {
  let encoder = Encoder::new(trace, timing, dialect, true);
  let mut sample = Vec::with_capacity(trace.samples.len());
  encoder.each(trace, timing.start_ms, None, false, |s, _| sample.push(s.clone()));
  Profile {
    sample,
    string_table: encoder.strings.owned(),
    ..encoder.header
  }
}

/// The trace as a gzip'd pprof profile.
pub fn encode_gzip(trace: &Trace, timing: &Timing) -> std::io::Result<Vec<u8>> {
  encode_gzip_for(trace, timing, &Dialect::Plain, None)
}

/// The trace as a gzip'd pprof profile, each sample standing for its weight if given.
pub fn encode_weighted_gzip(trace: &Trace, timing: &Timing, weights: Option<&[Weight]>) -> std::io::Result<Vec<u8>> {
  encode_gzip_for(trace, timing, &Dialect::Plain, weights)
}

/// The trace as a gzip'd pprof profile in a backend's dialect, each sample standing for
/// its weight if given. Streamed: the samples go into the gzip stream one at a time
/// (protobuf lets a repeated field's elements follow the rest), so memory holds the
/// compressed output, not a decoded copy of every sample's stack.
pub fn encode_gzip_for(
  trace: &Trace,
  timing: &Timing,
  dialect: &Dialect,
  weights: Option<&[Weight]>,
) -> std::io::Result<Vec<u8>> {
  let encoder = Encoder::new(trace, timing, dialect, weights.is_none());
  // The header, the string table, then the samples (protobuf lets a repeated field's
  // elements follow the rest), deflated on a second thread as they are encoded.
  super::gzip::gzip(flate2::Compression::fast(), |pipe| {
    pipe.buf().extend_from_slice(&encoder.header.encode_to_vec());
    encoder.strings.encode(pipe.buf());
    pipe.flush_full()?;
    let mut failed = None;
    let mut writer = SampleWriter::new(trace);
    encoder.each(trace, timing.start_ms, weights, true, |sample, reuse| {
      if failed.is_some() {
        return;
      }
      writer.write(trace, sample, reuse, pipe.buf());
      if let Err(e) = pipe.flush_full() {
        failed = Some(e);
      }
    });
    failed.map_or(Ok(()), Err)
  })
}

#[cfg(test)]
mod tests;
