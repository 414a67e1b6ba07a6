//! The Rust side of stop(), repeatable: a V8-shaped CPU profile of N samples, one
//! SIGPROF bracket per sample, a label set per ~1.5 samples (unique span ids), built into
//! a trace and encoded as JSON and pprof. Prints the minimum over runs of each phase
//! (preemption on a shared machine only adds time).
//!
//!   cargo run --release --example stop_bench -- [samples] [runs]
use selfprof::capture::labels;
use selfprof::capture::ring::Entry;
use selfprof::formats::pprof;
use selfprof::trace::{v8_profile::CpuProfile, LabelSet, Labeler, Labels, TraceBuilder, Window};
use std::time::Instant;

fn main() {
  let args: Vec<String> = std::env::args().collect();
  let n: usize = args.get(1).and_then(|s| s.parse().ok()).unwrap_or(100_000);
  let runs: usize = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(5);
  // A tree of 200 nodes: node i's parent is i / 3 (depth ~5), a few pseudo-nodes.
  let mut nodes = Vec::new();
  for i in 1..=200u32 {
    let children: Vec<u32> = (i * 3..i * 3 + 3).filter(|c| *c <= 200).collect();
    let (name, url, line) = match i {
      1 => ("(root)".to_string(), String::new(), -1),
      2 => ("(idle)".to_string(), String::new(), -1),
      3 => ("(garbage collector)".to_string(), String::new(), -1),
      _ => (
        format!("fn{i}"),
        format!("file:///app/src/module{}.js", i % 17),
        (i * 7) as i64,
      ),
    };
    nodes.push(format!(
      r#"{{"id":{i},"callFrame":{{"functionName":"{name}","scriptId":"{}","url":"{url}","lineNumber":{line},"columnNumber":{}}},"children":{:?}}}"#,
      if url.is_empty() { 0 } else { i % 17 + 1 },
      if url.is_empty() { -1 } else { 4 },
      if i == 1 { vec![2, 3, 4, 5] } else { children }
    ));
  }
  let start_us = 1_000_000_000.0f64;
  let samples: Vec<u32> = (0..n).map(|k| 4 + ((k * 7919) % 197) as u32).collect();
  let deltas: Vec<u32> = (0..n).map(|k| 120 + (k % 20) as u32).collect();
  let json = format!(
    r#"{{"nodes":[{}],"startTime":{start_us},"endTime":{},"samples":{:?},"timeDeltas":{:?}}}"#,
    nodes.join(","),
    start_us + n as f64 * 130.0,
    samples,
    deltas
  );
  // One bracket per sample, just before V8's stamp; contexts 1..=n*2/3.
  let mut t = start_us;
  let entries: Vec<Entry> = (0..n)
    .map(|k| {
      t += deltas[k] as f64;
      let stamp_ns = (t as u64) * 1000;
      Entry {
        before_ns: stamp_ns - 3000,
        after_ns: stamp_ns - 500,
        cpu_ns: k as u64 * 100_000,
        context: 1 + (k * 2 / 3) as u32,
        generation: k as u32,
        tid: 1,
      }
    })
    .collect();
  // Kept in the label store as JS's saves keep them; a build looks them up there.
  for id in 1..=(n * 2 / 3 + 1) as u32 {
    let set: LabelSet = vec![
      ("endpoint".to_string(), format!("GET /route/{}", id % 4)),
      ("span_id".to_string(), format!("{:016x}", 0x1000_0000u64 + id as u64)),
    ];
    labels::save(1, id, set, u64::from(id));
  }
  let lookup = |id: u32| labels::lookup(id).map(Labels::from);
  let (mut parse, mut build, mut to_json, mut to_pprof) = (f64::MAX, f64::MAX, f64::MAX, f64::MAX);
  let mut sizes = (0, 0, 0);
  for _ in 0..runs {
    let t0 = Instant::now();
    let profile = CpuProfile::from_json(&json).unwrap();
    let t1 = Instant::now();
    let mut builder = TraceBuilder::with_labeler(Labeler {
      entries: entries.clone(),
      lookup: Box::new(lookup),
      cpu_start_ns: Some(0),
      by_time: false,
    });
    builder
      .add_profile(
        &profile,
        &Window {
          origin_us: start_us - 1000.0,
          ..Window::default()
        },
      )
      .unwrap();
    let trace = builder.finish();
    let t2 = Instant::now();
    let j = trace.to_json();
    let t3 = Instant::now();
    let timing = pprof::Timing {
      time_origin_unix_ms: 1.7e12,
      start_ms: 0.0,
      end_ms: n as f64 * 0.13,
      period_ns: 100_000,
      cpu: true,
      lines: false,
    };
    let p = pprof::encode_gzip(&trace, &timing).unwrap();
    let t4 = Instant::now();
    let ms = |a: Instant, b: Instant| (b - a).as_secs_f64() * 1000.0;
    parse = parse.min(ms(t0, t1));
    build = build.min(ms(t1, t2));
    to_json = to_json.min(ms(t2, t3));
    to_pprof = to_pprof.min(ms(t3, t4));
    sizes = (trace.samples.len(), trace.contexts.len(), p.len());
    std::hint::black_box((j.len(), p.len()));
  }
  println!(
    "{} samples, {} contexts: parse {parse:.1} ms, build {build:.1} ms, to_json {to_json:.1} ms, to_pprof {to_pprof:.1} ms ({} KiB gz) [min of {runs}]",
    sizes.0,
    sizes.1,
    sizes.2 >> 10
  );
}
