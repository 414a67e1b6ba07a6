//! Builds one trace from one or more V8 CPU profiles, following the spec's processing
//! model ("take a sample", "get a stack ID", "get a frame ID", "get an element ID"), each
//! sample joined to the handler's brackets for its labels and CPU time (`Labeler`).

use super::v8_profile::{CpuProfile, IndexedProfile, NodeKind, ProfileError};
use super::{
  element_id, Context, Frame, Labels, LineTicks, Marker, Metadata, Sample, Stack, Trace, Window, NO_CONTEXT,
};
use crate::capture::ring::{self, Entry};
use std::collections::HashMap;

/// The context index of a kept set that holds no labels: the sample gets no context.
const NO_LABELS: u32 = u32::MAX;

/// What adding a profile did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Added {
  pub samples: usize,
  /// Samples inside the window that did not fit in the sample buffer.
  pub over_limit: usize,
}

/// Looks up the labels of a context id.
pub type LabelLookup<'a> = dyn FnMut(u32) -> Option<Labels> + Send + 'a;

/// Joins samples to SIGPROF ring entries for their labels and CPU time.
pub struct Labeler<'a> {
  /// This thread's ring entries, sorted by time: all of the recording's, or, when its
  /// profiles are added as they arrive, those from the last sample joined on (more come
  /// with `add_brackets`).
  pub entries: Vec<Entry>,
  pub lookup: Box<LabelLookup<'a>>,
  /// Thread CPU time when the recording started.
  pub cpu_start_ns: Option<u64>,
  /// The entries are label switches, joined by time (`ring::switch_context`), not signal
  /// brackets; samples get no CPU time.
  pub by_time: bool,
}

/// Builds one trace from one or more V8 profiles, deduplicating resources, frames
/// and stacks ("get an element ID") with hash maps instead of the spec's linear search.
#[derive(Default)]
pub struct TraceBuilder<'a> {
  pub(super) trace: Trace,
  resource_ids: crate::FastMap<String, u32>,
  frame_ids: crate::FastMap<Frame, u32>,
  stack_ids: crate::FastMap<Stack, u32>,
  context_ids: crate::capture::id_map::IdMap<u32>,
  /// The last context id looked up and its index (samples in a row mostly share one).
  last_context: Option<(u32, Option<u32>)>,
  labeler: Option<Labeler<'a>>,
  prev_cpu_ns: Option<u64>,
  /// The bracket the previous joined sample took (its `before_ns`).
  last_bracket_ns: Option<u64>,
  /// Where the last sample fell among the labeler's brackets.
  cursor: ring::Cursor,
  /// Line ticks so far, by (stack, line).
  line_ticks: HashMap<(u32, u32), u64>,
  /// The last sample time (µs, V8's clock) of the recordings added so far. Consecutive
  /// recordings handed off without a gap (lib/capture/group.js) overlap: V8 put the ticks
  /// of the overlap in both, with the same times, and they count once.
  last_us: Option<f64>,
}

/// How a profile node resolves in the trace.
#[derive(Clone, Copy)]
struct Resolved {
  stack_id: Option<u32>,
  marker: Option<Marker>,
}

fn one_based(zero_based: i64) -> Option<u32> {
  u32::try_from(zero_based).ok().and_then(|n| n.checked_add(1))
}

impl<'a> TraceBuilder<'a> {
  pub fn new() -> Self {
    Self::default()
  }

  /// A builder that labels samples from the SIGPROF ring.
  pub fn with_labeler(labeler: Labeler<'a>) -> Self {
    TraceBuilder {
      prev_cpu_ns: labeler.cpu_start_ns,
      // At most a context per bracket: no rehash while a labeled recording is joined.
      context_ids: crate::capture::id_map::with_capacity(labeler.entries.len().min(1 << 20)),
      labeler: Some(labeler),
      trace: Trace {
        metadata: Some(Metadata::default()),
        ..Trace::default()
      },
      ..Self::default()
    }
  }

  /// The trace's index for context `id`, if its labels are known.
  fn context_id(&mut self, id: u32) -> Option<u32> {
    match self.last_context {
      Some((last, index)) if last == id => index,
      _ => {
        let index = self.find_context(id);
        self.last_context = Some((id, index));
        index
      }
    }
  }

