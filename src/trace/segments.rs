//! A long recording's segments, joined on the thread pool as the recording runs
//! (`TraceJoin` in `src/lib.rs`): JS queues each segment the profiler group hands over,
//! a pool thread joins what is queued (`trace::join::Join`), and the stop's build takes
//! the join over and builds on from it (`trace::build`).

use super::build::ProfileInput;
use super::join::{Join, LabelSource};
use super::Window;
use crate::invalid;
use napi::Result;
use std::collections::VecDeque;
use std::sync::{Mutex, MutexGuard};

/// The segments of one recording, queued and joined in time order. The queue has a lock
/// of its own: the event loop's thread only ever appends to it, and never waits for a
/// join under way on the thread pool.
pub struct SegmentJoiner {
  /// Segments handed over, not joined yet (in time order).
  queue: Mutex<VecDeque<ProfileInput>>,
  state: Mutex<JoinState>,
}

struct JoinState {
  /// None once a build took it.
  join: Option<Join>,
  /// Why a segment could not be joined: the build fails with it.
  error: Option<String>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
  m.lock().unwrap_or_else(|e| e.into_inner())
}

impl SegmentJoiner {
  /// For the recording whose samples fall in `window`, labeled from `labels` if given.
  pub fn new(window: Window, labels: Option<LabelSource>) -> SegmentJoiner {
    SegmentJoiner {
      queue: Mutex::default(),
      state: Mutex::new(JoinState {
        join: Some(Join::new(window, labels)),
        error: None,
      }),
    }
  }

  /// Queues segments (in time order) for `join_queued`.
  pub fn queue(&self, segments: Vec<ProfileInput>) {
    lock(&self.queue).extend(segments);
  }

  /// Joins the segments queued so far (on the thread pool). Fails if one could not be
  /// joined, now or before.
  pub fn join_queued(&self) -> Result<()> {
    let joined = self.catch_up(&mut lock(&self.state));
    // A segment's parse and join free a few MB of short-lived buffers on this pool
    // thread's malloc arena, which glibc keeps while the recording runs (RSS that looks
    // held). Give the free pages back.
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only returns free memory to the system.
    unsafe {
      libc::malloc_trim(0);
    }
    joined
  }

  /// The join with every queued segment in it, for the stop's build to finish (once).
  pub fn take(&self) -> Result<Join> {
    let mut state = lock(&self.state);
    self.catch_up(&mut state)?;
    state
      .join
      .take()
      .ok_or_else(|| napi::Error::from_reason("this recording's trace was already built"))
  }

  /// Joins the segments queued so far, under the state's lock (`state`): one joiner at a
  /// time, so they are joined in the order they were queued.
  fn catch_up(&self, state: &mut JoinState) -> Result<()> {
    loop {
      let Some(mut segment) = lock(&self.queue).pop_front() else {
        break;
      };
      let Some(join) = state.join.as_mut() else {
        lock(&self.queue).clear();
        break;
      };
      if state.error.is_some() {
        continue;
      }
      // Every segment ends before the stop: all of its samples are in the window's end.
      let added = segment
        .profile()
        .and_then(|p| join.add(&p, segment.stride, f64::INFINITY).map_err(invalid));
      if let Err(e) = added {
        state.error = Some(e.reason.clone());
      }
    }
    match &state.error {
      Some(e) => Err(invalid(e)),
      None => Ok(()),
    }
  }
}
