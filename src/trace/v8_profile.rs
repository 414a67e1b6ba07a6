//! V8's CPU profile as the inspector `Profiler.stop` command returns it.
//!
//! Times are microseconds of V8's `TimeTicks` clock, which on Linux is
//! `CLOCK_MONOTONIC` (the same clock as `process.hrtime()` and `performance.now()`).
//! Line and column numbers are 0-based; -1 means "unknown".

use serde::Deserialize;

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CpuProfile {
  pub nodes: Vec<ProfileNode>,
  pub start_time: f64,
  pub end_time: f64,
  #[serde(default)]
  pub samples: Vec<u32>,
  #[serde(default)]
  pub time_deltas: Vec<f64>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ProfileNode {
  pub id: u32,
  pub call_frame: CallFrame,
  #[serde(default)]
  pub children: Vec<u32>,
  /// How many of this node's own samples V8 took at each source line of its function
  /// (`{ line, ticks }`, 1-based lines), when it recorded them: totals per node, not per
  /// sample.
  #[serde(default)]
  pub position_ticks: Vec<PositionTick>,
}

/// One entry of a node's `positionTicks`.
#[derive(Debug, Clone, Copy, Deserialize)]
pub struct PositionTick {
  /// 1-based line in the function's script.
  pub line: i64,
  pub ticks: u64,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CallFrame {
  pub function_name: String,
  #[serde(default)]
  pub script_id: String,
  #[serde(default)]
  pub url: String,
  pub line_number: i64,
  pub column_number: i64,
}

/// What a profile node stands for. V8 puts pseudo-nodes in the tree for time that
/// is not spent in a JS function; they carry no script and no position.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NodeKind {
  /// `(root)`: the top of the tree; a sample on it has an empty stack.
  Root,
  /// `(garbage collector)`
  Gc,
  /// `(idle)`: the isolate told V8 it was idle (waiting in the event loop).
  Idle,
  /// `(program)`: VM or native work that V8 could not attribute to JS.
  Program,
  /// A JS or builtin function.
  Function,
}

impl CallFrame {
  pub fn kind(&self) -> NodeKind {
    let pseudo = self.url.is_empty() && self.line_number < 0 && self.script_id.trim_matches('0').is_empty();
    if !pseudo {
      return NodeKind::Function;
    }
    match self.function_name.as_str() {
      "(root)" => NodeKind::Root,
      "(garbage collector)" => NodeKind::Gc,
      "(idle)" => NodeKind::Idle,
      "(program)" => NodeKind::Program,
      _ => NodeKind::Function,
    }
  }
}

/// A profile whose node tree has been checked and indexed.
pub struct IndexedProfile<'a> {
  pub profile: &'a CpuProfile,
  /// Node index of each node's parent (`None` for the root and for orphans).
  pub parent: Vec<Option<usize>>,
  /// Node index by V8 node id.
  pub by_id: crate::FastMap<u32, usize>,
  /// Node index of each sample (looked up once: ~128k samples in a long recording).
  pub sample_nodes: Vec<u32>,
}

#[derive(Debug, PartialEq)]
pub enum ProfileError {
  Json(String),
  LengthMismatch { samples: usize, deltas: usize },
  DuplicateNode(u32),
  UnknownNode(u32),
  Cycle(u32),
}

impl std::fmt::Display for ProfileError {
  fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
    match self {
      ProfileError::Json(e) => write!(f, "not a V8 CPU profile: {e}"),
      ProfileError::LengthMismatch { samples, deltas } => {
        write!(f, "V8 CPU profile has {samples} samples but {deltas} timeDeltas")
      }
      ProfileError::DuplicateNode(id) => write!(f, "V8 CPU profile has node id {id} twice"),
      ProfileError::UnknownNode(id) => write!(f, "V8 CPU profile refers to unknown node id {id}"),
      ProfileError::Cycle(id) => write!(f, "V8 CPU profile node {id} is its own ancestor"),
    }
  }
}

impl std::error::Error for ProfileError {}

impl CpuProfile {
  pub fn from_json(json: &str) -> Result<CpuProfile, ProfileError> {
    serde_json::from_str(json).map_err(|e| ProfileError::Json(e.to_string()))
  }

  /// Checks the tree and the sample arrays, and indexes the nodes.
  pub fn index(&self) -> Result<IndexedProfile<'_>, ProfileError> {
    if self.samples.len() != self.time_deltas.len() {
      return Err(ProfileError::LengthMismatch {
        samples: self.samples.len(),
        deltas: self.time_deltas.len(),
      });
    }
    let mut by_id = crate::FastMap::with_capacity_and_hasher(self.nodes.len(), Default::default());
    for (i, node) in self.nodes.iter().enumerate() {
      if by_id.insert(node.id, i).is_some() {
        return Err(ProfileError::DuplicateNode(node.id));
      }
    }
    let mut parent = vec![None; self.nodes.len()];
    for (i, node) in self.nodes.iter().enumerate() {
      for child in &node.children {
        let c = *by_id.get(child).ok_or(ProfileError::UnknownNode(*child))?;
        if parent[c].is_none() {
          parent[c] = Some(i);
        }
      }
    }
    // A cycle would make every walk to the root endless: reject it here, once,
    // in O(nodes): 0 = not seen, 1 = on the current walk, 2 = known to reach the root.
    let mut state = vec![0u8; self.nodes.len()];
    let mut path = Vec::new();
    for start in 0..self.nodes.len() {
      let mut at = Some(start);
      while let Some(i) = at {
        match state[i] {
          2 => break,
          1 => return Err(ProfileError::Cycle(self.nodes[i].id)),
          _ => {
            state[i] = 1;
            path.push(i);
            at = parent[i];
          }
        }
      }
      for i in path.drain(..) {
        state[i] = 2;
      }
    }
    // Samples of one node come in runs: the last id's index saves most lookups.
    let mut sample_nodes = Vec::with_capacity(self.samples.len());
    let mut last: Option<(u32, u32)> = None;
    for &id in &self.samples {
      let node = match last {
        Some((last_id, node)) if last_id == id => node,
        _ => {
          let node = *by_id.get(&id).ok_or(ProfileError::UnknownNode(id))? as u32;
          last = Some((id, node));
          node
        }
      };
      sample_nodes.push(node);
    }
    Ok(IndexedProfile {
      profile: self,
      parent,
      by_id,
      sample_nodes,
    })
  }
}

impl IndexedProfile<'_> {
  /// `(timestamp in µs, node index)` of every sample, in V8's order.
  pub fn samples_us(&self) -> impl Iterator<Item = (f64, usize)> + '_ {
    let p = self.profile;
    self
      .sample_nodes
      .iter()
      .zip(p.time_deltas.iter())
      .scan(p.start_time, move |t, (node, delta)| {
        *t += delta;
        Some((*t, *node as usize))
      })
  }
}
