use super::*;
use crate::formats::parse_trace;

const A: &str = r#"{
  "resources": ["file:///a.js"],
  "frames": [{ "name": "main", "resourceId": 0, "line": 1, "column": 14 }, { "name": "spin", "resourceId": 0, "line": 3, "column": 5 }],
  "stacks": [{ "frameId": 0 }, { "frameId": 1, "parentId": 0 }],
  "samples": [
    { "timestamp": 10.0, "stackId": 1, "contextId": 0 }, { "timestamp": 12.0, "marker": "idle" }
  ],
  "contexts": [{ "labels": { "endpoint": "GET /a" } }],
  "lineTicks": [{ "stackId": 1, "line": 4, "ticks": 1 }]
}"#;
const B: &str = r#"{
  "resources": ["file:///w.js", "file:///a.js"],
  "frames": [{ "name": "busy", "resourceId": 0, "line": 2, "column": 1 }, { "name": "spin", "resourceId": 1, "line": 3, "column": 5 }],
  "stacks": [{ "frameId": 0 }, { "frameId": 1, "parentId": 0 }],
  "samples": [{ "timestamp": 1.0, "stackId": 1 }, { "timestamp": 2.5, "stackId": 0 }],
  "contexts": []
}"#;

fn thread(json: &str, name: &str, id: &str, offset_ms: f64) -> ThreadTrace {
  ThreadTrace {
    trace: parse_trace(json).unwrap(),
    name: name.into(),
    id: id.into(),
    os_id: None,
    offset_ms,
  }
}

#[test]
fn each_threads_source_text_is_in_the_merged_trace() {
  let lines = |pairs: &[(u32, &str)]| pairs.iter().map(|&(l, t)| (l, t.to_owned())).collect();
  let mut a = thread(A, "Main Event Loop", "0", 0.0);
  a.trace.source_text = Some([("file:///a.js".to_owned(), lines(&[(4, "a4")]))].into());
  let mut b = thread(B, "Worker #1 Event Loop", "1", 10.0);
  b.trace.source_text = Some(
    [
      ("file:///a.js".to_owned(), lines(&[(4, "other"), (3, "a3")])),
      ("file:///w.js".to_owned(), lines(&[(2, "w2")])),
    ]
    .into(),
  );
  let c = thread(B, "Worker #2 Event Loop", "2", 0.0);
  let t = merge(vec![a, b, c]);
  let text = t.source_text.expect("kept");
  assert_eq!(text["file:///a.js"], lines(&[(3, "a3"), (4, "a4")]));
  assert_eq!(text["file:///w.js"], lines(&[(2, "w2")]));
  assert_eq!(merge(vec![thread(A, "m", "0", 0.0)]).source_text, None);
}

#[test]
fn source_map_notes_follow_their_frames_into_the_merged_trace() {
  use crate::symbolize::{Generated, ScriptInfo, SourceMapsInfo};
  let script = |url: &str| ScriptInfo {
    url: url.into(),
    map: Some("inline".into()),
    error: None,
  };
  let mut a = thread(A, "Main Event Loop", "0", 0.0);
  a.trace.source_maps = Some(SourceMapsInfo {
    mapped_frames: 1,
    unmapped_frames: 1,
    dropped_line_ticks: 2,
    scripts: vec![script("file:///a.js")],
    generated: vec![Generated {
      frame_id: 1,
      script: 0,
      line: 9,
      column: 9,
      name: None,
    }],
  });
  let mut b = thread(B, "Worker #1 Event Loop", "1", 10.0);
  b.trace.source_maps = Some(SourceMapsInfo {
    mapped_frames: 2,
    unmapped_frames: 0,
    dropped_line_ticks: 0,
    scripts: vec![script("file:///w.js"), script("file:///a.js")],
    generated: vec![
      Generated {
        frame_id: 0,
        script: 0,
        line: 7,
        column: 1,
        name: Some("b".into()),
      },
      Generated {
        frame_id: 1,
        script: 1,
        line: 9,
        column: 9,
        name: None,
      },
    ],
  });
  let t = merge(vec![a, b]);
  let m = t.source_maps.as_ref().expect("kept");
  assert_eq!((m.mapped_frames, m.unmapped_frames, m.dropped_line_ticks), (3, 1, 2));
  assert_eq!(
    m.scripts.iter().map(|s| s.url.as_str()).collect::<Vec<_>>(),
    vec!["file:///a.js", "file:///w.js"]
  );
  // Each note names its frame and script in the merged trace; spin (shared) once.
  assert_eq!(m.generated.len(), 2);
  for g in &m.generated {
    let frame = &t.frames[g.frame_id as usize];
    let url = &m.scripts[g.script as usize].url;
    match frame.name.as_str() {
      "spin" => assert_eq!((url.as_str(), g.line), ("file:///a.js", 9)),
      "busy" => assert_eq!(
        (url.as_str(), g.line, g.name.as_deref()),
        ("file:///w.js", 7, Some("b"))
      ),
      other => panic!("unexpected frame {other}"),
    }
  }
}

