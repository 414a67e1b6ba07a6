//! Profile formats: reading what selfprof converts (a trace's JSON or json-gzip, a pprof
//! profile plain or gzip'd: told apart by their bytes) and writing the formats other tools
//! read: Chrome DevTools `.cpuprofile` (also opened by speedscope), folded stacks (`a;b;c N`,
//! read by flamegraph.pl, inferno and speedscope), pprof, and the spec trace itself.

pub mod cpuprofile;
pub mod dialect;
pub mod folded;
pub mod gzip;
pub mod heap;
pub mod otlp;
pub mod pprof;
pub mod pprof_decode;
pub mod threads;

use crate::trace::v8_profile::CpuProfile;
use crate::trace::{Marker, Trace, TraceBuilder, Window};
use std::io::Read;

#[derive(Debug, PartialEq)]
pub struct ConvertError(pub String);

impl std::fmt::Display for ConvertError {
  fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
    f.write_str(&self.0)
  }
}

/// What converting outside input (files given to the CLI, `convert`, `readProfile`,
/// `htmlReport`) may cost: past a limit, one error naming it. docs/reliability.md's bounds table.
pub mod limits {
  /// Input, decompressed.
  pub const INPUT_BYTES: u64 = 256 << 20;
  /// What decoding a pprof profile may allocate (estimated before decoding).
  pub const DECODED_PPROF_BYTES: u64 = 256 << 20;
  /// Samples listed from a pprof's counts (for `trace`, `cpuprofile` and the report).
  pub const LISTED_SAMPLES: u64 = 500_000;
  /// Stack frames written in all (samples × depth), e.g. a trace as pprof.
  pub const FRAMES: u64 = 1 << 26;
  /// Stack frames walked to build a pprof's distinct stacks (samples sharing a stack
  /// walk it once).
  pub const DECODED_FRAMES: u64 = 1 << 23;
  /// Distinct stacks built from a pprof profile.
  pub const STACKS: usize = 1 << 20;
  /// Text output of a conversion (folded, trace, `.cpuprofile`): it is held once in Rust
  /// and once as a JS string.
  pub const TEXT_BYTES: usize = 256 << 20;
  /// V8's longest string, in one-byte characters (a trace's JSON from `stop()`).
  pub const JS_STRING_BYTES: usize = (1 << 29) - 24;
}

/// A profile read from outside: a trace, and for a pprof profile what each of its samples
/// stands for (counts are not expanded until a target lists samples) and its own timing.
pub struct Profile {
  pub trace: Trace,
  pub weights: Option<Vec<pprof::Weight>>,
  pub timing: Option<pprof::Timing>,
}

impl From<Trace> for Profile {
  fn from(trace: Trace) -> Profile {
    Profile {
      trace,
      weights: None,
      timing: None,
    }
  }
}

/// Reads any input selfprof converts: a trace's JSON, a V8 CPU profile's JSON (a
/// `.cpuprofile` file, the inspector's `Profiler.stop` result) or a pprof profile, each
/// plain or gzip'd. JSON is told from protobuf by its first non-blank byte, and a CPU
/// profile from a trace by its fields.
pub fn read_input(bytes: &[u8]) -> Result<Profile, ConvertError> {
  if bytes.is_empty() {
    return Err(ConvertError("empty input".into()));
  }
  let plain;
  let bytes = if bytes.starts_with(&[0x1f, 0x8b]) {
    plain = gunzip(bytes)?;
    &plain[..]
  } else if bytes.len() as u64 > limits::INPUT_BYTES {
    return Err(too_big());
  } else {
    bytes
  };
  match bytes.iter().find(|b| !b.is_ascii_whitespace()) {
    None => Err(ConvertError("empty input".into())),
    Some(b'{') => {
      let json = std::str::from_utf8(bytes).map_err(|e| ConvertError(format!("not a selfprof trace: {e}")))?;
      if is_cpu_profile(json) {
        return from_cpu_profile(json).map(Profile::from);
      }
      parse_trace(json).map(Profile::from)
    }
    Some(_) => {
      let d = pprof_decode::decode(bytes)?;
      // A heap profile's samples are weighted by bytes, not counts to list.
      let weights = d.trace.weight.is_none().then_some(d.weights);
      Ok(Profile {
        trace: d.trace,
        weights,
        timing: Some(d.timing),
      })
    }
  }
}

