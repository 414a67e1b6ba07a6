//! Source maps: frames of generated code (tsc, esbuild, swc, tsx output, bundles) to the
//! original file, line, column and name, as one step over a built trace before any format
//! is written, so the trace, pprof, folded stacks, `.cpuprofile` and the report all see
//! the same mapped frames.
//!
//! - Which map: for a `file://` script, the map Node holds for it when one is given (a
//!   script a loader compiled in memory, such as tsx's `.ts` files: the file on disk is
//!   not what V8 ran), else its last `//# sourceMappingURL=` comment (a file, or an
//!   inline `data:` URL), else a `.map` file beside it (`locate`).
//! - What maps: each frame by the position V8 gives its function (`map::Loaded::
//!   function_at`): file, line and column from the map, the name from the map's `names`
//!   when it names the function's own name token (minified code), else V8's. Line ticks
//!   of a mapped frame go to the original lines. Frames without a map stay as they are.
//! - Frames (and so stacks) that map to the same original place are merged: the trace
//!   stays deduplicated. The generated positions stay in `trace.sourceMaps`.
//! - Every map is parsed once and cached (`cache`), bounded by entries and memory; map
//!   files are read up to a size limit, and parsed within bounds on what they expand to
//!   (`limits`, `parse`). A map that is missing, malformed or too large leaves its frames
//!   as V8 gave them and is named, with why, in `trace.sourceMaps.scripts` (one over a
//!   bound is also a warning, `take_warnings`): never an error, never a lost recording.
//! - The hot lines' text (`text`, `trace.sourceText`): from the files of the scripts the
//!   recording's own V8 loaded, and from maps' `sourcesContent`; never from a file that a
//!   profile or a map only names.
//!
//! This runs where the trace is built: on the libuv thread pool, off the event loop.

mod cache;
mod locate;
mod map;
mod parse;
pub mod text;

use crate::trace::rebuild::{self, Rebuild};
use crate::trace::{Frame, Trace};
use cache::{Key, Outcome, Slot};
use locate::{Base, Lookup, Stamp};
use map::{Loaded, Original};
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Arc, Mutex};

pub use cache::CacheStats;
pub(crate) use locate::percent_decode;
pub use text::SourceText;

/// Bounds on what mapping reads and keeps.
pub mod limits {
  /// A map file, inline map or runtime map larger than this is not read.
  pub const MAP_BYTES: u64 = 32 << 20;
  /// A script is read whole (to find an inline map whose comment starts before its last
  /// `TAIL_BYTES`, or to find the name tokens of minified code) up to this size.
  pub const SCRIPT_BYTES: u64 = 64 << 20;
  /// Where a script's `sourceMappingURL` comment is looked for first: its end.
  pub const TAIL_BYTES: u64 = 64 << 10;
  /// Parsed maps kept, and the memory they may hold.
  pub const CACHE_MAPS: usize = 64;
  pub const CACHE_BYTES: usize = 128 << 20;
  /// What one map may expand to when parsed, whatever its size: its decoded mappings (24
  /// bytes each), its sources resolved (each with `sourceRoot`; the work of resolving them
  /// counts), its names. Over any: the map is not used.
  pub const MAP_MAPPINGS: usize = 4_000_000;
  pub const MAP_SOURCE_BYTES: usize = 16 << 20;
  pub const MAP_NAME_BYTES: usize = 16 << 20;
  /// A parsed map with what it keeps besides (the generated script's text for minified
  /// names; its sources' text, `sourcesContent`, when a build wants it): at most what the
  /// cache holds, so every map used is kept. What would take it over is not kept.
  pub const PARSED_BYTES: usize = CACHE_BYTES;
  /// Scripts remembered as having no map (or a map that failed).
  pub const CACHE_OTHERS: usize = 4096;
}

/// A source map Node holds for a script (`module.findSourceMap`), as JSON.
pub struct RuntimeMap {
  pub url: String,
  pub json: String,
}

