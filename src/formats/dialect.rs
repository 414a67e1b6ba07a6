//! Backend dialects: the label keys, value forms and sample-type names each backend joins
//! on, applied while one trace is encoded (build once, encode per backend).
//!
//! selfprof's own labels are free-form; three keys carry meaning: `endpoint` (the route),
//! `span_id` (the local root span's id: 16 hex digits as OpenTelemetry writes it, or a
//! decimal number as dd-trace does) and `trace_id` (32 hex digits). Where both dd-trace and
//! OpenTelemetry trace a request, `span_id`/`trace_id` are dd-trace's and OpenTelemetry's
//! are `otel_span_id`/`otel_trace_id` (JS: `capture/labels/tracers.js`): each backend gets
//! the ids of the tracer it joins, and only those (`second_ids`).
//!
//! - Datadog (dd-trace's wall profiler, `packages/dd-trace/src/profiling/profilers/wall.js`
//!   and `shared.js`): `endpoint` → `trace endpoint`; `span_id` → numeric labels `span id`
//!   and `local root span id` (a `local_root_span_id` label, if set, gives the latter);
//!   `trace_id` left out (Datadog joins on span ids), and OpenTelemetry's `otel_*` ids;
//!   `thread name`, `thread id` and `os thread id` on every sample; a numeric
//!   `end_timestamp_ns` per sample.
//! - Pyroscope (the server's `pkg/model/pprofsplit`, `pkg/pprof`; the Node client's
//!   `utils/process-profile.js`): count type `samples` (not `sample`); every string sample
//!   label but `span_id` and `trace_id` becomes a series label at ingest, so only the
//!   series labels asked for are sent, values cut to the server's 2048-byte limit; `span_id`
//!   as 16 hex digits (span profiles: Grafana joins them to OpenTelemetry's spans, so
//!   `otel_span_id` where a request has both tracers' ids); everything else is left out.
//! - OTLP (`otlp.rs`): the link from `otel_trace_id`/`otel_span_id` where a request has both
//!   tracers' ids (dd-trace's then left out), else from `trace_id`/`span_id`.

use super::pprof::Timing;
use crate::trace::{Labels, Trace};
use serde::Deserialize;
use std::borrow::Cow;

/// The most bytes Pyroscope accepts in a label value (`validation.max-length-label-value`).
pub const PYROSCOPE_MAX_VALUE_BYTES: usize = 2048;

/// How one backend wants the pprof profile.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(tag = "name", rename_all = "camelCase", deny_unknown_fields)]
pub enum Dialect {
  /// selfprof's own names (the file exporter, `stop({ format: 'pprof' })`).
  #[serde(rename = "pprof")]
  Plain,
  #[serde(rename = "datadog", rename_all = "camelCase")]
  Datadog {
    thread_name: String,
    thread_id: String,
    os_thread_id: String,
  },
  #[serde(rename = "pyroscope", rename_all = "camelCase")]
  Pyroscope { series_labels: Vec<String> },
  /// Not pprof: an OTLP profiles request (`otlp.rs`), labels as sample attributes.
  #[serde(rename = "otlp")]
  Otlp(super::otlp::OtlpOptions),
}

/// The trace's bytes for one backend: gzip'd pprof in its dialect, or an OTLP request.
pub fn encode(trace: &Trace, timing: &Timing, dialect: &Dialect) -> std::io::Result<Vec<u8>> {
  match dialect {
    Dialect::Otlp(options) => Ok(super::otlp::encode(trace, timing, options)),
    _ => super::pprof::encode_gzip_for(trace, timing, dialect, None),
  }
}

/// Parses the dialects JS asks for: `[{ name: 'datadog', threadName, ... }, ...]`.
pub fn parse(json: &str) -> Result<Vec<Dialect>, String> {
  serde_json::from_str(json).map_err(|e| format!("bad export dialects: {e}"))
}

/// A label as the dialect writes it: borrowed from the trace where it is as the trace
/// has it (most labels), owned where the dialect makes a new key or value.
#[derive(Debug, Clone, PartialEq)]
pub enum OutLabel<'a> {
  Str(Cow<'a, str>, Cow<'a, str>),
  Num(Cow<'a, str>, i64),
}

impl<'a> OutLabel<'a> {
  pub(crate) fn encode(self, strings: &mut super::pprof::Strings<'a>) -> super::pprof::Label {
    match self {
      OutLabel::Str(k, v) => {
        let key = strings.key_id(k);
        super::pprof::Label {
          key,
          str: strings.value_id(key, v),
          ..Default::default()
        }
      }
      OutLabel::Num(k, n) => super::pprof::Label {
        key: strings.key_id(k),
        num: n,
        ..Default::default()
      },
    }
  }
}

