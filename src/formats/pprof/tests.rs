use super::*;
use crate::parallel::PARALLEL_CONTEXTS;
use crate::trace::{Context, Frame, Labels, Metadata, Sample as TraceSample, Stack, Trace};
use std::io::Read;

fn trace() -> Trace {
  let s = |timestamp: f64, stack_id: Option<u32>, marker, context_id, cpu_time| TraceSample {
    timestamp,
    stack_id,
    marker,
    context_id,
    cpu_time,
  };
  Trace {
    resources: vec!["file:///app.js".into()],
    frames: vec![
      Frame {
        name: "main".into(),
        resource_id: Some(0),
        line: Some(1),
        column: Some(14),
      },
      Frame {
        name: "".into(),
        resource_id: Some(0),
        line: Some(5),
        column: Some(3),
      },
      Frame {
        name: "now".into(),
        resource_id: None,
        line: None,
        column: None,
      },
    ],
    stacks: vec![
      Stack {
        frame_id: 0,
        parent_id: None,
      },
      Stack {
        frame_id: 1,
        parent_id: Some(0),
      },
      Stack {
        frame_id: 2,
        parent_id: Some(1),
      },
    ],
    samples: vec![
      s(11.0, Some(2), None, Some(0), Some(0.9)),
      s(21.0, Some(1), None, Some(1), Some(1.0)),
      s(31.0, None, Some(Marker::Idle), None, None),
      s(41.0, None, Some(Marker::Gc), Some(0), Some(2.5)),
      s(50.0, None, None, None, None),
    ],
    contexts: vec![
      Context {
        labels: Labels::from(vec![
          ("endpoint".into(), "GET /a".into()),
          ("span_id".into(), "00000000000000ff".into()),
        ]),
      },
      Context {
        labels: Labels::from(vec![("endpoint".into(), "POST /b".into())]),
      },
    ],
    metadata: None,
    ..Trace::default()
  }
}

const TIMING: Timing = Timing {
  time_origin_unix_ms: 1_700_000_000_000.25,
  start_ms: 1.0,
  end_ms: 51.0,
  period_ns: 10_000_000,
  cpu: true,
  lines: true,
};

