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
//! Over 600 lines: one encoder whose parts (string table, labels, samples, locations) share its tables; split, they would pass those tables around.

pub use crate::formats::dialect::Dialect;
use crate::parallel::PARALLEL_CONTEXTS;
use crate::trace::columns::{KeyValueKind, VALUES_TRIED};
use crate::trace::{Context, Marker, Metadata, Sample as TraceSample, Trace};
use prost::Message;
use std::borrow::Cow;
use std::collections::HashMap;

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
  /// Whether to put samples at line-level locations from the trace's line ticks (per-line
  /// totals are V8's; the line of one sample is an apportionment, so it is asked for).
  pub lines: bool,
}

/// The string table being built. Strings the trace holds are borrowed, not copied (a
/// recording with a span id per request has as many distinct strings as label sets).
pub(crate) struct Strings<'a> {
  table: Vec<Cow<'a, str>>,
  ids: crate::FastMap<Cow<'a, str>, i64>,
  /// Per label key (its string id): whether its values are looked up (see `value_id`).
  values: crate::FastMap<i64, KeyValueKind>,
  /// Label keys seen last, by where their text is, and their ids (see `key_id`).
  recent_keys: Vec<(usize, usize, i64)>,
}

/// Label keys `key_id` remembers by address.
const RECENT_KEYS: usize = 16;

impl<'a> Strings<'a> {
  /// Room for `n` strings, `looked_up` of them in the lookup map (values appended
  /// without a lookup need none).
  pub(crate) fn with_capacities(n: usize, looked_up: usize) -> Self {
    let mut s = Strings {
      table: Vec::with_capacity(n),
      ids: crate::FastMap::with_capacity_and_hasher(looked_up.min(n), Default::default()),
      values: Default::default(),
      recent_keys: Vec::new(),
    };
    s.id("");
    s
  }

  pub(crate) fn new() -> Self {
    Self::with_capacities(16, 16)
  }

  /// Appends `other`'s strings but its first (`""`, id 0, which both tables have) to this
  /// table; returns what an id of `other` is in this one. They are not looked up here
  /// again: one asked for after may be added a second time.
  fn append(&mut self, other: Strings<'a>) -> impl Fn(i64) -> i64 {
    let past = self.table.len() as i64 - 1;
    self.table.extend(other.table.into_iter().skip(1));
    move |id| if id == 0 { 0 } else { id + past }
  }

  /// The table, owned (for a prost message).
  pub(crate) fn into_table(self) -> Vec<String> {
    self.owned()
  }

  pub(crate) fn id(&mut self, s: impl Into<Cow<'a, str>>) -> i64 {
    let s = s.into();
    if let Some(id) = self.ids.get(s.as_ref()) {
      return *id;
    }
    let id = self.table.len() as i64;
    self.ids.insert(s.clone(), id);
    self.table.push(s);
    id
  }

  /// The id of a label key. A kept label set's keys are the label store's interned ones,
  /// so ~100k contexts name the same few keys at the same addresses: those are
  /// recognized by address (the same bytes, borrowed for as long as the table), not
  /// hashed again.
  pub(crate) fn key_id(&mut self, k: Cow<'a, str>) -> i64 {
    let Cow::Borrowed(text) = k else {
      return self.id(k);
    };
    let at = (text.as_ptr() as usize, text.len());
    if let Some(&(_, _, id)) = self.recent_keys.iter().find(|r| (r.0, r.1) == at) {
      return id;
    }
    let id = self.id(text);
    if self.recent_keys.len() < RECENT_KEYS {
      self.recent_keys.push((at.0, at.1, id));
    }
    id
  }

