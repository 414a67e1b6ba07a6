//! Profile formats: reading what selfprof converts (a trace's JSON or json-gzip, a pprof
//! profile plain or gzip'd: told apart by their bytes) and writing the formats other tools
//! read: Chrome DevTools `.cpuprofile` (also opened by speedscope), folded stacks (`a;b;c N`,
//! read by flamegraph.pl, inferno and speedscope), pprof, and the spec trace itself.

pub mod cpuprofile;
pub mod dialect;
pub mod folded;
pub mod otlp;
pub mod pprof;
pub mod pprof_decode;

use crate::trace::{Marker, Trace};
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
    Some(_) => pprof_decode::decode(bytes),
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
    "cpuprofile" => serde_json::to_vec(&cpuprofile::to_cpuprofile(t)).map_err(|e| ConvertError(e.to_string())),
    "folded" => Ok(folded::to_folded(t).into_bytes()),
    "trace" => Ok(t.to_json().into_bytes()),
    "pprof" => pprof::encode_gzip(t, &pprof_timing(t)).map_err(io),
    other => Err(ConvertError(format!(
      "unknown target format {other:?}: expected \"cpuprofile\", \"folded\", \"pprof\" or \"trace\""
    ))),
  }
}

/// Frame ids of a stack, outermost first.
pub(crate) fn path(t: &Trace, stack_id: Option<u32>) -> Vec<u32> {
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

pub(crate) fn pseudo(marker: Option<Marker>) -> &'static str {
  match marker {
    Some(Marker::Idle) => "(idle)",
    Some(Marker::Gc) => "(garbage collector)",
    Some(Marker::Other) => "(program)",
    None => "(root)",
  }
}

pub(crate) fn name(t: &Trace, frame: u32) -> &str {
  match t.frames[frame as usize].name.as_str() {
    "" => "(anonymous)",
    n => n,
  }
}

#[cfg(test)]
mod tests {
  use super::cpuprofile::to_cpuprofile;
  use super::folded::to_folded;
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
