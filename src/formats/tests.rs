use super::cpuprofile::to_cpuprofile;
use super::folded::to_folded;
use super::*;

/// Line ticks (`lineTicks`), in a file of their own.
mod lines;

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
