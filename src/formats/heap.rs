//! Heap profiles: V8's sampling heap profile as a weighted trace, and that trace as a pprof
//! heap profile.
//!
//! V8 samples an allocation about every `interval` bytes and keeps the sampled objects that
//! are still alive, each under the stack that allocated it: a call tree whose nodes hold
//! the bytes of their live sampled objects (scaled by V8 to stand for every allocation)
//! and the objects. So a heap profile is a snapshot of the heap in use, not a rate.
//!
//! The tree reaches Rust flattened, parents before children (`flat`): read through V8's
//! C++ API (`capture::heap_profile`, binary), or through the inspector's
//! `getSamplingProfile` where that API is not reachable (`lib/capture/heap.js`, JSON).
//!
//! The pprof has the sample types the official Node clients write (@datadog/pprof's heap
//! serializer, which dd-trace's `space.pprof` and @pyroscope/nodejs both use):
//! `inuse_objects/count` and `inuse_space/bytes`, period type `inuse_space/bytes` with the
//! sampling interval as period. One sample per allocating stack.

pub mod build;
pub mod flat;

use super::dialect::Dialect;
use super::pprof::{Function, Label, Line, Location, Profile, Sample, Strings, ValueType};
use super::ConvertError;
use crate::trace::{element_id, Context, Frame, Sample as TraceSample, SampleWeights, Stack, Trace};
use flat::FlatHeap;
use prost::Message;
use std::collections::HashMap;
use std::io::Write;

pub const SPACE: &str = "inuse_space";
pub const OBJECTS: &str = "inuse_objects";

/// The objects a sample of `size` bytes stands for when V8 samples every `interval` bytes
/// on average (V8's own scaling, `SamplingHeapProfiler::ScaleSample`).
pub fn scale(size: f64, interval: f64) -> f64 {
  if interval <= 0.0 || size <= 0.0 {
    return 1.0;
  }
  1.0 / (1.0 - (-size / interval).exp())
}

/// A flattened sampling heap profile (JSON, `flat::FlatHeap::from_json`) as a weighted trace.
pub fn from_flat_json(json: &str, timestamp_ms: f64) -> Result<Trace, ConvertError> {
  from_flat(&FlatHeap::from_json(json)?, timestamp_ms)
}

/// A flattened sampling heap profile as a weighted trace: one sample per node with live
/// bytes, its weight those bytes and its count the objects they stand for. Frames are
/// 1-based as in every trace. `timestamp_ms` is when it was taken.
pub fn from_flat(heap: &FlatHeap, timestamp_ms: f64) -> Result<Trace, ConvertError> {
  let n = heap.nodes.len();
  let string = |i: u32| {
    heap.strings.get(i as usize).ok_or_else(|| {
      ConvertError(format!(
        "not a sampling heap profile: a node names string {i} of {}",
        heap.strings.len()
      ))
    })
  };
  let mut trace = Trace::default();
  let mut resource_ids: HashMap<String, u32> = HashMap::new();
  let mut frame_ids: HashMap<Frame, u32> = HashMap::new();
  let mut stack_ids: HashMap<Stack, u32> = HashMap::new();
  // The trace stack of each node (`None`: the root, which is no frame).
  let mut stack_of: Vec<Option<u32>> = Vec::with_capacity(n);
  let mut values = Vec::new();
  let mut counts = Vec::new();
  for (i, node) in heap.nodes.iter().enumerate() {
    let parent = match node.parent {
      -1 if i == 0 => None,
      p if p >= 0 && (p as usize) < i => Some(p as usize),
      p => {
        return Err(ConvertError(format!(
          "not a sampling heap profile: node {i} has parent {p}, not an earlier node"
        )))
      }
    };
    let Some(parent) = parent else {
      stack_of.push(None);
      continue;
    };
    let position = |v: i64| u32::try_from(v).ok().and_then(|v| v.checked_add(1));
    let resource_id = match node.url {
      Some(u) => Some(element_id(
        &mut resource_ids,
        &mut trace.resources,
        string(u)?.clone(),
        |u| u,
      )),
      None => None,
    };
    let frame = Frame {
      name: string(node.name)?.clone(),
      resource_id,
      line: position(node.line),
      column: position(node.column),
    };
    let frame_id = element_id(&mut frame_ids, &mut trace.frames, frame, |f| f);
    let stack = Stack {
      frame_id,
      parent_id: stack_of[parent],
    };
    let stack_id = element_id(&mut stack_ids, &mut trace.stacks, stack, |s| s);
    stack_of.push(Some(stack_id));
    if node.bytes > 0.0 && node.bytes.is_finite() {
      trace.samples.push(TraceSample {
        timestamp: timestamp_ms,
        stack_id: Some(stack_id),
        marker: None,
        context_id: None,
        cpu_time: None,
      });
      values.push(node.bytes.round());
      counts.push(if node.objects.is_finite() {
        node.objects.round().max(1.0)
      } else {
        1.0
      });
    }
  }
  trace.weight = Some(SampleWeights {
    kind: SPACE.into(),
    unit: "bytes".into(),
    values,
    count_kind: Some(OBJECTS.into()),
    counts: Some(counts),
  });
  Ok(trace)
}

