//! The block rule on traces written sample by sample: what each edge of the definition
//! (module comment) does with real sample patterns (those of Express under load, Node 20 and 24).

use super::*;
use crate::trace::{Context, Frame, LabelSet, Sample, Stack};

/// Frames: callbacks the loop dispatches (node:), the tick runner, and the app's code.
const FRAMES: [(&str, &str); 10] = [
  ("emitHook", "node:internal/async_hooks"),
  ("callbackTrampoline", "node:internal/async_hooks"),
  ("parserOnHeadersComplete", "node:_http_common"),
  ("processTimers", "node:internal/timers"),
  ("processTicksAndRejections", "node:internal/process/task_queues"),
  ("runNextTicks", "node:internal/process/task_queues"),
  ("runMicrotasks", ""),
  ("handler", "file:///app.js"),
  ("spin", "file:///app.js"),
  ("batch", "file:///app.js"),
];

/// A trace from tokens, one sample each, 1 ms apart unless a token says `+N` (ms since the
/// previous sample) or `cpuN` (its CPU time, else the gap): `I` idle, `P` program, `G` GC,
/// `R` a root-less sample, or a stack `a>b>c` of FRAMES names (outermost first); `:label`
/// gives its request (`endpoint` and `span_id` from it), `@thread` its thread.
fn trace(tokens: &str) -> Trace {
  let mut t = Trace {
    resources: FRAMES.iter().map(|f| f.1.to_owned()).collect(),
    frames: FRAMES
      .iter()
      .enumerate()
      .map(|(i, f)| Frame {
        name: f.0.to_owned(),
        resource_id: (!f.1.is_empty()).then_some(i as u32),
        line: Some(1),
        column: Some(1),
      })
      .collect(),
    ..Trace::default()
  };
  let mut stacks: HashMap<Stack, u32> = HashMap::new();
  let mut contexts: HashMap<LabelSet, u32> = HashMap::new();
  let mut time = 100.0;
  for token in tokens.split_whitespace() {
    let mut parts = token.split([':', '@', ',']);
    let what = parts.next().unwrap();
    let (mut label, mut thread, mut gap, mut cpu) = (None, None, 1.0, None);
    for p in token.split(',').skip(1) {
      if let Some(g) = p.strip_prefix('+') {
        gap = g.parse().unwrap();
      } else if let Some(c) = p.strip_prefix("cpu") {
        cpu = Some(c.parse().unwrap());
      }
    }
    let head = token.split(',').next().unwrap();
    if let Some((_, l)) = head.split_once(':') {
      label = Some(l.split('@').next().unwrap().to_owned());
    }
    if let Some((_, th)) = head.split_once('@') {
      thread = Some(th.to_owned());
    }
    let _ = &mut parts;
    time += gap;
    let mut sample = Sample {
      timestamp: time,
      stack_id: None,
      marker: None,
      context_id: None,
      cpu_time: Some(cpu.unwrap_or(gap)),
    };
    match what {
      "I" => sample.marker = Some(Marker::Idle),
      "P" => sample.marker = Some(Marker::Other),
      "G" => sample.marker = Some(Marker::Gc),
      "R" => {}
      path => {
        let mut parent = None;
        for name in path.split('>') {
          let frame_id = FRAMES
            .iter()
            .position(|f| f.0 == name)
            .unwrap_or_else(|| panic!("frame {name}")) as u32;
          let st = Stack {
            frame_id,
            parent_id: parent,
          };
          let id = *stacks.entry(st).or_insert_with(|| {
            t.stacks.push(st);
            t.stacks.len() as u32 - 1
          });
          parent = Some(id);
        }
        sample.stack_id = parent;
      }
    }
    let mut set: LabelSet = Vec::new();
    if let Some(l) = &label {
      set.push((
        "endpoint".into(),
        format!("GET /{}", l.trim_end_matches(char::is_numeric)),
      ));
      set.push(("span_id".into(), l.clone()));
    }
    if let Some(th) = &thread {
      set.push((THREAD_ID.into(), th.clone()));
    }
    if !set.is_empty() && sample.marker != Some(Marker::Idle) || thread.is_some() {
      set.sort();
      let id = *contexts.entry(set.clone()).or_insert_with(|| {
        t.contexts.push(Context::new(set));
        t.contexts.len() as u32 - 1
      });
      sample.context_id = Some(id);
    }
    t.samples.push(sample);
  }
  t
}

