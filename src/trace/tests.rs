//! Tests of the trace model and its builder. Over 600 lines: test cases, each short.

use super::v8_profile::{CpuProfile, ProfileError};
use super::*;
use crate::capture::ring::Entry;
use serde_json::json;
use std::io::Read;

/// Line ticks (`lineTicks`), in a file of their own.
mod lines;

/// A call frame as the inspector reports it (0-based positions).
fn cf(name: &str, url: &str, line: i64, col: i64) -> serde_json::Value {
  let script = if url.is_empty() { "0" } else { "42" };
  json!({ "functionName": name, "scriptId": script, "url": url, "lineNumber": line, "columnNumber": col })
}

fn pseudo(name: &str) -> serde_json::Value {
  cf(name, "", -1, -1)
}

/// A profile shaped like one from `Profiler.stop` on Node 20:
///
/// 1 (root)
/// ├─ 2 main          file:///app.js 0:0
/// │  ├─ 3 busy       file:///app.js 8:17
/// │  │  └─ 4 now     (builtin)
/// │  ├─ 5 helper     file:///lib.js 2:4
/// │  └─ 9 unsampled  file:///lib.js 7:1
/// ├─ 6 (garbage collector)
/// ├─ 7 (idle)
/// └─ 8 (program)
fn profile(samples: &[u32], deltas: &[f64]) -> CpuProfile {
  let v = json!({
    "nodes": [
      { "id": 1, "callFrame": pseudo("(root)"), "hitCount": 0, "children": [2, 6, 7, 8] },
      { "id": 2, "callFrame": cf("main", "file:///app.js", 0, 0), "children": [3, 5, 9] },
      { "id": 3, "callFrame": cf("busy", "file:///app.js", 8, 17), "children": [4] },
      { "id": 4, "callFrame": cf("now", "", -1, -1) },
      { "id": 5, "callFrame": cf("helper", "file:///lib.js", 2, 4) },
      { "id": 6, "callFrame": pseudo("(garbage collector)") },
      { "id": 7, "callFrame": pseudo("(idle)") },
      { "id": 8, "callFrame": pseudo("(program)") },
      { "id": 9, "callFrame": cf("unsampled", "file:///lib.js", 7, 1) }
    ],
    "startTime": 1_000_000.0,
    "endTime": 2_000_000.0,
    "samples": samples,
    "timeDeltas": deltas,
  });
  CpuProfile::from_json(&v.to_string()).expect("fixture parses")
}

fn build(p: &CpuProfile, w: &Window) -> Trace {
  let mut b = TraceBuilder::new();
  b.add_profile(p, w).expect("valid profile");
  b.finish()
}

/// The frames of a sample's stack, innermost first.
fn stack_names(t: &Trace, s: &Sample) -> Vec<String> {
  t.frames_leaf_first(s.stack_id)
    .map(|f| t.frames[f as usize].name.clone())
    .collect()
}

#[test]
fn converts_per_spec_processing_model() {
  let p = profile(
    &[3, 4, 5, 6, 7, 8, 1, 3],
    &[100.0, 1000.0, 1000.0, 1000.0, 1000.0, 1000.0, 1000.0, 1000.0],
  );
  let w = Window {
    origin_us: 900_000.0,
    ..Window::default()
  };
  let t = build(&p, &w);

  assert_eq!(t.resources, vec!["file:///app.js", "file:///lib.js"]);
  // Frames in order of first use; positions 1-based; builtins name-only.
  assert_eq!(
    t.frames,
    vec![
      Frame {
        name: "main".into(),
        resource_id: Some(0),
        line: Some(1),
        column: Some(1)
      },
      Frame {
        name: "busy".into(),
        resource_id: Some(0),
        line: Some(9),
        column: Some(18)
      },
      Frame {
        name: "now".into(),
        resource_id: None,
        line: None,
        column: None
      },
      Frame {
        name: "helper".into(),
        resource_id: Some(1),
        line: Some(3),
        column: Some(5)
      },
    ]
  );
  assert_eq!(
    t.stacks,
    vec![
      Stack {
        frame_id: 0,
        parent_id: None
      },
      Stack {
        frame_id: 1,
        parent_id: Some(0)
      },
      Stack {
        frame_id: 2,
        parent_id: Some(1)
      },
      Stack {
        frame_id: 3,
        parent_id: Some(0)
      },
    ]
  );
  let ts: Vec<f64> = t.samples.iter().map(|s| s.timestamp).collect();
  assert_eq!(ts, vec![100.1, 101.1, 102.1, 103.1, 104.1, 105.1, 106.1, 107.1]);
  let ids: Vec<Option<u32>> = t.samples.iter().map(|s| s.stack_id).collect();
  assert_eq!(ids, vec![Some(1), Some(2), Some(3), None, None, None, None, Some(1)]);
  let markers: Vec<Option<Marker>> = t.samples.iter().map(|s| s.marker).collect();
  assert_eq!(
    markers,
    vec![
      None,
      None,
      None,
      Some(Marker::Gc),
      Some(Marker::Idle),
      Some(Marker::Other),
      None,
      None
    ]
  );
  assert_eq!(stack_names(&t, &t.samples[1]), vec!["now", "busy", "main"]);
}

