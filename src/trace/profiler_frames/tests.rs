use super::*;
use crate::trace::v8_profile::CpuProfile;
use crate::trace::{LineTicks, Sample, TraceBuilder, Window};
use serde_json::json;

const ROOT: &str = "/srv/app/node_modules/selfprof";
const LABELS: &str = "file:///srv/app/node_modules/selfprof/lib/capture/labels.js";
const APP: &str = "file:///srv/app/server.js";

fn cf(name: &str, url: &str, line: i64) -> serde_json::Value {
  let script = if url.is_empty() && line < 0 { "0" } else { "1" };
  let column = if line < 0 { -1 } else { 3 };
  json!({ "functionName": name, "scriptId": script, "url": url, "lineNumber": line, "columnNumber": column })
}

/// A labeled request, as V8 records it:
///
/// 1 (root)
/// └─ 2 handler            server.js
///    ├─ 3 withLabels      selfprof
///    │  └─ 4 run          node:async_hooks
///    │     └─ 5 work      server.js          (line ticks)
///    │        └─ 6 sqrt   builtin
///    │     └─ 7 save      selfprof
///    │        └─ 8 stringify  builtin
///    ├─ 9 emit            node:events
///    │  └─ 10 onEnd       selfprof
///    └─ 11 compiled       (eval: no URL, a line)
/// 12 listOnTimeout        node:internal/timers
/// └─ 13 rotate            selfprof
///    └─ 14 work           server.js         (selfprof calling back into user code)
fn recording(samples: &[u32]) -> Trace {
  let v = json!({
    "nodes": [
      { "id": 1, "callFrame": cf("(root)", "", -1), "children": [2, 12] },
      { "id": 2, "callFrame": cf("handler", APP, 4), "children": [3, 9, 11] },
      { "id": 3, "callFrame": cf("withLabels", LABELS, 551), "children": [4] },
      { "id": 4, "callFrame": cf("run", "node:async_hooks", 300), "children": [5, 7] },
      { "id": 5, "callFrame": cf("work", APP, 1), "children": [6],
        "positionTicks": [{ "line": 3, "ticks": 2 }] },
      { "id": 6, "callFrame": cf("sqrt", "", -1) },
      { "id": 7, "callFrame": cf("save", LABELS, 55), "children": [8],
        "positionTicks": [{ "line": 60, "ticks": 1 }] },
      { "id": 8, "callFrame": cf("stringify", "", -1) },
      { "id": 9, "callFrame": cf("emit", "node:events", 10), "children": [10] },
      { "id": 10, "callFrame": cf("onEnd", "file:///srv/app/node_modules/selfprof/lib/integrations/otel.js", 90) },
      { "id": 11, "callFrame": cf("compiled", "", 0) },
      { "id": 12, "callFrame": cf("listOnTimeout", "node:internal/timers", 500), "children": [13] },
      { "id": 13, "callFrame": cf("rotate", "file:///srv/app/node_modules/selfprof/lib/service/index.js", 250), "children": [14] },
      { "id": 14, "callFrame": cf("work", APP, 1) }
    ],
    "startTime": 0.0,
    "endTime": 1000.0,
    "samples": samples,
    "timeDeltas": vec![1.0; samples.len()],
  });
  let p = CpuProfile::from_json(&v.to_string()).expect("fixture parses");
  let mut b = TraceBuilder::new();
  b.add_profile(&p, &Window::default()).expect("valid profile");
  b.finish()
}

/// A sample's frames, root first, as `name` (`name@file` for the user's own).
fn names(t: &Trace, s: &Sample) -> Vec<String> {
  let mut out: Vec<String> = t
    .frames_leaf_first(s.stack_id)
    .map(|f| t.frames[f as usize].name.clone())
    .collect();
  out.reverse();
  out
}

fn all(t: &Trace) -> Vec<Vec<String>> {
  t.samples.iter().map(|s| names(t, s)).collect()
}