fn repeat(token: &str, n: usize) -> String {
  vec![token; n].join(" ")
}

const REQ: &str = "parserOnHeadersComplete>handler>spin";

fn blocks(tokens: &str) -> Vec<Block> {
  event_loop_blocks(&trace(tokens), &BlockOptions::default())
}

fn spans(b: &Block) -> Vec<&str> {
  b.requests.iter().map(|r| r.labels["span_id"].as_str()).collect()
}

#[test]
fn one_requests_long_task_among_idle_time_is_a_block_of_its_samples() {
  let t = format!(
    "{} {} {} {}",
    repeat("I", 5),
    repeat(&format!("{REQ}:report1"), 80),
    "processTicksAndRejections:report1",
    repeat("I", 5)
  );
  let b = blocks(&t);
  assert_eq!(b.len(), 1);
  let b = &b[0];
  // 81 samples 1 ms apart, half a gap on each side: 81 ms, within one gap (±1 ms).
  assert!((b.duration - 81.0).abs() < 1e-9, "{}", b.duration);
  assert!((b.error - 1.0).abs() < 1e-9);
  assert_eq!((b.first_sample, b.last_sample), (Some(5), Some(85)));
  assert_eq!(spans(b), ["report1"]);
  assert_eq!(b.requests[0].labels["endpoint"], "GET /report");
  assert_eq!(
    b.stacks[0].frames.iter().map(|f| f.name.as_str()).collect::<Vec<_>>(),
    ["spin", "handler", "parserOnHeadersComplete"]
  );
  assert_eq!(b.stacks[0].samples, 80);
  let f = b.function.as_ref().unwrap();
  assert_eq!((f.frame.name.as_str(), f.samples), ("spin", 80));
  assert!(!b.open_start && !b.open_end);
  assert_eq!(b.unsampled, 0.0);
}

#[test]
fn the_function_a_block_ran_in_is_the_deepest_that_most_of_its_samples_share() {
  // Its work spread over what it calls, none of which holds more than half of it.
  let t = format!(
    "I {} {} {} I",
    repeat("parserOnHeadersComplete>handler>batch:r1", 20),
    repeat("parserOnHeadersComplete>handler>batch>spin:r1", 30),
    repeat("parserOnHeadersComplete>handler>batch>runMicrotasks:r1", 10)
  );
  let b = blocks(&t);
  let f = b[0].function.as_ref().unwrap();
  assert_eq!(
    (f.frame.name.as_str(), f.samples),
    ("batch", 60),
    "spin holds half, not most"
  );
  assert_eq!(b[0].stacks[0].frames[0].name, "spin");
  // Most of it in Node's own code under the app's function (performance.now() in a loop):
  // the app's function, what the user can change.
  let t = format!(
    "I {} {} I",
    repeat("parserOnHeadersComplete>handler>spin>processTimers:r1", 50),
    repeat("parserOnHeadersComplete>handler>spin:r1", 10)
  );
  let f = blocks(&t)[0].function.clone().unwrap();
  assert_eq!((f.frame.name.as_str(), f.samples), ("spin", 60));
  // Only Node's: its deepest.
  let t = format!("I {} I", repeat("parserOnHeadersComplete>processTimers", 60));
  assert_eq!(blocks(&t)[0].function.as_ref().unwrap().frame.name, "processTimers");
}

#[test]
fn short_requests_back_to_back_with_no_idle_sample_are_no_block() {
  // A saturated loop: 100 requests of 2 ms, each its own task (another span, a new callback).
  let t: Vec<String> = (0..100).map(|i| format!("{REQ}:ping{i} {REQ}:ping{i}")).collect();
  assert_eq!(blocks(&t.join(" ")), []);
  // Its tasks start where a request's callback follows another's ticks, even unlabeled.
  let t: Vec<String> = (0..100).map(|_| format!("{REQ} processTicksAndRejections")).collect();
  assert_eq!(blocks(&t.join(" ")), []);
}

