//! Profile formats: reading what selfprof converts (a trace's JSON or json-gzip, a pprof
//! profile plain or gzip'd: told apart by their bytes) and writing the formats other tools
//! read: Chrome DevTools `.cpuprofile` (also opened by speedscope), folded stacks (`a;b;c N`,
//! read by flamegraph.pl, inferno and speedscope), pprof, and the spec trace itself.

pub mod cpuprofile;
pub mod dialect;
pub mod folded;
pub mod gzip;
pub mod heap;
pub mod otlp;
pub mod pprof;
pub mod pprof_decode;
pub mod threads;

use crate::trace::v8_profile::CpuProfile;
use crate::trace::{Marker, Trace, TraceBuilder, Window};
use std::io::Read;

#[derive(Debug, PartialEq)]
pub struct ConvertError(pub String);

impl std::fmt::Display for ConvertError {
  fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
    f.write_str(&self.0)
  }
}

/// What converting outside input (files given to the CLI, `convert`, `readProfile`,
/// `htmlReport`) may cost: past a limit, one error naming it. docs/reliability.md's bounds table.
pub mod limits {
  /// Input, decompressed.
  pub const INPUT_BYTES: u64 = 256 << 20;
  /// What decoding a pprof profile may allocate (estimated before decoding).
  pub const DECODED_PPROF_BYTES: u64 = 256 << 20;
  /// Samples listed from a pprof's counts (for `trace`, `cpuprofile` and the report).
  pub const LISTED_SAMPLES: u64 = 500_000;
  /// Stack frames written in all (samples × depth), e.g. a trace as pprof.
  pub const FRAMES: u64 = 1 << 26;
  /// Stack frames walked to build a pprof's distinct stacks (samples sharing a stack
  /// walk it once).
  pub const DECODED_FRAMES: u64 = 1 << 23;
  /// Distinct stacks built from a pprof profile.
  pub const STACKS: usize = 1 << 20;
  /// Text output of a conversion (folded, trace, `.cpuprofile`): it is held once in Rust
  /// and once as a JS string.
  pub const TEXT_BYTES: usize = 256 << 20;
  /// V8's longest string, in one-byte characters (a trace's JSON from `stop()`).
  pub const JS_STRING_BYTES: usize = (1 << 29) - 24;
}

/// A profile read from outside: a trace, and for a pprof profile what each of its samples
/// stands for (counts are not expanded until a target lists samples) and its own timing.
pub struct Profile {
  pub trace: Trace,
  pub weights: Option<Vec<pprof::Weight>>,
  pub timing: Option<pprof::Timing>,
  /// A pprof's event-loop blocks, as its comments carry them (`pprof::parse_block_comments`).
  pub blocks: Option<crate::trace::blocks::Recorded>,
}

impl From<Trace> for Profile {
  fn from(trace: Trace) -> Profile {
    Profile {
      trace,
      weights: None,
      timing: None,
      blocks: None,
    }
  }
}

/// Reads any input selfprof converts: a trace's JSON, a V8 CPU profile's JSON (a
/// `.cpuprofile` file, the inspector's `Profiler.stop` result) or a pprof profile, each
/// plain or gzip'd. JSON is told from protobuf by its first non-blank byte, and a CPU
/// profile from a trace by its fields.
pub fn read_input(bytes: &[u8]) -> Result<Profile, ConvertError> {
  if bytes.is_empty() {
    return Err(ConvertError("empty input".into()));
  }
  let plain;
  let bytes = if bytes.starts_with(&[0x1f, 0x8b]) {
    plain = gunzip(bytes)?;
    &plain[..]
  } else if bytes.len() as u64 > limits::INPUT_BYTES {
    return Err(too_big());
  } else {
    bytes
  };
  match bytes.iter().find(|b| !b.is_ascii_whitespace()) {
    None => Err(ConvertError("empty input".into())),
    Some(b'{') => {
      let json = std::str::from_utf8(bytes).map_err(|e| ConvertError(format!("not a selfprof trace: {e}")))?;
      if is_cpu_profile(json) {
        return from_cpu_profile(json).map(Profile::from);
      }
      parse_trace(json).map(Profile::from)
    }
    Some(_) => {
      let d = pprof_decode::decode(bytes)?;
      // A heap profile's samples are weighted by bytes, not counts to list.
      let weights = d.trace.weight.is_none().then_some(d.weights);
      Ok(Profile {
        trace: d.trace,
        weights,
        timing: Some(d.timing),
        blocks: d.blocks,
      })
    }
  }
}

