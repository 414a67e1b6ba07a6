//! Converters from a selfprof trace (the spec's JSON) to other tools' formats:
//! Chrome DevTools `.cpuprofile` (also opened by speedscope) and folded stacks
//! (`a;b;c N`, read by flamegraph.pl, inferno and speedscope).

use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, HashMap};

/// The parts of a trace the converters read.
#[derive(Debug, Deserialize)]
pub struct TraceIn {
  pub resources: Vec<String>,
  pub frames: Vec<FrameIn>,
  pub stacks: Vec<StackIn>,
  pub samples: Vec<SampleIn>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FrameIn {
  pub name: String,
  pub resource_id: Option<u32>,
  pub line: Option<u32>,
  pub column: Option<u32>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StackIn {
  pub frame_id: u32,
  pub parent_id: Option<u32>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SampleIn {
  pub timestamp: f64,
  pub stack_id: Option<u32>,
  pub marker: Option<String>,
}

#[derive(Debug, PartialEq)]
pub struct ConvertError(pub String);

impl std::fmt::Display for ConvertError {
  fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
    f.write_str(&self.0)
  }
}

impl TraceIn {
  pub fn from_json(json: &str) -> Result<TraceIn, ConvertError> {
    let t: TraceIn = serde_json::from_str(json).map_err(|e| ConvertError(format!("not a selfprof trace: {e}")))?;
    t.check()?;
    Ok(t)
  }

  /// Every index in range and parents before children, so walks terminate.
  fn check(&self) -> Result<(), ConvertError> {
    let bad = |what: &str, i: usize| Err(ConvertError(format!("not a valid trace: {what} {i} is out of range")));
    for (i, f) in self.frames.iter().enumerate() {
      if f.resource_id.is_some_and(|r| r as usize >= self.resources.len()) {
        return bad("the resource of frame", i);
      }
    }
    for (i, s) in self.stacks.iter().enumerate() {
      if s.frame_id as usize >= self.frames.len() || s.parent_id.is_some_and(|p| p as usize >= i) {
        return bad("stack", i);
      }
    }
    for (i, s) in self.samples.iter().enumerate() {
      if s.stack_id.is_some_and(|id| id as usize >= self.stacks.len()) {
        return bad("the stack of sample", i);
      }
    }
    Ok(())
  }

  /// Frame ids of a stack, outermost first.
  fn path(&self, stack_id: Option<u32>) -> Vec<u32> {
    let mut out = Vec::new();
    let mut at = stack_id;
    while let Some(id) = at {
      let s = &self.stacks[id as usize];
      out.push(s.frame_id);
      at = s.parent_id;
    }
    out.reverse();
    out
  }

  fn pseudo(marker: Option<&str>) -> &'static str {
    match marker {
      Some("idle") => "(idle)",
      Some("gc") => "(garbage collector)",
      Some(_) => "(program)",
      None => "(root)",
    }
  }

  fn name(&self, frame: u32) -> &str {
    match self.frames[frame as usize].name.as_str() {
      "" => "(anonymous)",
      n => n,
    }
  }

  /// Folded stacks: `outer;...;leaf count`, one line per distinct stack, sorted.
  pub fn to_folded(&self) -> String {
    let mut counts: BTreeMap<String, u64> = BTreeMap::new();
    for s in &self.samples {
      let path = self.path(s.stack_id);
      let line = if path.is_empty() {
        Self::pseudo(s.marker.as_deref()).to_owned()
      } else {
        path
          .iter()
          .map(|f| self.name(*f).replace(';', ":"))
          .collect::<Vec<_>>()
          .join(";")
      };
      *counts.entry(line).or_default() += 1;
    }
    counts.into_iter().map(|(stack, n)| format!("{stack} {n}\n")).collect()
  }

  /// A Chrome DevTools CPU profile (`.cpuprofile`).
  pub fn to_cpuprofile(&self) -> CpuProfileOut {
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
    let mut samples = Vec::with_capacity(self.samples.len());
    let mut deltas = Vec::with_capacity(self.samples.len());
    let start = self.samples.first().map_or(0.0, |s| s.timestamp);
    let mut prev = start;
    for s in &self.samples {
      let node = match s.stack_id {
        Some(id) => match node_of_stack.get(&id) {
          Some(n) => *n,
          None => {
            let mut parent = 1;
            for frame in self.path(Some(id)) {
              let f = &self.frames[frame as usize];
              let url = f.resource_id.map_or("", |r| self.resources[r as usize].as_str());
              let line = f.line.map_or(-1, |l| l as i64 - 1);
              let column = f.column.map_or(-1, |c| c as i64 - 1);
              let name = self.name(frame).to_owned();
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
          let name = Self::pseudo(s.marker.as_deref());
          child(&mut nodes, 1, name.to_owned(), &|id| NodeOut::new(id, name, "", -1, -1))
        }
      };
      nodes[(node - 1) as usize].hit_count += 1;
      samples.push(node);
      deltas.push(((s.timestamp - prev) * 1000.0).round() as i64);
      prev = s.timestamp;
    }
    CpuProfileOut {
      nodes,
      start_time: (start * 1000.0).round() as i64,
      end_time: (prev * 1000.0).round() as i64,
      samples,
      time_deltas: deltas,
    }
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
    }
  }
}

#[cfg(test)]
mod tests {
  use super::*;

  const TRACE: &str = r#"{
    "resources": ["file:///a.js"],
    "frames": [{ "name": "main", "resourceId": 0, "line": 1, "column": 14 }, { "name": "" , "resourceId": 0, "line": 3, "column": 5 }],
    "stacks": [{ "frameId": 0 }, { "frameId": 1, "parentId": 0 }],
    "samples": [
      { "timestamp": 10.0, "stackId": 1 }, { "timestamp": 11.0, "stackId": 1 },
      { "timestamp": 12.5, "stackId": 0 }, { "timestamp": 13.0, "marker": "idle" },
      { "timestamp": 14.0, "marker": "gc" }, { "timestamp": 15.0 }
    ],
    "contexts": []
  }"#;

  #[test]
  fn folded_lines_add_up_to_the_samples() {
    let t = TraceIn::from_json(TRACE).unwrap();
    let folded = t.to_folded();
    assert_eq!(
      folded,
      "(garbage collector) 1\n(idle) 1\n(root) 1\nmain 1\nmain;(anonymous) 2\n"
    );
    let total: u64 = folded
      .lines()
      .map(|l| l.rsplit(' ').next().unwrap().parse::<u64>().unwrap())
      .sum();
    assert_eq!(total, 6);
  }

  #[test]
  fn cpuprofile_tree_hits_and_times() {
    let p = TraceIn::from_json(TRACE).unwrap().to_cpuprofile();
    let names: Vec<&str> = p.nodes.iter().map(|n| n.call_frame.function_name.as_str()).collect();
    assert_eq!(
      names,
      vec!["(root)", "main", "(anonymous)", "(idle)", "(garbage collector)"]
    );
    assert_eq!(p.nodes[0].children, vec![2, 4, 5]);
    assert_eq!(p.nodes[1].children, vec![3]);
    assert_eq!(
      (p.nodes[1].call_frame.line_number, p.nodes[1].call_frame.column_number),
      (0, 13)
    );
    assert_eq!(p.samples, vec![3, 3, 2, 4, 5, 1]);
    assert_eq!(p.time_deltas, vec![0, 1000, 1500, 500, 1000, 1000]);
    assert_eq!((p.start_time, p.end_time), (10_000, 15_000));
    let hits: u64 = p.nodes.iter().map(|n| n.hit_count).sum();
    assert_eq!(hits, 6);
  }

  #[test]
  fn bad_traces_are_errors() {
    assert!(TraceIn::from_json("{}")
      .unwrap_err()
      .0
      .starts_with("not a selfprof trace"));
    let cyclic = r#"{"resources":[],"frames":[{"name":"a"}],"stacks":[{"frameId":0,"parentId":0}],"samples":[]}"#;
    assert_eq!(
      TraceIn::from_json(cyclic).unwrap_err().0,
      "not a valid trace: stack 0 is out of range"
    );
    let dangling = r#"{"resources":[],"frames":[],"stacks":[],"samples":[{"timestamp":1,"stackId":4}]}"#;
    assert!(TraceIn::from_json(dangling).is_err());
  }
}
