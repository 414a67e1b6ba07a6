//! The trace builder: turns V8 CPU profiles into the JS Self-Profiling API's
//! `ProfilerTrace` ({ resources, frames, stacks, samples }), following the spec's
//! processing model ("take a sample", "get a stack ID", "get a frame ID",
//! "get an element ID").

pub mod build;
pub mod join;
pub mod profiler_frames;
pub mod segments;
pub mod v8_profile;

use crate::capture::ring::{self, Entry};
use crate::parallel::PARALLEL_CONTEXTS;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::collections::HashMap;
use std::sync::Arc;
use v8_profile::{CpuProfile, IndexedProfile, NodeKind, ProfileError};

pub use crate::capture::labels::LabelSet;

/// The context id of "no labels".
pub const NO_CONTEXT: u32 = 0;
/// The context index of a kept set that holds no labels: the sample gets no context.
const NO_LABELS: u32 = u32::MAX;

#[derive(Debug, Default, Clone, PartialEq, Serialize, Deserialize)]
pub struct Trace {
  pub resources: Vec<String>,
  pub frames: Vec<Frame>,
  pub stacks: Vec<Stack>,
  pub samples: Vec<Sample>,
  /// The label sets this trace's samples reference (`samples[i].contextId`).
  #[serde(default)]
  pub contexts: Vec<Context>,
  /// How samples were joined to the SIGPROF ring; absent when no ring was used.
  #[serde(default, skip_serializing_if = "Option::is_none")]
  pub metadata: Option<Metadata>,
  /// Extension (optional; readers that do not know it ignore it): per stack, how many of
  /// the samples whose innermost stack is that one V8 took at each source line of its
  /// frame's function, from V8's position ticks. See `LineTicks`.
  #[serde(default, rename = "lineTicks", skip_serializing_if = "Vec::is_empty")]
  pub line_ticks: Vec<LineTicks>,
  /// Extension (optional): a weighted profile, such as a heap profile, whose samples stand
  /// for an amount (bytes) rather than one sample each. See `SampleWeights`.
  #[serde(default, skip_serializing_if = "Option::is_none")]
  pub weight: Option<SampleWeights>,
  /// Extension (optional): what source mapping did, and where mapped frames were in the
  /// generated code (`crate::symbolize`). Absent when no frame's script has a source map.
  #[serde(
    default,
    rename = "sourceMaps",
    skip_serializing_if = "Option::is_none",
    deserialize_with = "crate::symbolize::lenient"
  )]
  pub source_maps: Option<crate::symbolize::SourceMapsInfo>,
  /// Extension (optional): the text of the hot lines, `{ [url]: { [line]: text } }`, from
  /// the scripts the recording loaded and source maps' `sourcesContent`
  /// (`crate::symbolize::text`). Absent when there is none.
  #[serde(
    default,
    rename = "sourceText",
    skip_serializing_if = "Option::is_none",
    deserialize_with = "crate::symbolize::text::lenient"
  )]
  pub source_text: Option<crate::symbolize::SourceText>,
}

/// What each sample of a weighted trace stands for: `values[i]` of `unit` for sample i (a
/// heap profile: the bytes in use allocated at that stack), and `counts[i]` things (the
/// objects); both parallel to `samples`. Such a trace has no time line: its samples are
/// aggregates, not points in time.
#[derive(Debug, Default, Clone, PartialEq, Serialize, Deserialize)]
pub struct SampleWeights {
  /// What is measured, as pprof names it (`inuse_space`).
  #[serde(rename = "type")]
  pub kind: String,
  /// Its unit (`bytes`).
  pub unit: String,
  pub values: Vec<f64>,
  /// What the counts count (`inuse_objects`), if there are counts.
  #[serde(default, rename = "countType", skip_serializing_if = "Option::is_none")]
  pub count_kind: Option<String>,
  #[serde(default, skip_serializing_if = "Option::is_none")]
  pub counts: Option<Vec<f64>>,
}

/// Samples of one stack at one line of its innermost frame's function.
///
/// V8 counts lines per call-tree node over its whole recording, not per sample, so this is
/// a total for the stack, sorted by stack then line. The ticks of a stack add up to at most
/// its samples (V8 has no line for some). When a trace keeps only part of a recording (its
/// window, stride or buffer limit), each node's counts are scaled to the samples kept
/// (largest remainder, so they stay whole and add up); otherwise they are V8's own.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LineTicks {
  pub stack_id: u32,
  /// 1-based line in the frame's resource.
  pub line: u32,
  pub ticks: u64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Context {
  #[serde(serialize_with = "labels_as_object", deserialize_with = "labels_from_object")]
  pub labels: Labels,
}

