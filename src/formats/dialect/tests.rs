use super::*;

fn l(pairs: &[(&str, &str)]) -> Labels {
  Labels::from(
    pairs
      .iter()
      .map(|(k, v)| (k.to_string(), v.to_string()))
      .collect::<Vec<_>>(),
  )
}

#[test]
fn span_ids_read_as_hex_or_decimal() {
  assert_eq!(span_id("00f067aa0ba902b7"), Some(0x00f0_67aa_0ba9_02b7));
  assert_eq!(span_id("8489345074087403192"), Some(8_489_345_074_087_403_192));
  assert_eq!(span_id("ffffffffffffffff"), Some(u64::MAX));
  assert_eq!(span_id("18446744073709551616"), None, "over u64");
  assert_eq!(span_id("0000000000000000"), None, "zero is no span");
  assert_eq!(span_id("abc"), None);
  assert_eq!(span_id(""), None);
}

#[test]
fn datadog_names_and_numbers() {
  let d = Dialect::Datadog {
    thread_name: "Main Event Loop".into(),
    thread_id: "0".into(),
    os_thread_id: "7".into(),
  };
  let out_in = l(&[
    ("endpoint", "GET /a"),
    ("span_id", "ffffffffffffffff"),
    ("trace_id", "0af7651916cd43dd8448eb211c80319c"),
    ("tenant", "acme"),
  ]);
  let out = d.labels(&out_in);
  assert_eq!(
    out,
    vec![
      OutLabel::Str("trace endpoint".into(), "GET /a".into()),
      OutLabel::Num("span id".into(), -1),
      OutLabel::Num("local root span id".into(), -1),
      OutLabel::Str("tenant".into(), "acme".into()),
    ]
  );
  let explicit_in = l(&[("local_root_span_id", "5"), ("span_id", "9")]);
  let explicit = d.labels(&explicit_in);
  assert_eq!(
    explicit,
    vec![
      OutLabel::Num("local root span id".into(), 5),
      OutLabel::Num("span id".into(), 9),
    ]
  );
  assert_eq!(d.every_sample().len(), 3);
  assert_eq!(d.end_timestamp_key(), Some("end_timestamp_ns"));
}

#[test]
fn pyroscope_keeps_series_and_span_only() {
  let d = Dialect::Pyroscope {
    series_labels: vec!["endpoint".into()],
  };
  let long = "é".repeat(2000);
  let out_in = l(&[
    ("endpoint", &long),
    ("span_id", "8489345074087403192"),
    ("trace_id", "0af7651916cd43dd8448eb211c80319c"),
    ("request_id", "r-1"),
  ]);
  let out = d.labels(&out_in);
  assert_eq!(out.len(), 2);
  match &out[0] {
    OutLabel::Str(k, v) => {
      assert_eq!(k, "endpoint");
      assert_eq!(v.len(), 2048);
    }
    other => panic!("{other:?}"),
  }
  assert_eq!(out[1], OutLabel::Str("span_id".into(), "75d0365dccb11eb8".into()));
  assert_eq!(d.count_type(), "samples");
}

#[test]
fn dialects_parse_from_json() {
  let d: Vec<Dialect> = serde_json::from_str(
    r#"[{"name":"pprof"},{"name":"pyroscope","seriesLabels":["endpoint"]},
        {"name":"datadog","threadName":"Main Event Loop","threadId":"0","osThreadId":"1"}]"#,
  )
  .unwrap();
  assert_eq!(d.len(), 3);
  assert!(serde_json::from_str::<Dialect>(r#"{"name":"kafka"}"#).is_err());
}

/// Both tracers' ids on one request: dd-trace's as `span_id`/`trace_id`, OpenTelemetry's
/// as `otel_*`. Datadog gets dd-trace's alone; Pyroscope OpenTelemetry's span; the plain
/// dialect every label as it is.
#[test]
fn both_tracers_ids_go_to_the_backend_that_joins_them() {
  let both = l(&[
    ("endpoint", "GET /a"),
    ("span_id", "8489345074087403192"),
    ("trace_id", "6b0baaaf0000000076eb74a6ea53344f"),
    ("otel_span_id", "00f067aa0ba902b7"),
    ("otel_trace_id", "4bf92f3577b34da6a3ce929d0e0e4736"),
  ]);
  assert!(second_ids(&both));
  assert!(!second_ids(&l(&[("span_id", "9")])));
  let datadog = Dialect::Datadog {
    thread_name: "Main Event Loop".into(),
    thread_id: "0".into(),
    os_thread_id: "7".into(),
  };
  assert_eq!(
    datadog.labels(&both),
    vec![
      OutLabel::Str("trace endpoint".into(), "GET /a".into()),
      OutLabel::Num("span id".into(), 8_489_345_074_087_403_192),
      OutLabel::Num("local root span id".into(), 8_489_345_074_087_403_192),
    ]
  );
  let pyroscope = Dialect::Pyroscope {
    series_labels: vec!["endpoint".into()],
  };
  assert_eq!(
    pyroscope.labels(&both),
    vec![
      OutLabel::Str("endpoint".into(), "GET /a".into()),
      OutLabel::Str("span_id".into(), "00f067aa0ba902b7".into()),
    ]
  );
  // One tracer's: its span, as before.
  assert_eq!(
    pyroscope.labels(&l(&[("span_id", "00f067aa0ba902b7")])),
    vec![OutLabel::Str("span_id".into(), "00f067aa0ba902b7".into())]
  );
  assert_eq!(Dialect::Plain.labels(&both).len(), 5);
}
