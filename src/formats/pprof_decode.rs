//! Reading a pprof profile (`profile.proto`, as selfprof, @datadog/pprof, Go and
//! Pyroscope write it) into a selfprof trace, so every converter and the report take
//! pprof files too.
//!
//! pprof aggregates: a sample has no time and stands for `count` samples. The trace keeps
//! one sample per pprof sample with its aggregates beside it (`Weight`: its `sample/count`,
//! else its first value over the period; its wall and CPU time), so pprof and folded
//! output never expand counts; `formats::expand` lists them as samples for the targets
//! that need one entry per sample. Timestamps lay the samples end to end by wall time
//! from 0 ms. Each location's lines become frames (inlined callees first, as pprof lists
//! them); a sample whose only frame is `(idle)`, `(garbage collector)` or `(program)`
//! becomes a marker sample, and `(root)` a sample with no stack. String labels (and
//! numeric ones, as text; a label with neither is an empty string) become the sample's
//! context.
//!
//! Hostile input: before decoding, `prescan` walks the protobuf (no allocation) and
//! estimates what decoding would allocate (a 2-byte empty sample decodes to a 72-byte
//! struct); over `limits::DECODED_PPROF_BYTES` it is refused. Frames walked and distinct
//! stacks are bounded too.

use super::limits;
use super::ConvertError;
use crate::formats::pprof::{Profile, Timing, Weight};
use crate::trace::{element_id, Context, Frame, LabelSet, Marker, Sample, Stack, Trace};
use prost::Message;
use std::collections::HashMap;

fn bad(what: impl std::fmt::Display) -> ConvertError {
  ConvertError(format!("not a selfprof trace or pprof profile: {what}"))
}

/// A decoded pprof: its samples as a trace, one per pprof sample, and what each stands for.
pub struct Decoded {
  pub trace: Trace,
  pub weights: Vec<Weight>,
  pub timing: Timing,
  /// The event-loop blocks selfprof wrote in its comments, if it did.
  pub blocks: Option<crate::trace::blocks::Recorded>,
}

// --- the pre-scan ---------------------------------------------------------------------

/// Bytes the decoded structs take per element (64-bit), doubled for Vec growth.
mod cost {
  pub const SAMPLE: u64 = 72;
  pub const LOCATION: u64 = 32;
  pub const LINE: u64 = 24;
  pub const FUNCTION: u64 = 40;
  pub const VALUE_TYPE: u64 = 16;
  pub const STRING: u64 = 24;
  pub const LABEL: u64 = 32;
  pub const SCALAR: u64 = 8;
}

struct Reader<'a> {
  bytes: &'a [u8],
  at: usize,
}

impl Reader<'_> {
  fn varint(&mut self) -> Option<u64> {
    let mut v = 0u64;
    for shift in (0..64).step_by(7) {
      let b = *self.bytes.get(self.at)?;
      self.at += 1;
      v |= u64::from(b & 0x7f) << shift;
      if b & 0x80 == 0 {
        return Some(v);
      }
    }
    None
  }

  /// The next field: `(field number, wire type, length-delimited payload if any)`.
  fn field(&mut self) -> Option<(u64, u8, &[u8])> {
    let key = self.varint()?;
    let wire = (key & 7) as u8;
    let payload: &[u8] = match wire {
      0 => {
        self.varint()?;
        &[]
      }
      1 => {
        self.at = self.at.checked_add(8).filter(|e| *e <= self.bytes.len())?;
        &[]
      }
      5 => {
        self.at = self.at.checked_add(4).filter(|e| *e <= self.bytes.len())?;
        &[]
      }
      2 => {
        let len = usize::try_from(self.varint()?).ok()?;
        let end = self.at.checked_add(len).filter(|e| *e <= self.bytes.len())?;
        let p = &self.bytes[self.at..end];
        self.at = end;
        p
      }
      _ => return None,
    };
    Some((key >> 3, wire, payload))
  }

  fn done(&self) -> bool {
    self.at >= self.bytes.len()
  }
}

/// Elements of a repeated scalar field occurrence: one unpacked, or one per varint packed.
fn scalars(wire: u8, payload: &[u8]) -> u64 {
  if wire == 2 {
    payload.iter().filter(|b| **b & 0x80 == 0).count() as u64
  } else {
    1
  }
}