/// `trace.sourceMaps` (an extension; readers that do not know it ignore it): what mapping
/// did. Present when a frame's script had a source map, usable or not.
#[derive(Debug, Default, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct SourceMapsInfo {
  /// Frames whose position (and maybe name) come from a source map.
  pub mapped_frames: usize,
  /// Frames of scripts with a source map that has no mapping at their position (code a
  /// tool added, such as module wrappers and helpers): as V8 gave them.
  pub unmapped_frames: usize,
  /// Line ticks of mapped frames whose generated line maps to no single line of the
  /// frame's original file (minified code, tsx's output): left out.
  #[serde(skip_serializing_if = "is_zero")]
  pub dropped_line_ticks: u64,
  /// The scripts of the trace's frames that have a source map, or one that could not be
  /// used (`error` says why).
  pub scripts: Vec<ScriptInfo>,
  /// Where each mapped frame was in the generated code.
  pub generated: Vec<Generated>,
}

fn is_zero(n: &u64) -> bool {
  *n == 0
}

/// Reads `trace.sourceMaps` from a trace file: an extension, so one that is not as
/// selfprof writes it is left out (as a reader that does not know it would), never an
/// error that makes the trace unreadable.
pub(crate) fn lenient<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<SourceMapsInfo>, D::Error> {
  let value = serde_json::Value::deserialize(d)?;
  Ok(serde_json::from_value(value).ok())
}

#[derive(Debug, Default, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ScriptInfo {
  /// The generated script's URL, as V8 named it.
  pub url: String,
  /// Where its map came from: the map file's URL, `inline`, or `runtime` (Node's
  /// source-map cache, for a script compiled in memory).
  #[serde(skip_serializing_if = "Option::is_none")]
  pub map: Option<String>,
  /// Why its map could not be used.
  #[serde(skip_serializing_if = "Option::is_none")]
  pub error: Option<String>,
}

#[derive(Debug, Default, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Generated {
  /// The mapped frame (`frames[frameId]`).
  pub frame_id: u32,
  /// Its script (`sourceMaps.scripts[script]`).
  pub script: u32,
  /// 1-based, as V8 gave them.
  pub line: u32,
  pub column: u32,
  /// V8's name, when the map gave another.
  #[serde(skip_serializing_if = "Option::is_none")]
  pub name: Option<String>,
}

fn hash_of(s: &str) -> u64 {
  let mut h = std::collections::hash_map::DefaultHasher::new();
  s.hash(&mut h);
  h.finish()
}

fn parse(json: &[u8], base: &Base, origin: String, content: bool) -> Outcome {
  let label = match origin.as_str() {
    "inline" => "the inline source map".to_owned(),
    "runtime" => "Node's source map".to_owned(),
    url => url.to_owned(),
  };
  cache::with(|c| c.parsed += 1);
  let parsed = catch_unwind(AssertUnwindSafe(|| {
    if content {
      Loaded::parse_with_content(json, base, origin)
    } else {
      Loaded::parse(json, base, origin)
    }
  }));
  match parsed {
    Ok(Ok(loaded)) => Outcome::Map(Arc::new(loaded)),
    Ok(Err(reason)) => Outcome::Failed(format!("{label}: {reason}").into()),
    Err(_) => Outcome::Failed(format!("{label}: the parser failed on it").into()),
  }
}

/// Why maps could not be used because they were over a bound, since the last
/// `take_warnings` (at most a few: each map fails once, then its failure is cached).
static WARNINGS: Mutex<Vec<String>> = Mutex::new(Vec::new());
const MAX_WARNINGS: usize = 8;

/// Whether a map's failure is one of the bounds (`limits`), not a missing or broken map.
fn over_a_bound(reason: &str) -> bool {
  [" up to ", "expand to more than", "grew past"]
    .iter()
    .any(|p| reason.contains(p))
}