/// Whether a JSON object has a V8 CPU profile's `nodes` and `startTime` and no trace's
/// `resources` (read without building anything).
fn is_cpu_profile(json: &str) -> bool {
  use serde::de::IgnoredAny;
  #[derive(serde::Deserialize)]
  #[serde(rename_all = "camelCase")]
  struct Fields {
    nodes: Option<IgnoredAny>,
    start_time: Option<IgnoredAny>,
    resources: Option<IgnoredAny>,
  }
  serde_json::from_str::<Fields>(json)
    .is_ok_and(|f| f.nodes.is_some() && f.start_time.is_some() && f.resources.is_none())
}

/// A V8 CPU profile's JSON as a trace, as `fromCpuProfile` builds it: timestamps in ms
/// from the profile's start.
pub fn from_cpu_profile(json: &str) -> Result<Trace, ConvertError> {
  let profile = CpuProfile::from_json(json).map_err(|e| ConvertError(e.to_string()))?;
  let mut builder = TraceBuilder::new();
  let window = Window {
    origin_us: profile.start_time,
    ..Window::default()
  };
  builder
    .add_profile(&profile, &window)
    .map_err(|e| ConvertError(e.to_string()))?;
  let trace = builder.finish();
  check(&trace)?;
  Ok(trace)
}

fn too_big() -> ConvertError {
  ConvertError(format!(
    "input is over {} MiB uncompressed; that is the limit",
    limits::INPUT_BYTES >> 20
  ))
}

/// Gunzips at most `limits::INPUT_BYTES`, reserving what the gzip trailer says it holds
/// (so an honest file is decompressed without reallocating).
fn gunzip(bytes: &[u8]) -> Result<Vec<u8>, ConvertError> {
  let trailer = bytes
    .len()
    .checked_sub(4)
    .map(|at| u32::from_le_bytes([bytes[at], bytes[at + 1], bytes[at + 2], bytes[at + 3]]) as u64);
  let mut out = Vec::with_capacity(trailer.unwrap_or(0).min(limits::INPUT_BYTES) as usize);
  flate2::read::MultiGzDecoder::new(bytes)
    .take(limits::INPUT_BYTES + 1)
    .read_to_end(&mut out)
    .map_err(|e| ConvertError(format!("truncated or corrupt gzip: {e}")))?;
  if out.len() as u64 > limits::INPUT_BYTES {
    return Err(too_big());
  }
  Ok(out)
}

/// Parses and checks a trace's JSON.
pub fn parse_trace(json: &str) -> Result<Trace, ConvertError> {
  let t: Trace = serde_json::from_str(json).map_err(|e| ConvertError(format!("not a selfprof trace: {e}")))?;
  check(&t)?;
  Ok(t)
}

/// Every index in range and parents before children, so walks terminate.
pub fn check(t: &Trace) -> Result<(), ConvertError> {
  let bad = |what: &str, i: usize| Err(ConvertError(format!("not a valid trace: {what} {i} is out of range")));
  for (i, f) in t.frames.iter().enumerate() {
    if f.resource_id.is_some_and(|r| r as usize >= t.resources.len()) {
      return bad("the resource of frame", i);
    }
  }
  for (i, s) in t.stacks.iter().enumerate() {
    if s.frame_id as usize >= t.frames.len() || s.parent_id.is_some_and(|p| p as usize >= i) {
      return bad("stack", i);
    }
  }
  for (i, s) in t.samples.iter().enumerate() {
    if s.stack_id.is_some_and(|id| id as usize >= t.stacks.len()) {
      return bad("the stack of sample", i);
    }
    if s.context_id.is_some_and(|id| id as usize >= t.contexts.len()) {
      return bad("the context of sample", i);
    }
    if !s.timestamp.is_finite() {
      return Err(ConvertError(format!(
        "not a valid trace: sample {i} has no finite timestamp"
      )));
    }
  }
  if let Some(w) = &t.weight {
    let bad_len = |v: &Vec<f64>| v.len() != t.samples.len() || v.iter().any(|x| !x.is_finite());
    if bad_len(&w.values) || w.counts.as_ref().is_some_and(bad_len) {
      return Err(ConvertError(
        "not a valid trace: weight.values (and counts) must be one finite number per sample".into(),
      ));
    }
  }
  for (i, l) in t.line_ticks.iter().enumerate() {
    if l.stack_id as usize >= t.stacks.len() || l.line == 0 {
      return bad("the stack or line of line tick", i);
    }
  }
  Ok(())
}