#[test]
fn serializes_with_spec_field_names_and_no_nulls() {
  let p = profile(&[4, 6], &[0.0, 10.0]);
  let t = build(
    &p,
    &Window {
      origin_us: 1_000_000.0,
      ..Window::default()
    },
  );
  let v: serde_json::Value = serde_json::from_str(&t.to_json()).unwrap();
  assert_eq!(
    v,
    json!({
      "resources": ["file:///app.js"],
      "frames": [
        { "name": "main", "resourceId": 0, "line": 1, "column": 1 },
        { "name": "busy", "resourceId": 0, "line": 9, "column": 18 },
        { "name": "now" }
      ],
      "stacks": [{ "frameId": 0 }, { "frameId": 1, "parentId": 0 }, { "frameId": 2, "parentId": 1 }],
      "samples": [{ "timestamp": 0.0, "stackId": 2 }, { "timestamp": 0.01, "marker": "gc" }],
      "contexts": []
    })
  );
}

#[test]
fn unsampled_nodes_are_not_in_the_trace() {
  let t = build(&profile(&[5], &[1.0]), &Window::default());
  assert!(t.frames.iter().all(|f| f.name != "unsampled" && f.name != "busy"));
  assert_eq!(t.stacks.len(), 2);
}

#[test]
fn identical_frames_under_one_parent_share_a_stack() {
  // V8 can split one function into several nodes (e.g. by line ticks); the trace
  // deduplicates them component-wise.
  let v = json!({
    "nodes": [
      { "id": 1, "callFrame": pseudo("(root)"), "children": [2, 3] },
      { "id": 2, "callFrame": cf("f", "file:///a.js", 1, 2) },
      { "id": 3, "callFrame": cf("f", "file:///a.js", 1, 2) }
    ],
    "startTime": 0.0, "endTime": 10.0, "samples": [2, 3, 2], "timeDeltas": [1.0, 1.0, 1.0]
  });
  let t = build(&CpuProfile::from_json(&v.to_string()).unwrap(), &Window::default());
  assert_eq!(t.frames.len(), 1);
  assert_eq!(t.stacks.len(), 1);
  assert!(t.samples.iter().all(|s| s.stack_id == Some(0)));
}

#[test]
fn out_of_order_samples_are_sorted() {
  let t = build(&profile(&[3, 5, 6], &[10.0, -4.0, 20.0]), &Window::default());
  let ts: Vec<f64> = t.samples.iter().map(|s| s.timestamp).collect();
  assert_eq!(ts, vec![1000.006, 1000.01, 1000.026]);
  assert_eq!(stack_names(&t, &t.samples[0]), vec!["helper", "main"]);
}

#[test]
fn window_drops_samples_outside_the_session() {
  let p = profile(&[3, 3, 3, 3], &[1000.0, 1000.0, 1000.0, 1000.0]);
  let w = Window {
    origin_us: 1_000_000.0,
    from_ms: 2.0,
    until_ms: 3.0,
    ..Window::default()
  };
  let t = build(&p, &w);
  let ts: Vec<f64> = t.samples.iter().map(|s| s.timestamp).collect();
  assert_eq!(ts, vec![2.0, 3.0]);
}

