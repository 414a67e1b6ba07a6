use super::*;
use crate::trace::{Context, Frame, Labels, Sample as TraceSample, Stack as TraceStack};

fn trace() -> Trace {
  let s = |timestamp: f64, stack_id: Option<u32>, marker, context_id, cpu_time| TraceSample {
    timestamp,
    stack_id,
    marker,
    context_id,
    cpu_time,
  };
  let frame = |name: &str, line| Frame {
    name: name.into(),
    resource_id: Some(0),
    line: Some(line),
    column: Some(3),
  };
  Trace {
    resources: vec!["file:///app.js".into()],
    frames: vec![frame("main", 1), frame("work", 5)],
    stacks: vec![
      TraceStack {
        frame_id: 0,
        parent_id: None,
      },
      TraceStack {
        frame_id: 1,
        parent_id: Some(0),
      },
    ],
    samples: vec![
      s(11.0, Some(1), None, Some(0), Some(0.9)),
      s(21.0, Some(1), None, Some(1), Some(1.0)),
      s(31.0, None, Some(Marker::Idle), None, None),
      s(41.0, Some(0), None, Some(0), Some(2.5)),
    ],
    contexts: vec![
      Context {
        labels: Labels::from(vec![
          ("endpoint".into(), "GET /a".into()),
          ("span_id".into(), "00f067aa0ba902b7".into()),
          ("trace_id".into(), "4bf92f3577b34da6a3ce929d0e0e4736".into()),
        ]),
      },
      Context {
        labels: Labels::from(vec![
          ("endpoint".into(), "POST /b".into()),
          ("span_id".into(), "not-hex".into()),
        ]),
      },
    ],
    metadata: None,
    line_ticks: Vec::new(),
    weight: None,
    source_maps: None,
    source_text: None,
  }
}

const TIMING: Timing = Timing {
  time_origin_unix_ms: 1_700_000_000_000.0,
  start_ms: 1.0,
  end_ms: 51.0,
  period_ns: 10_000_000,
  cpu: true,
  lines: false,
};

fn options() -> OtlpOptions {
  OtlpOptions {
    resource: vec![("service.name".into(), "checkout".into())],
    scope_name: "selfprof".into(),
    scope_version: "0.1.0".into(),
    profile_ids: vec!["0123456789abcdef0123456789abcdef".into()],
  }
}