/// pprof timing for a trace read from a file: it spans its samples, and its period is
/// the median spacing of its samples (the trace does not record its interval).
pub fn pprof_timing(t: &Trace) -> pprof::Timing {
  let first = t.samples.first().map_or(0.0, |s| s.timestamp);
  let last = t.samples.last().map_or(0.0, |s| s.timestamp);
  let mut gaps: Vec<f64> = t
    .samples
    .windows(2)
    .map(|w| w[1].timestamp - w[0].timestamp)
    .filter(|g| *g > 0.0)
    .collect();
  gaps.sort_by(f64::total_cmp);
  let period_ms = gaps.get(gaps.len() / 2).copied().unwrap_or(0.0);
  pprof::Timing {
    time_origin_unix_ms: 0.0,
    start_ms: first,
    end_ms: last,
    period_ns: (period_ms * 1e6).round() as i64,
    cpu: t.samples.iter().any(|s| s.cpu_time.is_some()),
    lines: false,
  }
}

/// The profile with every count listed as samples (each pprof sample's `count` samples
/// laid end to end over its wall time), for the targets that list samples.
pub fn expand(p: &Profile) -> Result<std::borrow::Cow<'_, Trace>, ConvertError> {
  let Some(weights) = &p.weights else {
    return Ok(std::borrow::Cow::Borrowed(&p.trace));
  };
  let total = weights
    .iter()
    .map(|w| w.count.max(0) as u64)
    .fold(0u64, u64::saturating_add);
  if total > limits::LISTED_SAMPLES {
    return Err(ConvertError(format!(
      "the profile stands for {total} samples; listing them is limited to {} (convert it to pprof or folded instead: they keep the counts)",
      limits::LISTED_SAMPLES
    )));
  }
  let mut samples = Vec::with_capacity(total as usize);
  for (s, w) in p.trace.samples.iter().zip(weights) {
    let step = w.wall_ns as f64 / 1e6 / w.count as f64;
    let cpu = s.cpu_time.map(|c| c / w.count as f64);
    for k in 1..=w.count {
      samples.push(crate::trace::Sample {
        timestamp: s.timestamp + step * k as f64,
        cpu_time: cpu,
        ..s.clone()
      });
    }
  }
  Ok(std::borrow::Cow::Owned(Trace {
    samples,
    ..p.trace.clone()
  }))
}

/// What `event_loop_blocks` found in a profile, and why there are none when it could not look.
#[derive(serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct FoundBlocks {
  /// `samples` (found from the samples' times), `pprof` (read from its comments) or `none`.
  pub from: &'static str,
  #[serde(flatten)]
  pub recorded: crate::trace::blocks::Recorded,
  #[serde(skip_serializing_if = "Option::is_none")]
  pub note: Option<String>,
}

/// The event-loop blocks of a profile longer than `options.threshold_ms`: found from a
/// trace's samples, or those a pprof's comments carry (a pprof keeps no sample times).
pub fn event_loop_blocks(p: &Profile, options: &crate::trace::blocks::BlockOptions) -> FoundBlocks {
  use crate::trace::blocks::Recorded;
  let none = |note: &str| FoundBlocks {
    from: "none",
    recorded: Recorded {
      threshold_ms: options.threshold_ms,
      found: 0,
      blocks: Vec::new(),
    },
    note: Some(note.to_owned()),
  };
  if p.trace.weight.is_some() {
    return none("a heap profile has no time line: event-loop blocks are found in CPU profiles");
  }
  if p.timing.is_none() {
    let blocks = crate::trace::blocks::event_loop_blocks(&p.trace, options);
    return FoundBlocks {
      from: "samples",
      recorded: Recorded {
        threshold_ms: options.threshold_ms,
        found: blocks.len(),
        blocks,
      },
      note: None,
    };
  }
  let Some(recorded) = &p.blocks else {
    return none("this pprof carries no event-loop blocks: a pprof keeps no sample times, and selfprof writes the blocks it found in the comments of the profiles it records");
  };
  let blocks: Vec<_> = recorded
    .blocks
    .iter()
    .filter(|b| b.duration > options.threshold_ms)
    .cloned()
    .collect();
  let mut note = Vec::new();
  if options.threshold_ms < recorded.threshold_ms {
    note.push(format!(
      "the profile holds the blocks over {} ms only",
      recorded.threshold_ms
    ));
  }
  if recorded.found > recorded.blocks.len() {
    note.push(format!(
      "it kept the {} longest of the {} it found",
      recorded.blocks.len(),
      recorded.found
    ));
  }
  FoundBlocks {
    from: "pprof",
    recorded: Recorded {
      threshold_ms: options.threshold_ms.max(recorded.threshold_ms),
      found: if recorded.found > recorded.blocks.len() {
        recorded.found
      } else {
        blocks.len()
      },
      blocks,
    },
    note: (!note.is_empty()).then(|| note.join("; ")),
  }
}

