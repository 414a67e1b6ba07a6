//! Chrome DevTools' `.cpuprofile` (the inspector's `Profiler.stop` result as a file), as
//! DevTools' Performance panel and speedscope open it.

use super::{name, pseudo};
use crate::trace::Trace;
use serde::Serialize;
use std::collections::HashMap;

/// A Chrome DevTools CPU profile (`.cpuprofile`). One node per stack that samples
/// reference (and its callers), made from its caller's node: linear in the stacks.
pub fn to_cpuprofile(t: &Trace) -> CpuProfileOut {
  let mut nodes = vec![NodeOut::new(1, "(root)", "", -1, -1)];
  // (parent node, frame id or a pseudo-frame's key) -> node id
  let mut child_of: HashMap<(u32, u32), u32> = HashMap::new();
  let mut child = |nodes: &mut Vec<NodeOut>, parent: u32, key: u32, make: &dyn Fn(u32) -> NodeOut| -> u32 {
    *child_of.entry((parent, key)).or_insert_with(|| {
      let id = nodes.len() as u32 + 1;
      nodes.push(make(id));
      nodes[(parent - 1) as usize].children.push(id);
      id
    })
  };
  // Stacks samples reference, and their callers (parents come before children).
  let mut used = vec![false; t.stacks.len()];
  for s in &t.samples {
    if let Some(id) = s.stack_id {
      used[id as usize] = true;
    }
  }
  for i in (0..t.stacks.len()).rev() {
    if let (true, Some(p)) = (used[i], t.stacks[i].parent_id) {
      used[p as usize] = true;
    }
  }
  let mut node_of_stack = vec![0u32; t.stacks.len()];
  for (i, st) in t.stacks.iter().enumerate() {
    if !used[i] {
      continue;
    }
    let parent = st.parent_id.map_or(1, |p| node_of_stack[p as usize]);
    let frame = st.frame_id;
    let f = &t.frames[frame as usize];
    let url = f.resource_id.map_or("", |r| t.resources[r as usize].as_str());
    let line = f.line.map_or(-1, |l| l as i64 - 1);
    let column = f.column.map_or(-1, |c| c as i64 - 1);
    let name = name(t, frame);
    node_of_stack[i] = child(&mut nodes, parent, frame, &|id| {
      NodeOut::new(id, name, url, line, column)
    });
  }
  let mut samples = Vec::with_capacity(t.samples.len());
  let mut deltas = Vec::with_capacity(t.samples.len());
  let start = t.samples.first().map_or(0.0, |s| s.timestamp);
  let mut prev = start;
  for s in &t.samples {
    let node = match s.stack_id {
      Some(id) => node_of_stack[id as usize],
      None if s.marker.is_none() => 1,
      None => {
        let name = pseudo(s.marker);
        let key = u32::MAX - s.marker.map_or(0, |m| m as u32);
        child(&mut nodes, 1, key, &|id| NodeOut::new(id, name, "", -1, -1))
      }
    };
    nodes[(node - 1) as usize].hit_count += 1;
    samples.push(node);
    deltas.push(((s.timestamp - prev) * 1000.0).round() as i64);
    prev = s.timestamp;
  }
  // Line ticks as V8 writes them: each stack's node's `positionTicks`.
  for l in &t.line_ticks {
    if let Some(&node) = node_of_stack.get(l.stack_id as usize).filter(|n| **n > 0) {
      nodes[(node - 1) as usize].position_ticks.push(PositionTickOut {
        line: l.line,
        ticks: l.ticks,
      });
    }
  }
  CpuProfileOut {
    nodes,
    start_time: (start * 1000.0).round() as i64,
    end_time: (prev * 1000.0).round() as i64,
    samples,
    time_deltas: deltas,
  }
}

impl CpuProfileOut {
  /// An upper bound on the bytes of its JSON.
  pub fn estimated_bytes(&self) -> u64 {
    let nodes: u64 = self
      .nodes
      .iter()
      .map(|n| {
        2 * (n.call_frame.function_name.len() + n.call_frame.url.len()) as u64
          + 160
          + 11 * n.children.len() as u64
          + 48 * n.position_ticks.len() as u64
      })
      .sum();
    nodes + 32 * self.samples.len() as u64 + 64
  }
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CpuProfileOut {
  pub nodes: Vec<NodeOut>,
  pub start_time: i64,
  pub end_time: i64,
  pub samples: Vec<u32>,
  pub time_deltas: Vec<i64>,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeOut {
  pub id: u32,
  pub call_frame: CallFrameOut,
  pub hit_count: u64,
  pub children: Vec<u32>,
  #[serde(skip_serializing_if = "Vec::is_empty")]
  pub position_ticks: Vec<PositionTickOut>,
}

#[derive(Debug, Serialize)]
pub struct PositionTickOut {
  pub line: u32,
  pub ticks: u64,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CallFrameOut {
  pub function_name: String,
  pub script_id: String,
  pub url: String,
  pub line_number: i64,
  pub column_number: i64,
}

impl NodeOut {
  fn new(id: u32, name: &str, url: &str, line: i64, column: i64) -> NodeOut {
    NodeOut {
      id,
      call_frame: CallFrameOut {
        function_name: name.to_owned(),
        script_id: "0".into(),
        url: url.to_owned(),
        line_number: line,
        column_number: column,
      },
      hit_count: 0,
      children: Vec::new(),
      position_ticks: Vec::new(),
    }
  }
}
