//! Rewriting a trace's frames after it was built: its resources, frames and stacks are taken
//! out and written again, deduplicated, in the order they are added back (parents still
//! before children); then samples and line ticks are pointed at the new stacks. What the
//! source maps' mapping and the hiding of selfprof's own frames share.

use super::{element_id, Frame, LineTicks, Stack, Trace};
use std::collections::HashMap;

/// The resources, frames and stacks a trace had before the rebuild.
pub struct Old {
  pub resources: Vec<String>,
  pub frames: Vec<Frame>,
  pub stacks: Vec<Stack>,
}

/// The new tables' ids by content, so each element is written once.
#[derive(Default)]
pub struct Rebuild {
  resource_ids: HashMap<String, u32>,
  frame_ids: HashMap<Frame, u32>,
  stack_ids: HashMap<Stack, u32>,
}

impl Rebuild {
  /// Takes `trace`'s resources, frames and stacks out, leaving its tables empty to refill.
  pub fn take(trace: &mut Trace) -> (Old, Rebuild) {
    let old = Old {
      resources: std::mem::take(&mut trace.resources),
      frames: std::mem::take(&mut trace.frames),
      stacks: std::mem::take(&mut trace.stacks),
    };
    (old, Rebuild::default())
  }

  /// The new id of the resource `url`.
  pub fn resource(&mut self, trace: &mut Trace, url: String) -> u32 {
    element_id(&mut self.resource_ids, &mut trace.resources, url, |u| u)
  }

  /// Whether the rebuilt trace has the resource `url`.
  pub fn has_resource(&self, url: &str) -> bool {
    self.resource_ids.contains_key(url)
  }

  /// The new id of `frame`, whose resource id is already a new one.
  pub fn frame(&mut self, trace: &mut Trace, frame: Frame) -> u32 {
    element_id(&mut self.frame_ids, &mut trace.frames, frame, |f| f)
  }

  /// The new id of the old frame `index`, unchanged but for its resource's id.
  pub fn old_frame(&mut self, trace: &mut Trace, old: &Old, index: usize) -> u32 {
    let f = &old.frames[index];
    let frame = Frame {
      resource_id: f
        .resource_id
        .map(|r| self.resource(trace, old.resources[r as usize].clone())),
      ..f.clone()
    };
    self.frame(trace, frame)
  }

  /// The new id of the stack of (new) `frame_id` under (new) `parent_id`.
  pub fn stack(&mut self, trace: &mut Trace, frame_id: u32, parent_id: Option<u32>) -> u32 {
    let stack = Stack { frame_id, parent_id };
    element_id(&mut self.stack_ids, &mut trace.stacks, stack, |s| s)
  }
}

/// Line ticks summed by (new stack, line), in that order.
pub fn line_ticks(ticks: HashMap<(u32, u32), u64>) -> Vec<LineTicks> {
  let mut line_ticks: Vec<LineTicks> = ticks
    .into_iter()
    .map(|((stack_id, line), ticks)| LineTicks { stack_id, line, ticks })
    .collect();
  line_ticks.sort_by_key(|l| (l.stack_id, l.line));
  line_ticks
}