  /// The id of a label's value under key `key` (a string id). A key whose values are
  /// nearly all distinct, such as a span id per request, gets its values appended to the
  /// table without a lookup: the lookup of ~100k distinct values in a table of that size
  /// misses the cache each time, and was the largest part of a labeled stop's encoding.
  /// A value repeated under such a key is stored twice; the profile means the same.
  pub(crate) fn value_id(&mut self, key: i64, v: impl Into<Cow<'a, str>>) -> i64 {
    let state = self.values.get(&key).copied().unwrap_or(KeyValueKind::FIRST);
    match state {
      KeyValueKind::Repeating => return self.id(v),
      KeyValueKind::Unique => {
        self.table.push(v.into());
        return self.table.len() as i64 - 1;
      }
      KeyValueKind::Trying { .. } => {}
    }
    let before = self.table.len();
    let id = self.id(v);
    self.values.insert(key, state.after(self.table.len() > before));
    id
  }

  /// The table as prost's field holds it.
  fn owned(&self) -> Vec<String> {
    self.table.iter().map(|s| s.to_string()).collect()
  }

  /// Writes the table as `Profile.string_table` (field 6) entries.
  fn encode(&self, buf: &mut Vec<u8>) {
    for s in &self.table {
      prost::encoding::encode_key(6, prost::encoding::WireType::LengthDelimited, buf);
      prost::encoding::encode_varint(s.len() as u64, buf);
      buf.extend_from_slice(s.as_bytes());
    }
  }
}

/// Each context's labels as the dialect names them, interned in `strings`: one array, and
/// each context's range in it. Many contexts (a span id per request: nearly one per
/// sample, most of their cost a cache miss per label set) are split in two:
/// the second half is interned on a second thread into a table of its own, appended to
/// `strings` after, its ids moved past the first's (the event loop's thread waits for the
/// build meanwhile, so the core is otherwise idle). A string both
/// halves use is then in the table twice (a request's endpoint, say); the profile means
/// the same. `count`: how many labels the contexts hold (the room to make: counting
/// them again would read every label set once more).
fn intern_labels<'a>(
  contexts: &'a [Context],
  count: usize,
  dialect: &Dialect,
  strings: &mut Strings<'a>,
) -> (Vec<Label>, Vec<(u32, u32)>) {
  // Room for all of them (a second half's are appended): no copy as they grow.
  let mut labels = Vec::with_capacity(count);
  let mut ranges = Vec::with_capacity(contexts.len());
  if contexts.len() < PARALLEL_CONTEXTS {
    intern_labels_into(contexts, dialect, strings, &mut labels, &mut ranges);
    return (labels, ranges);
  }
  let (first, second) = contexts.split_at(contexts.len() / 2);
  // The second half's labels, ranges and strings (a table of its own, ~a value per set).
  let second_half = || {
    let mut own = Strings::with_capacities(second.len() + 16, 16 + VALUES_TRIED as usize);
    let (mut labels, mut ranges) = (Vec::with_capacity(count / 2 + 16), Vec::with_capacity(second.len()));
    intern_labels_into(second, dialect, &mut own, &mut labels, &mut ranges);
    (labels, ranges, own)
  };
  let ((), later) = crate::parallel::both(
    || intern_labels_into(first, dialect, strings, &mut labels, &mut ranges),
    "selfprof-labels",
    second_half,
  );
  let (later_labels, later_ranges, later_strings) = later;
  let moved = strings.append(later_strings);
  let at = labels.len() as u32;
  labels.extend(later_labels.into_iter().map(|l| Label {
    key: moved(l.key),
    str: moved(l.str),
    num: l.num,
    num_unit: moved(l.num_unit),
  }));
  ranges.extend(later_ranges.into_iter().map(|(a, b)| (a + at, b + at)));
  (labels, ranges)
}

