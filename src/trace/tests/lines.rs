//! Line ticks: V8's per-node `positionTicks` in the trace (the `lineTicks` extension).
use crate::trace::v8_profile::CpuProfile;
use crate::trace::*;
use serde_json::json;

/// (root) → main → hot, where hot's node has position ticks on lines 7 and 9, and main's on
/// line 2; `samples` are node ids.
fn profile(samples: &[u32]) -> CpuProfile {
  profile_at(samples, 0.0)
}

fn profile_at(samples: &[u32], start_us: f64) -> CpuProfile {
  let cf = |name: &str, line: i64| json!({ "functionName": name, "scriptId": "7", "url": "file:///app.js", "lineNumber": line, "columnNumber": 4 });
  let root = json!({ "functionName": "(root)", "scriptId": "0", "url": "", "lineNumber": -1, "columnNumber": -1 });
  let count = |id: u32| samples.iter().filter(|s| **s == id).count() as u64;
  let (hot, main) = (count(3), count(2));
  // V8's ticks add up to the node's samples; one of hot's samples has no line.
  let hot_ticks = json!([{ "line": 7, "ticks": hot.saturating_sub(1) * 3 / 4 }, { "line": 9, "ticks": hot.saturating_sub(1) - hot.saturating_sub(1) * 3 / 4 }]);
  let v = json!({
    "nodes": [
      { "id": 1, "callFrame": root, "children": [2] },
      { "id": 2, "callFrame": cf("main", 0), "children": [3], "positionTicks": [{ "line": 2, "ticks": main }] },
      { "id": 3, "callFrame": cf("hot", 5), "positionTicks": hot_ticks },
    ],
    "startTime": start_us,
    "endTime": start_us + 1e6,
    "timeDeltas": vec![1000.0; samples.len()],
    "samples": samples,
  });
  CpuProfile::from_json(&v.to_string()).unwrap()
}

fn build(p: &CpuProfile, w: &Window) -> Trace {
  let mut b = TraceBuilder::new();
  b.add_profile(p, w).unwrap();
  b.finish()
}

fn ticks(t: &Trace) -> Vec<(String, u32, u64)> {
  t.line_ticks
    .iter()
    .map(|l| {
      (
        t.frames[t.stacks[l.stack_id as usize].frame_id as usize].name.clone(),
        l.line,
        l.ticks,
      )
    })
    .collect()
}

#[test]
fn position_ticks_become_line_ticks_of_the_nodes_stack() {
  let samples: Vec<u32> = [vec![3; 9], vec![2; 4]].concat();
  let t = build(&profile(&samples), &Window::default());
  assert_eq!(
    ticks(&t),
    vec![("main".into(), 2, 4), ("hot".into(), 7, 6), ("hot".into(), 9, 2)]
  );
  // A stack's ticks add up to at most its samples (one of hot's had no line).
  let hot_stack = t.line_ticks[1].stack_id;
  let on_hot = t.samples.iter().filter(|s| s.stack_id == Some(hot_stack)).count() as u64;
  assert_eq!(on_hot, 9);
  let json = t.to_json();
  assert!(
    json.contains(r#""lineTicks":[{"stackId":0,"line":2,"ticks":4},"#),
    "{json}"
  );
  assert_eq!(crate::formats::parse_trace(&json).unwrap(), t);
}

#[test]
fn a_partial_recording_scales_each_nodes_ticks_to_the_samples_kept() {
  // 41 samples on hot (30 on line 7, 10 on line 9, 1 without a line); keep every other one.
  let samples = vec![3; 41];
  let p = profile(&samples);
  let t = build(
    &p,
    &Window {
      stride: 2,
      ..Window::default()
    },
  );
  assert_eq!(t.samples.len(), 21);
  // 40 of 41 ticks have lines: 40 * 21 / 41 = 20.5 → 20 of the 21 kept samples.
  assert_eq!(ticks(&t), vec![("hot".into(), 7, 15), ("hot".into(), 9, 5)]);
  // A window that keeps nothing of a node adds none of its ticks.
  let none = build(
    &p,
    &Window {
      until_ms: -1.0,
      ..Window::default()
    },
  );
  assert!(none.samples.is_empty() && none.line_ticks.is_empty());
  // Two recordings of the same code, one after the other, add up on the same stack.
  let later = profile_at(&samples, 1e6);
  let mut b = TraceBuilder::new();
  b.add_profile(&p, &Window::default()).unwrap();
  b.add_profile(&later, &Window::default()).unwrap();
  assert_eq!(ticks(&b.finish()), vec![("hot".into(), 7, 60), ("hot".into(), 9, 20)]);
}

#[test]
fn scaled_ticks_are_whole_and_add_up() {
  assert_eq!(scale_ticks(&[(1, 5), (2, 5)], 10, 10), vec![(1, 5), (2, 5)]);
  assert_eq!(scale_ticks(&[(1, 5), (2, 5)], 0, 10), vec![]);
  assert_eq!(scale_ticks(&[(1, 1), (2, 1), (3, 1)], 1, 3), vec![(1, 1)]);
  for kept in 0..=17 {
    let out = scale_ticks(&[(3, 7), (4, 5), (8, 4), (9, 1)], kept, 17);
    assert_eq!(out.iter().map(|o| o.1).sum::<u64>(), kept, "kept {kept}");
  }
  // More ticks than samples (a hand-made profile): scaled to the ticks.
  assert_eq!(scale_ticks(&[(1, 4)], 2, 1).iter().map(|o| o.1).sum::<u64>(), 2);
}

#[test]
fn profiles_without_position_ticks_have_no_line_ticks() {
  let v = json!({
    "nodes": [{ "id": 1, "callFrame": { "functionName": "f", "scriptId": "1", "url": "file:///x.js", "lineNumber": 0, "columnNumber": 0 } }],
    "startTime": 0.0, "endTime": 1.0, "samples": [1], "timeDeltas": [1.0],
  });
  let t = build(&CpuProfile::from_json(&v.to_string()).unwrap(), &Window::default());
  assert!(t.line_ticks.is_empty());
  assert!(
    !t.to_json().contains("lineTicks"),
    "the extension is left out when empty"
  );
}