/// A fresh outcome: one over a bound is remembered for a warning.
fn noted(url: &str, outcome: Outcome) -> Outcome {
  if let Outcome::Failed(reason) = &outcome {
    if over_a_bound(reason) {
      let mut w = WARNINGS.lock().unwrap_or_else(|e| e.into_inner());
      if w.len() < MAX_WARNINGS {
        w.push(format!("the source map of {url} is not used: {reason}"));
      }
    }
  }
  outcome
}

/// The warnings for maps over a bound since the last call (JS logs them).
pub fn take_warnings() -> Vec<String> {
  std::mem::take(&mut *WARNINGS.lock().unwrap_or_else(|e| e.into_inner()))
}

/// The map of the script at `url` (a runtime map's JSON if Node gave one), from the cache
/// or loaded into it. `content`: with its sources' text (a cached map without it, when
/// it had some, is parsed again with it).
fn outcome_for(url: &str, runtime: Option<&str>, content: bool) -> Outcome {
  let wanted = |s: &Slot| !(content && matches!(&s.outcome, Outcome::Map(m) if m.content_not_asked()));
  let Some(path) = locate::file_url_to_path(url) else {
    return Outcome::NoMap;
  };
  let dir = path
    .parent()
    .map_or_else(|| std::path::PathBuf::from("/"), |p| p.to_path_buf());
  if let Some(json) = runtime {
    let key = Key::Runtime(url.to_owned(), json.len(), hash_of(json));
    if let Some(o) = cache::with(|c| c.get(&key, wanted)) {
      return o;
    }
    let outcome = if json.len() as u64 > limits::MAP_BYTES {
      Outcome::Failed(
        format!(
          "Node's source map is {} MiB; maps are read up to {} MiB",
          json.len() >> 20,
          limits::MAP_BYTES >> 20
        )
        .into(),
      )
    } else {
      parse(json.as_bytes(), &Base { dir }, "runtime".into(), content)
    };
    let outcome = noted(url, outcome);
    cache::with(|c| {
      c.put(
        key,
        Slot {
          outcome: outcome.clone(),
          script: None,
          map_file: None,
        },
      )
    });
    return outcome;
  }
  let Some(stamp) = Stamp::now(&path) else {
    return Outcome::NoMap; // gone, or not a regular file
  };
  let key = Key::Disk(path.clone());
  let current = |s: &Slot| {
    wanted(s)
      && s.script.as_ref() == Some(&stamp)
      && s
        .map_file
        .as_ref()
        .is_none_or(|(p, st)| Stamp::now(p).as_ref() == Some(st))
  };
  if let Some(o) = cache::with(|c| c.get(&key, current)) {
    return o;
  }
  let (outcome, map_file) = match catch_unwind(AssertUnwindSafe(|| load_disk(&path, stamp.len, content))) {
    Ok(r) => r,
    Err(_) => (Outcome::Failed("reading its source map failed".into()), None),
  };
  let outcome = noted(url, outcome);
  cache::with(|c| {
    c.put(
      key,
      Slot {
        outcome: outcome.clone(),
        script: Some(stamp),
        map_file: map_file.clone(),
      },
    )
  });
  outcome
}

fn load_disk(path: &std::path::Path, len: u64, content: bool) -> (Outcome, Option<(std::path::PathBuf, Stamp)>) {
  match locate::find_on_disk(path, len) {
    Lookup::NoMap => (Outcome::NoMap, None),
    Lookup::Failed(reason) => (Outcome::Failed(reason.into()), None),
    Lookup::Map(found) => {
      let outcome = match parse(&found.json, &found.base, found.origin, content) {
        Outcome::Map(loaded) if loaded.has_names() && len <= limits::SCRIPT_BYTES => {
          // Minified code: keep its text to find function name tokens.
          let mut loaded = Arc::try_unwrap(loaded).unwrap_or_else(|_| unreachable!("just made"));
          if let Ok(bytes) = std::fs::read(path) {
            loaded.set_text_within_bounds(String::from_utf8_lossy(&bytes).into_owned());
          }
          Outcome::Map(Arc::new(loaded))
        }
        other => other,
      };
      (outcome, found.map_file)
    }
  }
}