#[test]
fn buffer_limit_keeps_the_first_samples_and_counts_the_rest() {
  let p = profile(&[3, 5, 3, 5, 3], &[1.0; 5]);
  let mut b = TraceBuilder::new();
  let w = Window {
    max_samples: 3,
    ..Window::default()
  };
  assert_eq!(
    b.add_profile(&p, &w).unwrap(),
    Added {
      samples: 3,
      over_limit: 2
    }
  );
  let later = profile(&[3, 5, 3, 5, 3], &[10.0; 5]);
  assert_eq!(
    b.add_profile(&later, &w).unwrap(),
    Added {
      samples: 0,
      over_limit: 5
    }
  );
  assert_eq!(b.finish().samples.len(), 3);
}

#[test]
fn overlapping_recordings_count_their_shared_ticks_once() {
  // A hand-off (lib/capture/group.js): the next recording started before the last one
  // stopped, so V8 put the ticks at 1_000_003 and 1_000_004 µs in both.
  let mut b = TraceBuilder::new();
  let w = Window::default();
  let first = profile(&[3, 5, 3, 5], &[1.0; 4]);
  let second = profile(&[3, 5, 6, 7], &[3.0, 1.0, 1.0, 1.0]);
  assert_eq!(b.add_profile(&first, &w).unwrap().samples, 4);
  assert_eq!(b.add_profile(&second, &w).unwrap().samples, 2);
  let t = b.finish();
  let ts: Vec<f64> = t.samples.iter().map(|s| s.timestamp).collect();
  assert_eq!(ts, vec![1000.001, 1000.002, 1000.003, 1000.004, 1000.005, 1000.006]);
  assert_eq!(t.samples[4].marker, Some(Marker::Gc));
}

#[test]
fn later_profiles_extend_the_same_tables() {
  let mut b = TraceBuilder::new();
  b.add_profile(&profile(&[3], &[1.0]), &Window::default()).unwrap();
  let before = (b.trace.frames.len(), b.trace.stacks.len());
  b.add_profile(&profile(&[3, 5], &[5.0, 1.0]), &Window::default())
    .unwrap();
  let t = b.finish();
  assert_eq!((t.frames.len(), t.stacks.len()), (before.0 + 1, before.1 + 1));
  assert_eq!(t.samples[0].stack_id, t.samples[1].stack_id);
}

#[test]
fn deep_stacks_do_not_recurse() {
  let depth = 100_000u32;
  let mut nodes = vec![json!({ "id": 0, "callFrame": pseudo("(root)"), "children": [1] })];
  for i in 1..=depth {
    let children: Vec<u32> = if i < depth { vec![i + 1] } else { vec![] };
    nodes.push(json!({ "id": i, "callFrame": cf("r", "file:///deep.js", 0, 10), "children": children }));
  }
  let v = json!({ "nodes": nodes, "startTime": 0.0, "endTime": 1.0, "samples": [depth], "timeDeltas": [1.0] });
  let t = build(&CpuProfile::from_json(&v.to_string()).unwrap(), &Window::default());
  assert_eq!(t.frames.len(), 1);
  assert_eq!(t.stacks.len(), depth as usize);
  assert_eq!(t.samples[0].stack_id, Some(depth - 1));
}

#[test]
fn malformed_profiles_are_errors_not_panics() {
  let err = |v: serde_json::Value| {
    let p = CpuProfile::from_json(&v.to_string()).unwrap();
    TraceBuilder::new().add_profile(&p, &Window::default()).unwrap_err()
  };
  let root = json!({ "id": 1, "callFrame": pseudo("(root)"), "children": [2] });
  let pseudo_root = json!({ "id": 1, "callFrame": pseudo("(root)") });
  let f = |id: u32, children: Vec<u32>| json!({ "id": id, "callFrame": cf("f", "x", 0, 0), "children": children });
  assert_eq!(
    err(json!({ "nodes": [root], "startTime": 0, "endTime": 1, "samples": [1], "timeDeltas": [] })),
    ProfileError::LengthMismatch { samples: 1, deltas: 0 }
  );
  assert_eq!(
    err(json!({ "nodes": [root], "startTime": 0, "endTime": 1, "samples": [7], "timeDeltas": [1] })),
    ProfileError::UnknownNode(2)
  );
  assert_eq!(
    err(json!({ "nodes": [pseudo_root, f(2, vec![3]), f(3, vec![2])], "startTime": 0, "endTime": 1 })),
    ProfileError::Cycle(2)
  );
  assert_eq!(
    err(json!({ "nodes": [root, f(2, vec![]), f(2, vec![])], "startTime": 0, "endTime": 1 })),
    ProfileError::DuplicateNode(2)
  );
  assert!(matches!(
    CpuProfile::from_json("{\"nodes\": 3}"),
    Err(ProfileError::Json(_))
  ));
  assert!(matches!(CpuProfile::from_json(""), Err(ProfileError::Json(_))));
}