#[test]
fn samples_stacks_attributes_and_links() {
  let bytes = encode(&trace(), &TIMING, &options());
  let req = ExportProfilesServiceRequest::decode(&bytes[..]).unwrap();
  let d = req.dictionary.unwrap();
  // Every table starts with its zero value.
  assert_eq!(d.string_table[0], "");
  assert_eq!(d.function_table[0], Function::default());
  assert_eq!(d.location_table[0], Location::default());
  assert_eq!(d.stack_table[0], Stack::default());
  assert_eq!(d.link_table[0], Link::default());
  assert_eq!(d.attribute_table[0], KeyValueAndUnit::default());
  assert_eq!(d.mapping_table, vec![Mapping::default()]);
  let rp = &req.resource_profiles[0];
  assert_eq!(rp.resource.as_ref().unwrap().attributes[0].key, "service.name");
  let profiles = &rp.scope_profiles[0].profiles;
  assert_eq!(profiles.len(), 2, "wall and cpu");
  let str = |i: i32| d.string_table[i as usize].as_str();
  let wall = &profiles[0];
  let st = wall.sample_type.unwrap();
  assert_eq!((str(st.type_strindex), str(st.unit_strindex)), ("wall", "nanoseconds"));
  assert_eq!(wall.samples.len(), 4);
  assert_eq!(wall.time_unix_nano, 1_700_000_000_001_000_000);
  assert_eq!(wall.duration_nano, 50_000_000);
  assert_eq!(wall.profile_id.len(), 16);
  assert!(profiles[1].profile_id.is_empty());
  // Stacks leaf first; names through locations and functions.
  let names = |s: &Sample| -> Vec<&str> {
    d.stack_table[s.stack_index as usize]
      .location_indices
      .iter()
      .map(|l| str(d.function_table[d.location_table[*l as usize].lines[0].function_index as usize].name_strindex))
      .collect()
  };
  assert_eq!(names(&wall.samples[0]), vec!["work", "main"]);
  assert_eq!(names(&wall.samples[2]), vec!["(idle)"]);
  assert_eq!(wall.samples[0].values, vec![10_000_000]);
  assert_eq!(wall.samples[0].timestamps_unix_nano, vec![1_700_000_000_011_000_000]);
  // Context 0: trace and span in a link, the rest as attributes.
  let link = &d.link_table[wall.samples[0].link_index as usize];
  assert_eq!(link.span_id, vec![0x00, 0xf0, 0x67, 0xaa, 0x0b, 0xa9, 0x02, 0xb7]);
  assert_eq!(link.trace_id.len(), 16);
  let attrs = |s: &Sample| -> Vec<(String, String)> {
    s.attribute_indices
      .iter()
      .map(|i| {
        let a = &d.attribute_table[*i as usize];
        let v = match &a.value.as_ref().unwrap().value {
          Some(any_value::Value::StringValue(v)) => v.clone(),
          other => panic!("{other:?}"),
        };
        (str(a.key_strindex).to_owned(), v)
      })
      .collect()
  };
  assert_eq!(attrs(&wall.samples[0]), vec![("endpoint".into(), "GET /a".into())]);
  // Context 1: no valid link, so the ids stay attributes.
  assert_eq!(wall.samples[1].link_index, 0);
  assert_eq!(attrs(&wall.samples[1]).len(), 2);
  assert_eq!(wall.samples[2].attribute_indices, Vec::<i32>::new());
  // Shared entries are interned.
  assert_eq!(wall.samples[0].stack_index, wall.samples[1].stack_index);
  assert_eq!(wall.samples[0].link_index, wall.samples[3].link_index);
  // CPU: the samples with CPU time.
  assert_eq!(profiles[1].samples.len(), 3);
  assert_eq!(profiles[1].samples[2].values, vec![2_500_000]);
}

/// Both tracers' ids on a request: the link is OpenTelemetry's, dd-trace's ids are left
/// out; the other attributes stay.
#[test]
fn both_tracers_ids_link_opentelemetrys() {
  let mut t = trace();
  t.contexts[0].labels = Labels::from(vec![
    ("endpoint".into(), "GET /a".into()),
    ("span_id".into(), "8489345074087403192".into()),
    ("trace_id".into(), "6b0baaaf0000000076eb74a6ea53344f".into()),
    ("otel_span_id".into(), "00f067aa0ba902b7".into()),
    ("otel_trace_id".into(), "4bf92f3577b34da6a3ce929d0e0e4736".into()),
  ]);
  let bytes = encode(&t, &TIMING, &options());
  let req = ExportProfilesServiceRequest::decode(&bytes[..]).unwrap();
  let d = req.dictionary.unwrap();
  let wall = &req.resource_profiles[0].scope_profiles[0].profiles[0];
  let link = &d.link_table[wall.samples[0].link_index as usize];
  assert_eq!(link.span_id, vec![0x00, 0xf0, 0x67, 0xaa, 0x0b, 0xa9, 0x02, 0xb7]);
  assert_eq!(link.trace_id[..2], [0x4b, 0xf9]);
  let keys: Vec<&str> = wall.samples[0]
    .attribute_indices
    .iter()
    .map(|i| d.string_table[d.attribute_table[*i as usize].key_strindex as usize].as_str())
    .collect();
  assert_eq!(keys, vec!["endpoint"]);
}

#[test]
fn no_cpu_profile_without_cpu_time() {
  let timing = Timing { cpu: false, ..TIMING };
  let req = request(&trace(), &timing, &options());
  assert_eq!(req.resource_profiles[0].scope_profiles[0].profiles.len(), 1);
}
