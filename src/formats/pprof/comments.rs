//! The comments selfprof writes in a profile and reads back: its join counts
//! (`metadata_comment`), where line-level locations start (`LINES_COMMENT`), and the
//! event-loop blocks of the recording (`block_comments`).

use crate::trace::blocks::{event_loop_blocks, Block, BlockOptions, Recorded};
use crate::trace::{Metadata, Trace};

const METADATA_COMMENT: &str = "selfprof:";

/// `selfprof: matchedSamples=… betweenSignalsSamples=… unmatchedSamples=…[ labelsLostSamples=…][ labelPath=…]`.
pub(super) fn metadata_comment(m: &Metadata) -> String {
  let mut s = format!(
    "{METADATA_COMMENT} matchedSamples={} betweenSignalsSamples={} unmatchedSamples={}",
    m.matched_samples, m.between_signals_samples, m.unmatched_samples
  );
  if m.labels_lost_samples > 0 {
    s.push_str(&format!(" labelsLostSamples={}", m.labels_lost_samples));
  }
  match m.label_path {
    Some(crate::trace::LabelPath::AsyncHooks) => s.push_str(" labelPath=async-hooks"),
    Some(crate::trace::LabelPath::ContextFrame) => s.push_str(" labelPath=context-frame"),
    Some(crate::trace::LabelPath::SwitchLog) => s.push_str(" labelPath=switch-log"),
    None => {}
  }
  s
}

/// The join counts of a comment `metadata_comment` wrote, if `comment` is one.
pub fn parse_metadata_comment(comment: &str) -> Option<Metadata> {
  let rest = comment.strip_prefix(METADATA_COMMENT)?;
  let mut m = Metadata::default();
  for pair in rest.split_whitespace() {
    let (key, value) = pair.split_once('=')?;
    let count = || value.parse::<usize>().ok();
    match key {
      "matchedSamples" => m.matched_samples = count()?,
      "betweenSignalsSamples" => m.between_signals_samples = count()?,
      "unmatchedSamples" => m.unmatched_samples = count()?,
      "labelsLostSamples" => m.labels_lost_samples = count()?,
      "labelPath" => {
        m.label_path = match value {
          "async-hooks" => Some(crate::trace::LabelPath::AsyncHooks),
          "context-frame" => Some(crate::trace::LabelPath::ContextFrame),
          "switch-log" => Some(crate::trace::LabelPath::SwitchLog),
          _ => None,
        }
      }
      _ => {}
    }
  }
  Some(m)
}

/// Says from which location id on locations are lines within their function (selfprof's
/// line-level locations), so that a reader can tell them from the function's own location.
pub(super) const LINES_COMMENT: &str = "selfprof-lines: locations from id ";

/// The first line-level location id of a comment the encoder wrote, if `comment` is one.
pub fn parse_lines_comment(comment: &str) -> Option<u64> {
  comment.strip_prefix(LINES_COMMENT)?.parse().ok()
}

/// Says that the event-loop blocks were looked for, with what threshold, and how many
/// were found (`{"thresholdMs":50,"found":3,"kept":3}`); each kept block follows as a
/// comment of its own (`BLOCK_COMMENT` and its JSON, `trace::blocks::Block`).
const BLOCKS_COMMENT: &str = "selfprof-blocks: ";
const BLOCK_COMMENT: &str = "selfprof-block: ";

/// Blocks written in one profile at most, the longest; a label value's characters at most.
const MAX_BLOCKS: usize = 20;
const MAX_VALUE_CHARS: usize = 200;

#[derive(serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct BlocksHeader {
  threshold_ms: f64,
  found: usize,
  kept: usize,
}

/// The comments of a trace's event-loop blocks (`trace::blocks`), times made relative to
/// the profile's start and its Unix time.
pub(super) fn block_comments(trace: &Trace, timing: &super::Timing) -> Vec<String> {
  let options = BlockOptions::default();
  let mut blocks = event_loop_blocks(trace, &options);
  let found = blocks.len();
  if blocks.len() > MAX_BLOCKS {
    blocks.sort_by(|a, b| b.duration.total_cmp(&a.duration));
    blocks.truncate(MAX_BLOCKS);
    blocks.sort_by(|a, b| a.offset.total_cmp(&b.offset));
  }
  let header = BlocksHeader {
    threshold_ms: options.threshold_ms,
    found,
    kept: blocks.len(),
  };
  let mut out = vec![format!(
    "{BLOCKS_COMMENT}{}",
    serde_json::to_string(&header).unwrap_or_default()
  )];
  for mut b in blocks {
    let start = b.start.take().unwrap_or(timing.start_ms);
    b.offset = start - timing.start_ms;
    b.unix_ms = (timing.time_origin_unix_ms > 0.0).then_some(timing.time_origin_unix_ms + start);
    b.first_sample = None;
    b.last_sample = None;
    for r in &mut b.requests {
      for v in r.labels.values_mut() {
        if v.chars().count() > MAX_VALUE_CHARS {
          *v = v.chars().take(MAX_VALUE_CHARS).chain(std::iter::once('…')).collect();
        }
      }
    }
    out.push(format!(
      "{BLOCK_COMMENT}{}",
      serde_json::to_string(&b).unwrap_or_default()
    ));
  }
  out
}

/// The event-loop blocks a profile's comments carry, if selfprof looked for them when it
/// wrote the profile. A block comment that does not parse is left out.
pub fn parse_block_comments<'a>(comments: impl Iterator<Item = &'a str>) -> Option<Recorded> {
  let mut header: Option<BlocksHeader> = None;
  let mut blocks = Vec::new();
  for c in comments {
    if let Some(json) = c.strip_prefix(BLOCKS_COMMENT) {
      header = header.or_else(|| serde_json::from_str(json).ok());
    } else if let Some(json) = c.strip_prefix(BLOCK_COMMENT) {
      blocks.extend(serde_json::from_str::<Block>(json).ok());
    }
  }
  let header = header?;
  Some(Recorded {
    threshold_ms: header.threshold_ms,
    found: header.found,
    blocks,
  })
}
