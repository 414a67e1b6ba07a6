//! Line ticks through the formats, and `.cpuprofile` files as input.
use super::cpuprofile::to_cpuprofile;
use super::folded::to_folded;
use super::pprof::{profile, sample_lines, Profile, Timing};
use super::*;
use prost::Message;

/// A V8 CPU profile as `node --cpu-prof` writes it: (root) → main → hot, with position
/// ticks on hot (7 samples: 4 on line 12, 2 on line 13, 1 with no line) and main (line 3).
const CPU_PROFILE: &str = r#"{
  "nodes": [
    { "id": 1, "callFrame": { "functionName": "(root)", "scriptId": "0", "url": "", "lineNumber": -1, "columnNumber": -1 }, "hitCount": 0, "children": [2, 4] },
    { "id": 2, "callFrame": { "functionName": "main", "scriptId": "5", "url": "file:///app.js", "lineNumber": 1, "columnNumber": 13 }, "hitCount": 2, "children": [3], "positionTicks": [{ "line": 3, "ticks": 2 }] },
    { "id": 3, "callFrame": { "functionName": "hot", "scriptId": "5", "url": "file:///app.js", "lineNumber": 10, "columnNumber": 12 }, "hitCount": 7, "positionTicks": [{ "line": 12, "ticks": 4 }, { "line": 13, "ticks": 2 }] },
    { "id": 4, "callFrame": { "functionName": "(garbage collector)", "scriptId": "0", "url": "", "lineNumber": -1, "columnNumber": -1 }, "hitCount": 1 }
  ],
  "startTime": 5000000, "endTime": 5011000,
  "samples": [3, 3, 2, 3, 3, 4, 3, 2, 3, 3],
  "timeDeltas": [1000, 1000, 1000, 1000, 1000, 1000, 1000, 1000, 1000, 1000]
}"#;

const TIMING: Timing = Timing {
  time_origin_unix_ms: 0.0,
  start_ms: 0.0,
  end_ms: 10.0,
  period_ns: 1_000_000,
  cpu: false,
};

fn frame_name(t: &Trace, stack: u32) -> &str {
  &t.frames[t.stacks[stack as usize].frame_id as usize].name
}

