//! The comments selfprof writes in a profile and reads back: its join counts
//! (`metadata_comment`) and where line-level locations start (`LINES_COMMENT`).

use crate::trace::Metadata;

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