#[test]
fn several_requests_microtasks_in_one_task_are_one_block_naming_each() {
  // A timer resolves three requests' promises; their continuations (microtasks, outermost
  // frame their own async function) run 40 ms each before the loop turns again.
  let t = format!(
    "I I processTimers {} {} {} I I",
    repeat("batch>spin:batch1", 40),
    repeat("batch>spin:batch2", 40),
    repeat("processTicksAndRejections>runMicrotasks>batch>spin:batch3", 40)
  );
  let b = blocks(&t);
  assert_eq!(b.len(), 1, "{b:?}");
  assert!((b[0].duration - 121.0).abs() < 1e-9);
  assert_eq!(spans(&b[0]), ["batch1", "batch2", "batch3"]);
  assert_eq!(b[0].unlabeled, 1);
}

#[test]
fn microtasks_a_timer_callback_runs_itself_are_its_task_whatever_their_requests() {
  // The same batch where the timers' callback runs the microtasks itself (`runNextTicks`
  // between timer lists: Node 26 under load, 1 run in 6): every sample's outermost frame
  // is that callback's, and each continuation is another request's.
  let m = "processTimers>runNextTicks>runMicrotasks>batch>spin";
  let t = format!(
    "I I {} {} {} I I",
    repeat(&format!("{m}:batch1"), 40),
    repeat(&format!("{m}:batch2"), 40),
    repeat(&format!("{m}:batch3"), 40)
  );
  let b = blocks(&t);
  assert_eq!(b.len(), 1, "{b:?}");
  assert_eq!(spans(&b[0]), ["batch1", "batch2", "batch3"]);
  // Timer callbacks of two requests, back to back in that callback, are two tasks still.
  let t = format!(
    "I {} {} I",
    repeat("processTimers>handler>spin:r1", 40),
    repeat("processTimers>handler>spin:r2", 40)
  );
  assert_eq!(blocks(&t), []);
}

#[test]
fn a_program_sample_inside_a_later_requests_microtask_is_inside_the_task() {
  // V8 samples `(program)` in a fast API call (`performance.now()`) as the second
  // continuation ends, with its labels: the task runs on (Node 26 under load).
  let t = format!(
    "I I processTimers {} {} P:batch2 {} I I",
    repeat("batch>spin:batch1", 40),
    repeat("batch>spin:batch2", 40),
    repeat("batch>spin:batch3", 40)
  );
  let b = blocks(&t);
  assert_eq!(b.len(), 1, "{b:?}");
  // (Most samples first: the second has the `(program)` one too.)
  assert_eq!(spans(&b[0]), ["batch2", "batch1", "batch3"]);
  // With no labels, or another request's, it is the loop's own code between tasks.
  for p in ["P", "P:other9"] {
    let t = format!(
      "I I {} {p} {} I I",
      repeat(&format!("{REQ}:r1"), 40),
      repeat(&format!("{REQ}:r1"), 40)
    );
    assert_eq!(blocks(&t), [], "{p}");
  }
}

#[test]
fn garbage_collection_inside_a_block_is_part_of_it() {
  let t = format!(
    "I {} {} {} I",
    repeat(&format!("{REQ}:r1"), 30),
    repeat("G:r1", 15),
    repeat(&format!("{REQ}:r1"), 30)
  );
  let b = blocks(&t);
  assert_eq!(b.len(), 1);
  assert!((b[0].duration - 75.0).abs() < 1e-9);
  assert_eq!(b[0].gc, 15);
  // Unlabeled GC too (V8 may take it before the labels are known).
  let t = format!(
    "I {} {} {} I",
    repeat(&format!("{REQ}:r1"), 30),
    repeat("G", 15),
    repeat(&format!("{REQ}:r1"), 30)
  );
  assert_eq!(blocks(&t).len(), 1);
}

