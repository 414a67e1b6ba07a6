//! Reading a pprof profile (`profile.proto`, as selfprof, @datadog/pprof, Go and
//! Pyroscope write it) into a selfprof trace, so every converter and the report take
//! pprof files too.
//!
//! pprof aggregates: a sample has no time and stands for `count` samples. The trace
//! repeats it `count` times (from `sample/count`, else its first value over the period),
//! with timestamps laid end to end by its wall time (else the period) from 0 ms. Each
//! location's lines become frames (inlined callees first, as pprof lists them); a sample
//! whose only frame is `(idle)`, `(garbage collector)` or `(program)` becomes a marker
//! sample, and `(root)` a sample with no stack. String labels (and numeric ones, as
//! text) become the sample's context.

use crate::formats::pprof::Profile;
use crate::formats::ConvertError;
use crate::trace::{element_id, Context, Frame, LabelSet, Marker, Sample, Stack, Trace};
use prost::Message;
use std::collections::HashMap;
use std::sync::Arc;

/// Samples a decoded profile may expand to: past this, counts are not believable.
const MAX_SAMPLES: u64 = 20_000_000;

fn bad(what: impl std::fmt::Display) -> ConvertError {
  ConvertError(format!("not a selfprof trace or pprof profile: {what}"))
}

pub fn decode(bytes: &[u8]) -> Result<Trace, ConvertError> {
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

  let functions: HashMap<u64, &crate::formats::pprof::Function> = p.function.iter().map(|f| (f.id, f)).collect();
  let locations: HashMap<u64, &crate::formats::pprof::Location> = p.location.iter().map(|l| (l.id, l)).collect();
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
  let mut line_ticks: HashMap<(u32, u32), u64> = HashMap::new();

  let mut trace = Trace::default();
  let mut resource_ids: HashMap<String, u32> = HashMap::new();
  let mut frame_ids: HashMap<Frame, u32> = HashMap::new();
  let mut stack_ids: HashMap<Stack, u32> = HashMap::new();
  let mut context_ids: HashMap<LabelSet, u32> = HashMap::new();
  let mut total: u64 = 0;
  let mut now_ns: f64 = 0.0;

  for (n, s) in p.sample.iter().enumerate() {
    let value = |i: Option<usize>| i.and_then(|i| s.value.get(i)).copied();
    let count = match (value(count_at), p.period) {
      (Some(c), _) => c,
      (None, period) if period > 0 => (s.value.first().copied().unwrap_or(0) as f64 / period as f64).round() as i64,
      _ => 1,
    };
    if count <= 0 {
      continue;
    }
    total += count as u64;
    if total > MAX_SAMPLES {
      return Err(bad(format!("it holds more than {MAX_SAMPLES} samples")));
    }

    // Frames, leaf first, as pprof lists them.
    let mut names: Vec<Frame> = Vec::new();
    let mut leaf_line = None;
    for (depth, id) in s.location_id.iter().enumerate() {
      let loc = locations
        .get(id)
        .ok_or_else(|| bad(format!("sample {n} names unknown location {id}")))?;
      let positional = lines_from.is_some_and(|from| *id >= from);
      for line in &loc.line {
        let f = functions
          .get(&line.function_id)
          .ok_or_else(|| bad(format!("location {id} names unknown function {}", line.function_id)))?;
        let file = str(f.filename)?;
        let resource_id = if file.is_empty() {
          None
        } else {
          Some(element_id(
            &mut resource_ids,
            &mut trace.resources,
            file.to_owned(),
            |u| u,
          ))
        };
        let positive = |v: i64| u32::try_from(v).ok().filter(|v| *v > 0);
        let name = str(f.name)?;
        let (at_line, at_column) = if positional {
          if depth == 0 {
            leaf_line = positive(line.line);
          }
          function_at.get(&line.function_id).copied().unwrap_or((f.start_line, 0))
        } else {
          (line.line, line.column)
        };
        names.push(Frame {
          name: if name == "(anonymous)" {
            String::new()
          } else {
            name.to_owned()
          },
          resource_id,
          line: positive(at_line).or_else(|| positive(f.start_line)),
          column: positive(at_column),
        });
      }
    }
    let marker = match names.as_slice() {
      [only] if only.resource_id.is_none() => match only.name.as_str() {
        "(idle)" => Some(Some(Marker::Idle)),
        "(garbage collector)" => Some(Some(Marker::Gc)),
        "(program)" => Some(Some(Marker::Other)),
        "(root)" => Some(None),
        _ => None,
      },
      _ => None,
    };
    let (stack_id, marker) = match marker {
      Some(m) => (None, m),
      None => {
        let mut parent: Option<u32> = None;
        for frame in names.into_iter().rev() {
          let frame_id = element_id(&mut frame_ids, &mut trace.frames, frame, |f| f);
          let stack = Stack {
            frame_id,
            parent_id: parent,
          };
          parent = Some(element_id(&mut stack_ids, &mut trace.stacks, stack, |s| s));
        }
        (parent, None)
      }
    };
    if let (Some(stack), Some(line)) = (stack_id, leaf_line) {
      *line_ticks.entry((stack, line)).or_default() += count as u64;
    }

    let mut labels: LabelSet = Vec::with_capacity(s.label.len());
    for l in &s.label {
      let key = str(l.key)?.to_owned();
      let value = if l.str != 0 {
        str(l.str)?.to_owned()
      } else {
        l.num.to_string()
      };
      labels.push((key, value));
    }
    labels.sort();
    labels.dedup_by(|a, b| a.0 == b.0);
    let context_id = (!labels.is_empty() && marker != Some(Marker::Idle)).then(|| {
      element_id(&mut context_ids, &mut trace.contexts, labels, |l| Context {
        labels: Arc::new(l),
      })
    });

    let step_ns = match value(wall_at) {
      Some(w) if w > 0 => w as f64 / count as f64,
      _ if p.period > 0 => p.period as f64,
      _ => 1e6,
    };
    let cpu_ms = value(cpu_at).map(|c| c as f64 / 1e6 / count as f64);
    for _ in 0..count {
      now_ns += step_ns;
      trace.samples.push(Sample {
        timestamp: now_ns / 1e6,
        stack_id,
        marker,
        context_id,
        cpu_time: cpu_ms,
      });
    }
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
  Ok(trace)
}