#[test]
fn threads_merge_with_their_labels_on_one_time_line() {
  let t = merge(vec![
    thread(A, "Main Event Loop", "0", 0.0),
    thread(B, "Worker #1 Event Loop", "1", 10.0),
  ]);
  crate::formats::check(&t).unwrap();
  assert_eq!(t.samples.len(), 4);
  let ts: Vec<f64> = t.samples.iter().map(|s| s.timestamp).collect();
  assert_eq!(ts, vec![10.0, 11.0, 12.0, 12.5]);
  let label = |i: usize, k: &str| {
    let c = &t.contexts[t.samples[i].context_id.unwrap() as usize];
    c.labels.get(k).map(str::to_owned)
  };
  assert_eq!(label(0, THREAD_NAME).as_deref(), Some("Main Event Loop"));
  assert_eq!(label(0, "endpoint").as_deref(), Some("GET /a"));
  assert_eq!(label(1, THREAD_NAME).as_deref(), Some("Worker #1 Event Loop"));
  assert_eq!(label(1, THREAD_ID).as_deref(), Some("1"));
  assert_eq!(label(2, THREAD_ID).as_deref(), Some("0"), "idle samples too");
  // The worker's busy frame, on its own stack; spin of a.js is one frame for both.
  let leaf = |i: usize| &t.frames[t.stacks[t.samples[i].stack_id.unwrap() as usize].frame_id as usize];
  assert_eq!(leaf(3).name, "busy");
  assert_eq!(t.frames.iter().filter(|f| f.name == "spin").count(), 1);
  assert_eq!(t.resources.len(), 2);
  assert_eq!(t.line_ticks.len(), 1);
}

#[test]
fn parts_of_one_recording_concat_without_labels_and_their_overlap_once() {
  const LATER: &str = r#"{
    "resources": ["file:///a.js"],
    "frames": [{ "name": "main", "resourceId": 0, "line": 1, "column": 14 }, { "name": "spin", "resourceId": 0, "line": 3, "column": 5 }],
    "stacks": [{ "frameId": 0 }, { "frameId": 1, "parentId": 0 }],
    "samples": [
      { "timestamp": 12.0, "marker": "idle" }, { "timestamp": 14.0, "stackId": 1, "contextId": 0 }
    ],
    "contexts": [{ "labels": { "endpoint": "GET /b" } }]
  }"#;
  let t = concat(vec![parse_trace(A).unwrap(), parse_trace(LATER).unwrap()]);
  crate::formats::check(&t).unwrap();
  let ts: Vec<f64> = t.samples.iter().map(|s| s.timestamp).collect();
  assert_eq!(ts, vec![10.0, 12.0, 14.0], "the sample both parts hold, once");
  assert_eq!((t.frames.len(), t.stacks.len(), t.resources.len()), (2, 2, 1));
  let endpoint = |i: usize| {
    let c = &t.contexts[t.samples[i].context_id.unwrap() as usize];
    assert_eq!(c.labels.len(), 1, "no labels added");
    c.labels.get("endpoint").map(str::to_owned)
  };
  assert_eq!(endpoint(0).as_deref(), Some("GET /a"));
  assert_eq!(endpoint(2).as_deref(), Some("GET /b"));
  assert_eq!(t.samples[1].context_id, None);
}