#[test]
fn unlabeled_garbage_collection_before_a_requests_first_sample_is_not_that_requests() {
  // After idle, V8 collects (its own task, or the next one's first allocations: either way
  // before the request's code is known to run); then a short request.
  let t = format!("I I {} {} I", repeat("G", 60), repeat(&format!("{REQ}:ping1"), 5));
  let b = blocks(&t);
  assert_eq!(b.len(), 1);
  assert_eq!((b[0].requests.len(), b[0].gc), (0, 60));
  // Labeled, it is the request's own (V8 collected while its code ran).
  let t = format!("I I {} {} I", repeat("G:r1", 60), repeat(&format!("{REQ}:r1"), 5));
  assert_eq!(spans(&blocks(&t)[0]), ["r1"]);
}

#[test]
fn async_hooks_run_inside_a_task_and_their_trampoline_starts_one() {
  // An after hook Node calls from C++ as the callback returns: still the request's task.
  let t = format!("I {} emitHook>handler:r1 I", repeat(&format!("{REQ}:r1"), 50));
  assert!((blocks(&t)[0].duration - 51.0).abs() < 1e-9);
  // The trampoline the loop calls an fs or timer callback through, when hooks are on.
  let t = format!(
    "I {} {} I",
    repeat(&format!("{REQ}:r1"), 40),
    repeat("callbackTrampoline>handler>spin:r1", 40)
  );
  assert_eq!(blocks(&t), []);
}

#[test]
fn a_block_at_the_recordings_start_or_end_is_open_there() {
  let b = blocks(&format!("{} I I", repeat(&format!("{REQ}:r1"), 60)));
  assert_eq!(b.len(), 1);
  assert!(b[0].open_start && !b[0].open_end);
  // From its first sample (no sample before): at least 59.5 ms.
  assert!((b[0].duration - 59.5).abs() < 1e-9, "{}", b[0].duration);
  assert_eq!(b[0].offset, 0.0);
  let b = blocks(&format!("I I {}", repeat(&format!("{REQ}:r1"), 60)));
  assert!(!b[0].open_start && b[0].open_end);
  assert!((b[0].duration - 59.5).abs() < 1e-9);
  let b = blocks(&repeat(&format!("{REQ}:r1"), 60));
  assert!(b[0].open_start && b[0].open_end);
}

#[test]
fn a_labeled_program_sample_is_inside_the_task_and_an_unlabeled_one_after_it_is_not() {
  // Node 24: V8 takes `(program)` samples inside fast API calls (performance.now()).
  let t = format!(
    "I {} P:r1 {} I",
    repeat(&format!("{REQ}:r1"), 40),
    repeat(&format!("{REQ}:r1"), 40)
  );
  assert_eq!(blocks(&t).len(), 1);
  // The loop's own code between two requests' tasks: two tasks of 40 ms.
  let t = format!(
    "I {} P {} I",
    repeat(&format!("{REQ}:r1"), 40),
    repeat("processTimers>spin", 40)
  );
  assert_eq!(blocks(&t), []);
  // With the next request's labels already in effect, too.
  let t = format!(
    "I {} P:r2 {} I",
    repeat(&format!("{REQ}:r1"), 40),
    repeat(&format!("{REQ}:r1"), 40)
  );
  assert_eq!(blocks(&t), []);
  // In an app without labels it cuts nothing.
  let t = format!("I {} P {} I", repeat(REQ, 40), repeat(REQ, 40));
  assert_eq!(blocks(&t).len(), 1);
}

