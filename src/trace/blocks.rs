//! Event-loop blocks: the stretches where a thread's event loop did not turn for longer
//! than a threshold, found from the samples' times and stacks alone (no hook), each with
//! the requests whose code ran in it and its heaviest stacks. docs/api.md's "Event-loop
//! blocks" gives the definition for users; in short, per thread:
//!
//! 1. An `(idle)` sample was taken while the loop waited for events (Node marks the isolate
//!    idle around its poll). Every other sample is busy; a `(program)` sample without the
//!    labels of the request the task before it ran last (the loop's own code between
//!    callbacks) ends that task too.
//! 2. A run of busy samples may hold several tasks back to back. A JS sample starts a new
//!    task when its outermost frame is a callback Node's loop dispatched (a `node:`
//!    function other than the tick and microtask runners and async_hooks' emitters, which
//!    run inside a task) and the task so far left its
//!    first callback, began in another one, ran another request (label sets neither of
//!    which holds the other), or was only unlabeled garbage collection. A sample of
//!    another request running a tick (`processTicksAndRejections` not in `runMicrotasks`)
//!    starts one too: a request's ticks follow its own callback. The samples just before
//!    it that carry its request (garbage collection as it began), or no labels in the same
//!    callback, go with the new task. A sample running microtasks (the microtask runner on
//!    its stack: a timer's callback runs them itself between timer lists) starts none,
//!    whatever its request: it is inside the task that ran them. A stack V8 cut at its 255
//!    innermost frames has no known outermost frame.
//! 3. A task's edges are half-way to the samples on either side (at most half a typical
//!    interval, the median gap between the thread's samples), so its duration is accurate
//!    to about one interval (`error` bounds it). It is a block when that wall time exceeds
//!    the threshold: the loop did not turn, whatever held the thread. Where V8 took no
//!    sample for over two typical intervals and the thread's CPU time says it did not run
//!    (a busy machine, a CPU limit), that time beyond two intervals is `unsampled`: in the
//!    block, but not its code's doing.

use super::{Marker, Trace};
use crate::formats::threads::{OS_THREAD_ID, THREAD_ID, THREAD_NAME};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, HashMap};

mod requests;
use requests::Requests;

/// What to find and how much of each block to keep.
#[derive(Debug, Clone, Copy)]
pub struct BlockOptions {
  /// A block is longer than this (ms): 50, as the web's long tasks.
  pub threshold_ms: f64,
  /// Its heaviest stacks kept.
  pub stacks: usize,
  /// Its requests kept (the most samples first); the rest are counted.
  pub requests: usize,
  /// Frames kept of each stack, from the leaf.
  pub frames: usize,
}

pub const DEFAULT_THRESHOLD_MS: f64 = 50.0;

impl Default for BlockOptions {
  fn default() -> Self {
    BlockOptions {
      threshold_ms: DEFAULT_THRESHOLD_MS,
      stacks: 3,
      requests: 10,
      frames: 40,
    }
  }
}