#[test]
fn a_cpu_profile_reads_as_a_trace_with_its_line_ticks() {
  let t = read_input(CPU_PROFILE.as_bytes()).unwrap();
  assert_eq!(t.samples.len(), 10);
  assert_eq!(t.samples[0].timestamp, 1.0, "ms from the profile's start");
  assert_eq!(t.samples.iter().filter(|s| s.marker == Some(Marker::Gc)).count(), 1);
  let lines: Vec<(&str, u32, u64)> = t
    .line_ticks
    .iter()
    .map(|l| (frame_name(&t, l.stack_id), l.line, l.ticks))
    .collect();
  assert_eq!(lines, vec![("main", 3, 2), ("hot", 12, 4), ("hot", 13, 2)]);
  // gzip'd too, and a broken one is one clear error.
  let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
  std::io::Write::write_all(&mut gz, CPU_PROFILE.as_bytes()).unwrap();
  assert_eq!(read_input(&gz.finish().unwrap()).unwrap(), t);
  let broken = CPU_PROFILE.replace(r#""children": [3]"#, r#""children": [9]"#);
  assert_eq!(
    read_input(broken.as_bytes()).unwrap_err().0,
    "V8 CPU profile refers to unknown node id 9"
  );
  let bad = r#"{"nodes": 3, "startTime": 0}"#;
  assert!(read_input(bad.as_bytes())
    .unwrap_err()
    .0
    .starts_with("not a V8 CPU profile"));
  // A trace is still a trace (it has resources), even with a field named nodes.
  let trace = r#"{"resources":[],"frames":[],"stacks":[],"samples":[],"nodes":[],"startTime":1}"#;
  assert_eq!(read_input(trace.as_bytes()).unwrap(), Trace::default());
}

#[test]
fn pprof_leaf_locations_are_lines_whose_counts_are_the_line_ticks() {
  let t = read_input(CPU_PROFILE.as_bytes()).unwrap();
  let p = profile(&t, &TIMING);
  let st = |i: i64| p.string_table[i as usize].as_str();
  // Per (function, line) location: the samples whose leaf it is.
  let mut counts: std::collections::BTreeMap<(String, i64), i64> = Default::default();
  for s in &p.sample {
    let loc = &p.location[(s.location_id[0] - 1) as usize];
    assert_eq!(loc.line.len(), 1);
    let f = &p.function[(loc.line[0].function_id - 1) as usize];
    *counts.entry((st(f.name).to_owned(), loc.line[0].line)).or_default() += s.value[0];
  }
  let expect: Vec<((String, i64), i64)> = vec![
    (("(garbage collector)".into(), 0), 1),
    (("hot".into(), 11), 1), // the one sample V8 gave no line: the function's own location
    (("hot".into(), 12), 4),
    (("hot".into(), 13), 2),
    (("main".into(), 3), 2),
  ];
  assert_eq!(counts.into_iter().collect::<Vec<_>>(), expect);
  assert_eq!(
    p.sample.iter().map(|s| s.value[0]).sum::<i64>(),
    10,
    "every sample once"
  );
  // Callers keep the function's own location; one location per (function, line).
  let lines: Vec<(u64, i64)> = p
    .location
    .iter()
    .map(|l| (l.line[0].function_id, l.line[0].line))
    .collect();
  let mut unique = lines.clone();
  unique.sort();
  unique.dedup();
  assert_eq!(unique.len(), lines.len());
  let comments: Vec<&str> = p.comment.iter().map(|&c| st(c)).collect();
  assert_eq!(comments, vec!["selfprof-lines: locations from id 7"]);
}

#[test]
fn line_ticks_survive_pprof_and_cpuprofile_round_trips() {
  let t = read_input(CPU_PROFILE.as_bytes()).unwrap();
  let back = pprof_decode::decode(&profile(&t, &TIMING).encode_to_vec()).unwrap();
  assert_eq!(
    back.frames, t.frames,
    "line-level locations come back as their function's frame"
  );
  assert_eq!(back.stacks, t.stacks);
  assert_eq!(back.line_ticks, t.line_ticks);
  assert_eq!(to_folded(&back), to_folded(&t));
  // .cpuprofile: each stack's node carries its position ticks again.
  let cp = serde_json::to_string(&to_cpuprofile(&t)).unwrap();
  assert!(
    cp.contains(r#""positionTicks":[{"line":12,"ticks":4},{"line":13,"ticks":2}]"#),
    "{cp}"
  );
  let again = read_input(cp.as_bytes()).unwrap();
  assert_eq!(again.line_ticks, t.line_ticks);
  // Without line ticks nothing changes: no comment, one location per frame.
  let plain = Trace {
    line_ticks: vec![],
    ..t.clone()
  };
  let p = profile(&plain, &TIMING);
  assert!(p.comment.is_empty());
  assert_eq!(p.location.len(), t.frames.len() + 4);
  // A foreign pprof's lines are frames, as before (no comment, no line ticks).
  let foreign = Profile {
    comment: vec![],
    ..profile(&t, &TIMING)
  };
  assert!(pprof_decode::decode(&foreign.encode_to_vec())
    .unwrap()
    .line_ticks
    .is_empty());
}

#[test]
fn samples_are_dealt_to_lines_evenly_and_exactly() {
  let mut t = read_input(CPU_PROFILE.as_bytes()).unwrap();
  let hot = t.line_ticks[1].stack_id;
  let dealt: Vec<Option<u32>> = sample_lines(&t)
    .into_iter()
    .zip(&t.samples)
    .filter(|(_, s)| s.stack_id == Some(hot))
    .map(|(l, _)| l)
    .collect();
  assert_eq!(
    dealt,
    vec![Some(12), Some(13), Some(12), None, Some(12), Some(13), Some(12)]
  );
  // More ticks than samples (a hand-edited trace): scaled down, never more than the samples.
  t.line_ticks[1].ticks = 70;
  let n = sample_lines(&t).iter().filter(|l| l.is_some()).count();
  assert_eq!(n, 2 + 7);
  t.line_ticks.push(crate::trace::LineTicks {
    stack_id: 99,
    line: 1,
    ticks: 1,
  });
  assert!(check(&t).unwrap_err().0.contains("line tick 3 is out of range"));
}