impl Context {
  pub fn new(labels: impl Into<Labels>) -> Context {
    Context { labels: labels.into() }
  }
}

fn labels_as_object<S: Serializer>(labels: &Labels, s: S) -> Result<S::Ok, S::Error> {
  s.collect_map(labels.iter())
}

/// A context's labels, `(key, value)` pairs in key order: a set of its own (read from a
/// file, merged, made by a format), or one the label store keeps, shared with it rather
/// than copied (a recording's trace may reference ~100k sets: a copy of each string cost
/// more than the rest of the build).
#[derive(Clone)]
pub enum Labels {
  Owned(Arc<LabelSet>),
  Kept(crate::capture::labels::Packed),
}

/// The pairs of `Labels`.
#[derive(Clone)]
pub enum LabelsIter<'a> {
  Owned(std::slice::Iter<'a, (String, String)>),
  Kept(crate::capture::labels::PackedIter<'a>),
}

impl<'a> Iterator for LabelsIter<'a> {
  type Item = (&'a str, &'a str);

  fn next(&mut self) -> Option<Self::Item> {
    match self {
      LabelsIter::Owned(it) => it.next().map(|(k, v)| (k.as_str(), v.as_str())),
      LabelsIter::Kept(it) => it.next(),
    }
  }
}

impl Labels {
  pub fn iter(&self) -> LabelsIter<'_> {
    match self {
      Labels::Owned(set) => LabelsIter::Owned(set.iter()),
      Labels::Kept(packed) => LabelsIter::Kept(packed.iter()),
    }
  }

  pub fn len(&self) -> usize {
    match self {
      Labels::Owned(set) => set.len(),
      Labels::Kept(packed) => packed.len(),
    }
  }

  pub fn is_empty(&self) -> bool {
    self.len() == 0
  }

  /// The value of `key`, if the set has it.
  pub fn get(&self, key: &str) -> Option<&str> {
    self.iter().find(|(k, _)| *k == key).map(|(_, v)| v)
  }

  /// The pairs as owned strings.
  pub fn to_set(&self) -> LabelSet {
    match self {
      Labels::Owned(set) => (**set).clone(),
      Labels::Kept(packed) => packed.to_set(),
    }
  }
}

impl From<LabelSet> for Labels {
  fn from(set: LabelSet) -> Labels {
    Labels::Owned(Arc::new(set))
  }
}

impl From<Arc<LabelSet>> for Labels {
  fn from(set: Arc<LabelSet>) -> Labels {
    Labels::Owned(set)
  }
}

impl From<crate::capture::labels::Packed> for Labels {
  fn from(packed: crate::capture::labels::Packed) -> Labels {
    Labels::Kept(packed)
  }
}

impl PartialEq for Labels {
  fn eq(&self, other: &Labels) -> bool {
    self.iter().eq(other.iter())
  }
}

impl std::fmt::Debug for Labels {
  fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
    f.debug_list().entries(self.iter()).finish()
  }
}

#[derive(Debug, Default, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Metadata {
  /// Samples joined to a SIGPROF bracket (their labels and CPU time are known).
  pub matched_samples: usize,
  /// Samples V8 took without a signal (at start, on deoptimization) whose context is
  /// certain: the signals around them saw the same context with no switch between.
  /// They have labels but no `cpuTime`.
  pub between_signals_samples: usize,
  /// Samples with no bracket and no certain context: no labels, never guessed.
  pub unmatched_samples: usize,
  /// Samples whose context was known but whose labels were no longer kept.
  #[serde(skip_serializing_if = "is_zero")]
  pub labels_lost_samples: usize,
  /// How the recording's thread told the handler its label set.
  #[serde(skip_serializing_if = "Option::is_none")]
  pub label_path: Option<LabelPath>,
}

/// How a thread tells the SIGPROF handler its current label set.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum LabelPath {
  /// async_hooks publish the set's id at every continuation.
  AsyncHooks,
  /// The handler reads it from the async context frame (Node >= 24).
  ContextFrame,
  /// No handler runs (Windows): JS logs each switch with its time, and samples are
  /// joined to the log by time.
  SwitchLog,
}