/// Stack frames that writing every sample's stack walks: samples × depth.
fn frames_written(t: &Trace) -> u64 {
  let mut depth = vec![0u64; t.stacks.len()];
  for (i, s) in t.stacks.iter().enumerate() {
    depth[i] = 1 + s.parent_id.map_or(0, |p| depth[p as usize]);
  }
  t.samples
    .iter()
    .map(|s| s.stack_id.map_or(1, |id| depth[id as usize]))
    .fold(0u64, u64::saturating_add)
}

/// The error for text output of `bytes`, over `limits::TEXT_BYTES`.
pub(crate) fn too_long(what: &str, bytes: u64) -> ConvertError {
  ConvertError(format!(
    "the {what} would be {} MiB; text output is limited to {} MiB (pprof keeps deep stacks compact)",
    bytes >> 20,
    limits::TEXT_BYTES >> 20
  ))
}

/// Text output, if a JS string can hold it.
fn text(out: Vec<u8>, what: &str) -> Result<Vec<u8>, ConvertError> {
  if out.len() > limits::TEXT_BYTES {
    return Err(too_long(what, out.len() as u64));
  }
  Ok(out)
}

/// The profile as the named format: `cpuprofile`, `folded` and `trace` are text (JSON,
/// folded lines, JSON), `pprof` gzip'd protobuf. Each stays within `limits`.
pub fn to_format(p: &Profile, to: &str) -> Result<Vec<u8>, ConvertError> {
  to_format_with(p, to, false)
}

/// `to_format`, with pprof samples at line-level locations if `lines` (see `pprof::Timing`).
pub fn to_format_with(p: &Profile, to: &str, lines: bool) -> Result<Vec<u8>, ConvertError> {
  let io = |e: std::io::Error| ConvertError(e.to_string());
  match to {
    "cpuprofile" if p.trace.weight.is_some() => Err(ConvertError(
      "a heap profile (weighted by bytes) has no .cpuprofile form: convert it to pprof, folded or trace".into(),
    )),
    "pprof" if p.trace.weight.is_some() => {
      let timing = p.timing.unwrap_or_else(|| pprof_timing(&p.trace));
      let heap_timing = heap::HeapTiming {
        time_nanos: (timing.time_origin_unix_ms * 1e6) as i64,
        duration_nanos: ((timing.end_ms - timing.start_ms).max(0.0) * 1e6) as i64,
        interval_bytes: timing.period_ns,
      };
      heap::encode_gzip(&p.trace, &heap_timing, &dialect::Dialect::Plain, &[]).map_err(io)
    }
    "cpuprofile" => {
      let t = expand(p)?;
      let profile = cpuprofile::to_cpuprofile(&t);
      let estimate = profile.estimated_bytes();
      if estimate > limits::TEXT_BYTES as u64 {
        return Err(too_long(".cpuprofile", estimate));
      }
      text(
        serde_json::to_vec(&profile).map_err(|e| ConvertError(e.to_string()))?,
        ".cpuprofile",
      )
    }
    "folded" => text(
      folded::to_folded_weighted(&p.trace, p.weights.as_deref())?.into_bytes(),
      "folded output",
    ),
    "trace" => text(expand(p)?.to_json().into_bytes(), "trace"),
    "pprof" => {
      let frames = frames_written(&p.trace);
      if frames > limits::FRAMES {
        return Err(ConvertError(format!(
          "the pprof would hold {frames} stack frames (samples × depth); the limit is {}",
          limits::FRAMES
        )));
      }
      let timing = pprof::Timing {
        lines,
        ..p.timing.unwrap_or_else(|| pprof_timing(&p.trace))
      };
      pprof::encode_weighted_gzip(&p.trace, &timing, p.weights.as_deref()).map_err(io)
    }
    other => Err(ConvertError(format!(
      "unknown target format {other:?}: expected \"cpuprofile\", \"folded\", \"pprof\" or \"trace\""
    ))),
  }
}

pub(crate) fn pseudo(marker: Option<Marker>) -> &'static str {
  match marker {
    Some(Marker::Idle) => "(idle)",
    Some(Marker::Gc) => "(garbage collector)",
    Some(Marker::Other) => "(program)",
    None => "(root)",
  }
}

pub(crate) fn name(t: &Trace, frame: u32) -> &str {
  match t.frames[frame as usize].name.as_str() {
    "" => "(anonymous)",
    n => n,
  }
}

#[cfg(test)]
mod tests;
