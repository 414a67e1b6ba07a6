//! Converters between a selfprof trace (the spec's JSON, or json-gzip) or a pprof file
//! and other tools' formats: Chrome DevTools `.cpuprofile` (also opened by speedscope),
//! folded stacks (`a;b;c N`, read by flamegraph.pl, inferno and speedscope), pprof, and
//! the spec trace itself.

use crate::pprof;
use crate::trace::{Marker, Trace};
use serde::Serialize;
use std::collections::{BTreeMap, HashMap};
use std::io::Read;

#[derive(Debug, PartialEq)]
pub struct ConvertError(pub String);

impl std::fmt::Display for ConvertError {
  fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
    f.write_str(&self.0)
  }
}

/// Decompressed input is bounded, so a gzip bomb is an error rather than an OOM.
const MAX_INPUT_BYTES: u64 = 1 << 30;

/// Reads a trace from any input selfprof converts: a trace's JSON or a pprof profile,
/// each plain or gzip'd. JSON is told from protobuf by its first non-blank byte.
pub fn read_input(bytes: &[u8]) -> Result<Trace, ConvertError> {
  if bytes.is_empty() {
    return Err(ConvertError("empty input".into()));
  }
  let plain;
  let bytes = if bytes.starts_with(&[0x1f, 0x8b]) {
    let mut out = Vec::new();
    flate2::read::MultiGzDecoder::new(bytes)
      .take(MAX_INPUT_BYTES + 1)
      .read_to_end(&mut out)
      .map_err(|e| ConvertError(format!("truncated or corrupt gzip: {e}")))?;
    if out.len() as u64 > MAX_INPUT_BYTES {
      return Err(ConvertError(format!(
        "input is over {MAX_INPUT_BYTES} bytes uncompressed"
      )));
    }
    plain = out;
    &plain[..]
  } else {
    bytes
  };
  match bytes.iter().find(|b| !b.is_ascii_whitespace()) {
    None => Err(ConvertError("empty input".into())),
    Some(b'{') => {
      let json = std::str::from_utf8(bytes).map_err(|e| ConvertError(format!("not a selfprof trace: {e}")))?;
      parse_trace(json)
    }
    Some(_) => crate::pprof_decode::decode(bytes),
  }
}

/// Parses and checks a trace's JSON.
pub fn parse_trace(json: &str) -> Result<Trace, ConvertError> {
  let t: Trace = serde_json::from_str(json).map_err(|e| ConvertError(format!("not a selfprof trace: {e}")))?;
  check(&t)?;
  Ok(t)
}

/// Every index in range and parents before children, so walks terminate.
pub fn check(t: &Trace) -> Result<(), ConvertError> {
  let bad = |what: &str, i: usize| Err(ConvertError(format!("not a valid trace: {what} {i} is out of range")));
  for (i, f) in t.frames.iter().enumerate() {
    if f.resource_id.is_some_and(|r| r as usize >= t.resources.len()) {
      return bad("the resource of frame", i);
    }
  }
  for (i, s) in t.stacks.iter().enumerate() {
    if s.frame_id as usize >= t.frames.len() || s.parent_id.is_some_and(|p| p as usize >= i) {
      return bad("stack", i);
    }
  }
  for (i, s) in t.samples.iter().enumerate() {
    if s.stack_id.is_some_and(|id| id as usize >= t.stacks.len()) {
      return bad("the stack of sample", i);
    }
    if s.context_id.is_some_and(|id| id as usize >= t.contexts.len()) {
      return bad("the context of sample", i);
    }
    if !s.timestamp.is_finite() {
      return Err(ConvertError(format!(
        "not a valid trace: sample {i} has no finite timestamp"
      )));
    }
  }
  Ok(())
}

/// pprof timing for a trace read from a file: it spans its samples, and its period is
/// the median spacing of its samples (the trace does not record its interval).
pub fn pprof_timing(t: &Trace) -> pprof::Timing {
  let first = t.samples.first().map_or(0.0, |s| s.timestamp);
  let last = t.samples.last().map_or(0.0, |s| s.timestamp);
  let mut gaps: Vec<f64> = t
    .samples
    .windows(2)
    .map(|w| w[1].timestamp - w[0].timestamp)
    .filter(|g| *g > 0.0)
    .collect();
  gaps.sort_by(f64::total_cmp);
  let period_ms = gaps.get(gaps.len() / 2).copied().unwrap_or(0.0);
  pprof::Timing {
    time_origin_unix_ms: 0.0,
    start_ms: first,
    end_ms: last,
    period_ns: (period_ms * 1e6).round() as i64,
    cpu: t.samples.iter().any(|s| s.cpu_time.is_some()),
  }
}

/// The trace as the named format: `cpuprofile`, `folded` and `trace` are text (JSON,
/// folded lines, JSON), `pprof` gzip'd protobuf.
pub fn to_format(t: &Trace, to: &str) -> Result<Vec<u8>, ConvertError> {
  let io = |e: std::io::Error| ConvertError(e.to_string());
  match to {
    "cpuprofile" => serde_json::to_vec(&to_cpuprofile(t)).map_err(|e| ConvertError(e.to_string())),
    "folded" => Ok(to_folded(t).into_bytes()),
    "trace" => Ok(t.to_json().into_bytes()),
    "pprof" => pprof::encode_gzip(t, &pprof_timing(t)).map_err(io),
    other => Err(ConvertError(format!(
      "unknown target format {other:?}: expected \"cpuprofile\", \"folded\", \"pprof\" or \"trace\""
    ))),
  }
}