#[test]
fn runs_between_user_frames_go_and_leaf_runs_become_one_profiler_frame() {
  let mut t = recording(&[5, 6, 8, 7, 10, 11, 13, 14, 3, 2]);
  let before = t.clone();
  let counts = hide(&mut t, &ProfilerFiles::new([ROOT]));
  let expect: Vec<Vec<&str>> = vec![
    vec!["handler", "work"],
    vec!["handler", "work", "sqrt"],
    vec!["handler", "(selfprof)"],
    vec!["handler", "(selfprof)"],
    vec!["handler", "emit", "(selfprof)"],
    vec!["handler", "compiled"],
    vec!["listOnTimeout", "(selfprof)"],
    vec!["listOnTimeout", "work"],
    vec!["handler", "(selfprof)"],
    vec!["handler"],
  ];
  assert_eq!(all(&t), expect);
  assert_eq!(counts.profiler_samples, 5);
  // Samples keep their times and order; nothing of selfprof's is left.
  assert_eq!(t.samples.len(), before.samples.len());
  for (a, b) in t.samples.iter().zip(&before.samples) {
    assert_eq!(
      (a.timestamp, a.marker, a.context_id),
      (b.timestamp, b.marker, b.context_id)
    );
  }
  assert!(!t.resources.iter().any(|r| r.contains("selfprof")));
  assert!(!t
    .frames
    .iter()
    .any(|f| ["withLabels", "save", "onEnd", "rotate", "run"].contains(&f.name.as_str())));
  // Still a trie, deduplicated, parents first, every stack referenced.
  let mut seen = std::collections::HashSet::new();
  for (i, s) in t.stacks.iter().enumerate() {
    assert!(s.parent_id.is_none_or(|p| (p as usize) < i));
    assert!(seen.insert(*s), "stack {i} repeats");
  }
  // The user's line ticks follow its frame; selfprof's own go with it.
  let (work, save) = (t.samples[0].stack_id.unwrap(), before.samples[3].stack_id.unwrap());
  let old_work = before.samples[0].stack_id.unwrap();
  assert!(before.line_ticks.iter().any(|l| l.stack_id == save));
  let moved: Vec<LineTicks> = before
    .line_ticks
    .iter()
    .filter(|l| l.stack_id == old_work)
    .map(|l| LineTicks { stack_id: work, ..*l })
    .collect();
  assert!(!moved.is_empty());
  assert_eq!(t.line_ticks, moved);
}

#[test]
fn hiding_twice_changes_nothing_and_other_traces_are_left_alone() {
  let mut t = recording(&[5, 8, 13]);
  hide(&mut t, &ProfilerFiles::new([ROOT]));
  let once = t.clone();
  assert_eq!(hide(&mut t, &ProfilerFiles::new([ROOT])), HideCounts::default());
  assert_eq!(t, once);
  // Shown as recorded: withLabels and friends are there.
  let shown = recording(&[5, 8, 13]);
  assert_eq!(
    all(&shown)[1],
    vec!["handler", "withLabels", "run", "save", "stringify"]
  );
}