/// When and how a heap profile was taken.
#[derive(Debug, Clone, Copy, Default)]
pub struct HeapTiming {
  /// Unix time in ns of the snapshot's period start, and its length.
  pub time_nanos: i64,
  pub duration_nanos: i64,
  /// The sampling interval in bytes.
  pub interval_bytes: i64,
}

/// The pprof heap profile of a weighted trace: values `[inuse_objects, inuse_space]`, each
/// sample's labels as the dialect names them, and `comments`.
pub fn profile(trace: &Trace, timing: &HeapTiming, dialect: &Dialect, comments: &[String]) -> Profile {
  let mut strings = Strings::new();
  let objects_type = ValueType {
    r#type: strings.id(OBJECTS),
    unit: strings.id("count"),
  };
  let space_type = ValueType {
    r#type: strings.id(SPACE),
    unit: strings.id("bytes"),
  };
  let mut function = Vec::with_capacity(trace.frames.len());
  let mut location = Vec::with_capacity(trace.frames.len());
  for (i, f) in trace.frames.iter().enumerate() {
    let id = i as u64 + 1;
    let name = strings.id(if f.name.is_empty() { "(anonymous)" } else { &f.name });
    let file = f
      .resource_id
      .and_then(|r| trace.resources.get(r as usize))
      .map_or("", String::as_str);
    function.push(Function {
      id,
      name,
      system_name: name,
      filename: strings.id(file),
      start_line: f.line.map_or(0, i64::from),
    });
    location.push(Location {
      id,
      line: vec![Line {
        function_id: id,
        line: f.line.map_or(0, i64::from),
        column: f.column.map_or(0, i64::from),
      }],
    });
  }
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
  let weight = trace.weight.as_ref();
  let mut sample = Vec::with_capacity(trace.samples.len());
  for (i, s) in trace.samples.iter().enumerate() {
    let bytes = weight.and_then(|w| w.values.get(i)).copied().unwrap_or(0.0);
    let count = weight
      .and_then(|w| w.counts.as_ref())
      .and_then(|c| c.get(i))
      .copied()
      .unwrap_or(0.0);
    let location_id = trace.frames_leaf_first(s.stack_id).map(|f| u64::from(f) + 1).collect();
    sample.push(Sample {
      location_id,
      value: vec![count.round() as i64, bytes.round() as i64],
      label: s
        .context_id
        .and_then(|c| labels.get(c as usize))
        .cloned()
        .unwrap_or_default(),
    });
  }
  Profile {
    sample_type: vec![objects_type, space_type.clone()],
    sample,
    location,
    function,
    time_nanos: timing.time_nanos,
    duration_nanos: timing.duration_nanos,
    period_type: Some(space_type),
    period: timing.interval_bytes,
    default_sample_type: strings.id(SPACE),
    comment: comments.iter().map(|c| strings.id(c)).collect(),
    string_table: strings.into_table(),
  }
}

/// `profile`, gzip'd.
pub fn encode_gzip(
  trace: &Trace,
  timing: &HeapTiming,
  dialect: &Dialect,
  comments: &[String],
) -> std::io::Result<Vec<u8>> {
  let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
  gz.write_all(&profile(trace, timing, dialect, comments).encode_to_vec())?;
  gz.finish()
}

/// Adds the labels `extra` to every sample of `trace` (samples without labels get a set
/// of their own): a thread's name and id.
pub fn label_every_sample(trace: &mut Trace, extra: &[(String, String)]) {
  if extra.is_empty() {
    return;
  }
  let mut contexts: Vec<Context> = trace
    .contexts
    .iter()
    .map(|c| {
      let mut labels: Vec<(String, String)> = c
        .labels
        .iter()
        .filter(|(k, _)| !extra.iter().any(|(e, _)| e == k))
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect();
      labels.extend(extra.iter().cloned());
      Context::new(labels)
    })
    .collect();
  let bare = contexts.len() as u32;
  contexts.push(Context::new(extra.to_vec()));
  for s in &mut trace.samples {
    if s.context_id.is_none() {
      s.context_id = Some(bare);
    }
  }
  trace.contexts = contexts;
}

#[cfg(test)]
mod tests;