/// One block. Times are ms: `start` on the trace's clock (absent when read back from a
/// pprof's comments), `offset` after the recording's first sample (a pprof's: its start).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Block {
  #[serde(default, skip_serializing_if = "Option::is_none")]
  pub start: Option<f64>,
  pub offset: f64,
  /// Unix time of `start`, when the recording's time origin is known (pprof).
  #[serde(default, skip_serializing_if = "Option::is_none")]
  pub unix_ms: Option<f64>,
  pub duration: f64,
  /// The real duration is within `duration ± error`: between the time from its first
  /// sample to its last and the time between the samples around them (on the sides the
  /// recording saw). Half the two gaps when V8 sampled on time.
  pub error: f64,
  /// Of `duration`, the ms when the thread was not running (no sample, no CPU time).
  pub unsampled: f64,
  /// The thread's CPU time between its first and last samples, when samples carry it.
  #[serde(default, skip_serializing_if = "Option::is_none")]
  pub cpu: Option<f64>,
  pub samples: u32,
  /// Its first and last samples' indices in the trace.
  #[serde(default, skip_serializing_if = "Option::is_none")]
  pub first_sample: Option<u32>,
  #[serde(default, skip_serializing_if = "Option::is_none")]
  pub last_sample: Option<u32>,
  /// It was running when the recording started (or still when it stopped): it lasted at
  /// least `duration`.
  #[serde(default, skip_serializing_if = "is_false")]
  pub open_start: bool,
  #[serde(default, skip_serializing_if = "is_false")]
  pub open_end: bool,
  /// Its thread's labels (`thread name`, `thread id`), in a trace of several threads.
  #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
  pub thread: BTreeMap<String, String>,
  /// The requests whose code ran in it (their labels, but the thread's), most samples first.
  pub requests: Vec<BlockRequest>,
  /// Requests beyond those listed.
  #[serde(default, skip_serializing_if = "is_zero")]
  pub other_requests: u32,
  /// Its samples with no request's labels, and those of garbage collection.
  pub unlabeled: u32,
  pub gc: u32,
  /// The function it ran in: the deepest frame of the app's or a package's code (else of
  /// any) that most of its JS samples share, following the heaviest call path from the
  /// root, and how many do.
  #[serde(default, skip_serializing_if = "Option::is_none")]
  pub function: Option<BlockFunction>,
  /// Its heaviest stacks, the most samples first.
  pub stacks: Vec<BlockStack>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BlockFunction {
  #[serde(flatten)]
  pub frame: BlockFrame,
  pub samples: u32,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BlockRequest {
  pub labels: BTreeMap<String, String>,
  pub samples: u32,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BlockStack {
  /// Leaf first.
  pub frames: Vec<BlockFrame>,
  pub samples: u32,
  /// Frames beyond those kept, toward the root.
  #[serde(default, skip_serializing_if = "is_zero")]
  pub more: u32,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BlockFrame {
  pub name: String,
  #[serde(default, skip_serializing_if = "Option::is_none")]
  pub url: Option<String>,
  #[serde(default, skip_serializing_if = "Option::is_none")]
  pub line: Option<u32>,
  #[serde(default, skip_serializing_if = "Option::is_none")]
  pub column: Option<u32>,
}

/// The blocks of a profile, as found in its samples or read from a pprof's comments.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Recorded {
  /// Blocks are longer than this (ms).
  pub threshold_ms: f64,
  /// How many there were: more than `blocks` when a pprof kept only the longest.
  pub found: usize,
  pub blocks: Vec<Block>,
}

fn is_false(b: &bool) -> bool {
  !*b
}

fn is_zero(n: &u32) -> bool {
  *n == 0
}

/// V8 keeps a sample's 255 innermost frames: from about this depth on, the outermost
/// frame the trace shows may not be the stack's.
const CUT_DEPTH: u32 = 250;

/// Stack nodes walked to find the blocks' functions, at most (see `Facts::budget`).
const WALK_BUDGET: u64 = 1 << 22;

/// `deepest_shared`'s per-stack scratch, indexed by stack id.
struct Walk {
  epoch: u32,
  seen: Vec<u32>,
  total: Vec<u32>,
  best: Vec<u32>,
}

/// Frames that drain the current task's ticks and microtasks: not a callback of its own.
const TICKS: &str = "processTicksAndRejections";
const MICROTASKS: &str = "runMicrotasks";
/// Node's async_hooks module, and the trampoline the loop's callbacks enter JS through
/// there when hooks are on.
const ASYNC_HOOKS: &str = "node:internal/async_hooks";
const TRAMPOLINE: &str = "callbackTrampoline";

/// What the walk needs to know of each stack, context and sample.
struct Facts<'a> {
  trace: &'a Trace,
  /// Per stack: its outermost frame, or None when V8 may have cut it; its depth.
  root: Vec<Option<u32>>,
  depth: Vec<u32>,
  /// Stack nodes the blocks' functions may still walk (a hostile trace's deep stacks in
  /// many blocks); past it, blocks have no `function`.
  budget: std::cell::Cell<u64>,
  /// Per stack, reused by each block's walk: the walk that last reached it, its samples,
  /// its heaviest child (`deepest_shared`).
  walk: std::cell::RefCell<Walk>,
  /// Per frame: a callback Node's loop dispatches (see the module's rule 2).
  entry: Vec<bool>,
  /// Per stack: its outermost frame the tick runner (a tick, unless `microtask`).
  tick: Vec<bool>,
  /// Per stack: microtasks running (the microtask runner on it), inside whatever task ran them.
  microtask: Vec<bool>,
  /// Per context: its labels but the thread's, as sorted pairs (empty: no request).
  request: Vec<Vec<(&'a str, &'a str)>>,
  /// Pairs of contexts compared (`same_request`), for the tests of how much work a block is.
  #[cfg(test)]
  compared: std::cell::Cell<u64>,
}

impl<'a> Facts<'a> {
  fn new(trace: &'a Trace) -> Facts<'a> {
    let mut depth = vec![0u32; trace.stacks.len()];
    let mut root = vec![None; trace.stacks.len()];
    for (i, s) in trace.stacks.iter().enumerate() {
      // Parents come before children (`formats::check`).
      let parent = s.parent_id.map(|p| p as usize).filter(|p| *p < i);
      depth[i] = parent.map_or(1, |p| depth[p] + 1);
      root[i] = match parent {
        Some(p) => root[p],
        None => Some(s.frame_id),
      };
    }
    for (i, r) in root.iter_mut().enumerate() {
      if depth[i] >= CUT_DEPTH {
        *r = None;
      }
    }
    let name = |frame: u32| trace.frames.get(frame as usize).map_or("", |f| f.name.as_str());
    let entry = trace
      .frames
      .iter()
      .map(|f| {
        let url = f
          .resource_id
          .and_then(|r| trace.resources.get(r as usize))
          .map_or("", String::as_str);
        // async_hooks' emitters run around a callback, inside its task; its trampoline is
        // how the loop calls one.
        let hook = url == ASYNC_HOOKS && f.name != TRAMPOLINE;
        url.starts_with("node:") && !hook && f.name != TICKS && f.name != MICROTASKS
      })
      .collect();
    // (Microtasks the tick runner runs are told apart by `microtask`, checked first.)
    let tick = (0..trace.stacks.len())
      .map(|i| root[i].is_some_and(|r| name(r) == TICKS))
      .collect();
    let mut microtask = vec![false; trace.stacks.len()];
    for (i, s) in trace.stacks.iter().enumerate() {
      let parent = s.parent_id.map(|p| p as usize).filter(|p| *p < i);
      microtask[i] = name(s.frame_id) == MICROTASKS || parent.is_some_and(|p| microtask[p]);
    }
    let request = trace
      .contexts
      .iter()
      .map(|c| {
        let mut pairs: Vec<(&str, &str)> = c.labels.iter().filter(|(k, _)| !is_thread_key(k)).collect();
        pairs.sort_unstable();
        pairs
      })
      .collect();
    Facts {
      trace,
      root,
      depth,
      budget: std::cell::Cell::new(WALK_BUDGET),
      walk: std::cell::RefCell::new(Walk {
        epoch: 0,
        seen: vec![0; trace.stacks.len()],
        total: vec![0; trace.stacks.len()],
        best: vec![u32::MAX; trace.stacks.len()],
      }),
      entry,
      tick,
      microtask,
      request,
      #[cfg(test)]
      compared: std::cell::Cell::new(0),
    }
  }

  /// The request (context id) of sample `i`, if its labels name one.
  fn request_of(&self, i: usize) -> Option<u32> {
    let c = self.trace.samples[i].context_id?;
    self.request.get(c as usize).filter(|r| !r.is_empty()).map(|_| c)
  }

  /// Whether two contexts are one request's: one's labels hold all of the other's.
  fn same_request(&self, a: u32, b: u32) -> bool {
    #[cfg(test)]
    self.compared.set(self.compared.get() + 1);
    if a == b {
      return true;
    }
    let (a, b) = (&self.request[a as usize], &self.request[b as usize]);
    let within = |x: &[(&str, &str)], y: &[(&str, &str)]| x.iter().all(|p| y.binary_search(p).is_ok());
    within(a, b) || within(b, a)
  }

  /// The outermost frame of JS sample `i`, when known.
  fn root_of(&self, i: usize) -> Option<u32> {
    let s = &self.trace.samples[i];
    if s.marker.is_some() {
      return None;
    }
    self.root.get(s.stack_id? as usize).copied().flatten()
  }

  /// Whether JS sample `i`'s stack is one `per_stack` marks (false for a marker sample).
  fn js_stack_in(&self, i: usize, per_stack: &[bool]) -> bool {
    let s = &self.trace.samples[i];
    s.marker.is_none()
      && s
        .stack_id
        .is_some_and(|id| per_stack.get(id as usize).copied().unwrap_or(false))
  }

  /// Whether JS sample `i` runs microtasks (the runner on its stack, under any callback).
  fn is_microtask(&self, i: usize) -> bool {
    self.js_stack_in(i, &self.microtask)
  }

  /// Whether JS sample `i` runs under the tick runner (a tick where not `is_microtask`).
  fn is_tick(&self, i: usize) -> bool {
    self.js_stack_in(i, &self.tick)
  }
}

fn is_thread_key(k: &str) -> bool {
  k == THREAD_NAME || k == THREAD_ID || k == OS_THREAD_ID
}

/// A task being walked: where it began, and what its samples showed so far.
#[derive(Clone, Copy)]
struct Task {
  first: usize,
  /// The callback it began in (an entry frame), if its first known frame was one.
  entry: Option<u32>,
  /// A sample ran outside that callback (its ticks, microtasks, or a start not seen).
  left: bool,
  request: Option<u32>,
  /// The request of its latest labeled sample (microtasks of several requests run in one task).
  last: Option<u32>,
  /// Its samples so far are unlabeled garbage collection only.
  gc_only: bool,
}

impl Task {
  fn new(first: usize) -> Task {
    Task {
      first,
      entry: None,
      left: false,
      request: None,
      last: None,
      gc_only: true,
    }
  }

  fn feed(&mut self, f: &Facts, i: usize) {
    let s = &f.trace.samples[i];
    self.gc_only &= s.marker == Some(Marker::Gc) && f.request_of(i).is_none();
    if let Some(root) = f.root_of(i) {
      if self.entry.is_none() && !self.left {
        if f.entry[root as usize] {
          self.entry = Some(root);
        } else {
          self.left = true;
        }
      } else if Some(root) != self.entry {
        self.left = true;
      }
    }
    if let Some(r) = f.request_of(i) {
      self.request.get_or_insert(r);
      self.last = Some(r);
    }
  }

  /// Whether JS sample `i` starts a task after this one (rule 2).
  fn ends_before(&self, f: &Facts, i: usize) -> bool {
    let Some(root) = f.root_of(i) else {
      return false;
    };
    // Microtasks run inside the task that ran them (a timer's callback runs them itself,
    // between timer lists), whatever their requests.
    if f.is_microtask(i) {
      return false;
    }
    let other_request = matches!((self.request, f.request_of(i)), (Some(a), Some(b)) if !f.same_request(a, b));
    if f.is_tick(i) {
      return other_request;
    }
    f.entry[root as usize] && (self.left || self.gc_only || self.entry.is_some_and(|e| e != root) || other_request)
  }
}

/// The samples of each thread, in time order: one list, or one per `thread id` label.
fn threads(trace: &Trace) -> Vec<Vec<usize>> {
  let thread_of: Vec<Option<&str>> = trace.contexts.iter().map(|c| c.labels.get(THREAD_ID)).collect();
  let mut by: Vec<(Option<&str>, Vec<usize>)> = Vec::new();
  let mut index: HashMap<Option<&str>, usize> = HashMap::new();
  for (i, s) in trace.samples.iter().enumerate() {
    let key = s.context_id.and_then(|c| thread_of.get(c as usize).copied().flatten());
    let at = *index.entry(key).or_insert_with(|| {
      by.push((key, Vec::new()));
      by.len() - 1
    });
    by[at].1.push(i);
  }
  by.into_iter()
    .map(|(_, mut list)| {
      list.sort_by(|&a, &b| trace.samples[a].timestamp.total_cmp(&trace.samples[b].timestamp));
      list
    })
    .collect()
}

/// The median gap between consecutive samples of `list` (0 when there is none).
fn typical_gap(trace: &Trace, list: &[usize]) -> f64 {
  let mut gaps: Vec<f64> = list
    .windows(2)
    .map(|w| trace.samples[w[1]].timestamp - trace.samples[w[0]].timestamp)
    .filter(|g| *g > 0.0)
    .collect();
  if gaps.is_empty() {
    return 0.0;
  }
  gaps.sort_by(f64::total_cmp);
  gaps[gaps.len() / 2]
}

/// The tasks of one thread's samples (`list`), as ranges of positions in it.
fn tasks(f: &Facts, list: &[usize]) -> Vec<(usize, usize)> {
  let samples = &f.trace.samples;
  let mut out = Vec::new();
  let mut task: Option<Task> = None;
  for (p, &i) in list.iter().enumerate() {
    let s = &samples[i];
    let between = match s.marker {
      Some(Marker::Idle) => true,
      // The loop's own code between callbacks, once a request's task ran: no request, or
      // another, is in effect there. (Inside a task V8 takes `(program)` samples too, in
      // fast API calls: with the labels of the request running, the task's latest.)
      Some(Marker::Other) => task.is_some_and(|t| {
        t.last
          .is_some_and(|r| f.request_of(i).is_none_or(|c| !f.same_request(r, c)))
      }),
      _ => false,
    };
    if between {
      if let Some(t) = task.take() {
        out.push((t.first, p - 1));
      }
      continue;
    }
    if let Some(t) = task.filter(|t| t.ends_before(f, i)) {
      // The new task's start: the samples just before that carry its request (and not the
      // old task's: garbage collection as it began), or no labels in the same callback.
      let root = f.root_of(i);
      let request = f.request_of(i);
      let theirs = |j: usize| match (f.request_of(j), request) {
        (Some(c), Some(r)) => f.same_request(c, r) && !t.request.is_some_and(|o| f.same_request(o, c)),
        (None, _) => f.root_of(j).is_some() && f.root_of(j) == root,
        (Some(_), None) => false,
      };
      let mut k = p;
      while k > t.first + 1 && theirs(list[k - 1]) {
        k -= 1;
      }
      out.push((t.first, k - 1));
      let mut next = Task::new(k);
      for &j in &list[k..p] {
        next.feed(f, j);
      }
      task = Some(next);
    }
    let t = task.get_or_insert_with(|| Task::new(p));
    t.feed(f, i);
  }
  if let Some(t) = task {
    out.push((t.first, list.len() - 1));
  }
  out
}

/// The event-loop blocks of a trace with sample times (not a weighted one), by start.
pub fn event_loop_blocks(trace: &Trace, options: &BlockOptions) -> Vec<Block> {
  if trace.weight.is_some() || trace.samples.is_empty() {
    return Vec::new();
  }
  let f = Facts::new(trace);
  let first_time = trace.samples.iter().map(|s| s.timestamp).fold(f64::INFINITY, f64::min);
  let mut blocks = Vec::new();
  for list in threads(trace) {
    let typical = typical_gap(trace, &list);
    let time = |p: usize| trace.samples[list[p]].timestamp;
    for (a, b) in tasks(&f, &list) {
      let before = (a > 0).then(|| time(a) - time(a - 1));
      let after = (b + 1 < list.len()).then(|| time(b + 1) - time(b));
      let start = time(a) - before.map_or(0.0, |g| g.min(typical) / 2.0);
      let end = time(b) + after.map_or(0.0, |g| g.min(typical) / 2.0);
      let duration = end - start;
      if duration <= options.threshold_ms {
        continue;
      }
      let mut unsampled = 0.0;
      let mut cpu: Option<f64> = None;
      for pair in list[a..=b].windows(2) {
        let (prev, this) = (&trace.samples[pair[0]], &trace.samples[pair[1]]);
        let gap = this.timestamp - prev.timestamp;
        let ran = this.cpu_time;
        if let Some(c) = ran {
          *cpu.get_or_insert(0.0) += c;
        }
        // Without CPU times a gap cannot be told from a thread that ran: it counts.
        if ran.is_some_and(|c| c < gap / 2.0) {
          unsampled += (gap - 2.0 * typical).max(0.0);
        }
      }
      let mut block = describe(&f, &list[a..=b], options);
      block.start = Some(start);
      block.offset = start - first_time;
      block.duration = duration;
      // The real edges lie between the samples around them: the real duration is between
      // the span of its samples and that of its neighbours.
      let (shortest, longest) = (
        time(b) - time(a),
        time(b) - time(a) + before.unwrap_or(0.0) + after.unwrap_or(0.0),
      );
      block.error = (duration - shortest).max(longest - duration);
      block.unsampled = unsampled;
      block.cpu = cpu;
      block.first_sample = Some(list[a] as u32);
      block.last_sample = Some(list[b] as u32);
      block.open_start = before.is_none();
      block.open_end = after.is_none();
      blocks.push(block);
    }
  }
  blocks.sort_by(|x, y| x.offset.total_cmp(&y.offset));
  blocks
}

/// A block's samples (`indices`): its thread, requests and heaviest stacks.
fn describe(f: &Facts, indices: &[usize], options: &BlockOptions) -> Block {
  let trace = f.trace;
  let mut thread = BTreeMap::new();
  let mut requests = Requests::new(f, indices);
  let mut stacks: HashMap<u32, u32> = HashMap::new();
  let (mut unlabeled, mut gc) = (0u32, 0u32);
  for &i in indices {
    let s = &trace.samples[i];
    if thread.is_empty() {
      if let Some(c) = s.context_id.and_then(|c| trace.contexts.get(c as usize)) {
        thread = c
          .labels
          .iter()
          .filter(|(k, _)| *k == THREAD_NAME || *k == THREAD_ID)
          .map(|(k, v)| (k.to_owned(), v.to_owned()))
          .collect();
      }
    }
    match f.request_of(i) {
      Some(c) => requests.add(c),
      None => unlabeled += 1,
    }
    match (s.marker, s.stack_id) {
      (Some(Marker::Gc), _) => gc += 1,
      (None, Some(stack)) => *stacks.entry(stack).or_default() += 1,
      _ => {}
    }
  }
  let function = deepest_shared(f, &stacks).map(|(stack, samples)| BlockFunction {
    frame: frame_of(trace, trace.stacks[stack as usize].frame_id),
    samples,
  });
  let mut requests = requests.entries;
  requests.sort_by(|x, y| y.1.cmp(&x.1).then(x.0.cmp(&y.0)));
  let other_requests = requests.len().saturating_sub(options.requests) as u32;
  let requests = requests
    .into_iter()
    .take(options.requests)
    .map(|(c, samples)| BlockRequest {
      labels: f.request[c as usize]
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect(),
      samples,
    })
    .collect();
  let mut heaviest: Vec<(u32, u32)> = stacks.into_iter().collect();
  heaviest.sort_by(|x, y| y.1.cmp(&x.1).then(x.0.cmp(&y.0)));
  let stacks = heaviest
    .into_iter()
    .take(options.stacks)
    .map(|(stack, samples)| BlockStack {
      frames: trace
        .frames_leaf_first(Some(stack))
        .take(options.frames)
        .map(|id| frame_of(trace, id))
        .collect(),
      samples,
      more: f.depth[stack as usize].saturating_sub(options.frames as u32),
    })
    .collect();
  Block {
    start: None,
    offset: 0.0,
    unix_ms: None,
    duration: 0.0,
    error: 0.0,
    unsampled: 0.0,
    cpu: None,
    samples: indices.len() as u32,
    first_sample: None,
    last_sample: None,
    open_start: false,
    open_end: false,
    thread,
    requests,
    other_requests,
    unlabeled,
    gc,
    function,
    stacks,
  }
}

fn frame_of(trace: &Trace, id: u32) -> BlockFrame {
  let fr = &trace.frames[id as usize];
  BlockFrame {
    name: if fr.name.is_empty() {
      "(anonymous)".into()
    } else {
      fr.name.clone()
    },
    url: fr.resource_id.and_then(|r| trace.resources.get(r as usize)).cloned(),
    line: fr.line,
    column: fr.column,
  }
}

/// The deepest stack node on the heaviest path from the root that most of the samples
/// (`leaves`: samples per innermost stack) run under (more than half), and how many do:
/// the deepest of the app's or a package's code there, else any. None when there is none,
/// or the walk is past `f.budget`.
fn deepest_shared(f: &Facts, leaves: &HashMap<u32, u32>) -> Option<(u32, u32)> {
  let stacks = &f.trace.stacks;
  let all: u32 = leaves.values().sum();
  let mut w = f.walk.borrow_mut();
  w.epoch += 1;
  let epoch = w.epoch;
  // Every node under which a sample ran, each reached once.
  let mut nodes: Vec<u32> = Vec::new();
  for &leaf in leaves.keys() {
    let mut at = Some(leaf);
    while let Some(id) = at.filter(|id| w.seen[*id as usize] != epoch) {
      f.budget.set(f.budget.get().checked_sub(1)?);
      w.seen[id as usize] = epoch;
      w.total[id as usize] = 0;
      w.best[id as usize] = u32::MAX;
      nodes.push(id);
      at = stacks[id as usize].parent_id;
    }
  }
  // Each node's samples (children, with higher ids, added to their parents first), and
  // each parent's heaviest child; the root's among the roots.
  nodes.sort_unstable_by(|a, b| b.cmp(a));
  let mut root_best = u32::MAX;
  let heavier = |w: &Walk, a: u32, b: u32| {
    b == u32::MAX || (w.total[a as usize], std::cmp::Reverse(a)) > (w.total[b as usize], std::cmp::Reverse(b))
  };
  for &id in &nodes {
    let i = id as usize;
    w.total[i] += leaves.get(&id).copied().unwrap_or(0);
    match stacks[i].parent_id {
      Some(p) => {
        w.total[p as usize] += w.total[i];
        if heavier(&w, id, w.best[p as usize]) {
          w.best[p as usize] = id;
        }
      }
      None if heavier(&w, id, root_best) => root_best = id,
      None => {}
    }
  }
  // Down the heaviest path while most samples are under it; the last frame of the app's
  // or a package's code there (not Node's, not native: what the user can change), else the
  // last of any.
  let (mut found, mut code) = (None, None);
  let mut next = root_best;
  while next != u32::MAX && 2 * w.total[next as usize] > all {
    found = Some((next, w.total[next as usize]));
    let frame = &f.trace.frames[stacks[next as usize].frame_id as usize];
    let url = frame.resource_id.and_then(|r| f.trace.resources.get(r as usize));
    if url.is_some_and(|u| !u.starts_with("node:")) && frame.name != "(selfprof)" {
      code = found;
    }
    next = w.best[next as usize];
  }
  code.or(found)
}

#[cfg(test)]
mod tests;
