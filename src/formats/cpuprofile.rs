//! Chrome DevTools' `.cpuprofile` (the inspector's `Profiler.stop` result as a file), as
//! DevTools' Performance panel and speedscope open it.

use super::{name, path, pseudo};
use crate::trace::Trace;
use serde::Serialize;
use std::collections::HashMap;

/// A Chrome DevTools CPU profile (`.cpuprofile`).
pub fn to_cpuprofile(t: &Trace) -> CpuProfileOut {
  let mut nodes = vec![NodeOut::new(1, "(root)", "", -1, -1)];
  let mut child_of: HashMap<(u32, String), u32> = HashMap::new();
  let mut node_of_stack: HashMap<u32, u32> = HashMap::new();
  let mut child = |nodes: &mut Vec<NodeOut>, parent: u32, key: String, make: &dyn Fn(u32) -> NodeOut| -> u32 {
    if let Some(id) = child_of.get(&(parent, key.clone())) {
      return *id;
    }
    let id = nodes.len() as u32 + 1;
    nodes.push(make(id));
    nodes[(parent - 1) as usize].children.push(id);
    child_of.insert((parent, key), id);
    id
  };
  let mut samples = Vec::with_capacity(t.samples.len());
  let mut deltas = Vec::with_capacity(t.samples.len());
  let start = t.samples.first().map_or(0.0, |s| s.timestamp);
  let mut prev = start;
  for s in &t.samples {
    let node = match s.stack_id {
      Some(id) => match node_of_stack.get(&id) {
        Some(n) => *n,
        None => {
          let mut parent = 1;
          for frame in path(t, Some(id)) {
            let f = &t.frames[frame as usize];
            let url = f.resource_id.map_or("", |r| t.resources[r as usize].as_str());
            let line = f.line.map_or(-1, |l| l as i64 - 1);
            let column = f.column.map_or(-1, |c| c as i64 - 1);
            let name = name(t, frame).to_owned();
            parent = child(&mut nodes, parent, format!("f{frame}"), &|id| {
              NodeOut::new(id, &name, url, line, column)
            });
          }
          node_of_stack.insert(id, parent);
          parent
        }
      },
      None if s.marker.is_none() => 1,
      None => {
        let name = pseudo(s.marker);
        child(&mut nodes, 1, name.to_owned(), &|id| NodeOut::new(id, name, "", -1, -1))
      }
    };
    nodes[(node - 1) as usize].hit_count += 1;
    samples.push(node);
    deltas.push(((s.timestamp - prev) * 1000.0).round() as i64);
    prev = s.timestamp;
  }
  // Line ticks as V8 writes them: each stack's node's `positionTicks`.
  for l in &t.line_ticks {
    if let Some(node) = node_of_stack.get(&l.stack_id) {
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