fn labels_from_object<'de, D: Deserializer<'de>>(d: D) -> Result<Labels, D::Error> {
  let map = std::collections::BTreeMap::<String, String>::deserialize(d)?;
  Ok(Labels::from(map.into_iter().collect::<LabelSet>()))
}

fn is_zero(n: &usize) -> bool {
  *n == 0
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Frame {
  pub name: String,
  #[serde(skip_serializing_if = "Option::is_none")]
  pub resource_id: Option<u32>,
  /// 1-based line of the function's definition.
  #[serde(skip_serializing_if = "Option::is_none")]
  pub line: Option<u32>,
  /// 1-based column of the function's definition.
  #[serde(skip_serializing_if = "Option::is_none")]
  pub column: Option<u32>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Stack {
  pub frame_id: u32,
  #[serde(skip_serializing_if = "Option::is_none")]
  pub parent_id: Option<u32>,
}

/// Why a sample has no JS stack (the spec's markers extension, for Node).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Marker {
  /// V8 was collecting garbage.
  Gc,
  /// The event loop was waiting for work.
  Idle,
  /// VM or native work that V8 could not attribute to a JS function (V8's `(program)`).
  Other,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Sample {
  /// Milliseconds since `performance.timeOrigin`.
  pub timestamp: f64,
  #[serde(skip_serializing_if = "Option::is_none")]
  pub stack_id: Option<u32>,
  #[serde(skip_serializing_if = "Option::is_none")]
  pub marker: Option<Marker>,
  /// Index into `contexts`: the labels in effect when the sample was taken.
  #[serde(skip_serializing_if = "Option::is_none")]
  pub context_id: Option<u32>,
  /// Thread CPU time (ms) since the previous sample of this trace (or its start).
  #[serde(skip_serializing_if = "Option::is_none")]
  pub cpu_time: Option<f64>,
}

/// Which of a profile's samples belong to a trace, and how to place them in time.
#[derive(Debug, Clone, Copy)]
pub struct Window {
  /// `performance.timeOrigin` on V8's clock, in microseconds.
  pub origin_us: f64,
  /// Samples before this time (ms since the time origin) are not the trace's.
  pub from_ms: f64,
  /// Samples after this time (ms since the time origin) are not the trace's:
  /// the profiler had been stopped.
  pub until_ms: f64,
  /// The sample buffer size limit.
  pub max_samples: usize,
  /// Keep every `stride`-th of the profile's samples (in time order, from its first):
  /// a profiler whose interval is `stride` times the sampler's.
  pub stride: usize,
}

impl Default for Window {
  fn default() -> Self {
    Window {
      origin_us: 0.0,
      from_ms: f64::NEG_INFINITY,
      until_ms: f64::INFINITY,
      max_samples: usize::MAX,
      stride: 1,
    }
  }
}

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
  trace: Trace,
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

/// The id of `key` in `list`, adding `make(key)` at the end when it is new.
pub(crate) fn element_id<K: std::hash::Hash + Eq + Clone, V, S: std::hash::BuildHasher>(
  ids: &mut std::collections::HashMap<K, u32, S>,
  list: &mut Vec<V>,
  key: K,
  make: impl FnOnce(K) -> V,
) -> u32 {
  if let Some(id) = ids.get(&key) {
    return *id;
  }
  let id = list.len() as u32;
  ids.insert(key.clone(), id);
  list.push(make(key));
  id
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
pub(crate) fn scale_ticks(ticks: &[(u32, u64)], kept: u64, recorded: u64) -> Vec<(u32, u64)> {
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

/// The trace in the form JS builds its trace object from without parsing one big JSON
/// string on the event loop: the small tables as JSON, the contexts as columns of their
/// label values in pieces, and the samples as columns.
///
/// A context's labels object is its key set's keys (`key_sets[context_keys[c]]`, in the
/// trace's key order) with, in turn, the values of `value_ends`: a value of its piece
/// ends at the next of them, counted in UTF-16 code units (what JS's `slice` counts)
/// from the piece's start; a negative one `-1 - i` is `shared[i]` instead. JS slices the
/// values out of one string per piece rather than parsing JSON: ~5× less event-loop time
/// for ~60k label sets.
pub struct Parts {
  /// `{ resources, frames, stacks, metadata?, lineTicks?, sourceMaps?, sourceText? }`.
  pub head: String,
  /// The distinct key lists of the contexts, as JSON: `[["endpoint", "span_id"], ...]`.
  pub key_sets: String,
  /// Per context, the index of its key list in `key_sets`.
  pub context_keys: Vec<u32>,
  /// The contexts' label values, concatenated, in pieces of at most `CONTEXTS_PER_PIECE`
  /// contexts (a piece ends once it passes `PIECE_BYTES`).
  pub values: Vec<String>,
  /// Per value, in context then key order, where it ends in its piece (UTF-16 units),
  /// or `-1 - i` for `shared[i]`.
  pub value_ends: Vec<i32>,
  /// Label values that repeat from context to context (see `Repeats`), one string each.
  pub shared: Vec<String>,
  /// Per piece, how many contexts it holds.
  pub piece_contexts: Vec<u32>,
  pub timestamp: Vec<f64>,
  /// `stackId`, or -1 for none.
  pub stack: Vec<i32>,
  /// 0: none, 1: gc, 2: idle, 3: other.
  pub marker: Vec<u8>,
  /// `contextId`, or -1 for none.
  pub context: Vec<i32>,
  /// `cpuTime`, or NaN for none.
  pub cpu_time: Vec<f64>,
}

/// Contexts per piece of `Parts` (JS makes one piece's per turn of the event loop): at
/// most this many, and a piece ends once it passes `PIECE_BYTES` (label sets can be large).
pub const CONTEXTS_PER_PIECE: usize = 2048;
pub const PIECE_BYTES: usize = 4 << 20;

/// `Parts`' context columns.
#[derive(Default)]
struct ContextColumns<'a> {
  key_sets: Vec<Vec<&'a str>>,
  context_keys: Vec<u32>,
  values: Vec<String>,
  value_ends: Vec<i32>,
  piece_contexts: Vec<u32>,
  shared: Vec<&'a str>,
}

impl<'a> ContextColumns<'a> {
  fn of(contexts: &'a [Context]) -> ContextColumns<'a> {
    let mut out = ContextColumns {
      context_keys: Vec::with_capacity(contexts.len()),
      ..Default::default()
    };
    let mut key_set_ids: HashMap<Vec<&'a str>, u32> = HashMap::new();
    let mut repeats = Repeats::default();
    let mut piece = String::new();
    let (mut in_piece, mut piece_units) = (0u32, 0usize);
    for c in contexts {
      // Most contexts have the key set of the one before: no lookup, no allocation.
      let same = out.context_keys.last().is_some_and(|&last| {
        c.labels
          .iter()
          .map(|(k, _)| k)
          .eq(out.key_sets[last as usize].iter().copied())
      });
      let id = if same {
        *out.context_keys.last().unwrap_or(&0)
      } else {
        let keys: Vec<&'a str> = c.labels.iter().map(|(k, _)| k).collect();
        *key_set_ids.entry(keys).or_insert_with_key(|keys| {
          out.key_sets.push(keys.clone());
          (out.key_sets.len() - 1) as u32
        })
      };
      out.context_keys.push(id);
      for (k, v) in c.labels.iter() {
        if let Some(i) = repeats.shared(k, v, &mut out.shared) {
          out.value_ends.push(-1 - i as i32);
          continue;
        }
        piece.push_str(v);
        piece_units += utf16_len(v);
        out.value_ends.push(piece_units as i32);
      }
      in_piece += 1;
      if in_piece as usize == CONTEXTS_PER_PIECE || piece.len() >= PIECE_BYTES {
        out.values.push(std::mem::take(&mut piece));
        out.piece_contexts.push(in_piece);
        (in_piece, piece_units) = (0, 0);
      }
    }
    if in_piece > 0 {
      out.values.push(piece);
      out.piece_contexts.push(in_piece);
    }
    out
  }

  /// Appends the columns of the contexts after these (`later`'s pieces after these ones,
  /// its shared values after these ones: a value both share is then there twice).
  fn append(&mut self, later: ContextColumns<'a>) {
    let ids: Vec<u32> = later
      .key_sets
      .into_iter()
      .map(|keys| match self.key_sets.iter().position(|k| *k == keys) {
        Some(i) => i as u32,
        None => {
          self.key_sets.push(keys);
          (self.key_sets.len() - 1) as u32
        }
      })
      .collect();
    self
      .context_keys
      .extend(later.context_keys.into_iter().map(|id| ids[id as usize]));
    self.values.extend(later.values);
    let past = self.shared.len() as i32;
    self
      .value_ends
      .extend(later.value_ends.into_iter().map(|e| if e < 0 { e - past } else { e }));
    self.shared.extend(later.shared);
    self.piece_contexts.extend(later.piece_contexts);
  }
}

/// Which label values go to JS once, in `Parts::shared`, rather than once per context. A
/// value that repeats (a request's endpoint, method or tenant) is then one JS string for
/// all its contexts but the first, not a string each: at ~80k contexts with 4 endpoints
/// that is ~80k fewer objects for V8's scavenges to copy as the trace object is made
/// (made and collected in ~52 ms rather than ~74 ms, in a JS model of it). A key whose
/// values are nearly all new (a span id per request) has its values sliced from the
/// piece, as before, and no longer looked up.
#[derive(Default)]
struct Repeats<'a> {
  /// Per label key (at most `KEYS_TRACKED`, by its text): how its values fare.
  keys: Vec<(&'a str, KeyValues)>,
  /// Values seen: their index in `shared`, or `ONCE` (seen once, sliced).
  ids: crate::FastMap<&'a str, u32>,
}

/// How a label key's values fare where each could be looked up in a table of those seen:
/// the first `VALUES_TRIED` are; if nearly all of them were new (a span id per request),
/// the key's values are unique and no longer looked up (a lookup of ~100k distinct values
/// misses the cache each time), else they repeat and are looked up from then on. pprof's
/// string table (`formats::pprof`) and `Parts::shared` decide alike.
#[derive(Clone, Copy)]
pub(crate) enum KeyValues {
  /// Looked up so far: how many, and how many of them were new.
  Trying {
    tried: u32,
    new: u32,
  },
  Repeating,
  Unique,
}

/// A key's values looked up before deciding whether they repeat.
pub(crate) const VALUES_TRIED: u32 = 1024;
/// Past `VALUES_TRIED`, a key with at least this many new values in 1,024 is unique per
/// label set: its values are no longer looked up.
const VALUES_NEW: u32 = 960;

impl KeyValues {
  /// A key none of whose values was looked up yet.
  pub(crate) const FIRST: KeyValues = KeyValues::Trying { tried: 0, new: 0 };

  /// After one more of the key's values was looked up (`new`: not seen before).
  pub(crate) fn after(self, new: bool) -> KeyValues {
    let KeyValues::Trying { tried, new: fresh } = self else {
      return self;
    };
    let (tried, fresh) = (tried + 1, fresh + u32::from(new));
    match tried {
      VALUES_TRIED if fresh >= VALUES_NEW => KeyValues::Unique,
      VALUES_TRIED => KeyValues::Repeating,
      _ => KeyValues::Trying { tried, new: fresh },
    }
  }
}

const ONCE: u32 = u32::MAX;
/// Label keys whose values are considered for sharing (the rest are sliced).
const KEYS_TRACKED: usize = 32;
/// At most this many values remembered; later new ones are sliced.
const VALUES_SEEN: usize = 1 << 16;

impl<'a> Repeats<'a> {
  /// The index in `shared` of value `v` of key `k`, if it goes there: from its second
  /// context on.
  fn shared(&mut self, k: &'a str, v: &'a str, shared: &mut Vec<&'a str>) -> Option<u32> {
    // The keys of a kept label set are the store's interned strings: the same address.
    let slot = match self
      .keys
      .iter()
      .position(|(key, _)| (std::ptr::eq(key.as_ptr(), k.as_ptr()) && key.len() == k.len()) || *key == k)
    {
      Some(slot) => slot,
      None if self.keys.len() < KEYS_TRACKED => {
        self.keys.push((k, KeyValues::FIRST));
        self.keys.len() - 1
      }
      None => return None,
    };
    let state = self.keys[slot].1;
    if let KeyValues::Unique = state {
      return None;
    }
    let seen = self.ids.len() < VALUES_SEEN;
    let (id, new) = match self.ids.get_mut(v) {
      Some(id) if *id == ONCE => {
        *id = shared.len() as u32;
        shared.push(v);
        (Some(*id), false)
      }
      Some(id) => (Some(*id), false),
      None => {
        if seen {
          self.ids.insert(v, ONCE);
        }
        (None, true)
      }
    };
    self.keys[slot].1 = state.after(new);
    id
  }
}

/// The length of `s` in UTF-16 code units.
fn utf16_len(s: &str) -> usize {
  if s.is_ascii() {
    s.len()
  } else {
    s.chars().map(char::len_utf16).sum()
  }
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Head<'a> {
  resources: &'a [String],
  frames: &'a [Frame],
  stacks: &'a [Stack],
  #[serde(skip_serializing_if = "Option::is_none")]
  metadata: Option<&'a Metadata>,
  #[serde(skip_serializing_if = "<[LineTicks]>::is_empty")]
  line_ticks: &'a [LineTicks],
  #[serde(skip_serializing_if = "Option::is_none")]
  source_maps: Option<&'a crate::symbolize::SourceMapsInfo>,
  #[serde(skip_serializing_if = "Option::is_none")]
  source_text: Option<&'a crate::symbolize::SourceText>,
}

impl Trace {
  /// The frame ids of stack `stack_id`, leaf first, as pprof and OTLP list a sample's
  /// locations. Stops at a stack id out of range (a hostile trace) rather than panicking.
  pub fn frames_leaf_first(&self, stack_id: Option<u32>) -> impl Iterator<Item = u32> + Clone + '_ {
    std::iter::successors(stack_id.and_then(|id| self.stacks.get(id as usize)), |st| {
      st.parent_id.and_then(|p| self.stacks.get(p as usize))
    })
    .map(|st| st.frame_id)
  }

  /// The trace as `Parts`. With many contexts, half of them have their columns made on a
  /// thread of their own (reading ~80k label sets stored seconds earlier, out of the cache,
  /// took ~7.5 ms on one thread).
  pub fn parts(&self) -> Parts {
    let head = Head {
      resources: &self.resources,
      frames: &self.frames,
      stacks: &self.stacks,
      metadata: self.metadata.as_ref(),
      line_ticks: &self.line_ticks,
      source_maps: self.source_maps.as_ref(),
      source_text: self.source_text.as_ref(),
    };
    // Serializing plain structs of strings and numbers cannot fail.
    let head = serde_json::to_string(&head).unwrap_or_default();
    let contexts = if self.contexts.len() >= PARALLEL_CONTEXTS {
      // Split at a piece's end, so that each half's pieces are whole.
      let mid = self.contexts.len() / 2 / CONTEXTS_PER_PIECE * CONTEXTS_PER_PIECE;
      let (first, second) = self.contexts.split_at(mid);
      let (mut columns, rest) = crate::parallel::both(
        || ContextColumns::of(first),
        "selfprof-parts",
        || ContextColumns::of(second),
      );
      columns.append(rest);
      columns
    } else {
      ContextColumns::of(&self.contexts)
    };
    let n = self.samples.len();
    let mut p = Parts {
      head,
      key_sets: serde_json::to_string(&contexts.key_sets).unwrap_or_default(),
      context_keys: contexts.context_keys,
      values: contexts.values,
      value_ends: contexts.value_ends,
      shared: contexts.shared.into_iter().map(str::to_owned).collect(),
      piece_contexts: contexts.piece_contexts,
      timestamp: Vec::with_capacity(n),
      stack: Vec::with_capacity(n),
      marker: Vec::with_capacity(n),
      context: Vec::with_capacity(n),
      cpu_time: Vec::with_capacity(n),
    };
    for s in &self.samples {
      p.timestamp.push(s.timestamp);
      p.stack.push(s.stack_id.map_or(-1, |id| id as i32));
      p.marker.push(match s.marker {
        None => 0,
        Some(Marker::Gc) => 1,
        Some(Marker::Idle) => 2,
        Some(Marker::Other) => 3,
      });
      p.context.push(s.context_id.map_or(-1, |id| id as i32));
      p.cpu_time.push(s.cpu_time.unwrap_or(f64::NAN));
    }
    p
  }

  pub fn to_json(&self) -> String {
    // Serializing plain structs of strings and numbers cannot fail.
    serde_json::to_string(self).unwrap_or_default()
  }

  /// The `json-gzip` format: the trace's JSON, gzip'd.
  pub fn to_json_gzip(&self) -> std::io::Result<Vec<u8>> {
    // serde_json writes in small pieces: the pipe hands deflate 64 KiB at a time, on a
    // second thread.
    crate::formats::gzip::gzip(flate2::Compression::default(), |pipe| {
      serde_json::to_writer(pipe, self).map_err(std::io::Error::from)
    })
  }
}

#[cfg(test)]
mod tests;

#[cfg(test)]
mod lines_tests;
