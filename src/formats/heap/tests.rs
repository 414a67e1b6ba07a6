use super::*;

const FLAT: &str = r#"{
  "interval": 1024,
  "nodes": [
    { "parent": -1, "name": "(root)", "url": "", "line": -1, "column": -1, "selfSize": 0 },
    { "parent": 0, "name": "main", "url": "file:///a.js", "line": 0, "column": 13, "selfSize": 0 },
    { "parent": 1, "name": "hog", "url": "file:///a.js", "line": 4, "column": 12, "selfSize": 1048576 },
    { "parent": 1, "name": "", "url": "file:///a.js", "line": 9, "column": 2, "selfSize": 2048 },
    { "parent": 0, "name": "(V8 API)", "url": "", "line": -1, "column": -1, "selfSize": 64 }
  ],
  "samples": [2, 1048576, 3, 1024, 3, 1024, 4, 64]
}"#;

#[test]
fn a_sampling_heap_profile_becomes_a_weighted_trace() {
  let t = from_flat_json(FLAT, 5.0).unwrap();
  assert_eq!(t.samples.len(), 3, "one per node with live bytes");
  let w = t.weight.as_ref().unwrap();
  assert_eq!(w.values, vec![1048576.0, 2048.0, 64.0]);
  let counts = w.counts.as_ref().unwrap();
  assert_eq!(counts[0], 1.0, "a sample far over the interval is one object");
  assert!(counts[1] >= 2.0, "small samples stand for more objects: {counts:?}");
  let hog = &t.frames[t.stacks[t.samples[0].stack_id.unwrap() as usize].frame_id as usize];
  assert_eq!((hog.name.as_str(), hog.line, hog.column), ("hog", Some(5), Some(13)));
  assert_eq!(t.frames.iter().filter(|f| f.name == "main").count(), 1);
  assert!(t.samples.iter().all(|s| s.timestamp == 5.0));
}

#[test]
fn bad_heap_profiles_are_errors() {
  let e = |j: &str| from_flat_json(j, 0.0).err().unwrap().0;
  assert!(e("{}").starts_with("not a sampling heap profile"));
  assert!(e(r#"{"interval":1,"nodes":[{"parent":-1},{"parent":3}]}"#).contains("not an earlier node"));
  assert!(e(r#"{"interval":1,"nodes":[{"parent":-1}],"samples":[7,1]}"#).contains("names node 7"));
}

#[test]
fn the_pprof_has_the_official_clients_sample_types() {
  let t = from_flat_json(FLAT, 0.0).unwrap();
  let timing = HeapTiming {
    time_nanos: 1,
    duration_nanos: 2,
    interval_bytes: 1024,
  };
  let p = profile(&t, &timing, &Dialect::Plain, &[]);
  let s = |i: i64| p.string_table[i as usize].as_str();
  let types: Vec<(&str, &str)> = p.sample_type.iter().map(|v| (s(v.r#type), s(v.unit))).collect();
  assert_eq!(types, vec![("inuse_objects", "count"), ("inuse_space", "bytes")]);
  assert_eq!(p.period, 1024);
  assert_eq!(s(p.default_sample_type), "inuse_space");
  let bytes: i64 = p.sample.iter().map(|x| x.value[1]).sum();
  assert_eq!(bytes, 1048576 + 2048 + 64);
  // Read back: a weighted trace again, bytes as they were.
  let gz = encode_gzip(&t, &timing, &Dialect::Plain, &[]).unwrap();
  let back = crate::formats::read_input(&gz).unwrap();
  let w = back.trace.weight.as_ref().unwrap();
  assert_eq!(w.values.iter().sum::<f64>(), (1048576 + 2048 + 64) as f64);
  assert_eq!(w.kind, "inuse_space");
  assert!(back.weights.is_none(), "bytes are not counts to expand");
}

#[test]
fn thread_labels_go_on_every_sample() {
  let mut t = from_flat_json(FLAT, 0.0).unwrap();
  label_every_sample(&mut t, &[("thread name".into(), "Worker 1".into())]);
  assert!(t
    .samples
    .iter()
    .all(|s| t.contexts[s.context_id.unwrap() as usize].labels.to_set()[0].1 == "Worker 1"));
}
