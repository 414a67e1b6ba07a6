//! The JS Self-Profiling API's `ProfilerTrace` ({ resources, frames, stacks, samples },
//! with selfprof's contexts, metadata and line ticks): the data model every format reads
//! and writes. Made from V8's CPU profiles by `builder` (the spec's processing model),
//! joined to the handler's brackets by `join` (at the stop: `build`; while a recording
//! runs: `segments`), handed to JS as columns by `columns`.

pub mod blocks;
pub mod build;
pub mod builder;
pub mod columns;
pub mod join;
pub mod profiler_frames;
pub mod rebuild;
pub mod segments;
pub mod v8_profile;

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::sync::Arc;

pub use crate::capture::labels::LabelSet;
pub use builder::{scale_ticks, Added, LabelLookup, Labeler, TraceBuilder};

/// The context id of "no labels".
pub const NO_CONTEXT: u32 = 0;

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

impl Trace {
  /// The frame ids of stack `stack_id`, leaf first, as pprof and OTLP list a sample's
  /// locations. Stops at a stack id out of range (a hostile trace) rather than panicking.
  pub fn frames_leaf_first(&self, stack_id: Option<u32>) -> impl Iterator<Item = u32> + Clone + '_ {
    std::iter::successors(stack_id.and_then(|id| self.stacks.get(id as usize)), |st| {
      st.parent_id.and_then(|p| self.stacks.get(p as usize))
    })
    .map(|st| st.frame_id)
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