#[test]
fn json_gzip_round_trips() {
  let t = build(&profile(&[3, 4, 6, 7], &[1.0; 4]), &Window::default());
  let gz = t.to_json_gzip().unwrap();
  assert_eq!(&gz[..2], &[0x1f, 0x8b], "gzip magic");
  let mut json = String::new();
  flate2::read::GzDecoder::new(&gz[..]).read_to_string(&mut json).unwrap();
  assert_eq!(json, t.to_json());
}

fn entry(before_us: u64, context: u32, cpu_us: u64) -> Entry {
  Entry {
    before_ns: before_us * 1000 - 300,
    after_ns: before_us * 1000 + 4_700,
    cpu_ns: cpu_us * 1000,
    context,
    generation: 0,
    tid: 1,
  }
}

/// `entry` of a context's generation (a switch of context starts a new one).
fn entry_in(before_us: u64, context: u32, cpu_us: u64, generation: u32) -> Entry {
  Entry {
    generation,
    ..entry(before_us, context, cpu_us)
  }
}

#[test]
fn joined_by_time_a_sample_takes_the_set_switched_to_before_it_never_one_it_cannot_be_sure_of() {
  // Samples at 1001.003 .. 1006.003 ms on V8's clock (µs stamps); the 4th is GC, the last idle.
  let p = profile(&[3, 5, 3, 6, 3, 7], &[1003.0, 1000.0, 1000.0, 1000.0, 1000.0, 1000.0]);
  let labels = |id: u32| -> Option<Labels> {
    match id {
      7 => Some(Labels::from(vec![("endpoint".into(), "GET /a".into())])),
      9 => Some(Labels::from(vec![("endpoint".into(), "GET /b".into())])),
      _ => None,
    }
  };
  let switch = |ns: u64, context: u32, seq: u32| Entry {
    before_ns: ns,
    after_ns: ns,
    cpu_ns: 0,
    context,
    generation: seq,
    tid: 1,
  };
  let switches = vec![
    switch(1_000_900_000, 7, 0),
    switch(1_001_500_000, 9, 1),
    // In the 3rd sample's µs: 9 or 7.
    switch(1_003_003_400, 7, 2),
    // Labels no longer kept.
    switch(1_004_500_000, 11, 3),
  ];
  let build = |p: &CpuProfile| {
    let mut b = TraceBuilder::with_labeler(Labeler {
      entries: switches.clone(),
      lookup: Box::new(labels),
      cpu_start_ns: Some(100_000),
      by_time: true,
    });
    b.add_profile(
      p,
      &Window {
        origin_us: 1_000_000.0,
        ..Window::default()
      },
    )
    .unwrap();
    b.finish()
  };
  let t = build(&p);
  let endpoints: Vec<Option<&str>> = t
    .samples
    .iter()
    .map(|s| {
      s.context_id
        .and_then(|c| t.contexts[c as usize].labels.iter().next().map(|(_, v)| v))
    })
    .collect();
  assert_eq!(
    endpoints,
    vec![Some("GET /a"), Some("GET /b"), None, Some("GET /a"), None, None],
    "the 3rd is unsure, the 5th's labels are gone, the idle one has none"
  );
  assert!(t.samples.iter().all(|s| s.cpu_time.is_none()), "no CPU time by time");
  let m = t.metadata.unwrap();
  assert_eq!(
    (
      m.matched_samples,
      m.between_signals_samples,
      m.unmatched_samples,
      m.labels_lost_samples
    ),
    (5, 0, 1, 1)
  );

  // Stamps all in whole ms: V8 read its millisecond clock, which no switch can be placed
  // against. No labels.
  let t = build(&profile(&[3, 5, 3, 6, 3, 7], &[1000.0; 6]));
  assert!(t.samples.iter().all(|s| s.context_id.is_none()));
  assert_eq!(t.metadata.unwrap().unmatched_samples, 6);
}