#[test]
fn requests_queued_behind_a_block_are_not_in_it() {
  // The next request's task starts unlabeled (its parser, before the tracer's span).
  let t = format!(
    "I {} processTicksAndRejections:r1 parserOnHeadersComplete {REQ}:r2 {REQ}:r2 {REQ} {REQ}:r3 I",
    repeat(&format!("{REQ}:r1"), 100)
  );
  let b = blocks(&t);
  assert_eq!(b.len(), 1);
  assert_eq!(spans(&b[0]), ["r1"]);
  assert!((b[0].duration - 101.0).abs() < 1e-9, "{}", b[0].duration);
  // Garbage collection as the next request began (its labels already in effect) is its.
  let t = format!(
    "I {} processTicksAndRejections:p1 G:r2 G:r2 {} I",
    repeat(&format!("{REQ}:p0"), 3),
    repeat(&format!("{REQ}:r2"), 60)
  );
  let b = blocks(&t);
  assert_eq!((spans(&b[0]), b[0].gc), (vec!["r2"], 2));
  assert!((b[0].duration - 62.0).abs() < 1e-9, "{}", b[0].duration);
  // Its callback not sampled, only its ticks: those of another request start its task.
  let t = format!(
    "I {} processTicksAndRejections>handler:r2 processTicksAndRejections>handler:r2 I",
    repeat(&format!("{REQ}:r1"), 100)
  );
  let b = blocks(&t);
  assert_eq!(spans(&b[0]), ["r1"]);
  assert!((b[0].duration - 100.0).abs() < 1e-9);
  // Without the ticks between: the other span, in a new callback, starts a task.
  let t = format!(
    "I {} parserOnHeadersComplete {REQ}:r2 I",
    repeat(&format!("{REQ}:r1"), 100)
  );
  let b = blocks(&t);
  assert_eq!(spans(&b[0]), ["r1"]);
  assert!((b[0].duration - 100.0).abs() < 1e-9);
}

#[test]
fn one_request_that_yields_to_the_loop_between_chunks_is_not_one_block() {
  // A handler doing 4 chunks of 30 ms with setImmediate between (its callback sampled).
  // Each chunk resumes in processImmediate's callback (here processTimers: another node:
  // callback), after the previous chunk's ticks.
  let first = repeat(&format!("{REQ}:c1"), 30);
  let next = repeat("processTimers>handler>spin:c1", 30);
  let t = format!("I {first} processTicksAndRejections:c1 {next} processTicksAndRejections:c1 {next} processTicksAndRejections:c1 {next} I");
  assert_eq!(blocks(&t), [], "each chunk is its own task");
  // With no sample of the ticks between, the same callback again is not told apart.
  let t = format!("I {first} {} I", repeat("parserOnHeadersComplete>handler>spin:c1", 30));
  assert_eq!(blocks(&t).len(), 1);
}

#[test]
fn time_the_thread_did_not_run_is_in_the_block_and_said_apart() {
  // A 2 ms request the machine descheduled for 160 ms in the middle: no sample, no CPU. The
  // loop did not turn for 161 ms; 159 of them the thread was not running.
  let t = format!("I I {REQ}:ping1 {REQ}:ping1,+160,cpu1 I I");
  let b = blocks(&t);
  assert_eq!(b.len(), 1);
  assert!((b[0].duration - 161.0).abs() < 1e-9, "{}", b[0].duration);
  assert!((b[0].unsampled - 158.0).abs() < 1e-9, "{}", b[0].unsampled);
  assert_eq!(b[0].cpu, Some(1.0));
  // Its edges: within the gaps around it.
  assert!((b[0].error - 1.0).abs() < 1e-9);
  // A gap before a block longer than a typical interval: its start is less certain.
  let t = format!("I I {REQ}:r1,+30 {} I", repeat(&format!("{REQ}:r1"), 79));
  let b = blocks(&t);
  assert!((b[0].duration - 80.0).abs() < 1e-9, "{}", b[0].duration);
  assert!(
    (b[0].error - 30.0).abs() < 1e-9,
    "from 79 ms (its samples) to 110 ms (its neighbours): {}",
    b[0].error
  );
  // A 100 ms block the sampler missed 40 ms of while the thread ran (CPU 40 ms): all its own.
  let t = format!(
    "I I {} {REQ}:r1,+40,cpu40 {} I",
    repeat(&format!("{REQ}:r1"), 30),
    repeat(&format!("{REQ}:r1"), 30)
  );
  let b = blocks(&t);
  assert_eq!(b.len(), 1);
  assert!((b[0].duration - 100.0).abs() < 1e-9, "{}", b[0].duration);
  assert_eq!(b[0].unsampled, 0.0);
  // A thread blocked in a synchronous call (execSync) is sampled all along with no CPU.
  let t = format!("I I {} I", repeat(&format!("{REQ}:exec1,cpu0"), 150));
  let b = blocks(&t);
  assert_eq!(b.len(), 1);
  assert_eq!(b[0].unsampled, 0.0);
  assert_eq!(b[0].cpu, Some(0.0));
  // A gap outside a task (the loop idle, then descheduled) is not in it: its edges reach
  // half a typical interval at most.
  let t = format!("I I {} I,+200 I", repeat(&format!("{REQ}:r1"), 60));
  assert!((blocks(&t)[0].duration - 60.0).abs() < 1e-9);
}

