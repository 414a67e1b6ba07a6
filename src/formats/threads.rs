//! Every thread in one profile: the traces of a process's threads (its main thread and its
//! `worker_threads`, each recorded by its own isolate's profiler) appended into one trace,
//! each sample labeled with its thread (`thread name`, `thread id`, `os thread id`, as
//! dd-trace names them), as dd-trace puts every thread in one pprof.
//!
//! Each thread's timestamps count from its own `performance.timeOrigin` (a worker's starts
//! when the worker does); `offset_ms` (its origin minus the first thread's) puts them on
//! the first thread's time line. Resources, frames and stacks are shared where equal.

use super::heap::label_every_sample;
use crate::symbolize::{Generated, ScriptInfo, SourceMapsInfo};
use crate::trace::{element_id, Context, Frame, LabelSet, LineTicks, Metadata, SampleWeights, Stack, Trace};
use std::collections::HashMap;

pub const THREAD_NAME: &str = "thread name";
pub const THREAD_ID: &str = "thread id";
pub const OS_THREAD_ID: &str = "os thread id";

/// One thread's trace and who it is.
pub struct ThreadTrace {
  pub trace: Trace,
  pub name: String,
  pub id: String,
  pub os_id: Option<String>,
  /// Added to its timestamps (ms).
  pub offset_ms: f64,
}

impl ThreadTrace {
  pub fn labels(&self) -> Vec<(String, String)> {
    let mut l = vec![
      (THREAD_NAME.to_owned(), self.name.clone()),
      (THREAD_ID.to_owned(), self.id.clone()),
    ];
    if let Some(os) = &self.os_id {
      l.push((OS_THREAD_ID.to_owned(), os.clone()));
    }
    l
  }
}

/// The threads' traces as one, samples in time order, each with its thread's labels.
/// Weighted traces (heap profiles) stay weighted when every thread's is.
pub fn merge(threads: Vec<ThreadTrace>) -> Trace {
  append(
    threads
      .into_iter()
      .map(|t| {
        let labels = t.labels();
        (t.trace, labels, t.offset_ms)
      })
      .collect(),
  )
}

/// The consecutive parts of one thread's recording (`selfprof record`'s checkpoints, in time
/// order) as one trace, with no labels added. Consecutive parts overlap by a sample or two
/// (one recording started before the other stopped): a part's samples at or before the
/// previous part's last are those, and are dropped.
pub fn concat(parts: Vec<Trace>) -> Trace {
  let mut last = f64::NEG_INFINITY;
  let parts = parts
    .into_iter()
    .map(|mut t| {
      let keep: Vec<bool> = t.samples.iter().map(|s| s.timestamp > last).collect();
      if keep.iter().any(|k| !k) {
        // `retain` visits each element once, in order.
        let mut k = keep.iter();
        t.samples.retain(|_| *k.next().unwrap_or(&false));
        if let Some(w) = &mut t.weight {
          let mut k = keep.iter();
          w.values.retain(|_| *k.next().unwrap_or(&false));
          if let Some(c) = &mut w.counts {
            let mut k = keep.iter();
            c.retain(|_| *k.next().unwrap_or(&false));
          }
        }
      }
      last = t.samples.iter().map(|s| s.timestamp).fold(last, f64::max);
      (t, Vec::new(), 0.0)
    })
    .collect();
  append(parts)
}

/// A trace to append, the labels added to every sample of it, and the ms added to its timestamps.
type Appended = (Trace, Vec<(String, String)>, f64);