#[test]
fn labeler_joins_samples_to_brackets_for_labels_and_cpu_time() {
  // Samples at 1001, 1002, 1003, 1004, 1005, 1006 ms on V8's clock (µs stamps); the
  // last is idle.
  let p = profile(&[3, 5, 3, 6, 3, 7], &[1000.0; 6]);
  let labels = |id: u32| -> Option<Labels> {
    match id {
      7 => Some(Labels::from(vec![("endpoint".into(), "GET /a".into())])),
      9 => Some(Labels::from(vec![
        ("endpoint".into(), "GET /b".into()),
        ("span_id".into(), "00000000000000ff".into()),
      ])),
      _ => None,
    }
  };
  let entries = vec![
    entry(1_001_000, 7, 500),
    entry(1_002_000, 9, 900),
    entry(1_003_000, 7, 1_700),
    // no bracket around 1_004_000
    entry(1_005_000, 11, 2_000), // labels no longer kept
    entry(1_006_000, 9, 2_100),
  ];
  let mut b = TraceBuilder::with_labeler(Labeler {
    entries,
    lookup: Box::new(labels),
    cpu_start_ns: Some(100_000),
    by_time: false,
  });
  b.add_profile(
    &p,
    &Window {
      origin_us: 1_000_000.0,
      ..Window::default()
    },
  )
  .unwrap();
  let t = b.finish();
  let ctx: Vec<Option<u32>> = t.samples.iter().map(|s| s.context_id).collect();
  assert_eq!(
    ctx,
    vec![Some(0), Some(1), Some(0), None, None, None],
    "idle samples carry no labels"
  );
  let cpu: Vec<Option<f64>> = t.samples.iter().map(|s| s.cpu_time).collect();
  assert_eq!(cpu, vec![Some(0.4), Some(0.4), Some(0.8), None, Some(0.3), Some(0.1)]);
  assert_eq!(
    t.metadata,
    Some(Metadata {
      matched_samples: 5,
      between_signals_samples: 0,
      unmatched_samples: 1,
      labels_lost_samples: 1,
      label_path: None,
    })
  );
  let v: serde_json::Value = serde_json::from_str(&t.to_json()).unwrap();
  assert_eq!(
    v["contexts"],
    json!([
      { "labels": { "endpoint": "GET /a" } },
      { "labels": { "endpoint": "GET /b", "span_id": "00000000000000ff" } }
    ])
  );
  assert_eq!(
    v["samples"][1],
    json!({ "timestamp": 2.0, "stackId": 2, "contextId": 1, "cpuTime": 0.4 })
  );
  assert_eq!(
    v["metadata"],
    json!({ "matchedSamples": 5, "betweenSignalsSamples": 0, "unmatchedSamples": 1, "labelsLostSamples": 1 })
  );
}

#[test]
fn stride_keeps_every_nth_sample_from_the_first() {
  let p = profile(&[3, 5, 3, 5, 3, 5, 3], &[1000.0; 7]);
  let t = build(
    &p,
    &Window {
      stride: 3,
      ..Window::default()
    },
  );
  let ts: Vec<f64> = t.samples.iter().map(|s| s.timestamp).collect();
  assert_eq!(ts, vec![1001.0, 1004.0, 1007.0]);
  // Two strides over one profile: the coarser one's samples are a subset.
  let fine = build(
    &p,
    &Window {
      stride: 2,
      ..Window::default()
    },
  );
  let coarse = build(
    &p,
    &Window {
      stride: 4,
      ..Window::default()
    },
  );
  let fine_ts: Vec<f64> = fine.samples.iter().map(|s| s.timestamp).collect();
  assert!(coarse.samples.iter().all(|s| fine_ts.contains(&s.timestamp)));
}