  fn find_context(&mut self, id: u32) -> Option<u32> {
    if let Some(c) = self.context_ids.get(&id) {
      return Some(*c);
    }
    let labels = self.labeler.as_mut().and_then(|l| (l.lookup)(id))?;
    if labels.is_empty() {
      // A set with no labels (selfprof's own check of the context frame): no context.
      self.context_ids.insert(id, NO_LABELS);
      return Some(NO_LABELS);
    }
    let index = self.trace.contexts.len() as u32;
    self.trace.contexts.push(Context { labels });
    self.context_ids.insert(id, index);
    Some(index)
  }

  /// Sets a sample's context, counting samples whose labels are gone. Idle samples get
  /// none: no request runs while the event loop waits, whatever ran last.
  fn set_context(&mut self, sample: &mut Sample, id: u32) {
    if id == NO_CONTEXT || sample.marker == Some(Marker::Idle) {
      return;
    }
    match self.context_id(id) {
      Some(NO_LABELS) => {}
      Some(index) => sample.context_id = Some(index),
      None => {
        if let Some(meta) = self.trace.metadata.as_mut() {
          meta.labels_lost_samples += 1;
        }
      }
    }
  }

  /// Labels and CPU time of a sample taken at `t_us`, if a ring bracket holds it.
  ///
  /// One signal makes one V8 sample, and samples come in time order, so a bracket
  /// belongs to the first sample that falls in it. A later one in the same bracket is a
  /// sample V8 took without a signal (a deoptimization just after the signal): it is
  /// labeled only if the context around it is certain, like any other such sample.
  fn annotate(&mut self, t_us: f64, sample: &mut Sample, clock_ok: bool) {
    let Some(labeler) = self.labeler.as_ref() else {
      return;
    };
    if labeler.by_time {
      let context = clock_ok
        .then(|| ring::switch_context(&labeler.entries, &mut self.cursor, t_us))
        .flatten();
      let meta = self.trace.metadata.get_or_insert_with(Metadata::default);
      match context {
        Some(context) => {
          meta.matched_samples += 1;
          self.set_context(sample, context);
        }
        None => meta.unmatched_samples += 1,
      }
      return;
    }
    let found = ring::match_sample(&labeler.entries, &mut self.cursor, t_us, self.last_bracket_ns);
    let meta = self.trace.metadata.get_or_insert_with(Metadata::default);
    let entry = match found {
      ring::Match::Signal(e) => *e,
      ring::Match::Between(context) => {
        meta.between_signals_samples += 1;
        self.set_context(sample, context);
        return;
      }
      ring::Match::None => {
        meta.unmatched_samples += 1;
        return;
      }
    };
    meta.matched_samples += 1;
    self.last_bracket_ns = Some(entry.before_ns);
    if let Some(prev) = self.prev_cpu_ns {
      sample.cpu_time = Some(entry.cpu_ns.saturating_sub(prev) as f64 / 1e6);
    }
    self.prev_cpu_ns = Some(entry.cpu_ns);
    self.set_context(sample, entry.context);
  }

  /// Brackets recorded after those the labeler has (later than all of them, in time
  /// order), for profiles added from now on. Those before the last sample's bracket go:
  /// samples are added in time order, so no later sample can fall in them.
  pub fn add_brackets(&mut self, more: Vec<Entry>) {
    let Some(labeler) = self.labeler.as_mut() else {
      return;
    };
    let passed = self.cursor.passed(&labeler.entries);
    labeler.entries.drain(..passed);
    self.cursor = ring::Cursor::default();
    labeler.entries.extend(more);
  }

  /// Looks the labels of the contexts of label-set `ids` up again (sets completed after
  /// they were first looked up); ids this trace has no context for are left out.
  pub fn refresh_contexts(&mut self, ids: &[u32], mut lookup: impl FnMut(u32) -> Option<Labels>) {
    for id in ids {
      let Some(&index) = self.context_ids.get(id).filter(|&&i| i != NO_LABELS) else {
        continue;
      };
      if let (Some(labels), Some(context)) = (lookup(*id), self.trace.contexts.get_mut(index as usize)) {
        context.labels = labels;
      }
    }
  }