/// What decoding `bytes` as a Profile would allocate, estimated from its fields; `None`
/// if it is not well-formed protobuf.
fn prescan(bytes: &[u8]) -> Option<u64> {
  let mut total = 0u64;
  let mut r = Reader { bytes, at: 0 };
  while !r.done() {
    let (field, wire, payload) = r.field()?;
    total += match field {
      1 | 11 => cost::VALUE_TYPE,
      2 => {
        let mut s = Reader { bytes: payload, at: 0 };
        let mut c = cost::SAMPLE;
        while !s.done() {
          let (f, w, p) = s.field()?;
          c += match f {
            1 | 2 => cost::SCALAR * scalars(w, p),
            3 => cost::LABEL,
            _ => 0,
          };
        }
        c
      }
      4 => {
        let mut l = Reader { bytes: payload, at: 0 };
        let mut c = cost::LOCATION;
        while !l.done() {
          let (f, _, _) = l.field()?;
          if f == 4 {
            c += cost::LINE;
          }
        }
        c
      }
      5 => cost::FUNCTION,
      6 => cost::STRING + payload.len() as u64,
      13 => cost::SCALAR * scalars(wire, payload),
      _ => 0,
    };
  }
  Some(total * 2)
}

// --- decoding -------------------------------------------------------------------------