/// Whether a JSON object has a V8 CPU profile's `nodes` and `startTime` and no trace's
/// `resources` (read without building anything).
fn is_cpu_profile(json: &str) -> bool {
  use serde::de::IgnoredAny;
  #[derive(serde::Deserialize)]
  #[serde(rename_all = "camelCase")]
  struct Fields {
    nodes: Option<IgnoredAny>,
    start_time: Option<IgnoredAny>,
    resources: Option<IgnoredAny>,
  }
  serde_json::from_str::<Fields>(json)
    .is_ok_and(|f| f.nodes.is_some() && f.start_time.is_some() && f.resources.is_none())
}

/// A V8 CPU profile's JSON as a trace, as `fromCpuProfile` builds it: timestamps in ms
/// from the profile's start.
pub fn from_cpu_profile(json: &str) -> Result<Trace, ConvertError> {
  let profile = CpuProfile::from_json(json).map_err(|e| ConvertError(e.to_string()))?;
  let mut builder = TraceBuilder::new();
  let window = Window {
    origin_us: profile.start_time,
    ..Window::default()
  };
  builder
    .add_profile(&profile, &window)
    .map_err(|e| ConvertError(e.to_string()))?;
  let trace = builder.finish();
  check(&trace)?;
  Ok(trace)
}

fn too_big() -> ConvertError {
  ConvertError(format!(
    "input is over {} MiB uncompressed; that is the limit",
    limits::INPUT_BYTES >> 20
  ))
}

/// Gunzips at most `limits::INPUT_BYTES`, reserving what the gzip trailer says it holds
/// (so an honest file is decompressed without reallocating).
fn gunzip(bytes: &[u8]) -> Result<Vec<u8>, ConvertError> {
  let trailer = bytes
    .len()
    .checked_sub(4)
    .map(|at| u32::from_le_bytes([bytes[at], bytes[at + 1], bytes[at + 2], bytes[at + 3]]) as u64);
  let mut out = Vec::with_capacity(trailer.unwrap_or(0).min(limits::INPUT_BYTES) as usize);
  flate2::read::MultiGzDecoder::new(bytes)
    .take(limits::INPUT_BYTES + 1)
    .read_to_end(&mut out)
    .map_err(|e| ConvertError(format!("truncated or corrupt gzip: {e}")))?;
  if out.len() as u64 > limits::INPUT_BYTES {
    return Err(too_big());
  }
  Ok(out)
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
  if let Some(w) = &t.weight {
    let bad_len = |v: &Vec<f64>| v.len() != t.samples.len() || v.iter().any(|x| !x.is_finite());
    if bad_len(&w.values) || w.counts.as_ref().is_some_and(bad_len) {
      return Err(ConvertError(
        "not a valid trace: weight.values (and counts) must be one finite number per sample".into(),
      ));
    }
  }
  for (i, l) in t.line_ticks.iter().enumerate() {
    if l.stack_id as usize >= t.stacks.len() || l.line == 0 {
      return bad("the stack or line of line tick", i);
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
    lines: false,
  }
}

/// The profile with every count listed as samples (each pprof sample's `count` samples
/// laid end to end over its wall time), for the targets that list samples.
pub fn expand(p: &Profile) -> Result<std::borrow::Cow<'_, Trace>, ConvertError> {
  let Some(weights) = &p.weights else {
    return Ok(std::borrow::Cow::Borrowed(&p.trace));
  };
  let total = weights
    .iter()
    .map(|w| w.count.max(0) as u64)
    .fold(0u64, u64::saturating_add);
  if total > limits::LISTED_SAMPLES {
    return Err(ConvertError(format!(
      "the profile stands for {total} samples; listing them is limited to {} (convert it to pprof or folded instead: they keep the counts)",
      limits::LISTED_SAMPLES
    )));
  }
  let mut samples = Vec::with_capacity(total as usize);
  for (s, w) in p.trace.samples.iter().zip(weights) {
    let step = w.wall_ns as f64 / 1e6 / w.count as f64;
    let cpu = s.cpu_time.map(|c| c / w.count as f64);
    for k in 1..=w.count {
      samples.push(crate::trace::Sample {
        timestamp: s.timestamp + step * k as f64,
        cpu_time: cpu,
        ..s.clone()
      });
    }
  }
  Ok(std::borrow::Cow::Owned(Trace {
    samples,
    ..p.trace.clone()
  }))
}

/// Stack frames that writing every sample's stack walks: samples × depth.
fn frames_written(t: &Trace) -> u64 {
  let mut depth = vec![0u64; t.stacks.len()];
  for (i, s) in t.stacks.iter().enumerate() {
    depth[i] = 1 + s.parent_id.map_or(0, |p| depth[p as usize]);
  }
  t.samples
    .iter()
    .map(|s| s.stack_id.map_or(1, |id| depth[id as usize]))
    .fold(0u64, u64::saturating_add)
}

