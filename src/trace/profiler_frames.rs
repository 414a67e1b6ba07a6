//! selfprof's own frames in the user's profile. `withLabels(labels, fn)` runs `fn`, so it
//! sits on every labeled request's stack; the span integrations, the label hooks, a
//! rotation's stop and the CLI's preload run in the app's threads too. Users read such
//! frames as their code's cost, so by default a trace hides them:
//!
//! - A **profiler frame** is one whose script is one of selfprof's own package files (the
//!   package root's `lib/`, `bin/`, `index.js`, `start.js`, `worker.js`, `binding.js`), for
//!   each root this process loaded selfprof from (as loaded and its real path), and for
//!   any copy installed under `node_modules/selfprof/`.
//! - A **runtime frame** is Node's own (`node:` scripts) or a builtin (no script, no line).
//! - Walking a stack from its root, a profiler frame starts a run that goes on through
//!   profiler and runtime frames (what selfprof called) up to the next frame of the
//!   user's code. A run followed by user code (`withLabels` → `AsyncLocalStorage.run` →
//!   `fn`) is removed: the caller links straight to `fn`. A run that reaches the sample's
//!   leaf is selfprof's own work: it becomes one frame `(selfprof)` under the frame above
//!   the run. So every sample stays (its time is real), and what selfprof's code took is
//!   named as selfprof's, never spread over the user's functions.
//! - In a weighted trace (a heap profile), such a sample is memory selfprof's own code
//!   allocated, not the app's: it is left out, with its weight (`HideCounts::hidden_weight`).
//!   What the user's code allocated under `withLabels` stays, linked around it.
//!
//! Frames above the run stay, runtime ones included (a timer's `listOnTimeout` over a
//! rotation). A frame without a script but with a line is `eval`/`new Function` code: the
//! user's.

use super::rebuild::{self, Rebuild};
use super::{Frame, Trace};
use std::collections::HashMap;

/// The frame that stands for selfprof's own work at the leaf of a sample.
pub const PROFILER_FRAME: &str = "(selfprof)";

/// Where selfprof's own files are: the package roots it was loaded from.
#[derive(Debug, Default, Clone)]
pub struct ProfilerFiles {
  /// Absolute paths, without a trailing `/`.
  roots: Vec<Vec<u8>>,
}

/// A path inside a package root that is one of selfprof's own files.
fn package_file(rest: &[u8]) -> bool {
  rest.starts_with(b"lib/")
    || rest.starts_with(b"bin/")
    || matches!(rest, b"index.js" | b"start.js" | b"worker.js" | b"binding.js")
}

const INSTALLED: &[u8] = b"/node_modules/selfprof/";

impl ProfilerFiles {
  /// The files under `roots` (absolute paths; others are ignored) and under any
  /// `node_modules/selfprof/`.
  pub fn new<S: AsRef<str>>(roots: impl IntoIterator<Item = S>) -> ProfilerFiles {
    let mut out: Vec<Vec<u8>> = Vec::new();
    for r in roots {
      let r = r.as_ref().trim_end_matches('/');
      if !(r.starts_with('/') && r.len() > 1) {
        continue;
      }
      // Node names a script by a URL parsed from its path, which drops tabs and line
      // breaks and reads `\` as `/`: such a root is matched in that form too.
      let parsed: String = r
        .chars()
        .filter(|c| !matches!(c, '\t' | '\n' | '\r'))
        .map(|c| if c == '\\' { '/' } else { c })
        .collect();
      for root in [r.as_bytes().to_vec(), parsed.into_bytes()] {
        if !out.contains(&root) {
          out.push(root);
        }
      }
    }
    ProfilerFiles { roots: out }
  }