#[test]
fn each_thread_has_its_own_loop() {
  // Two threads' samples interleaved in one merged trace: each busy 30 ms, idle between.
  let mut tokens = Vec::new();
  for i in 0..60 {
    tokens.push(if i < 30 { format!("{REQ}:a1@0") } else { "I@0".into() });
    tokens.push(if i >= 30 {
      format!("{REQ}:b1@1,+0")
    } else {
      "I@1,+0".into()
    });
  }
  assert_eq!(blocks(&tokens.join(" ")), []);
  let mut tokens = Vec::new();
  for _ in 0..60 {
    tokens.push(format!("{REQ}:a1@0"));
    tokens.push("I@1,+0".into());
  }
  let b = blocks(&tokens.join(" "));
  assert_eq!(b.len(), 1);
  assert_eq!(b[0].thread[THREAD_ID], "0");
  assert_eq!(spans(&b[0]), ["a1"], "the thread's label is not the request's");
}

#[test]
fn a_stack_v8_cut_short_starts_no_task() {
  // 260 frames deep: its outermost frame is not known, so it cannot start a new task.
  let deep = format!("{}>spin", repeat("handler", 259).replace(' ', ">"));
  let t = format!(
    "I {} {} {} I",
    repeat(&format!("{REQ}:r1"), 30),
    repeat(&format!("processTimers>{deep}:r1"), 30),
    repeat(&format!("{REQ}:r1"), 30)
  );
  assert_eq!(blocks(&t).len(), 1);
}

#[test]
fn threshold_and_limits() {
  let t = format!("I {} I", repeat(&format!("{REQ}:r1"), 50));
  assert_eq!(blocks(&t), [], "50 ms is not over 50 ms");
  let lower = BlockOptions {
    threshold_ms: 20.0,
    stacks: 1,
    requests: 1,
    frames: 2,
  };
  let t = format!(
    "I {} {} I",
    repeat("processTimers>batch>spin:x1", 20),
    repeat("batch>handler:x2", 10)
  );
  let b = event_loop_blocks(&trace(&t), &lower);
  assert_eq!(b.len(), 1);
  assert_eq!((b[0].requests.len(), b[0].other_requests), (1, 1));
  assert_eq!(b[0].stacks.len(), 1);
  assert_eq!((b[0].stacks[0].frames.len(), b[0].stacks[0].more), (2, 1));
}

/// A pprof's timing for the traces here: from 90 ms to `end_ms`, 1 ms apart, CPU time.
fn pprof_timing(end_ms: f64) -> crate::formats::pprof::Timing {
  crate::formats::pprof::Timing {
    time_origin_unix_ms: 1_700_000_000_000.0,
    start_ms: 90.0,
    end_ms,
    period_ns: 1_000_000,
    cpu: true,
    lines: false,
  }
}