  /// Looks labels up with `lookup` from now on.
  pub fn set_lookup(&mut self, lookup: Box<LabelLookup<'a>>) {
    if let Some(labeler) = self.labeler.as_mut() {
      labeler.lookup = lookup;
    }
  }

  pub fn samples_len(&self) -> usize {
    self.trace.samples.len()
  }

  fn resource_id(&mut self, url: &str) -> u32 {
    if let Some(id) = self.resource_ids.get(url) {
      return *id;
    }
    element_id(&mut self.resource_ids, &mut self.trace.resources, url.to_owned(), |u| u)
  }

  fn frame_id(&mut self, frame: Frame) -> u32 {
    element_id(&mut self.frame_ids, &mut self.trace.frames, frame, |f| f)
  }

  fn stack_id(&mut self, stack: Stack) -> u32 {
    element_id(&mut self.stack_ids, &mut self.trace.stacks, stack, |s| s)
  }

  /// Resolves one node whose parent is already resolved.
  fn resolve_node(&mut self, profile: &CpuProfile, node: usize, parent: Resolved) -> Resolved {
    let cf = &profile.nodes[node].call_frame;
    let marker = |m| Resolved {
      stack_id: parent.stack_id,
      marker: Some(m),
    };
    match cf.kind() {
      NodeKind::Root => Resolved {
        stack_id: None,
        marker: None,
      },
      NodeKind::Gc => marker(Marker::Gc),
      NodeKind::Idle => marker(Marker::Idle),
      NodeKind::Program => marker(Marker::Other),
      NodeKind::Function => {
        // Builtins (no script) get a name-only frame, as the spec's "get a frame ID"
        // sets resource, line and column only for frames with a script.
        let resource_id = (!cf.url.is_empty()).then(|| self.resource_id(&cf.url));
        let frame = Frame {
          name: cf.function_name.clone(),
          resource_id,
          line: one_based(cf.line_number),
          column: one_based(cf.column_number),
        };
        let frame_id = self.frame_id(frame);
        Resolved {
          stack_id: Some(self.stack_id(Stack {
            frame_id,
            parent_id: parent.stack_id,
          })),
          marker: None,
        }
      }
    }
  }

  /// Resolves a node and its unresolved ancestors, outermost first, so that
  /// parents enter `stacks` before their children. Iterative: JS stacks can be
  /// deeper than a native stack would like to recurse.
  fn resolve(&mut self, p: &IndexedProfile, memo: &mut [Option<Resolved>], node: usize) -> Resolved {
    if let Some(r) = memo[node] {
      return r;
    }
    let mut chain = vec![node];
    let mut top = Resolved {
      stack_id: None,
      marker: None,
    };
    while let Some(parent) = p.parent[*chain.last().unwrap_or(&node)] {
      if let Some(r) = memo[parent] {
        top = r;
        break;
      }
      chain.push(parent);
    }
    for &n in chain.iter().rev() {
      top = self.resolve_node(p.profile, n, top);
      memo[n] = Some(top);
    }
    top
  }

  /// Adds the samples of `profile` that fall in `window`, in timestamp order
  /// (V8 occasionally reports a sample slightly out of order; the spec's
  /// timestamps never go backwards).
  pub fn add_profile(&mut self, profile: &CpuProfile, window: &Window) -> Result<Added, ProfileError> {
    let indexed = profile.index()?;
    let mut all: Vec<(f64, usize, f64)> = indexed
      .samples_us()
      .map(|(t_us, node)| ((t_us - window.origin_us) / 1000.0, node, t_us))
      .collect();
    all.sort_by(|a, b| a.0.total_cmp(&b.0));
    if let Some(last) = self.last_us {
      all.retain(|&(_, _, t_us)| t_us > last);
    }
    if let Some(&(_, _, t_us)) = all.last() {
      self.last_us = Some(t_us);
    }
    let stride = window.stride.max(1);
    let mut picked: Vec<(f64, usize, f64)> = all
      .into_iter()
      .step_by(stride)
      .filter(|(ms, _, _)| *ms >= window.from_ms && *ms <= window.until_ms)
      .collect();
    let room = window.max_samples.saturating_sub(self.trace.samples.len());
    let over_limit = picked.len().saturating_sub(room);
    picked.truncate(room);

    // Joined by time, the stamps must be on the switches' clock: V8 falls back to a
    // millisecond clock where it finds no invariant TSC, whose stamps are all whole ms.
    let clock_ok =
      !self.labeler.as_ref().is_some_and(|l| l.by_time) || picked.iter().any(|&(_, _, t)| t % 1000.0 != 0.0);
    self.trace.samples.reserve(picked.len());
    let mut memo = vec![None; profile.nodes.len()];
    let mut kept = vec![0u64; profile.nodes.len()];
    for &(timestamp, node, t_us) in &picked {
      kept[node] += 1;
      let r = self.resolve(&indexed, &mut memo, node);
      let mut sample = Sample {
        timestamp,
        stack_id: r.stack_id,
        marker: r.marker,
        context_id: None,
        cpu_time: None,
      };
      self.annotate(t_us, &mut sample, clock_ok);
      self.trace.samples.push(sample);
    }
    self.add_line_ticks(&indexed, &memo, &kept);
    Ok(Added {
      samples: picked.len(),
      over_limit,
    })
  }