/// Appends each context's labels to `labels`, and its range in them to `ranges`.
fn intern_labels_into<'a>(
  contexts: &'a [Context],
  dialect: &Dialect,
  strings: &mut Strings<'a>,
  labels: &mut Vec<Label>,
  ranges: &mut Vec<(u32, u32)>,
) {
  let mut out_labels = Vec::new();
  for c in contexts {
    let start = labels.len() as u32;
    dialect.labels_into(&c.labels, &mut out_labels);
    labels.extend(out_labels.drain(..).map(|l| l.encode(strings)));
    ranges.push((start, labels.len() as u32));
  }
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
  fn new(trace: &'a Trace, timing: &Timing, dialect: &Dialect) -> Encoder<'a> {
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
  let encoder = Encoder::new(trace, timing, dialect);
  let mut sample = Vec::with_capacity(trace.samples.len());
  encoder.each(trace, timing.start_ms, None, false, |s, _| sample.push(s.clone()));
  Profile {
    sample,
    string_table: encoder.strings.owned(),
    ..encoder.header
  }
}

const METADATA_COMMENT: &str = "selfprof:";

/// `selfprof: matchedSamples=… betweenSignalsSamples=… unmatchedSamples=…[ labelsLostSamples=…][ labelPath=…]`.
fn metadata_comment(m: &Metadata) -> String {
  let mut s = format!(
    "{METADATA_COMMENT} matchedSamples={} betweenSignalsSamples={} unmatchedSamples={}",
    m.matched_samples, m.between_signals_samples, m.unmatched_samples
  );
  if m.labels_lost_samples > 0 {
    s.push_str(&format!(" labelsLostSamples={}", m.labels_lost_samples));
  }
  match m.label_path {
    Some(crate::trace::LabelPath::AsyncHooks) => s.push_str(" labelPath=async-hooks"),
    Some(crate::trace::LabelPath::ContextFrame) => s.push_str(" labelPath=context-frame"),
    Some(crate::trace::LabelPath::SwitchLog) => s.push_str(" labelPath=switch-log"),
    None => {}
  }
  s
}

/// The join counts of a comment `metadata_comment` wrote, if `comment` is one.
pub fn parse_metadata_comment(comment: &str) -> Option<Metadata> {
  let rest = comment.strip_prefix(METADATA_COMMENT)?;
  let mut m = Metadata::default();
  for pair in rest.split_whitespace() {
    let (key, value) = pair.split_once('=')?;
    let count = || value.parse::<usize>().ok();
    match key {
      "matchedSamples" => m.matched_samples = count()?,
      "betweenSignalsSamples" => m.between_signals_samples = count()?,
      "unmatchedSamples" => m.unmatched_samples = count()?,
      "labelsLostSamples" => m.labels_lost_samples = count()?,
      "labelPath" => {
        m.label_path = match value {
          "async-hooks" => Some(crate::trace::LabelPath::AsyncHooks),
          "context-frame" => Some(crate::trace::LabelPath::ContextFrame),
          "switch-log" => Some(crate::trace::LabelPath::SwitchLog),
          _ => None,
        }
      }
      _ => {}
    }
  }
  Some(m)
}

/// Says from which location id on locations are lines within their function (selfprof's
/// line-level locations), so that a reader can tell them from the function's own location.
const LINES_COMMENT: &str = "selfprof-lines: locations from id ";

/// The first line-level location id of a comment the encoder wrote, if `comment` is one.
pub fn parse_lines_comment(comment: &str) -> Option<u64> {
  comment.strip_prefix(LINES_COMMENT)?.parse().ok()
}

/// The source lines each sample's count is put at in pprof, from the trace's line ticks:
/// per sample, `(line, count)` pieces (`None`: no line, the frame's own location), empty
/// for samples on stacks without line ticks.
///
/// V8 counts lines per stack, not per sample, so the line of one sample is not known. The
/// counts of each stack's samples (in time order) are dealt to its lines, and to "no line"
/// for what V8 gave none, so that the per-line counts equal the trace's line ticks exactly.
/// A sample of count 1 (every trace from V8) goes to the line furthest behind its share so
/// far, which spreads each line's samples evenly; a larger count (a decoded pprof's) is
/// split in proportion to what each line has left. So per-line totals are V8's, while the
/// line of a single sample (and the lines per label) are an apportionment.
pub struct LinePieces {
  /// Pieces of sample i: `pieces[offsets[i]..offsets[i + 1]]`.
  offsets: Vec<u32>,
  pieces: Vec<(Option<u32>, i64)>,
}

impl LinePieces {
  pub fn of(&self, sample: usize) -> &[(Option<u32>, i64)] {
    match (self.offsets.get(sample), self.offsets.get(sample + 1)) {
      (Some(&a), Some(&b)) => &self.pieces[a as usize..b as usize],
      _ => &[],
    }
  }

  pub fn deal(trace: &Trace, weights: Option<&[Weight]>) -> Option<LinePieces> {
    if trace.line_ticks.is_empty() {
      return None;
    }
    let count = |i: usize| weights.and_then(|w| w.get(i)).map_or(1, |w| w.count.max(0) as u64);
    let mut by_stack: HashMap<u32, Vec<usize>> = HashMap::new();
    for (i, s) in trace.samples.iter().enumerate() {
      if let (Some(stack), None) = (s.stack_id, s.marker) {
        by_stack.entry(stack).or_default().push(i);
      }
    }
    let mut ticks: HashMap<u32, Vec<(u32, u64)>> = HashMap::new();
    for l in &trace.line_ticks {
      ticks.entry(l.stack_id).or_default().push((l.line, l.ticks));
    }
    // (sample, line, count), for the samples on stacks with line ticks.
    let mut dealt: Vec<(usize, Option<u32>, i64)> = Vec::new();
    for (stack, lines) in ticks {
      let Some(samples) = by_stack.get(&stack) else {
        continue;
      };
      let n: u64 = samples.iter().map(|&i| count(i)).sum();
      let sum: u64 = lines.iter().map(|t| t.1).sum();
      let lines = if sum > n {
        crate::trace::scale_ticks(&lines, n, sum)
      } else {
        lines
      };
      let mut quota: Vec<(Option<u32>, u64)> = lines.iter().map(|&(l, t)| (Some(l), t)).collect();
      let with_line: u64 = quota.iter().map(|q| q.1).sum();
      quota.push((None, n - with_line));
      let mut given = vec![0u64; quota.len()];
      let mut units: u64 = 0;
      for &i in samples {
        let w = count(i);
        let mut got = vec![0u64; quota.len()];
        if w <= 64 {
          for _ in 0..w {
            // How far behind its share each bucket is, times n.
            let behind =
              |b: usize| i128::from(quota[b].1) * i128::from(units + 1) - i128::from(given[b]) * i128::from(n);
            let b = (0..quota.len())
              .max_by(|&a, &b| behind(a).cmp(&behind(b)).then(b.cmp(&a)))
              .unwrap_or(0);
            given[b] += 1;
            got[b] += 1;
            units += 1;
          }
        } else {
          let left = u128::from(n - units);
          let rem: Vec<u128> = (0..quota.len()).map(|b| u128::from(quota[b].1 - given[b])).collect();
          let mut order: Vec<(usize, u128)> = Vec::with_capacity(quota.len());
          let mut spare = w;
          for b in 0..quota.len() {
            let q = u128::from(w) * rem[b];
            got[b] = (q / left) as u64;
            spare -= got[b];
            order.push((b, q % left));
          }
          order.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
          for (b, _) in order.into_iter().take(spare as usize) {
            got[b] += 1;
          }
          for b in 0..quota.len() {
            given[b] += got[b];
          }
          units += w;
        }
        dealt.extend(
          (0..quota.len())
            .filter(|&b| got[b] > 0)
            .map(|b| (i, quota[b].0, got[b] as i64)),
        );
      }
    }
    dealt.sort_by_key(|d| d.0);
    let mut offsets = Vec::with_capacity(trace.samples.len() + 1);
    let mut at = 0;
    for i in 0..=trace.samples.len() {
      while at < dealt.len() && dealt[at].0 < i {
        at += 1;
      }
      offsets.push(at as u32);
    }
    let pieces = dealt.into_iter().map(|(_, line, count)| (line, count)).collect();
    Some(LinePieces { offsets, pieces })
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
  let encoder = Encoder::new(trace, timing, dialect);
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