/// What the cache holds now.
pub fn cache_stats() -> CacheStats {
  cache::with(|c| c.stats())
}

/// Empties the cache (tests, benchmarks).
pub fn clear_cache() {
  cache::with(|c| c.clear())
}

/// Where a trace's source text (`trace.sourceText`) may come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TextFrom {
  Nothing,
  /// Source maps' own `sourcesContent` (a profile from elsewhere: its scripts are names).
  Maps,
  /// That, and the files of the trace's scripts as they are when it is built: for a trace
  /// built from this process's own recordings, whose scripts V8 loaded.
  MapsAndScripts,
}

/// Maps the frames (and line ticks) of `trace` through the source maps of their scripts.
/// A trace that already carries `sourceMaps` was mapped when it was built: left as it is.
pub fn symbolize(trace: &mut Trace, runtime: &[RuntimeMap]) {
  build(trace, Some(runtime), TextFrom::Nothing);
}

/// Maps `trace` through source maps (with these runtime maps; `None`: not at all), then
/// adds the source text of its hot lines that `text` allows.
pub fn build(trace: &mut Trace, runtime: Option<&[RuntimeMap]>, text: TextFrom) {
  // The trace's scripts before mapping: V8's (mapping adds files that maps only name).
  let scripts: Option<std::collections::HashSet<String>> =
    (text == TextFrom::MapsAndScripts).then(|| trace.resources.iter().cloned().collect());
  let contents = match runtime {
    Some(runtime) => map_frames(trace, runtime, text != TextFrom::Nothing),
    None => text::Contents::new(),
  };
  if text != TextFrom::Nothing {
    let _ = catch_unwind(AssertUnwindSafe(|| text::add(trace, scripts.as_ref(), &contents)));
  }
}

/// `symbolize`, keeping the maps' sources' text when `content`: which mapped files have
/// it, for `text::add`.
fn map_frames(trace: &mut Trace, runtime: &[RuntimeMap], content: bool) -> text::Contents {
  if trace.source_maps.is_some() {
    return text::Contents::new();
  }
  let runtime: HashMap<&str, &str> = runtime.iter().map(|m| (m.url.as_str(), m.json.as_str())).collect();
  // Planned on a borrowed trace (a panic there leaves the trace as it was), then applied.
  let planned = catch_unwind(AssertUnwindSafe(|| plan(trace, &runtime, content)));
  let Ok(Some(plan)) = planned else {
    return text::Contents::new();
  };
  let mut contents = text::Contents::new();
  if content {
    for (o, m) in plan.mapped.iter().flatten() {
      if m.content(o.src).is_some() {
        contents.entry(o.url.clone()).or_insert_with(|| (m.clone(), o.src));
      }
    }
  }
  apply(trace, plan);
  contents
}

struct Plan {
  info: SourceMapsInfo,
  /// Per frame: where it maps to, and its map.
  mapped: Vec<Option<(Original, Arc<Loaded>)>>,
  /// Per resource: its index in `info.scripts`.
  script_of: Vec<Option<u32>>,
}