#[test]
fn a_second_sample_in_one_bracket_is_not_the_signals() {
  // A signal's sample at 1001 ms, then V8's own sample 10 µs later (a deoptimization,
  // inside the match slack): only the first takes the bracket.
  let p = profile(&[3, 3, 3, 3, 3], &[1000.0, 10.0, 990.0, 10.0, 990.0]);
  let labels = |id: u32| -> Option<Labels> { Some(Labels::from(vec![("endpoint".into(), format!("GET /{id}"))])) };
  let entries = vec![
    entry_in(1_001_000, 7, 500, 1),
    entry_in(1_002_000, 7, 900, 1),
    entry_in(1_003_000, 9, 1_300, 2),
  ];
  let mut b = TraceBuilder::with_labeler(Labeler {
    entries,
    lookup: Box::new(labels),
    cpu_start_ns: Some(100_000),
    by_time: false,
  });
  b.add_profile(&p, &Window::default()).unwrap();
  let t = b.finish();
  let ctx: Vec<Option<u32>> = t.samples.iter().map(|s| s.context_id).collect();
  // The second is between two signals of one context, so still labeled; the fourth
  // lies before a context switch, so it is not.
  assert_eq!(ctx, vec![Some(0), Some(0), Some(0), None, Some(1)]);
  let cpu: Vec<Option<f64>> = t.samples.iter().map(|s| s.cpu_time).collect();
  assert_eq!(cpu, vec![Some(0.4), None, Some(0.4), None, Some(0.4)]);
  assert_eq!(
    t.metadata,
    Some(Metadata {
      matched_samples: 3,
      between_signals_samples: 1,
      unmatched_samples: 1,
      labels_lost_samples: 0,
      label_path: None,
    })
  );
}

#[test]
fn a_recording_joined_in_segments_is_the_recording_joined_whole() {
  // lib/capture/group.js hands a long recording over in segments, each joined as it
  // arrives (trace::join): the brackets come in pieces, the second segment repeats the
  // first's last tick, and the trace must be the one a single build makes.
  let labels = |id: u32| -> Option<Labels> { Some(Labels::from(vec![("span_id".into(), format!("{id:016x}"))])) };
  let brackets = vec![
    entry_in(1_001_000, 7, 500, 1),
    entry_in(1_002_000, 9, 900, 2),
    entry_in(1_003_000, 9, 1_300, 3),
    // V8's own samples at 1003.01 ms (first segment) and 1003.5 ms (second) lie between
    // these two: same context, same generation.
    entry_in(1_004_000, 9, 1_700, 3),
    entry_in(1_005_000, 7, 2_000, 4),
    entry_in(1_006_000, 11, 2_100, 5),
    entry_in(1_007_000, 11, 2_200, 5),
  ];
  let labeler = |entries: Vec<Entry>| Labeler {
    entries,
    lookup: Box::new(labels),
    cpu_start_ns: Some(100_000),
    by_time: false,
  };
  let w = Window {
    origin_us: 1_000_000.0,
    ..Window::default()
  };
  let mut whole = TraceBuilder::with_labeler(labeler(brackets.clone()));
  let all = profile(
    &[3, 5, 3, 3, 3, 5, 3, 6, 7],
    &[1000.0, 1000.0, 1000.0, 10.0, 490.0, 500.0, 1000.0, 1000.0, 1000.0],
  );
  whole.add_profile(&all, &w).unwrap();
  let whole = whole.finish();

  // The first segment is joined while the recording runs: the brackets so far include
  // the next segment's first signal.
  let mut parts = TraceBuilder::with_labeler(labeler(brackets[..4].to_vec()));
  let first = profile(&[3, 5, 3, 3], &[1000.0, 1000.0, 1000.0, 10.0]);
  parts.add_profile(&first, &w).unwrap();
  parts.add_brackets(brackets[4..].to_vec());
  let second = profile(&[3, 3, 5, 3, 6, 7], &[3010.0, 490.0, 500.0, 1000.0, 1000.0, 1000.0]);
  parts.add_profile(&second, &w).unwrap();
  let parts = parts.finish();

  let meta = whole.metadata.unwrap();
  assert_eq!((meta.matched_samples, meta.between_signals_samples), (7, 2));
  assert_eq!(whole.samples.len(), 9);
  assert_eq!(parts.to_json(), whole.to_json());
}