#[test]
fn selfprof_is_found_by_its_root_and_in_any_node_modules() {
  let files = ProfilerFiles::new(["/home/me/src/prof/", "relative/ignored"]);
  for yes in [
    "file:///home/me/src/prof/lib/capture/labels.js",
    "file:///home/me/src/prof/index.js",
    "file:///home/me/src/prof/start.js",
    "file:///home/me/src/prof/bin/selfprof.js",
    "/home/me/src/prof/worker.js",
    "file:///opt/x/node_modules/selfprof/lib/service/index.js",
    "file:///opt/x/node_modules/.pnpm/selfprof@0.1.0/node_modules/selfprof/lib/log.js",
    "file:///opt/my%20app/node_modules/selfprof/start.js",
    "file://localhost/home/me/src/prof/lib/log.js",
  ] {
    assert!(files.contains(yes), "{yes}");
  }
  for no in [
    "file:///home/me/src/prof/examples/demo.js",
    "file:///home/me/src/prof/__test__/labels.test.js",
    "file:///home/me/src/profiler/lib/x.js",
    "file:///home/me/src/prof/node_modules/express/index.js",
    "file:///opt/x/node_modules/selfprof-ui/lib/x.js",
    "file:///opt/x/node_modules/selfprof/node_modules/dep/lib/x.js",
    "file:///opt/x/node_modules/selfprof/examples/demo.js",
    "node:internal/timers",
    "relative/ignored/lib/x.js",
    "https://example.com/node_modules/selfprof/lib/x.js",
  ] {
    assert!(!files.contains(no), "{no}");
  }
  // A root with a space, as a file URL encodes it; one with a line break and a backslash,
  // as Node names its scripts (the URL parser drops the one and reads the other as `/`).
  assert!(ProfilerFiles::new(["/a b/sp"]).contains("file:///a%20b/sp/lib/x.js"));
  let odd = ProfilerFiles::new(["/t/a\nb c\"d'e\\f"]);
  assert!(odd.contains("file:///t/ab%20c%22d'e/f/lib/capture/profiler.js"));
  assert!(odd.contains("/t/a\nb c\"d'e\\f/index.js"));
}

#[test]
fn mapped_frames_and_source_text_follow_the_rebuilt_tables() {
  let mut t = recording(&[5, 8]);
  let work = t.frames.iter().position(|f| f.name == "work").unwrap() as u32;
  let save = t.frames.iter().position(|f| f.name == "save").unwrap() as u32;
  let generated = |frame_id| crate::symbolize::Generated {
    frame_id,
    script: 0,
    line: 1,
    column: 1,
    name: None,
  };
  t.source_maps = Some(crate::symbolize::SourceMapsInfo {
    mapped_frames: 2,
    generated: vec![generated(work), generated(save)],
    ..Default::default()
  });
  let text = |line: u32| std::collections::BTreeMap::from([(line, "x".to_string())]);
  t.source_text = Some(std::collections::BTreeMap::from([
    (APP.to_string(), text(4)),
    (LABELS.to_string(), text(60)),
  ]));
  hide(&mut t, &ProfilerFiles::new([ROOT]));
  let info = t.source_maps.as_ref().unwrap();
  assert_eq!(info.mapped_frames, 1);
  assert_eq!(info.generated.len(), 1);
  assert_eq!(t.frames[info.generated[0].frame_id as usize].name, "work");
  assert_eq!(t.source_text.as_ref().unwrap().keys().collect::<Vec<_>>(), vec![APP]);
}

#[test]
fn a_weighted_trace_leaves_out_selfprofs_own_allocations() {
  // A heap profile: bytes allocated by selfprof's own code (at a leaf run) are its memory,
  // not the app's; bytes the user's code allocated under withLabels stay, linked around it.
  let mut t = recording(&[5, 8, 14]);
  t.weight = Some(crate::trace::SampleWeights {
    kind: "inuse_space".into(),
    unit: "bytes".into(),
    values: vec![10.0, 20.0, 30.0],
    count_kind: Some("inuse_objects".into()),
    counts: Some(vec![1.0, 2.0, 3.0]),
  });
  let counts = hide(&mut t, &ProfilerFiles::new([ROOT]));
  let w = t.weight.as_ref().unwrap();
  assert_eq!(w.values, vec![10.0, 30.0]);
  assert_eq!(w.counts.as_ref().unwrap(), &vec![1.0, 3.0]);
  assert_eq!(all(&t), vec![vec!["handler", "work"], vec!["listOnTimeout", "work"]]);
  assert_eq!((counts.profiler_samples, counts.hidden_weight), (1, 20.0));
  assert!(t.frames.iter().all(|f| f.name != PROFILER_FRAME));
}

#[test]
fn a_malformed_trace_is_left_as_it_is() {
  let mut t = recording(&[5, 8]);
  t.stacks[1].parent_id = Some(40);
  let before = t.clone();
  hide(&mut t, &ProfilerFiles::new([ROOT]));
  assert_eq!(t, before);
}