pub fn decode(bytes: &[u8]) -> Result<Decoded, ConvertError> {
  let estimate = prescan(bytes).ok_or_else(|| bad("protobuf: malformed fields"))?;
  if estimate > limits::DECODED_PPROF_BYTES {
    return Err(ConvertError(format!(
      "the pprof profile would take {} MiB to decode; the limit is {} MiB",
      estimate >> 20,
      limits::DECODED_PPROF_BYTES >> 20
    )));
  }
  let p = Profile::decode(bytes).map_err(|e| bad(format!("protobuf: {e}")))?;
  // Every pprof encoder writes the string table, starting with "": a protobuf message
  // without one is something else that happened to decode.
  if p.string_table.first().is_none_or(|s| !s.is_empty()) {
    return Err(bad("its string table does not start with \"\""));
  }
  let str = |i: i64| -> Result<&str, ConvertError> {
    usize::try_from(i)
      .ok()
      .and_then(|i| p.string_table.get(i))
      .map(String::as_str)
      .ok_or_else(|| bad(format!("string {i} is out of range")))
  };
  let value_index = |ty: &[&str], unit: &str| -> Option<usize> {
    p.sample_type
      .iter()
      .position(|v| str(v.r#type).is_ok_and(|t| ty.contains(&t)) && str(v.unit).is_ok_and(|u| u == unit))
  };
  let count_at = value_index(&["sample", "samples"], "count");
  let wall_at = value_index(&["wall"], "nanoseconds");
  let cpu_at = value_index(&["cpu"], "nanoseconds");
  // A heap profile (bytes, no count or time): its samples are weighted by their bytes.
  let heap_at = if count_at.is_none() && wall_at.is_none() {
    value_index(&["inuse_space", "space", "alloc_space"], "bytes")
  } else {
    None
  };
  let heap_objects_at = heap_at.and_then(|_| value_index(&["inuse_objects", "objects", "alloc_objects"], "count"));
  let mut heap_values: Vec<f64> = Vec::new();
  let mut heap_counts: Vec<f64> = Vec::new();

  let functions: HashMap<u64, &crate::formats::pprof::Function> = p.function.iter().map(|f| (f.id, f)).collect();
  let mut trace = Trace::default();
  let mut resource_ids: HashMap<String, u32> = HashMap::new();
  let mut frame_ids: HashMap<Frame, u32> = HashMap::new();
  let mut stack_ids: HashMap<Stack, u32> = HashMap::new();
  let mut context_ids: HashMap<LabelSet, u32> = HashMap::new();

  // selfprof's line-level locations (ids from `lines_from` on): the line is a position in
  // the function, whose frame is its own location's; they come back as line ticks.
  let lines_from = p
    .comment
    .iter()
    .filter_map(|&c| str(c).ok())
    .find_map(crate::formats::pprof::parse_lines_comment);
  let function_at: HashMap<u64, (i64, i64)> = match lines_from {
    Some(from) => p
      .location
      .iter()
      .filter(|l| l.id < from)
      .filter_map(|l| l.line.first().map(|x| (x.function_id, (x.line, x.column))))
      .collect(),
    None => HashMap::new(),
  };
  let mut line_of_location: HashMap<u64, u32> = HashMap::new();
  let mut line_ticks: HashMap<(u32, u32), u64> = HashMap::new();

  // Each location's frames, leaf first: `(name, file, line, column)`, resolved once; put
  // into the trace (with their resources) only when a sample's stack uses them.
  type Raw<'a> = (&'a str, &'a str, Option<u32>, Option<u32>);
  let mut location_frames: HashMap<u64, Vec<Raw>> = HashMap::with_capacity(p.location.len());
  for loc in &p.location {
    let mut frames = Vec::with_capacity(loc.line.len());
    let positional = lines_from.is_some_and(|from| loc.id >= from) && loc.line.len() == 1;
    for line in &loc.line {
      let f = functions.get(&line.function_id).ok_or_else(|| {
        bad(format!(
          "location {} names unknown function {}",
          loc.id, line.function_id
        ))
      })?;
      let positive = |v: i64| u32::try_from(v).ok().filter(|v| *v > 0);
      let (at_line, at_column) = if positional {
        if let Some(l) = positive(line.line) {
          line_of_location.insert(loc.id, l);
        }
        function_at.get(&line.function_id).copied().unwrap_or((f.start_line, 0))
      } else {
        (line.line, line.column)
      };
      frames.push((
        str(f.name)?,
        str(f.filename)?,
        positive(at_line).or_else(|| positive(f.start_line)),
        positive(at_column),
      ));
    }
    location_frames.insert(loc.id, frames);
  }
  let mut interned: HashMap<(u64, usize), u32> = HashMap::new();
  let pseudo = |(name, file, _, _): &Raw| -> Option<Option<Marker>> {
    if !file.is_empty() {
      return None;
    }
    match *name {
      "(idle)" => Some(Some(Marker::Idle)),
      "(garbage collector)" => Some(Some(Marker::Gc)),
      "(program)" => Some(Some(Marker::Other)),
      "(root)" => Some(None),
      _ => None,
    }
  };

  let mut weights = Vec::with_capacity(p.sample.len());
  let mut frames_walked: u64 = 0;
  let mut now_ns: f64 = 0.0;
  // Samples with the same locations (one stack under other labels or values) share the
  // stack built for the first of them: only new stacks cost frame walks.
  let mut stacks_by_locations: HashMap<&[u64], (Option<u32>, Option<Marker>)> = HashMap::new();
  for (n, s) in p.sample.iter().enumerate() {
    let value = |i: Option<usize>| i.and_then(|i| s.value.get(i)).copied();
    let count = match (value(count_at), p.period) {
      _ if heap_at.is_some() => value(heap_at).map_or(0, |b| i64::from(b > 0)),
      (Some(c), _) => c,
      (None, period) if period > 0 => (s.value.first().copied().unwrap_or(0) as f64 / period as f64).round() as i64,
      _ => 1,
    };
    if count <= 0 {
      continue;
    }
    let (stack_id, marker) = match stacks_by_locations.get(s.location_id.as_slice()) {
      Some(known) => *known,
      None => {
        let frames_of = |id: &u64| {
          location_frames
            .get(id)
            .ok_or_else(|| bad(format!("sample {n} names unknown location {id}")))
        };
        // A lone `(idle)`, `(garbage collector)`, `(program)` or `(root)` frame is a marker.
        let marker = match s.location_id.as_slice() {
          [only] => match frames_of(only)?.as_slice() {
            [frame] => pseudo(frame),
            _ => None,
          },
          _ => None,
        };
        let stack_and_marker = match marker {
          Some(m) => (None, m),
          None => {
            // Root first: locations in reverse, each location's lines in reverse (pprof
            // lists the leaf first, and a location's inlined callees before its caller).
            let mut parent: Option<u32> = None;
            for id in s.location_id.iter().rev() {
              let lines = frames_of(id)?.len();
              frames_walked += lines as u64;
              if frames_walked > limits::DECODED_FRAMES {
                return Err(ConvertError(format!(
                  "the pprof profile's distinct stacks hold more than {} frames in all; that is the limit",
                  limits::DECODED_FRAMES
                )));
              }
              for k in (0..lines).rev() {
                let frame_id = match interned.get(&(*id, k)) {
                  Some(f) => *f,
                  None => {
                    let (name, file, line, column) = location_frames[id][k];
                    let resource_id = (!file.is_empty())
                      .then(|| element_id(&mut resource_ids, &mut trace.resources, file.to_owned(), |u| u));
                    let frame = Frame {
                      name: if name == "(anonymous)" {
                        String::new()
                      } else {
                        name.to_owned()
                      },
                      resource_id,
                      line,
                      column,
                    };
                    let f = element_id(&mut frame_ids, &mut trace.frames, frame, |f| f);
                    interned.insert((*id, k), f);
                    f
                  }
                };
                let stack = Stack {
                  frame_id,
                  parent_id: parent,
                };
                parent = Some(element_id(&mut stack_ids, &mut trace.stacks, stack, |s| s));
                if trace.stacks.len() > limits::STACKS {
                  return Err(ConvertError(format!(
                    "the pprof profile has more than {} distinct stacks; that is the limit",
                    limits::STACKS
                  )));
                }
              }
            }
            (parent, None)
          }
        };
        stacks_by_locations.insert(s.location_id.as_slice(), stack_and_marker);
        stack_and_marker
      }
    };
    let leaf_line = s.location_id.first().and_then(|id| line_of_location.get(id));
    if let (Some(stack), Some(&line)) = (stack_id, leaf_line) {
      *line_ticks.entry((stack, line)).or_default() += count as u64;
    }

    let mut labels: LabelSet = Vec::with_capacity(s.label.len());
    for l in &s.label {
      let key = str(l.key)?.to_owned();
      // A string label's value, else a number as text. Neither (string id 0, number 0, no
      // unit) is an empty string: how selfprof writes `""` (Go's reader drops such a label).
      let value = if l.str != 0 {
        str(l.str)?.to_owned()
      } else if l.num != 0 || l.num_unit != 0 {
        l.num.to_string()
      } else {
        String::new()
      };
      labels.push((key, value));
    }
    labels.sort();
    labels.dedup_by(|a, b| a.0 == b.0);
    let context_id = (!labels.is_empty() && marker != Some(Marker::Idle))
      .then(|| element_id(&mut context_ids, &mut trace.contexts, labels, Context::new));

    let wall_ns = match value(wall_at) {
      Some(w) if w > 0 => w as f64,
      _ if p.period > 0 => p.period as f64 * count as f64,
      _ => 1e6 * count as f64,
    };
    let cpu_ns = value(cpu_at);
    trace.samples.push(Sample {
      timestamp: now_ns / 1e6,
      stack_id,
      marker,
      context_id,
      cpu_time: cpu_ns.map(|c| c as f64 / 1e6),
    });
    if heap_at.is_some() {
      heap_values.push(value(heap_at).unwrap_or(0) as f64);
      heap_counts.push(value(heap_objects_at).unwrap_or(0) as f64);
      weights.push(Weight::default());
      continue;
    }
    now_ns += wall_ns;
    weights.push(Weight {
      count,
      wall_ns: wall_ns.round() as i64,
      cpu_ns: cpu_ns.unwrap_or(0),
    });
  }
  // selfprof's own comment: how many samples the SIGPROF join labeled.
  trace.metadata = p
    .comment
    .iter()
    .filter_map(|&c| str(c).ok())
    .find_map(crate::formats::pprof::parse_metadata_comment);
  trace.line_ticks = line_ticks
    .into_iter()
    .map(|((stack_id, line), ticks)| crate::trace::LineTicks { stack_id, line, ticks })
    .collect();
  trace.line_ticks.sort_by_key(|l| (l.stack_id, l.line));
  if let Some(at) = heap_at {
    let kind = |i: usize| str(p.sample_type[i].r#type).map(str::to_owned);
    trace.weight = Some(crate::trace::SampleWeights {
      kind: kind(at)?,
      unit: "bytes".into(),
      values: heap_values,
      count_kind: heap_objects_at.map(kind).transpose()?,
      counts: heap_objects_at.map(|_| heap_counts),
    });
  }
  let timing = Timing {
    time_origin_unix_ms: p.time_nanos as f64 / 1e6,
    start_ms: 0.0,
    end_ms: if p.duration_nanos > 0 {
      p.duration_nanos as f64 / 1e6
    } else {
      now_ns / 1e6
    },
    period_ns: p.period,
    cpu: cpu_at.is_some(),
    lines: false,
  };
  let blocks = crate::formats::pprof::parse_block_comments(p.comment.iter().filter_map(|&c| str(c).ok()));
  Ok(Decoded {
    trace,
    weights,
    timing,
    blocks,
  })
}
