//! A recording's trace, built as its V8 profiles arrive rather than all at its stop.
//!
//! A long recording is handed over in segments (lib/capture/group.js hands V8's profile off
//! every `SEGMENT_SIGNALS` signals without a gap): each is parsed and joined to the
//! signal handler's brackets on the thread pool while the recording runs, so its stop only
//! joins the last segment and encodes. The join is the one a single build does: the
//! brackets arrive in pieces (`TraceBuilder::add_brackets`), the samples in time order.

use super::v8_profile::{CpuProfile, ProfileError};
use super::{Added, LabelLookup, Labeler, Labels, Trace, TraceBuilder, Window};
use crate::capture::{self, drain, labels};

/// The brackets (ns on the signal handler's clock) of samples from `from_ms` to `until_ms`
/// (ms since the time origin, `origin_us` on that clock), a little wider than that: a
/// sample at the window's edge was bracketed by a signal that began just before it.
pub fn bracket_range_ns(origin_us: f64, from_ms: f64, until_ms: f64) -> (u64, u64) {
  let to_ns = |ms: f64| ((origin_us + ms * 1000.0) * 1000.0).max(0.0) as u64;
  (
    to_ns(from_ms).saturating_sub(1_000_000),
    to_ns(until_ms).saturating_add(1_000_000),
  )
}

/// Where a recording's labels come from: thread `tid`'s brackets, in the drained log, and
/// the label sets they name (`capture::labels`).
#[derive(Clone, Copy)]
pub struct LabelSource {
  pub tid: i32,
  /// Thread CPU time when the recording started.
  pub cpu_start_ns: Option<u64>,
  /// The recording's token (`drain::recording_started`): the records it was joined
  /// through are let go as it is.
  pub recording: Option<u32>,
  /// How its thread told the handler its label set (for the trace's metadata).
  pub path: Option<super::LabelPath>,
}

/// The label sets of the store, looked up by id.
pub fn store_lookup() -> Box<LabelLookup<'static>> {
  Box::new(|id| labels::lookup(id).map(Labels::from))
}

/// A trace being built from a recording's profiles, in time order.
pub struct Join {
  builder: TraceBuilder<'static>,
  window: Window,
  /// The thread whose brackets the samples join, and where its next brackets start.
  brackets: Option<(i32, u64)>,
  /// Whether the brackets read so far include the last one before the window (a label
  /// switch, where samples are joined by time, rules from before the recording).
  prior_read: bool,
  recording: Option<u32>,
  /// Where the label store's amendment log stood when the recording started: the sets
  /// amended since then are looked up again at the finish.
  amend_mark: Option<u64>,
}

impl Join {
  /// For samples in `window` (its `until_ms` and `stride` are given per profile), labeled
  /// from `labels` if given.
  pub fn new(window: Window, labels: Option<LabelSource>) -> Join {
    let builder = match labels {
      Some(src) => TraceBuilder::with_labeler(Labeler {
        entries: Vec::new(),
        lookup: store_lookup(),
        cpu_start_ns: src.cpu_start_ns,
        by_time: capture::BY_TIME,
      }),
      None => TraceBuilder::new(),
    };
    let from_ns = bracket_range_ns(window.origin_us, window.from_ms, f64::INFINITY).0;
    let amend_mark = labels.map(|src| {
      src
        .recording
        .and_then(|token| labels::recording_amend_mark(src.tid, token))
        .unwrap_or_else(labels::amend_mark)
    });
    Join {
      amend_mark,
      builder,
      window,
      brackets: labels.map(|src| (src.tid, from_ns)),
      prior_read: !capture::BY_TIME,
      recording: labels.and_then(|src| src.recording),
    }
  }

  /// Looks labels up with `lookup` from now on (a stop's prefetched sets, then the store).
  pub fn set_lookup(&mut self, lookup: Box<LabelLookup<'static>>) {
    self.builder.set_lookup(lookup);
  }

  /// Adds a profile's samples up to `until_ms`, every `stride`-th, joined to the brackets
  /// recorded so far (up to `until_ms`, and a little after).
  pub fn add(&mut self, profile: &CpuProfile, stride: usize, until_ms: f64) -> Result<Added, ProfileError> {
    if let Some((tid, from_ns)) = self.brackets.as_mut() {
      let until_ns = bracket_range_ns(self.window.origin_us, self.window.from_ms, until_ms).1;
      if *from_ns <= until_ns {
        let more = drain::records(*tid, *from_ns, until_ns, !self.prior_read);
        self.prior_read = true;
        if let Some(last) = more.last() {
          *from_ns = last.before_ns.saturating_add(1);
          if let Some(token) = self.recording {
            drain::recording_joined(*tid, token, *from_ns);
          }
        }
        self.builder.add_brackets(more);
      }
    }
    let window = Window {
      until_ms,
      stride: stride.max(1),
      ..self.window
    };
    self.builder.add_profile(profile, &window)
  }

  /// The trace, with the labels of sets amended while it was built (a request's route,
  /// known after its first samples were joined) as they are now.
  pub fn finish(mut self) -> Trace {
    if let Some(mark) = self.amend_mark {
      let mut ids = labels::amended_since(mark);
      if !ids.is_empty() {
        ids.sort_unstable();
        ids.dedup();
        self
          .builder
          .refresh_contexts(&ids, |id| labels::lookup(id).map(Labels::from));
      }
    }
    self.builder.finish()
  }
}