  /// Whether the script `resource` (a `file://` URL or an absolute path) is selfprof's.
  pub fn contains(&self, resource: &str) -> bool {
    let path = if let Some(rest) = resource.strip_prefix("file://") {
      let rest = rest.split(['?', '#']).next().unwrap_or("");
      let rest = rest.strip_prefix("localhost").unwrap_or(rest);
      if !rest.starts_with('/') {
        return false;
      }
      crate::symbolize::percent_decode(rest)
    } else if resource.starts_with('/') {
      resource.as_bytes().to_vec()
    } else {
      return false;
    };
    let under = |root: &[u8]| {
      path.len() > root.len() + 1
        && path.starts_with(root)
        && path[root.len()] == b'/'
        && package_file(&path[root.len() + 1..])
    };
    if self.roots.iter().any(|r| under(r)) {
      return true;
    }
    // Any installed copy (pnpm's and Yarn's layouts end in node_modules/selfprof too).
    let last = path.windows(INSTALLED.len()).rposition(|w| w == INSTALLED);
    last.is_some_and(|i| package_file(&path[i + INSTALLED.len()..]))
  }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
  User,
  Runtime,
  Profiler,
}

/// A stack as it is once profiler frames are hidden: the stack of the frames kept so far,
/// and whether a run of profiler frames (and what they called) is open below it.
#[derive(Clone, Copy)]
struct Hidden {
  kept: Option<u32>,
  in_run: bool,
}

/// What hiding did: samples whose leaf was selfprof's own work (now under `(selfprof)`),
/// and profiler frames taken out of the trace.
#[derive(Debug, Default, Clone, Copy, PartialEq)]
pub struct HideCounts {
  pub profiler_samples: usize,
  pub removed_frames: usize,
  /// The weight of the samples left out of a weighted trace (bytes of a heap profile).
  pub hidden_weight: f64,
}

