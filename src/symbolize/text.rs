//! `trace.sourceText` (an extension): the text of a trace's hot lines, `{ [resource url]:
//! { [line]: text } }`, for the lines of its line ticks and each such function's first
//! line, so that a report made from the trace, anywhere and later, shows them without
//! reading a file.
//!
//! Where text comes from is what makes it safe to show: the files of the scripts the
//! recording's own V8 loaded (a trace built in this process; read as the trace is built),
//! and source maps' own `sourcesContent`. Never from a file a profile or a map only names:
//! a trace file, a `.cpuprofile` or a map can name `/proc/self/environ` or `~/.npmrc`.
//! Bounded: files up to `FILE_BYTES`, `LINE_CHARS` characters a line, `LINES` lines and
//! `READ_BYTES` read per trace.

use super::locate;
use super::map::Loaded;
use crate::trace::Trace;
use serde::Deserialize;
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::io::Read;
use std::sync::Arc;

pub const FILE_BYTES: u64 = 4 << 20;
pub const LINE_CHARS: usize = 240;
pub const LINES: usize = 4000;
pub const READ_BYTES: u64 = 32 << 20;

/// Per resource URL, per 1-based line, its text.
pub type SourceText = BTreeMap<String, BTreeMap<u32, String>>;

/// The mapped files whose text a map carries: URL → (map, source index).
pub(crate) type Contents = HashMap<Arc<str>, (Arc<Loaded>, u32)>;

/// Reads `trace.sourceText` from a trace file: an extension, so one that is not as
/// selfprof writes it is left out rather than making the trace unreadable.
pub(crate) fn lenient<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<SourceText>, D::Error> {
  let value = serde_json::Value::deserialize(d)?;
  Ok(serde_json::from_value(value).ok())
}

/// Adds `trace.sourceText` (unless the trace carries one): each hot line's text from
/// `contents` (maps' `sourcesContent`) or, for a URL in `scripts`, from its file.
pub(crate) fn add(trace: &mut Trace, scripts: Option<&HashSet<String>>, contents: &Contents) {
  if trace.source_text.is_some() || trace.line_ticks.is_empty() {
    return;
  }
  // The lines wanted per resource, resources in the order their first tick comes.
  let mut order: Vec<u32> = Vec::new();
  let mut wanted: HashMap<u32, BTreeSet<u32>> = HashMap::new();
  for t in &trace.line_ticks {
    let Some(frame) = trace
      .stacks
      .get(t.stack_id as usize)
      .and_then(|s| trace.frames.get(s.frame_id as usize))
    else {
      continue;
    };
    let Some(r) = frame.resource_id.filter(|&r| (r as usize) < trace.resources.len()) else {
      continue;
    };
    let lines = wanted.entry(r).or_insert_with(|| {
      order.push(r);
      BTreeSet::new()
    });
    lines.extend([Some(t.line), frame.line].into_iter().flatten().filter(|&l| l >= 1));
  }
  let mut out = SourceText::new();
  let mut budget = LINES;
  let mut read = 0u64;
  for r in order {
    if budget == 0 {
      break;
    }
    let url = &trace.resources[r as usize];
    let text: Option<std::borrow::Cow<str>> = match contents.get(url.as_str()) {
      Some((map, src)) => map.content(*src).map(std::borrow::Cow::Borrowed),
      None if scripts.is_some_and(|s| s.contains(url)) => read_script(url, &mut read).map(std::borrow::Cow::Owned),
      None => None,
    };
    let Some(text) = text else { continue };
    let picked = pick(&text, &wanted[&r], &mut budget);
    if !picked.is_empty() {
      out.insert(url.clone(), picked);
    }
  }
  if !out.is_empty() {
    trace.source_text = Some(out);
  }
}

/// A script's text, if it is a `file://` regular file of at most `FILE_BYTES` and the
/// trace's read budget allows it.
fn read_script(url: &str, read: &mut u64) -> Option<String> {
  let path = locate::file_url_to_path(url)?;
  let meta = std::fs::metadata(&path).ok().filter(|m| m.is_file())?;
  if meta.len() > FILE_BYTES || *read + meta.len() > READ_BYTES {
    return None;
  }
  let mut bytes = Vec::with_capacity(meta.len() as usize);
  std::fs::File::open(&path)
    .ok()?
    .take(FILE_BYTES + 1)
    .read_to_end(&mut bytes)
    .ok()?;
  if bytes.len() as u64 > FILE_BYTES {
    return None;
  }
  *read += bytes.len() as u64;
  Some(String::from_utf8_lossy(&bytes).into_owned())
}

/// Lines `wanted` (1-based, ECMAScript line terminators, as V8 and source maps count them)
/// of `text`, each cut at `LINE_CHARS` characters, while `budget` lasts.
fn pick(text: &str, wanted: &BTreeSet<u32>, budget: &mut usize) -> BTreeMap<u32, String> {
  let mut out = BTreeMap::new();
  let mut want = wanted.iter().copied().peekable();
  let mut line = 1u32;
  let mut rest = text;
  while let Some(&next) = want.peek() {
    if *budget == 0 {
      break;
    }
    let (this, after) = split_line(rest);
    if line == next {
      want.next();
      *budget -= 1;
      out.insert(line, clip(this));
    }
    match after {
      Some(after) => rest = after,
      None => break,
    }
    line += 1;
  }
  out
}

/// The first line of `s` and what follows its terminator (none: it was the last line).
fn split_line(s: &str) -> (&str, Option<&str>) {
  for (i, c) in s.char_indices() {
    match c {
      '\n' | '\u{2028}' | '\u{2029}' => return (&s[..i], Some(&s[i + c.len_utf8()..])),
      '\r' => {
        let skip = if s[i + 1..].starts_with('\n') { 2 } else { 1 };
        return (&s[..i], Some(&s[i + skip..]));
      }
      _ => {}
    }
  }
  (s, None)
}

fn clip(line: &str) -> String {
  match line.char_indices().nth(LINE_CHARS) {
    Some((at, _)) => format!("{}…", &line[..at]),
    None => line.to_owned(),
  }
}

/// The text of both traces, the first's where both have a line (merging threads).
pub(crate) fn merge(into: &mut Option<SourceText>, from: Option<&SourceText>) {
  let Some(from) = from else { return };
  let into = into.get_or_insert_with(SourceText::new);
  for (url, lines) in from {
    let mine = into.entry(url.clone()).or_default();
    for (line, text) in lines {
      mine.entry(*line).or_insert_with(|| text.clone());
    }
  }
}