#[test]
fn blocks_go_into_a_pprof_and_come_back_from_it() {
  use crate::formats::pprof::{parse_block_comments, profile};
  let t = trace(&format!(
    "I {} I {} I",
    repeat(&format!("{REQ}:r1"), 60),
    repeat(&format!("{REQ}:r2"), 70)
  ));
  let timing = pprof_timing(300.0);
  let p = profile(&t, &timing);
  let comments = p.comment.iter().map(|&c| p.string_table[c as usize].as_str());
  let back = parse_block_comments(comments).expect("the comments carry blocks");
  let found = event_loop_blocks(&t, &BlockOptions::default());
  assert_eq!((back.threshold_ms, back.found, back.blocks.len()), (50.0, 2, 2));
  for (b, f) in back.blocks.iter().zip(&found) {
    assert_eq!(b.start, None);
    assert!((b.offset - (f.start.unwrap() - 90.0)).abs() < 1e-9);
    assert_eq!(b.unix_ms, Some(1_700_000_000_000.0 + f.start.unwrap()));
    assert_eq!(
      (b.duration, &b.requests, &b.stacks, &b.function),
      (f.duration, &f.requests, &f.stacks, &f.function)
    );
  }
  // A heap profile (weighted) has none, and says so by having no comment.
  let mut heap = t.clone();
  heap.weight = Some(crate::trace::SampleWeights {
    kind: "inuse_space".into(),
    unit: "bytes".into(),
    values: vec![1.0; heap.samples.len()],
    ..Default::default()
  });
  assert_eq!(event_loop_blocks(&heap, &BlockOptions::default()), []);
}

#[test]
fn a_pprofs_blocks_read_back_are_the_numbers_written_to_the_last_bit() {
  // V8's timestamps are whole microseconds: a block's duration, their difference in ms,
  // is often a double like 211.85000000000002 that a parser off by one bit reads as
  // 211.84999999999997, and `selfprof report --blocks` of the pprof would print 211.8 ms
  // where the trace's own blocks say 211.9.
  use crate::formats::pprof::{parse_block_comments, profile};
  let mut t = trace(&format!(
    "I {} I {} I {} I",
    repeat(&format!("{REQ}:r1"), 60),
    repeat(&format!("{REQ}:r2"), 70),
    repeat(&format!("{REQ}:r3"), 80)
  ));
  let timing = pprof_timing(400.0);
  let mut differed = Vec::new();
  for shift in 0..200u32 {
    for (i, s) in t.samples.iter_mut().enumerate() {
      s.timestamp = 100.0 + i as f64 + f64::from((shift * 7919 + i as u32 * 104_729) % 1000) * 0.001;
    }
    let found = event_loop_blocks(&t, &BlockOptions::default());
    let p = profile(&t, &timing);
    let back = parse_block_comments(p.comment.iter().map(|&c| p.string_table[c as usize].as_str()))
      .expect("the comments carry blocks");
    assert_eq!(back.blocks.len(), found.len());
    for (b, f) in back.blocks.iter().zip(&found) {
      if (b.duration.to_bits(), b.error.to_bits(), b.unsampled.to_bits())
        != (f.duration.to_bits(), f.error.to_bits(), f.unsampled.to_bits())
      {
        differed.push([(f.duration, b.duration), (f.error, b.error), (f.unsampled, b.unsampled)]);
      }
    }
  }
  assert_eq!(
    differed.iter().take(3).collect::<Vec<_>>(),
    Vec::<&[(f64, f64); 3]>::new(),
    "{} of 600 blocks read back differently",
    differed.len()
  );
}

#[test]
fn a_hostile_traces_deep_stacks_in_many_blocks_are_walked_within_a_budget() {
  // One chain of 10,000 frames, and 1,000 blocks of 60 samples at its leaf: finding each
  // block's function would walk 10 million nodes; the walks stop at `WALK_BUDGET`.
  let mut t = trace("I");
  t.samples.clear();
  let depth = 10_000u32;
  for i in 0..depth {
    t.stacks.push(Stack {
      frame_id: 4,
      parent_id: i.checked_sub(1),
    });
  }
  let mut time = 0.0;
  for _ in 0..1_000 {
    for k in 0..62 {
      time += 1.0;
      let busy = k > 0 && k < 61;
      t.samples.push(Sample {
        timestamp: time,
        stack_id: busy.then_some(depth - 1),
        marker: (!busy).then_some(Marker::Idle),
        context_id: None,
        cpu_time: Some(1.0),
      });
    }
  }
  let b = blocks_of(&t);
  assert_eq!(b.len(), 1_000);
  let walked = b.iter().filter(|b| b.function.is_some()).count() as u64;
  assert_eq!(walked, WALK_BUDGET / u64::from(depth), "then no more functions");
  assert!(b
    .iter()
    .all(|b| b.stacks[0].more == depth - 40 && b.stacks[0].frames.len() == 40));
}