/// Hides selfprof's own frames in `trace` (see the module's comment). Samples, their
/// order, labels, times and weights stay; resources, frames and stacks are rebuilt,
/// deduplicated, with only those still referenced; line ticks, `sourceMaps.generated` and
/// `sourceText` follow. A trace without profiler frames is left as it is.
pub fn hide(trace: &mut Trace, files: &ProfilerFiles) -> HideCounts {
  let profiler_resource: Vec<bool> = trace.resources.iter().map(|r| files.contains(r)).collect();
  if !profiler_resource.contains(&true) || !well_formed(trace) {
    return HideCounts::default();
  }
  let kinds: Vec<Kind> = trace
    .frames
    .iter()
    .map(|f| match f.resource_id {
      Some(r) if profiler_resource[r as usize] => Kind::Profiler,
      Some(r) if trace.resources[r as usize].starts_with("node:") => Kind::Runtime,
      None if f.line.is_none() => Kind::Runtime,
      _ => Kind::User,
    })
    .collect();

  let (old, mut rb) = Rebuild::take(trace);
  let mut new_frame: Vec<Option<u32>> = vec![None; old.frames.len()];

  // Stacks come parents first.
  let mut hidden: Vec<Hidden> = Vec::with_capacity(old.stacks.len());
  for s in &old.stacks {
    let parent = s.parent_id.map_or(
      Hidden {
        kept: None,
        in_run: false,
      },
      |p| hidden[p as usize],
    );
    let f = s.frame_id as usize;
    let h = match kinds[f] {
      Kind::Profiler => Hidden {
        kept: parent.kept,
        in_run: true,
      },
      Kind::Runtime if parent.in_run => parent,
      _ => {
        let frame_id = *new_frame[f].get_or_insert_with(|| rb.old_frame(trace, &old, f));
        Hidden {
          kept: Some(rb.stack(trace, frame_id, parent.kept)),
          in_run: false,
        }
      }
    };
    hidden.push(h);
  }

  // Each sample's stack: the kept one, or `(selfprof)` under it when its leaf is in a run.
  let mut counts = HideCounts {
    removed_frames: kinds.iter().filter(|k| **k == Kind::Profiler).count(),
    ..HideCounts::default()
  };
  let mut profiler_stack: HashMap<Option<u32>, u32> = HashMap::new();
  let mut profiler_frame: Option<u32> = None;
  let weighted = trace.weight.is_some();
  let mut left_out: Vec<bool> = Vec::new();
  for i in 0..trace.samples.len() {
    let Some(old) = trace.samples[i].stack_id else { continue };
    let h = hidden[old as usize];
    if !h.in_run {
      trace.samples[i].stack_id = h.kept;
      continue;
    }
    counts.profiler_samples += 1;
    if weighted {
      left_out.resize(trace.samples.len(), false);
      left_out[i] = true;
      counts.hidden_weight += trace
        .weight
        .as_ref()
        .and_then(|w| w.values.get(i))
        .copied()
        .unwrap_or(0.0);
      continue;
    }
    let frame_id = *profiler_frame.get_or_insert_with(|| {
      let frame = Frame {
        name: PROFILER_FRAME.into(),
        resource_id: None,
        line: None,
        column: None,
      };
      rb.frame(trace, frame)
    });
    let id = *profiler_stack
      .entry(h.kept)
      .or_insert_with(|| rb.stack(trace, frame_id, h.kept));
    trace.samples[i].stack_id = Some(id);
  }

  if !left_out.is_empty() {
    leave_out(trace, &left_out);
  }

  // Line ticks are of a stack's leaf frame: they follow it, or go with it into a run.
  let mut ticks: HashMap<(u32, u32), u64> = HashMap::new();
  for t in &trace.line_ticks {
    if let Some(Hidden {
      kept: Some(stack),
      in_run: false,
    }) = hidden.get(t.stack_id as usize).copied()
    {
      *ticks.entry((stack, t.line)).or_default() += t.ticks;
    }
  }
  trace.line_ticks = rebuild::line_ticks(ticks);

  if let Some(info) = trace.source_maps.as_mut() {
    let before = info.generated.len();
    info
      .generated
      .retain_mut(|g| match new_frame.get(g.frame_id as usize).copied().flatten() {
        Some(id) => {
          g.frame_id = id;
          true
        }
        None => false,
      });
    info.mapped_frames = info.mapped_frames.saturating_sub(before - info.generated.len());
  }
  if let Some(text) = trace.source_text.as_mut() {
    text.retain(|url, _| rb.has_resource(url));
    if text.is_empty() {
      trace.source_text = None;
    }
  }
  counts
}

/// Removes the samples `out` marks, with their weights and counts.
fn leave_out(trace: &mut Trace, out: &[bool]) {
  fn unmarked<T>(v: &mut Vec<T>, out: &[bool]) {
    let mut i = 0;
    v.retain(|_| {
      i += 1;
      !out.get(i - 1).copied().unwrap_or(false)
    });
  }
  unmarked(&mut trace.samples, out);
  if let Some(w) = trace.weight.as_mut() {
    unmarked(&mut w.values, out);
    if let Some(c) = w.counts.as_mut() {
      unmarked(c, out);
    }
  }
}

/// Whether every id in `trace` is in range and every stack's parent comes before it, as
/// the builders make them and the readers check them (a trace that is not is left as is).
fn well_formed(trace: &Trace) -> bool {
  let resources = trace.resources.len() as u64;
  let frames = trace.frames.len() as u64;
  trace
    .frames
    .iter()
    .all(|f| f.resource_id.is_none_or(|r| u64::from(r) < resources))
    && trace
      .stacks
      .iter()
      .enumerate()
      .all(|(i, s)| u64::from(s.frame_id) < frames && s.parent_id.is_none_or(|p| (p as usize) < i))
    && trace
      .samples
      .iter()
      .all(|s| s.stack_id.is_none_or(|id| (id as usize) < trace.stacks.len()))
    && trace
      .line_ticks
      .iter()
      .all(|t| (t.stack_id as usize) < trace.stacks.len())
}

#[cfg(test)]
mod tests;