/// Traces appended into one, samples in time order.
fn append(threads: Vec<Appended>) -> Trace {
  let mut out = Trace::default();
  let mut resource_ids: HashMap<String, u32> = HashMap::new();
  let mut frame_ids: HashMap<Frame, u32> = HashMap::new();
  let mut stack_ids: HashMap<Stack, u32> = HashMap::new();
  let mut context_ids: HashMap<LabelSet, u32> = HashMap::new();
  let mut line_ticks: HashMap<(u32, u32), u64> = HashMap::new();
  let weighted = !threads.is_empty() && threads.iter().all(|t| t.0.weight.is_some());
  let mut weight = SampleWeights::default();
  let mut metadata: Option<Metadata> = None;
  let mut source_maps: Option<SourceMapsInfo> = None;
  let mut script_ids: HashMap<ScriptInfo, u32> = HashMap::new();
  let mut mapped: std::collections::HashSet<u32> = std::collections::HashSet::new();
  // (timestamp, sample, weight value, weight count), sorted at the end.
  let mut samples = Vec::new();
  for (mut t, labels, offset_ms) in threads {
    label_every_sample(&mut t, &labels);
    let resources: Vec<u32> = t
      .resources
      .iter()
      .map(|r| element_id(&mut resource_ids, &mut out.resources, r.clone(), |r| r))
      .collect();
    let frames: Vec<u32> = t
      .frames
      .iter()
      .map(|f| {
        let frame = Frame {
          resource_id: f.resource_id.and_then(|r| resources.get(r as usize).copied()),
          ..f.clone()
        };
        element_id(&mut frame_ids, &mut out.frames, frame, |f| f)
      })
      .collect();
    let mut stacks: Vec<u32> = Vec::with_capacity(t.stacks.len());
    for s in &t.stacks {
      let stack = Stack {
        frame_id: frames.get(s.frame_id as usize).copied().unwrap_or(0),
        parent_id: s.parent_id.and_then(|p| stacks.get(p as usize).copied()),
      };
      stacks.push(element_id(&mut stack_ids, &mut out.stacks, stack, |s| s));
    }
    let contexts: Vec<u32> = t
      .contexts
      .iter()
      .map(|c| element_id(&mut context_ids, &mut out.contexts, c.labels.to_set(), Context::new))
      .collect();
    for l in &t.line_ticks {
      if let Some(&s) = stacks.get(l.stack_id as usize) {
        *line_ticks.entry((s, l.line)).or_default() += l.ticks;
      }
    }
    if let Some(m) = &t.metadata {
      let sum = metadata.get_or_insert_with(Metadata::default);
      sum.matched_samples += m.matched_samples;
      sum.between_signals_samples += m.between_signals_samples;
      sum.unmatched_samples += m.unmatched_samples;
      sum.labels_lost_samples += m.labels_lost_samples;
      sum.label_path = sum.label_path.or(m.label_path);
    }
    // What source mapping did in each thread, with its frame and script ids made the
    // merged trace's (a frame shared by threads keeps the first thread's generated place).
    if let Some(m) = &t.source_maps {
      let sum = source_maps.get_or_insert_with(SourceMapsInfo::default);
      sum.mapped_frames += m.mapped_frames;
      sum.unmapped_frames += m.unmapped_frames;
      sum.dropped_line_ticks += m.dropped_line_ticks;
      let scripts: Vec<u32> = m
        .scripts
        .iter()
        .map(|sc| element_id(&mut script_ids, &mut sum.scripts, sc.clone(), |sc| sc))
        .collect();
      for g in &m.generated {
        let (Some(&frame_id), Some(&script)) = (frames.get(g.frame_id as usize), scripts.get(g.script as usize)) else {
          continue;
        };
        if mapped.insert(frame_id) {
          sum.generated.push(Generated {
            frame_id,
            script,
            ..g.clone()
          });
        }
      }
    }
    crate::symbolize::text::merge(&mut out.source_text, t.source_text.as_ref());
    if weighted && weight.kind.is_empty() {
      if let Some(w) = &t.weight {
        weight.kind = w.kind.clone();
        weight.unit = w.unit.clone();
        weight.count_kind = w.count_kind.clone();
      }
    }
    for (i, s) in t.samples.iter().enumerate() {
      let mut s = s.clone();
      s.timestamp += offset_ms;
      s.stack_id = s.stack_id.and_then(|id| stacks.get(id as usize).copied());
      s.context_id = s.context_id.and_then(|id| contexts.get(id as usize).copied());
      let (value, count) = match &t.weight {
        Some(w) => (
          w.values.get(i).copied().unwrap_or(0.0),
          w.counts.as_ref().and_then(|c| c.get(i)).copied(),
        ),
        None => (1.0, None),
      };
      samples.push((s, value, count));
    }
  }
  samples.sort_by(|a, b| a.0.timestamp.total_cmp(&b.0.timestamp));
  if weighted {
    weight.values = samples.iter().map(|s| s.1).collect();
    weight.counts = weight
      .count_kind
      .is_some()
      .then(|| samples.iter().map(|s| s.2.unwrap_or(0.0)).collect());
    out.weight = Some(weight);
  }
  out.samples = samples.into_iter().map(|s| s.0).collect();
  out.metadata = metadata;
  out.source_maps = source_maps;
  out.line_ticks = line_ticks
    .into_iter()
    .map(|((stack_id, line), ticks)| LineTicks { stack_id, line, ticks })
    .collect();
  out.line_ticks.sort_by_key(|l| (l.stack_id, l.line));
  out
}

#[cfg(test)]
mod tests;