#[test]
fn encodes_samples_stacks_labels_and_times() {
  let p = profile(&trace(), &TIMING);
  let st = |i: i64| p.string_table[i as usize].as_str();
  assert_eq!(st(0), "");
  let types: Vec<(&str, &str)> = p.sample_type.iter().map(|v| (st(v.r#type), st(v.unit))).collect();
  assert_eq!(
    types,
    vec![("sample", "count"), ("wall", "nanoseconds"), ("cpu", "nanoseconds")]
  );
  let pt = p.period_type.as_ref().unwrap();
  assert_eq!(
    (st(pt.r#type), st(pt.unit), p.period),
    ("wall", "nanoseconds", 10_000_000)
  );
  assert_eq!(p.time_nanos, 1_700_000_000_001_250_000);
  assert_eq!(p.duration_nanos, 50_000_000);

  // Locations leaf first; function names and files.
  let name_of = |loc: u64| {
    let f = &p.function[(p.location[(loc - 1) as usize].line[0].function_id - 1) as usize];
    (st(f.name).to_owned(), st(f.filename).to_owned())
  };
  let stack = |i: usize| {
    p.sample[i]
      .location_id
      .iter()
      .map(|l| name_of(*l).0)
      .collect::<Vec<_>>()
  };
  assert_eq!(stack(0), vec!["now", "(anonymous)", "main"]);
  assert_eq!(name_of(1), ("main".into(), "file:///app.js".into()));
  assert_eq!(p.location[0].line[0].line, 1);
  assert_eq!(p.location[0].line[0].column, 14);
  assert_eq!(stack(2), vec!["(idle)"]);
  assert_eq!(stack(3), vec!["(garbage collector)"]);
  assert_eq!(stack(4), vec!["(root)"]);

  // Values: count, wall since the previous sample, cpu.
  let values: Vec<Vec<i64>> = p.sample.iter().map(|s| s.value.clone()).collect();
  assert_eq!(
    values,
    vec![
      vec![1, 10_000_000, 900_000],
      vec![1, 10_000_000, 1_000_000],
      vec![1, 10_000_000, 0],
      vec![1, 10_000_000, 2_500_000],
      vec![1, 9_000_000, 0],
    ]
  );
  let wall: i64 = p.sample.iter().map(|s| s.value[1]).sum();
  assert_eq!(wall, 49_000_000, "wall time covers the recording up to its last sample");

  let labels = |i: usize| {
    p.sample[i]
      .label
      .iter()
      .map(|l| (st(l.key), st(l.str)))
      .collect::<Vec<_>>()
  };
  assert_eq!(labels(0), vec![("endpoint", "GET /a"), ("span_id", "00000000000000ff")]);
  assert_eq!(labels(1), vec![("endpoint", "POST /b")]);
  assert!(labels(2).is_empty());
}

#[test]
fn gzip_round_trips_through_prost() {
  let gz = encode_gzip(&trace(), &TIMING).unwrap();
  assert_eq!(&gz[..2], &[0x1f, 0x8b]);
  let mut raw = Vec::new();
  flate2::read::GzDecoder::new(&gz[..]).read_to_end(&mut raw).unwrap();
  assert_eq!(Profile::decode(&raw[..]).unwrap(), profile(&trace(), &TIMING));
}

#[test]
fn cpu_sample_type_is_left_out_when_not_collected() {
  let p = profile(&trace(), &Timing { cpu: false, ..TIMING });
  assert_eq!(p.sample_type.len(), 2);
  assert!(p.sample.iter().all(|s| s.value.len() == 2));
}

#[test]
fn join_counts_travel_as_a_comment_and_read_back() {
  let m = Metadata {
    matched_samples: 4,
    between_signals_samples: 0,
    unmatched_samples: 1,
    labels_lost_samples: 0,
    label_path: Some(crate::trace::LabelPath::ContextFrame),
  };
  let p = profile(
    &Trace {
      metadata: Some(m),
      ..trace()
    },
    &TIMING,
  );
  // (and the event-loop blocks looked for: `trace::blocks::tests`)
  let comments: Vec<&str> = p
    .comment
    .iter()
    .map(|&c| p.string_table[c as usize].as_str())
    .filter(|c| !c.starts_with("selfprof-block"))
    .collect();
  assert_eq!(
    comments,
    vec!["selfprof: matchedSamples=4 betweenSignalsSamples=0 unmatchedSamples=1 labelPath=context-frame"]
  );
  let back = crate::formats::pprof_decode::decode(&p.encode_to_vec()).unwrap();
  assert_eq!(back.trace.metadata, Some(m));
  let plain = profile(&trace(), &TIMING);
  assert!(
    plain
      .comment
      .iter()
      .all(|&c| plain.string_table[c as usize].starts_with("selfprof-block")),
    "no join, no comment of it"
  );
  assert_eq!(parse_metadata_comment("selfprof: matchedSamples=x"), None);
  assert_eq!(parse_metadata_comment("made by another tool"), None);
}

#[test]
fn dialects_rename_labels_and_add_per_sample_ones() {
  let datadog = Dialect::Datadog {
    thread_name: "Main Event Loop".into(),
    thread_id: "0".into(),
    os_thread_id: "42".into(),
  };
  let p = profile_for(&trace(), &TIMING, &datadog);
  let s = |i: i64| p.string_table[i as usize].as_str();
  assert_eq!(s(p.sample_type[0].r#type), "sample");
  // Every sample: three thread labels and its end time (Unix ns) as a number.
  for (sample, t) in p.sample.iter().zip(&trace().samples) {
    let end = sample.label.iter().find(|l| s(l.key) == "end_timestamp_ns").unwrap();
    assert_eq!(end.num, 1_700_000_000_000_250_000 + (t.timestamp * 1e6) as i64);
    assert_eq!(s(end.num_unit), "nanoseconds");
    let thread: Vec<_> = sample
      .label
      .iter()
      .filter(|l| s(l.key).starts_with("thread") || s(l.key) == "os thread id")
      .map(|l| s(l.str))
      .collect();
    assert_eq!(thread, vec!["Main Event Loop", "0", "42"]);
  }
  let first = &p.sample[0].label;
  let get = |k: &str| first.iter().find(|l| s(l.key) == k).cloned();
  assert_eq!(
    get("trace endpoint").map(|l| s(l.str).to_owned()),
    Some("GET /a".into())
  );
  assert_eq!(get("span id").map(|l| l.num), Some(255));
  assert_eq!(get("local root span id").map(|l| l.num), Some(255));
  assert!(get("endpoint").is_none() && get("span_id").is_none());

  let pyroscope = Dialect::Pyroscope {
    series_labels: vec!["endpoint".into()],
  };
  let p = profile_for(&trace(), &TIMING, &pyroscope);
  let s = |i: i64| p.string_table[i as usize].as_str();
  let types: Vec<_> = p
    .sample_type
    .iter()
    .map(|v| format!("{}/{}", s(v.r#type), s(v.unit)))
    .collect();
  assert_eq!(types, vec!["samples/count", "wall/nanoseconds", "cpu/nanoseconds"]);
  let keys: Vec<_> = p.sample[0].label.iter().map(|l| s(l.key)).collect();
  assert_eq!(keys, vec!["endpoint", "span_id"]);
  // The plain encoding is unchanged by the dialect machinery.
  assert_eq!(
    profile_for(&trace(), &TIMING, &Dialect::Plain),
    profile(&trace(), &TIMING)
  );
}

/// A trace of `n` samples, each with its own label set: `endpoint` one of 4, `span_id` from
/// `span(i)`.
fn labeled(n: usize, span: impl Fn(usize) -> String) -> Trace {
  let mut t = trace();
  t.samples = (0..n)
    .map(|i| TraceSample {
      timestamp: 1.0 + i as f64,
      stack_id: Some(2),
      marker: None,
      context_id: Some(i as u32),
      cpu_time: None,
    })
    .collect();
  t.contexts = (0..n)
    .map(|i| Context {
      labels: Labels::from(vec![
        ("endpoint".into(), format!("GET /{}", i % 4)),
        ("span_id".into(), span(i)),
      ]),
    })
    .collect();
  t
}

#[test]
#[cfg_attr(miri, ignore)] // scale, not memory safety: 11,000 label sets, over 15 minutes under Miri
fn distinct_label_values_are_appended_and_repeated_ones_shared() {
  let st_labels = |p: &Profile, i: usize| -> Vec<(String, String)> {
    p.sample[i]
      .label
      .iter()
      .map(|l| {
        (
          p.string_table[l.key as usize].clone(),
          p.string_table[l.str as usize].clone(),
        )
      })
      .collect()
  };
  let count = |p: &Profile, s: &str| p.string_table.iter().filter(|x| *x == s).count();
  // A span id per label set: every value kept, endpoints stored once each.
  let t = labeled(5000, |i| format!("{:016x}", 0xab00_0000 + i));
  let p = profile(&t, &TIMING);
  for i in [0, 1023, 1024, 1025, 4999] {
    assert_eq!(
      st_labels(&p, i),
      vec![
        ("endpoint".to_string(), format!("GET /{}", i % 4)),
        ("span_id".to_string(), format!("{:016x}", 0xab00_0000 + i))
      ]
    );
  }
  assert_eq!(count(&p, "GET /3"), 1);
  assert!(p.string_table.len() < 5000 + 40, "{} strings", p.string_table.len());

  // Span ids distinct for the first 1,024 sets, then each one repeated: read back the
  // same; the repeats may be stored again (at most once per label set).
  let t = labeled(3000, |i| format!("{:016x}", if i < 1024 { i } else { i % 7 }));
  let p = profile(&t, &TIMING);
  for i in [0, 1023, 1024, 2999] {
    assert_eq!(
      st_labels(&p, i)[1].1,
      format!("{:016x}", if i < 1024 { i } else { i % 7 })
    );
  }
  assert!(p.string_table.len() <= 3000 + 40);
  let back = crate::formats::pprof_decode::decode(&p.encode_to_vec()).unwrap();
  let ctx = |i: usize| {
    back.trace.samples[i]
      .context_id
      .map(|c| back.trace.contexts[c as usize].labels.to_set())
  };
  assert_eq!(ctx(1030).unwrap()[1].1, format!("{:016x}", 1030 % 7));

  // Values that mostly repeat stay deduplicated: each endpoint once, span ids from 7.
  let t = labeled(3000, |i| format!("{:016x}", i % 7));
  let p = profile(&t, &TIMING);
  assert_eq!(count(&p, "0000000000000006"), 1);
  assert_eq!(count(&p, "GET /0"), 1);
}

#[test]
#[cfg_attr(miri, ignore)] // scale, not memory safety: over PARALLEL_CONTEXTS label sets
fn labels_interned_on_two_threads_read_back_as_their_contexts() {
  // Enough contexts for two threads; a third of the span ids empty (id 0 in both tables),
  // the last context without labels.
  let n = PARALLEL_CONTEXTS * 2 + 1;
  let span = |i: usize| {
    if i.is_multiple_of(3) {
      String::new()
    } else {
      format!("{:016x}", 0xcd00_0000 + i)
    }
  };
  let mut t = labeled(n, span);
  t.contexts[n - 1] = Context {
    labels: Labels::from(vec![]),
  };
  let expected = |i: usize| -> Vec<(String, String)> {
    if i == n - 1 {
      return vec![];
    }
    vec![
      ("endpoint".into(), format!("GET /{}", i % 4)),
      ("span_id".into(), span(i)),
    ]
  };
  // The real bytes, read back by the decoder.
  let gz = encode_gzip(&t, &TIMING).unwrap();
  let mut raw = Vec::new();
  flate2::read::GzDecoder::new(&gz[..]).read_to_end(&mut raw).unwrap();
  let p = Profile::decode(&raw[..]).unwrap();
  assert_eq!(p.sample.len(), n);
  for (i, sample) in p.sample.iter().enumerate() {
    let got: Vec<(String, String)> = sample
      .label
      .iter()
      .map(|l| {
        (
          p.string_table[l.key as usize].clone(),
          p.string_table[l.str as usize].clone(),
        )
      })
      .collect();
    assert_eq!(got, expected(i), "sample {i}");
  }
  // The functions' names are where they were: the second table goes after.
  let name = |f: &Function| p.string_table[f.name as usize].as_str();
  assert_eq!(
    p.function.iter().map(name).take(3).collect::<Vec<_>>(),
    ["main", "(anonymous)", "now"]
  );
  assert_eq!(p.string_table[0], "");
  // A span id per set: the table holds each once, and the endpoints at most once per half.
  assert!(p.string_table.len() < n + 64, "{} strings", p.string_table.len());
  // And by selfprof's own reader.
  let back = crate::formats::pprof_decode::decode(&raw).unwrap();
  for i in [0, 1, n / 2 - 2, n / 2 - 1, n / 2, n / 2 + 1, n - 2, n - 1] {
    let c = back.trace.samples[i]
      .context_id
      .map(|c| back.trace.contexts[c as usize].labels.to_set());
    assert_eq!(c.unwrap_or_default(), expected(i), "decoded sample {i}");
  }

  // Datadog's: span ids as numbers, an extra label per set, keys renamed, per-sample
  // labels interned after both halves.
  let datadog = Dialect::Datadog {
    thread_name: "Main Event Loop".into(),
    thread_id: "0".into(),
    os_thread_id: "42".into(),
  };
  let p = profile_for(&t, &TIMING, &datadog);
  let s = |i: i64| p.string_table[i as usize].as_str();
  for (i, sample) in p.sample.iter().enumerate() {
    let get = |k: &str| sample.label.iter().find(|l| s(l.key) == k);
    if i == n - 1 {
      assert!(get("trace endpoint").is_none() && get("span id").is_none());
    } else {
      assert_eq!(
        get("trace endpoint").map(|l| s(l.str)),
        Some(format!("GET /{}", i % 4).as_str()),
        "sample {i}"
      );
      let id = (i % 3 != 0).then(|| (0xcd00_0000 + i) as i64);
      assert_eq!(get("span id").map(|l| l.num), id, "sample {i}");
      assert_eq!(get("local root span id").map(|l| l.num), id, "sample {i}");
    }
    assert_eq!(
      get("thread name").map(|l| s(l.str)),
      Some("Main Event Loop"),
      "sample {i}"
    );
  }
}

/// The samples as `SampleWriter` writes them and as prost encodes them.
fn samples_both_ways(
  trace: &Trace,
  timing: &Timing,
  dialect: &Dialect,
  weights: Option<&[Weight]>,
) -> (Vec<u8>, Vec<u8>) {
  let encoder = Encoder::new(trace, timing, dialect, true);
  let (mut written, mut by_prost) = (Vec::new(), Vec::new());
  let mut writer = SampleWriter::new(trace);
  encoder.each(trace, timing.start_ms, weights, true, |s, reuse| {
    writer.write(trace, s, reuse, &mut written)
  });
  let mut n = 0;
  encoder.each(trace, timing.start_ms, weights, false, |s, _| {
    prost::encoding::message::encode(2, s, &mut by_prost);
    n += 1;
  });
  assert!(n >= trace.samples.len(), "{n} pprof samples");
  (written, by_prost)
}

#[test]
fn samples_written_from_cached_stacks_and_labels_are_prosts_bytes() {
  use crate::trace::LineTicks;
  // Repeated stacks and contexts (cached), markers with and without a stack, samples
  // without labels, line-level leaves, and a dialect's per-sample and numeric labels.
  // Under Miri (~170 s at the full size) a few rounds hold every case as well.
  let rounds = if cfg!(miri) { 4 } else { 40 };
  let mut t = trace();
  let base = t.samples.clone();
  for round in 0..rounds {
    for (i, s) in base.iter().enumerate() {
      t.samples.push(TraceSample {
        timestamp: 60.0 + f64::from(round) * 10.0 + i as f64,
        context_id: if round % 3 == 0 { None } else { s.context_id },
        ..s.clone()
      });
    }
  }
  t.samples.push(TraceSample {
    timestamp: 500.0,
    stack_id: Some(1),
    marker: Some(Marker::Gc),
    context_id: Some(1),
    cpu_time: Some(0.5),
  });
  t.line_ticks = vec![
    LineTicks {
      stack_id: 2,
      line: 7,
      ticks: 20,
    },
    LineTicks {
      stack_id: 2,
      line: 9,
      ticks: 11,
    },
  ];
  let datadog = Dialect::Datadog {
    thread_name: "Main Event Loop".into(),
    thread_id: "0".into(),
    os_thread_id: "42".into(),
  };
  let weights: Vec<Weight> = (0..t.samples.len())
    .map(|i| Weight {
      count: 1 + (i % 5) as i64,
      wall_ns: 10_000_000 * (1 + i as i64),
      cpu_ns: 300_000 * i as i64,
    })
    .collect();
  let pyroscope = Dialect::Pyroscope {
    series_labels: vec!["endpoint".into()],
  };
  for dialect in [&Dialect::Plain, &datadog, &pyroscope] {
    for timing in [
      TIMING,
      Timing {
        lines: false,
        cpu: false,
        ..TIMING
      },
    ] {
      for w in [None, Some(&weights[..])] {
        let (written, by_prost) = samples_both_ways(&t, &timing, dialect, w);
        assert!(
          written == by_prost,
          "{dialect:?}, lines {}, weights {}",
          timing.lines,
          w.is_some()
        );
      }
    }
  }
  // A span id per sample: every context encoded once, none reused.
  let t = labeled(if cfg!(miri) { 30 } else { 300 }, |i| {
    format!("{:016x}", 0xab00_0000 + i)
  });
  let (written, by_prost) = samples_both_ways(&t, &TIMING, &Dialect::Plain, None);
  assert!(written == by_prost);
}