/// Frame ids of a stack, outermost first.
fn path(t: &Trace, stack_id: Option<u32>) -> Vec<u32> {
  let mut out = Vec::new();
  let mut at = stack_id;
  while let Some(id) = at {
    let s = &t.stacks[id as usize];
    out.push(s.frame_id);
    at = s.parent_id;
  }
  out.reverse();
  out
}

fn pseudo(marker: Option<Marker>) -> &'static str {
  match marker {
    Some(Marker::Idle) => "(idle)",
    Some(Marker::Gc) => "(garbage collector)",
    Some(Marker::Other) => "(program)",
    None => "(root)",
  }
}

fn name(t: &Trace, frame: u32) -> &str {
  match t.frames[frame as usize].name.as_str() {
    "" => "(anonymous)",
    n => n,
  }
}

/// Folded stacks: `outer;...;leaf count`, one line per distinct stack, sorted.
pub fn to_folded(t: &Trace) -> String {
  let mut counts: BTreeMap<String, u64> = BTreeMap::new();
  for s in &t.samples {
    let path = path(t, s.stack_id);
    let line = if path.is_empty() {
      pseudo(s.marker).to_owned()
    } else {
      path
        .iter()
        .map(|f| name(t, *f).replace(';', ":"))
        .collect::<Vec<_>>()
        .join(";")
    };
    *counts.entry(line).or_default() += 1;
  }
  counts.into_iter().map(|(stack, n)| format!("{stack} {n}\n")).collect()
}

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
    let t = parse_trace(TRACE).unwrap();
    let folded = to_folded(&t);
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
    let p = to_cpuprofile(&parse_trace(TRACE).unwrap());
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
    assert!(parse_trace("{}").unwrap_err().0.starts_with("not a selfprof trace"));
    let cyclic = r#"{"resources":[],"frames":[{"name":"a"}],"stacks":[{"frameId":0,"parentId":0}],"samples":[]}"#;
    assert_eq!(
      parse_trace(cyclic).unwrap_err().0,
      "not a valid trace: stack 0 is out of range"
    );
    let dangling = r#"{"resources":[],"frames":[],"stacks":[],"samples":[{"timestamp":1,"stackId":4}]}"#;
    assert!(parse_trace(dangling).is_err());
  }

  #[test]
  fn inputs_are_sniffed_and_gunzipped() {
    let t = parse_trace(TRACE).unwrap();
    assert_eq!(read_input(TRACE.as_bytes()).unwrap(), t);
    assert_eq!(read_input(&t.to_json_gzip().unwrap()).unwrap(), t);
    assert_eq!(read_input(b"").unwrap_err().0, "empty input");
    assert_eq!(read_input(b"  \n").unwrap_err().0, "empty input");
    let gz = t.to_json_gzip().unwrap();
    assert!(read_input(&gz[..gz.len() / 2])
      .unwrap_err()
      .0
      .starts_with("truncated or corrupt gzip"));
    assert!(read_input(b"\x08\x96\x01garbage").is_err());
    let unknown_marker = r#"{"resources":[],"frames":[],"stacks":[],"samples":[{"timestamp":1,"marker":"nap"}]}"#;
    assert!(read_input(unknown_marker.as_bytes()).is_err());
  }

  #[test]
  fn pprof_round_trip_keeps_stacks_labels_and_markers() {
    let labeled = r#"{
      "resources": ["file:///a.js"],
      "frames": [{ "name": "main", "resourceId": 0, "line": 1, "column": 14 }, { "name": "work", "resourceId": 0, "line": 3, "column": 5 }],
      "stacks": [{ "frameId": 0 }, { "frameId": 1, "parentId": 0 }],
      "samples": [
        { "timestamp": 10.0, "stackId": 1, "contextId": 0, "cpuTime": 0.9 }, { "timestamp": 11.0, "stackId": 1, "contextId": 1 },
        { "timestamp": 12.0, "stackId": 0 }, { "timestamp": 13.0, "marker": "idle" },
        { "timestamp": 14.0, "marker": "gc", "contextId": 0 }, { "timestamp": 15.0 }
      ],
      "contexts": [{ "labels": { "endpoint": "GET /a" } }, { "labels": { "endpoint": "GET /b", "span_id": "7" } }]
    }"#;
    let t = parse_trace(labeled).unwrap();
    let pprof = to_format(&t, "pprof").unwrap();
    let back = read_input(&pprof).unwrap();
    assert_eq!(to_folded(&back), to_folded(&t));
    assert_eq!(back.samples.len(), 6);
    assert_eq!(back.frames, t.frames);
    let labels = |tr: &Trace| -> Vec<Option<Vec<(String, String)>>> {
      let mut v: Vec<_> = tr
        .samples
        .iter()
        .map(|s| s.context_id.map(|c| (*tr.contexts[c as usize].labels).clone()))
        .collect();
      v.sort();
      v
    };
    assert_eq!(labels(&back), labels(&t));
    let markers = |tr: &Trace| tr.samples.iter().filter_map(|s| s.marker).count();
    assert_eq!(markers(&back), 2);
  }
}
