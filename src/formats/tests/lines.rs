//! Line ticks through the formats, and `.cpuprofile` files as input.
use crate::formats::cpuprofile::to_cpuprofile;
use crate::formats::folded::to_folded;
use crate::formats::pprof::{profile, LinePieces, Profile as PprofProfile, Timing, Weight};
use crate::formats::*;
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
  lines: true,
};

fn frame_name(t: &Trace, stack: u32) -> &str {
  &t.frames[t.stacks[stack as usize].frame_id as usize].name
}

#[test]
fn a_cpu_profile_reads_as_a_trace_with_its_line_ticks() {
  let t = read_input(CPU_PROFILE.as_bytes()).unwrap().trace;
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
  assert_eq!(read_input(&gz.finish().unwrap()).unwrap().trace, t);
  let broken = CPU_PROFILE.replace(r#""children": [3]"#, r#""children": [9]"#);
  assert_eq!(
    read_input(broken.as_bytes()).err().unwrap().0,
    "V8 CPU profile refers to unknown node id 9"
  );
  let bad = r#"{"nodes": 3, "startTime": 0}"#;
  assert!(read_input(bad.as_bytes())
    .err()
    .unwrap()
    .0
    .starts_with("not a V8 CPU profile"));
  // A trace is still a trace (it has resources), even with a field named nodes.
  let trace = r#"{"resources":[],"frames":[],"stacks":[],"samples":[],"nodes":[],"startTime":1}"#;
  assert_eq!(read_input(trace.as_bytes()).unwrap().trace, Trace::default());
}

#[test]
fn pprof_leaf_locations_are_lines_whose_counts_are_the_line_ticks() {
  let t = read_input(CPU_PROFILE.as_bytes()).unwrap().trace;
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
  // (and the event-loop blocks looked for: `trace::blocks::tests`)
  let comments: Vec<&str> = p
    .comment
    .iter()
    .map(|&c| st(c))
    .filter(|c| !c.starts_with("selfprof-block"))
    .collect();
  assert_eq!(comments, vec!["selfprof-lines: locations from id 7"]);
}

#[test]
fn line_ticks_survive_pprof_and_cpuprofile_round_trips() {
  let t = read_input(CPU_PROFILE.as_bytes()).unwrap().trace;
  let back = pprof_decode::decode(&profile(&t, &TIMING).encode_to_vec())
    .unwrap()
    .trace;
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
  let again = read_input(cp.as_bytes()).unwrap().trace;
  assert_eq!(again.line_ticks, t.line_ticks);
  // Without line ticks nothing changes: no comment, one location per frame.
  let plain = Trace {
    line_ticks: vec![],
    ..t.clone()
  };
  let p = profile(&plain, &TIMING);
  let st = |i: i64| p.string_table[i as usize].as_str();
  assert!(p.comment.iter().all(|&c| st(c).starts_with("selfprof-block")));
  assert_eq!(p.location.len(), t.frames.len() + 4);
  // A foreign pprof's lines are frames, as before (no comment, no line ticks).
  let foreign = PprofProfile {
    comment: vec![],
    ..profile(&t, &TIMING)
  };
  assert!(pprof_decode::decode(&foreign.encode_to_vec())
    .unwrap()
    .trace
    .line_ticks
    .is_empty());
}

/// Each sample's `(line, count)` pieces.
fn pieces(t: &Trace, weights: Option<&[Weight]>) -> Vec<Vec<(Option<u32>, i64)>> {
  let d = LinePieces::deal(t, weights).unwrap();
  (0..t.samples.len()).map(|i| d.of(i).to_vec()).collect()
}

#[test]
fn samples_are_dealt_to_lines_evenly_and_exactly() {
  let mut t = read_input(CPU_PROFILE.as_bytes()).unwrap().trace;
  let hot = t.line_ticks[1].stack_id;
  let on_hot: Vec<usize> = (0..t.samples.len())
    .filter(|&i| t.samples[i].stack_id == Some(hot))
    .collect();
  let dealt: Vec<Vec<(Option<u32>, i64)>> = on_hot.iter().map(|&i| pieces(&t, None)[i].clone()).collect();
  let one = |l: Option<u32>| vec![(l, 1)];
  assert_eq!(
    dealt,
    vec![
      one(Some(12)),
      one(Some(13)),
      one(Some(12)),
      one(None),
      one(Some(12)),
      one(Some(13)),
      one(Some(12))
    ]
  );
  // Weighted samples (a decoded pprof's): each count is split, and the totals are exact.
  let weights: Vec<Weight> = (0..t.samples.len())
    .map(|i| Weight {
      count: [1, 100, 3, 7][i % 4],
      wall_ns: 1_000_000,
      cpu_ns: 0,
    })
    .collect();
  let n: i64 = on_hot.iter().map(|&i| weights[i].count).sum();
  t.line_ticks[1].ticks = 60; // line 12
  t.line_ticks[2].ticks = 40; // line 13
  let p = pieces(&t, Some(&weights));
  let mut per_line: std::collections::BTreeMap<Option<u32>, i64> = Default::default();
  for &i in &on_hot {
    assert_eq!(
      p[i].iter().map(|x| x.1).sum::<i64>(),
      weights[i].count,
      "sample {i} keeps its count"
    );
    for &(l, c) in &p[i] {
      *per_line.entry(l).or_default() += c;
    }
  }
  assert_eq!(
    per_line,
    [(None, n - 100), (Some(12), 60), (Some(13), 40)].into_iter().collect()
  );
  // Through the encoder: the pieces are pprof samples whose counts and times add up.
  let enc = super::pprof::encode_weighted_gzip(&t, &TIMING, Some(&weights)).unwrap();
  let back = read_input(&enc).unwrap();
  let ws = back.weights.as_ref().unwrap();
  assert_eq!(
    ws.iter().map(|w| w.count).sum::<i64>(),
    weights.iter().map(|w| w.count).sum::<i64>()
  );
  assert_eq!(
    ws.iter().map(|w| w.wall_ns).sum::<i64>(),
    weights.iter().map(|w| w.wall_ns).sum::<i64>()
  );
  let lines: Vec<(u32, u64)> = back.trace.line_ticks.iter().map(|l| (l.line, l.ticks)).collect();
  assert!(lines.contains(&(12, 60)) && lines.contains(&(13, 40)), "{lines:?}");
  // More ticks than samples (a hand-edited trace): scaled down, never more than the samples.
  t.line_ticks[1].ticks = 7000;
  let unit = pieces(&t, None);
  assert_eq!(on_hot.iter().filter(|&&i| unit[i][0].0.is_some()).count(), 7);
  t.line_ticks.push(crate::trace::LineTicks {
    stack_id: 99,
    line: 1,
    ticks: 1,
  });
  assert!(check(&t).err().unwrap().0.contains("line tick 3 is out of range"));
}