/// A span id label's value as a number: 16 hex digits (OpenTelemetry, W3C) or 1 to 20
/// decimal digits (dd-trace); zero is no span.
pub fn span_id(value: &str) -> Option<u64> {
  let n = if value.len() == 16 && value.bytes().all(|b| b.is_ascii_hexdigit()) {
    u64::from_str_radix(value, 16).ok()
  } else if (1..=20).contains(&value.len()) && value.bytes().all(|b| b.is_ascii_digit()) {
    value.parse().ok()
  } else {
    None
  };
  n.filter(|n| *n != 0)
}

/// OpenTelemetry's span and trace id keys where both tracers trace a request (dd-trace's
/// are then `span_id` and `trace_id`).
pub const OTEL_SPAN_ID: &str = "otel_span_id";
pub const OTEL_TRACE_ID: &str = "otel_trace_id";

/// Whether `labels` hold a second tracer's (OpenTelemetry's) ids beside dd-trace's.
pub fn second_ids(labels: &Labels) -> bool {
  labels.get(OTEL_SPAN_ID).is_some() || labels.get(OTEL_TRACE_ID).is_some()
}

/// `s` cut to at most `max` bytes, at a character boundary.
pub fn truncate(s: &str, max: usize) -> &str {
  if s.len() <= max {
    return s;
  }
  let mut end = max;
  while !s.is_char_boundary(end) {
    end -= 1;
  }
  &s[..end]
}

impl Dialect {
  /// The count sample type's name.
  pub fn count_type(&self) -> &'static str {
    match self {
      Dialect::Pyroscope { .. } => "samples",
      _ => "sample",
    }
  }

  /// A label set as the backend names it.
  pub fn labels<'a>(&self, labels: &'a Labels) -> Vec<OutLabel<'a>> {
    let mut out = Vec::new();
    self.labels_into(labels, &mut out);
    out
  }

  /// `labels`, appended to `out` (one buffer for every context of a trace).
  pub fn labels_into<'a>(&self, labels: &'a Labels, out: &mut Vec<OutLabel<'a>>) {
    let str = |k: &'a str, v: &'a str| OutLabel::Str(Cow::Borrowed(k), Cow::Borrowed(v));
    match self {
      Dialect::Plain | Dialect::Otlp(_) => out.extend(labels.iter().map(|(k, v)| str(k, v))),
      Dialect::Datadog { .. } => {
        let explicit_root = labels.get("local_root_span_id").and_then(span_id);
        for (k, v) in labels.iter() {
          match k {
            "endpoint" => out.push(str("trace endpoint", v)),
            "span_id" => match span_id(v) {
              Some(id) => {
                out.push(OutLabel::Num(Cow::Borrowed("span id"), id as i64));
                if explicit_root.is_none() {
                  out.push(OutLabel::Num(Cow::Borrowed("local root span id"), id as i64));
                }
              }
              None => out.push(str(k, v)),
            },
            "local_root_span_id" => match explicit_root {
              Some(id) => out.push(OutLabel::Num(Cow::Borrowed("local root span id"), id as i64)),
              None => out.push(str(k, v)),
            },
            "trace_id" | OTEL_SPAN_ID | OTEL_TRACE_ID => {}
            _ => out.push(str(k, v)),
          }
        }
      }
      Dialect::Pyroscope { series_labels } => {
        // The span Grafana joins: OpenTelemetry's where both tracers' ids are here.
        let span_key = if labels.get(OTEL_SPAN_ID).is_some() {
          OTEL_SPAN_ID
        } else {
          "span_id"
        };
        out.extend(labels.iter().filter_map(|(k, v)| {
          if k == span_key {
            return Some(match span_id(v) {
              Some(id) => OutLabel::Str(Cow::Borrowed("span_id"), Cow::Owned(format!("{id:016x}"))),
              None => str("span_id", truncate(v, PYROSCOPE_MAX_VALUE_BYTES)),
            });
          }
          if k == "span_id" || k == OTEL_SPAN_ID {
            return None;
          }
          series_labels
            .iter()
            .any(|s| s == k)
            .then(|| str(k, truncate(v, PYROSCOPE_MAX_VALUE_BYTES)))
        }))
      }
    }
  }

  /// Labels every sample carries.
  pub fn every_sample(&self) -> Vec<OutLabel<'static>> {
    let str = |k: &'static str, v: &str| OutLabel::Str(Cow::Borrowed(k), Cow::Owned(v.to_owned()));
    match self {
      Dialect::Datadog {
        thread_name,
        thread_id,
        os_thread_id,
      } => vec![
        str("thread name", thread_name),
        str("thread id", thread_id),
        str("os thread id", os_thread_id),
      ],
      _ => Vec::new(),
    }
  }

  /// The key of a numeric per-sample end time label (Unix ns), if the backend reads one.
  pub fn end_timestamp_key(&self) -> Option<&'static str> {
    match self {
      Dialect::Datadog { .. } => Some("end_timestamp_ns"),
      _ => None,
    }
  }
}

#[cfg(test)]
mod tests;