fn blocks_of(t: &Trace) -> Vec<Block> {
  event_loop_blocks(t, &BlockOptions::default())
}

/// A trace of one busy stretch at the app's own code (no callback of the loop's starts a
/// task in it), sample `i` in context `context(i)` of `sets`.
fn one_stretch(sets: &[LabelSet], context: impl Fn(usize) -> Option<u32>, n: usize) -> Trace {
  let mut t = trace("I");
  t.samples.clear();
  t.stacks.push(Stack {
    frame_id: 6, // handler, file:///app.js
    parent_id: None,
  });
  t.contexts = sets.iter().cloned().map(Context::new).collect();
  t.samples = (0..n)
    .map(|i| Sample {
      timestamp: 1.0 + i as f64,
      stack_id: Some(0),
      marker: None,
      context_id: context(i),
      cpu_time: Some(1.0),
    })
    .collect();
  t
}

#[test]
fn a_blocks_requests_are_merged_as_comparing_each_context_with_every_request_merges() {
  // Label sets from few keys and values, so that many hold others: each context must join
  // the first request so far that it matches, as a walk over all of them finds it.
  let mut seed = 0x2545_f491_4f6c_dd1du64;
  let mut next = |m: u64| {
    seed ^= seed << 13;
    seed ^= seed >> 7;
    seed ^= seed << 17;
    seed % m
  };
  for round in 0..200 {
    let sets: Vec<LabelSet> = (0..40)
      .map(|_| {
        let mut set: LabelSet = Vec::new();
        for k in ["endpoint", "span_id", "tenant", "user"] {
          if next(2) == 0 {
            set.push((k.into(), format!("v{}", next(2))));
          }
        }
        if next(8) == 0 {
          set.push((THREAD_ID.into(), "1".into()));
        }
        set
      })
      .collect();
    let picks: Vec<Option<u32>> = (0..300).map(|_| (next(10) != 0).then(|| next(40) as u32)).collect();
    let t = one_stretch(&sets, |i| picks[i], picks.len());
    let f = Facts::new(&t);
    let indices: Vec<usize> = (0..t.samples.len()).collect();
    let mut walked: Vec<(u32, u32)> = Vec::new();
    for &i in &indices {
      let Some(c) = f.request_of(i) else { continue };
      match walked.iter_mut().find(|(r, _)| f.same_request(*r, c)) {
        Some(entry) => {
          entry.1 += 1;
          if f.request[c as usize].len() > f.request[entry.0 as usize].len() {
            entry.0 = c;
          }
        }
        None => walked.push((c, 1)),
      }
    }
    let mut requests = Requests::new(&f, &indices);
    for c in indices.iter().filter_map(|&i| f.request_of(i)) {
      requests.add(c);
    }
    assert_eq!(requests.entries, walked, "round {round}");
  }
}

#[test]
fn a_block_of_many_requests_compares_each_sample_with_a_few() {
  // One stretch of 12,000 samples, each its own request (a third without a span id, four
  // endpoints): comparing each with every request so far made 32 million comparisons.
  let n = 12_000;
  let span = |i: usize| {
    if i.is_multiple_of(3) {
      String::new()
    } else {
      format!("{i:016x}")
    }
  };
  let sets: Vec<LabelSet> = (0..n)
    .map(|i| {
      vec![
        ("endpoint".into(), format!("GET /{}", i % 4)),
        ("span_id".into(), span(i)),
      ]
    })
    .collect();
  let t = one_stretch(&sets, |i| Some(i as u32), n);
  let f = Facts::new(&t);
  let indices: Vec<usize> = (0..n).collect();
  let block = describe(&f, &indices, &BlockOptions::default());
  let requests = n - n / 3 + 4;
  assert_eq!(block.requests.len() + block.other_requests as usize, requests);
  assert_eq!(block.requests[0].samples, 1000, "the four without a span id first");
  assert!(f.compared.get() <= 3 * n as u64, "{} comparisons", f.compared.get());
}