/// The error for text output of `bytes`, over `limits::TEXT_BYTES`.
pub(crate) fn too_long(what: &str, bytes: u64) -> ConvertError {
  ConvertError(format!(
    "the {what} would be {} MiB; text output is limited to {} MiB (pprof keeps deep stacks compact)",
    bytes >> 20,
    limits::TEXT_BYTES >> 20
  ))
}

/// Text output, if a JS string can hold it.
fn text(out: Vec<u8>, what: &str) -> Result<Vec<u8>, ConvertError> {
  if out.len() > limits::TEXT_BYTES {
    return Err(too_long(what, out.len() as u64));
  }
  Ok(out)
}

/// The profile as the named format: `cpuprofile`, `folded` and `trace` are text (JSON,
/// folded lines, JSON), `pprof` gzip'd protobuf. Each stays within `limits`.
pub fn to_format(p: &Profile, to: &str) -> Result<Vec<u8>, ConvertError> {
  to_format_with(p, to, false)
}

/// `to_format`, with pprof samples at line-level locations if `lines` (see `pprof::Timing`).
pub fn to_format_with(p: &Profile, to: &str, lines: bool) -> Result<Vec<u8>, ConvertError> {
  let io = |e: std::io::Error| ConvertError(e.to_string());
  match to {
    "cpuprofile" if p.trace.weight.is_some() => Err(ConvertError(
      "a heap profile (weighted by bytes) has no .cpuprofile form: convert it to pprof, folded or trace".into(),
    )),
    "pprof" if p.trace.weight.is_some() => {
      let timing = p.timing.unwrap_or_else(|| pprof_timing(&p.trace));
      let heap_timing = heap::HeapTiming {
        time_nanos: (timing.time_origin_unix_ms * 1e6) as i64,
        duration_nanos: ((timing.end_ms - timing.start_ms).max(0.0) * 1e6) as i64,
        interval_bytes: timing.period_ns,
      };
      heap::encode_gzip(&p.trace, &heap_timing, &dialect::Dialect::Plain).map_err(io)
    }
    "cpuprofile" => {
      let t = expand(p)?;
      let profile = cpuprofile::to_cpuprofile(&t);
      let estimate = profile.estimated_bytes();
      if estimate > limits::TEXT_BYTES as u64 {
        return Err(too_long(".cpuprofile", estimate));
      }
      text(
        serde_json::to_vec(&profile).map_err(|e| ConvertError(e.to_string()))?,
        ".cpuprofile",
      )
    }
    "folded" => text(
      folded::to_folded_weighted(&p.trace, p.weights.as_deref())?.into_bytes(),
      "folded output",
    ),
    "trace" => text(expand(p)?.to_json().into_bytes(), "trace"),
    "pprof" => {
      let frames = frames_written(&p.trace);
      if frames > limits::FRAMES {
        return Err(ConvertError(format!(
          "the pprof would hold {frames} stack frames (samples × depth); the limit is {}",
          limits::FRAMES
        )));
      }
      let timing = pprof::Timing {
        lines,
        ..p.timing.unwrap_or_else(|| pprof_timing(&p.trace))
      };
      pprof::encode_weighted_gzip(&p.trace, &timing, p.weights.as_deref()).map_err(io)
    }
    other => Err(ConvertError(format!(
      "unknown target format {other:?}: expected \"cpuprofile\", \"folded\", \"pprof\" or \"trace\""
    ))),
  }
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
mod lines_tests;

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
    assert_eq!(read_input(TRACE.as_bytes()).unwrap().trace, t);
    assert_eq!(read_input(&t.to_json_gzip().unwrap()).unwrap().trace, t);
    let err = |b: &[u8]| read_input(b).err().map(|e| e.0).unwrap_or_default();
    assert_eq!(err(b""), "empty input");
    assert_eq!(err(b"  \n"), "empty input");
    let gz = t.to_json_gzip().unwrap();
    assert!(err(&gz[..gz.len() / 2]).starts_with("truncated or corrupt gzip"));
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
    let pprof = to_format(&Profile::from(t.clone()), "pprof").unwrap();
    let read = read_input(&pprof).unwrap();
    assert_eq!(
      folded::to_folded_weighted(&read.trace, read.weights.as_deref()).unwrap(),
      to_folded(&t)
    );
    let back = expand(&read).unwrap().into_owned();
    assert_eq!(back.samples.len(), 6);
    assert_eq!(back.frames, t.frames);
    let labels = |tr: &Trace| -> Vec<Option<Vec<(String, String)>>> {
      let mut v: Vec<_> = tr
        .samples
        .iter()
        .map(|s| s.context_id.map(|c| tr.contexts[c as usize].labels.to_set()))
        .collect();
      v.sort();
      v
    };
    assert_eq!(labels(&back), labels(&t));
    let markers = |tr: &Trace| tr.samples.iter().filter_map(|s| s.marker).count();
    assert_eq!(markers(&back), 2);
  }

  /// A pprof of one sample: `refs` references to one location, standing for `count` samples.
  fn pprof_of(refs: usize, count: i64) -> Vec<u8> {
    use prost::Message;
    let t = parse_trace(TRACE).unwrap();
    let mut p = pprof::profile(&t, &pprof_timing(&t));
    p.sample.truncate(1);
    p.sample[0].location_id = vec![p.location[0].id; refs];
    p.sample[0].value = vec![count, count * 1_000_000, 0];
    p.encode_to_vec()
  }

  #[test]
  #[cfg_attr(miri, ignore)] // scale, not memory safety: minutes under Miri
  fn pprof_counts_are_kept_not_expanded_and_listing_them_is_bounded() {
    let p = read_input(&pprof_of(3, 19_999_999)).unwrap();
    assert_eq!(p.trace.samples.len(), 1, "one sample standing for its count");
    let folded = String::from_utf8(to_format(&p, "folded").unwrap()).unwrap();
    assert_eq!(folded, "main;main;main 19999999\n");
    let again = read_input(&to_format(&p, "pprof").unwrap()).unwrap();
    assert_eq!(
      again.weights.unwrap()[0].count,
      19_999_999,
      "pprof to pprof keeps the count"
    );
    let err = to_format(&p, "trace").err().unwrap().0;
    assert!(
      err.contains("19999999 samples") && err.contains("limited to 500000"),
      "{err}"
    );
    // 20,000 frames deep, a million times: one line, one pprof sample.
    let deep = read_input(&pprof_of(20_000, 1_000_000)).unwrap();
    assert_eq!(
      to_format(&deep, "folded").unwrap().len(),
      20_000 * 5 + " 1000000\n".len() - 1
    );
    assert!(to_format(&deep, "pprof").unwrap().len() < 1 << 20);
  }

  #[test]
  #[cfg_attr(miri, ignore)] // scale, not memory safety: minutes under Miri
  fn what_decoding_a_pprof_would_allocate_is_bounded_before_decoding() {
    use prost::Message;
    // 8 MiB of empty samples: 2 bytes each in the file, 72 bytes each decoded.
    let mut bomb = Vec::new();
    pprof::Profile {
      string_table: vec![String::new()],
      ..Default::default()
    }
    .encode(&mut bomb)
    .unwrap();
    bomb.extend(std::iter::repeat_n([0x12u8, 0x00], 4 << 20).flatten());
    let err = read_input(&bomb).err().unwrap().0;
    assert!(err.contains("would take") && err.contains("limit is 256 MiB"), "{err}");
  }

  #[test]
  // 4.5M frames: minutes under Miri's interpreter, and it checks time bounds, not memory safety.
  #[cfg_attr(miri, ignore)]
  fn deep_stacks_fold_in_linear_time_and_stay_within_the_frame_budget() {
    // A chain 3,000 deep with a sample at every depth: 4.5M frames to write as pprof.
    let n = 3_000u32;
    let t = Trace {
      frames: vec![crate::trace::Frame {
        name: "f".into(),
        resource_id: None,
        line: None,
        column: None,
      }],
      stacks: (0..n)
        .map(|i| crate::trace::Stack {
          frame_id: 0,
          parent_id: i.checked_sub(1),
        })
        .collect(),
      samples: (0..n)
        .map(|i| crate::trace::Sample {
          timestamp: i as f64,
          stack_id: Some(i),
          marker: None,
          context_id: None,
          cpu_time: None,
        })
        .collect(),
      ..Trace::default()
    };
    let p = Profile::from(t);
    let folded = to_format(&p, "folded").unwrap();
    assert_eq!(folded.iter().filter(|b| **b == b'\n').count(), n as usize);
    assert!(to_format(&p, "pprof").is_ok());
    assert_eq!(frames_written(&p.trace), (n as u64) * (n as u64 + 1) / 2);
  }
}