  /// Adds the position ticks of the nodes this profile's kept samples are on, scaled to
  /// the share of each node's samples kept (exactly V8's counts when all were kept).
  fn add_line_ticks(&mut self, p: &IndexedProfile, memo: &[Option<Resolved>], kept: &[u64]) {
    let mut recorded = vec![0u64; p.profile.nodes.len()];
    for &node in &p.sample_nodes {
      recorded[node as usize] += 1;
    }
    for (node, n) in p.profile.nodes.iter().enumerate() {
      let Some(Resolved {
        stack_id: Some(stack_id),
        marker: None,
      }) = memo[node]
      else {
        continue;
      };
      let ticks: Vec<(u32, u64)> = n
        .position_ticks
        .iter()
        .filter_map(|t| Some((u32::try_from(t.line).ok().filter(|l| *l > 0)?, t.ticks)))
        .filter(|(_, t)| *t > 0)
        .collect();
      for (line, t) in scale_ticks(&ticks, kept[node], recorded[node]) {
        *self.line_ticks.entry((stack_id, line)).or_default() += t;
      }
    }
  }

  pub fn finish(mut self) -> Trace {
    let mut lines: Vec<LineTicks> = self
      .line_ticks
      .drain()
      .map(|((stack_id, line), ticks)| LineTicks { stack_id, line, ticks })
      .filter(|l| l.ticks > 0)
      .collect();
    lines.sort_by_key(|l| (l.stack_id, l.line));
    self.trace.line_ticks = lines;
    self.trace
  }
}

/// A node's `(line, ticks)` for `kept` of its `recorded` samples: unchanged when all were
/// kept, else each line's share of the kept samples, rounded by largest remainder so that
/// they add up to the kept share of the node's ticks.
pub fn scale_ticks(ticks: &[(u32, u64)], kept: u64, recorded: u64) -> Vec<(u32, u64)> {
  let total: u64 = ticks.iter().map(|t| t.1).sum();
  // V8's ticks never exceed the node's samples; a hand-made profile's might.
  let recorded = recorded.max(total);
  if kept == 0 || recorded == 0 {
    return Vec::new();
  }
  if kept >= recorded {
    return ticks.to_vec();
  }
  let (kept, recorded) = (kept as u128, recorded as u128);
  let target = ((total as u128 * kept * 2 + recorded) / (recorded * 2)) as u64;
  let mut out: Vec<(u32, u64, u128)> = ticks
    .iter()
    .map(|&(line, t)| {
      let q = t as u128 * kept;
      (line, (q / recorded) as u64, q % recorded)
    })
    .collect();
  let mut left = target.saturating_sub(out.iter().map(|o| o.1).sum());
  let mut order: Vec<usize> = (0..out.len()).collect();
  order.sort_by(|&a, &b| out[b].2.cmp(&out[a].2).then(out[a].0.cmp(&out[b].0)));
  for i in order {
    if left == 0 {
      break;
    }
    out[i].1 += 1;
    left -= 1;
  }
  out.into_iter().filter(|o| o.1 > 0).map(|o| (o.0, o.1)).collect()
}