fn plan(trace: &Trace, runtime: &HashMap<&str, &str>, content: bool) -> Option<Plan> {
  let outcomes: Vec<Outcome> = trace
    .resources
    .iter()
    .map(|url| outcome_for(url, runtime.get(url.as_str()).copied(), content))
    .collect();
  let mut info = SourceMapsInfo::default();
  let mut script_of = vec![None; outcomes.len()];
  for (r, o) in outcomes.iter().enumerate() {
    let (map, error) = match o {
      Outcome::NoMap => continue,
      Outcome::Map(m) => (Some(m.origin.clone()), None),
      Outcome::Failed(reason) => (None, Some(reason.to_string())),
    };
    script_of[r] = Some(info.scripts.len() as u32);
    info.scripts.push(ScriptInfo {
      url: trace.resources[r].clone(),
      map,
      error,
    });
  }
  if info.scripts.is_empty() {
    return None;
  }
  let mapped = trace
    .frames
    .iter()
    .map(|f| {
      let Outcome::Map(m) = &outcomes[f.resource_id? as usize] else {
        return None;
      };
      let found = match (f.line, f.column) {
        (Some(l), Some(c)) if l > 0 && c > 0 => m.function_at(l - 1, c - 1, &f.name),
        _ => None,
      };
      let found = found.filter(|o| o.line < u32::MAX - 1 && o.column < u32::MAX - 1);
      match found {
        Some(o) => Some((o, m.clone())),
        None => {
          info.unmapped_frames += 1;
          None
        }
      }
    })
    .collect::<Vec<_>>();
  Some(Plan {
    info,
    mapped,
    script_of,
  })
}

fn apply(trace: &mut Trace, plan: Plan) {
  let Plan {
    mut info,
    mapped,
    script_of,
  } = plan;
  info.mapped_frames = mapped.iter().filter(|m| m.is_some()).count();
  if info.mapped_frames == 0 {
    trace.source_maps = Some(info);
    return;
  }
  // Rebuilt deduplicated, in the same order: resources by first use, frames, then stacks.
  let (old, mut rb) = Rebuild::take(trace);
  let mut new_frame = Vec::with_capacity(old.frames.len());
  for (i, f) in old.frames.iter().enumerate() {
    let id = match &mapped[i] {
      Some((o, _)) => {
        let frame = Frame {
          name: o.name.clone().unwrap_or_else(|| f.name.clone()),
          resource_id: Some(rb.resource(trace, o.url.to_string())),
          line: Some(o.line + 1),
          column: Some(o.column + 1),
        };
        let renamed = (frame.name != f.name).then(|| f.name.clone());
        let id = rb.frame(trace, frame);
        if let (Some(r), Some(line), Some(column)) = (f.resource_id, f.line, f.column) {
          info.generated.push(Generated {
            frame_id: id,
            script: script_of[r as usize].unwrap_or(0),
            line,
            column,
            name: renamed,
          });
        }
        id
      }
      None => rb.old_frame(trace, &old, i),
    };
    new_frame.push(id);
  }
  let mut new_stack: Vec<u32> = Vec::with_capacity(old.stacks.len());
  for s in &old.stacks {
    let parent = s.parent_id.map(|p| new_stack[p as usize]);
    new_stack.push(rb.stack(trace, new_frame[s.frame_id as usize], parent));
  }
  for s in &mut trace.samples {
    s.stack_id = s.stack_id.map(|id| new_stack[id as usize]);
  }
  // Line ticks: a mapped frame's generated lines become original lines (of its source).
  let mut ticks: HashMap<(u32, u32), u64> = HashMap::new();
  for t in &trace.line_ticks {
    let old_frame = old.stacks[t.stack_id as usize].frame_id as usize;
    let line = match &mapped[old_frame] {
      None => Some(t.line),
      Some((o, m)) => {
        let f = &old.frames[old_frame];
        // On the function's own first line (minified code), from where it starts.
        let from = if f.line == Some(t.line) {
          f.column.unwrap_or(1).saturating_sub(1)
        } else {
          0
        };
        m.line_of(t.line - 1, from, o.src).and_then(|l| l.checked_add(1))
      }
    };
    match line {
      Some(line) => *ticks.entry((new_stack[t.stack_id as usize], line)).or_default() += t.ticks,
      None => info.dropped_line_ticks += t.ticks,
    }
  }
  trace.line_ticks = rebuild::line_ticks(ticks);
  trace.source_maps = Some(info);
}

#[cfg(test)]
mod tests;
