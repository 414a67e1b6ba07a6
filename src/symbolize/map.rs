//! One source map, parsed once into what a trace's lookups need (sorted mappings,
//! resolved source URLs, names) and nothing else: the map's `sourcesContent` and the
//! parser's own structures are dropped after loading.

use super::locate;
use std::sync::Arc;

/// No source, or no name, for a mapping.
pub(crate) const NONE: u32 = !0;

/// One mapping: a generated position and the original one it comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Mapping {
  pub dst_line: u32,
  pub dst_col: u32,
  pub src: u32,
  pub src_line: u32,
  pub src_col: u32,
  pub name: u32,
}

/// The generated script's text, kept when the map has `names` (to find the token of a
/// function's name in minified code).
pub(crate) struct Text {
  text: String,
  /// Byte offset of each line's start (ECMAScript line terminators).
  line_starts: Vec<u32>,
  /// Per line: whether it is ASCII (a UTF-16 column is then its byte offset), else where
  /// its marks start in `marks`.
  lines: Vec<LineKind>,
  /// For lines that are not ASCII: (byte, UTF-16 column) every `MARK` columns, from the
  /// line's start, so a column's byte is found without scanning a minified line whole.
  marks: Vec<(u32, u32)>,
}

#[derive(Clone, Copy)]
enum LineKind {
  Ascii,
  Marks(u32, u32),
}

const MARK: u32 = 1024;

impl Text {
  pub fn new(text: String) -> Text {
    let mut line_starts = vec![0u32];
    let bytes = text.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
      let len = match bytes[i] {
        b'\n' => 1,
        b'\r' if bytes.get(i + 1) == Some(&b'\n') => 2,
        b'\r' => 1,
        // U+2028, U+2029 in UTF-8.
        0xE2 if bytes.get(i + 1) == Some(&0x80) && matches!(bytes.get(i + 2), Some(0xA8 | 0xA9)) => 3,
        _ => 0,
      };
      if len == 0 {
        i += 1;
      } else {
        i += len;
        line_starts.push(i as u32);
      }
    }
    let mut lines = Vec::with_capacity(line_starts.len());
    let mut marks = Vec::new();
    for (n, &start) in line_starts.iter().enumerate() {
      let end = line_starts.get(n + 1).map_or(text.len(), |&e| e as usize);
      let line = text.get(start as usize..end).unwrap_or("");
      if line.is_ascii() {
        lines.push(LineKind::Ascii);
        continue;
      }
      let first = marks.len() as u32;
      let mut units = 0u32;
      let mut next = MARK;
      for (b, c) in line.char_indices() {
        if units >= next {
          marks.push((b as u32, units));
          next = units + MARK;
        }
        units += c.len_utf16() as u32;
      }
      lines.push(LineKind::Marks(first, marks.len() as u32));
    }
    Text {
      text,
      line_starts,
      lines,
      marks,
    }
  }

  /// Byte offset in line `line` of its UTF-16 column `col` (source maps and V8 count
  /// UTF-16 units), from the nearest mark before it.
  pub(crate) fn byte_of(&self, line: u32, source: &str, col: u32) -> Option<usize> {
    match *self.lines.get(line as usize)? {
      LineKind::Ascii => (col as usize <= source.len()).then_some(col as usize),
      LineKind::Marks(first, end) => {
        let marks = self.marks.get(first as usize..end as usize)?;
        let k = marks.partition_point(|&(_, units)| units <= col);
        let (byte, units) = if k == 0 { (0, 0) } else { marks[k - 1] };
        byte_of_utf16(source.get(byte as usize..)?, col - units).map(|b| b + byte as usize)
      }
    }
  }

  /// Line `line` (0-based) without its terminator.
  pub(crate) fn line(&self, line: u32) -> Option<&str> {
    let start = *self.line_starts.get(line as usize)? as usize;
    let end = self
      .line_starts
      .get(line as usize + 1)
      .map_or(self.text.len(), |&e| e as usize);
    let s = self.text.get(start..end)?;
    Some(s.trim_end_matches(['\n', '\r', '\u{2028}', '\u{2029}']))
  }

  fn bytes(&self) -> usize {
    self.text.len() + self.line_starts.len() * 12 + self.marks.len() * 8
  }
}

/// A parsed source map, ready for lookups.
pub(crate) struct Loaded {
  /// Sorted by generated position.
  pub(crate) mappings: Vec<Mapping>,
  /// Each source's URL, resolved against where the map is (absolute).
  pub(crate) sources: Vec<Arc<str>>,
  pub(crate) names: Vec<Box<str>>,
  pub(crate) contents: Contents,
  text: Option<Text>,
  /// Where the map came from, for `trace.sourceMaps.scripts[].map`.
  pub origin: String,
}

/// The sources' text (`sourcesContent`) of a parsed map.
pub(crate) enum Contents {
  /// The map has none.
  None,
  /// It has some, not kept: not asked for.
  NotAsked,
  /// It has some, not kept: over `limits::MAP_CONTENT_BYTES` (or `PARSED_BYTES`).
  TooLarge,
  /// One string, and each source's range of it (none: no text for that source).
  Kept {
    text: Box<str>,
    ranges: Box<[Option<(u32, u32)>]>,
  },
}

/// Where a function's frame maps to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Original {
  pub url: Arc<str>,
  pub src: u32,
  /// 0-based.
  pub line: u32,
  pub column: u32,
  /// The original name, when the map names the function's name token.
  pub name: Option<String>,
}

impl Loaded {
  /// Parses a source map's JSON. `base` is the map's own location (the map file, or the
  /// script for an inline map): relative `sources` resolve against it. Bounded by what it
  /// expands to (`limits`, `parse`).
  pub fn parse(json: &[u8], base: &locate::Base, origin: String) -> Result<Loaded, String> {
    super::parse::parse(json, base, origin, false)
  }

  /// `parse`, keeping the sources' text (`sourcesContent`) too when it is within bounds.
  pub fn parse_with_content(json: &[u8], base: &locate::Base, origin: String) -> Result<Loaded, String> {
    super::parse::parse(json, base, origin, true)
  }

  pub(crate) fn empty(origin: String) -> Loaded {
    Loaded {
      mappings: Vec::new(),
      sources: Vec::new(),
      names: Vec::new(),
      contents: Contents::None,
      text: None,
      origin,
    }
  }

  /// Source `src`'s text, from the map's `sourcesContent`, if kept.
  pub fn content(&self, src: u32) -> Option<&str> {
    match &self.contents {
      Contents::Kept { text, ranges } => {
        let (start, end) = (*ranges.get(src as usize)?)?;
        text.get(start as usize..end as usize)
      }
      _ => None,
    }
  }

  /// Whether the map has sources' text that was not kept because it was not asked for
  /// (a build that wants it parses the map again; one over its bound is not).
  pub fn content_not_asked(&self) -> bool {
    matches!(self.contents, Contents::NotAsked)
  }

  /// Whether the map names identifiers (minified code): then the generated script's
  /// text is worth keeping, to find each function's name token.
  pub fn has_names(&self) -> bool {
    !self.names.is_empty()
  }

  #[cfg(test)]
  pub fn set_text(&mut self, text: String) {
    self.text = Some(Text::new(text));
  }

  /// Keeps the generated script's text if the map stays within `limits::PARSED_BYTES`
  /// with it (else names come from V8, as without a map's `names`).
  pub fn set_text_within_bounds(&mut self, text: String) {
    if self.bytes() + text.len() > super::limits::PARSED_BYTES {
      return;
    }
    let text = Text::new(text);
    if self.bytes() + text.bytes() <= super::limits::PARSED_BYTES {
      self.text = Some(text);
    }
  }

  /// Memory this map holds, for the cache's bound.
  pub fn bytes(&self) -> usize {
    self.mappings.len() * std::mem::size_of::<Mapping>()
      + self.sources.iter().map(|s| s.len() + 32).sum::<usize>()
      + self.names.iter().map(|s| s.len() + 16).sum::<usize>()
      + self.text.as_ref().map_or(0, Text::bytes)
      + match &self.contents {
        Contents::Kept { text, ranges } => text.len() + ranges.len() * 12,
        _ => 0,
      }
      + self.origin.len()
      + 128
  }

  /// Index of the last mapping at or before (line, col), if any.
  fn at_or_before(&self, line: u32, col: u32) -> Option<usize> {
    self
      .mappings
      .partition_point(|m| (m.dst_line, m.dst_col) <= (line, col))
      .checked_sub(1)
  }

  /// The mapping for a function V8 places at 0-based (line, col) (the `(` of its
  /// parameters, or an arrow's first parameter): the last mapping at or before it on the
  /// same generated line (for tsc and esbuild output, the function's name or its
  /// `function` keyword), else the first one after it on that line. None if that
  /// mapping has no source. V8's top-level function of a script (1:1) maps to the start
  /// of the map's only source when the map has one and nothing else maps there.
  pub fn function_at(&self, line: u32, col: u32, v8_name: &str) -> Option<Original> {
    let before = self.at_or_before(line, col);
    let index = match before {
      Some(i) if self.mappings[i].dst_line == line => Some(i),
      _ => {
        let next = before.map_or(0, |i| i + 1);
        self.mappings.get(next).filter(|m| m.dst_line == line).map(|_| next)
      }
    };
    let Some(m) = index.map(|i| self.mappings[i]).filter(|m| m.src != NONE) else {
      if (line, col) == (0, 0) && self.sources.len() == 1 {
        return Some(Original {
          url: self.sources[0].clone(),
          src: 0,
          line: 0,
          column: 0,
          name: None,
        });
      }
      return None;
    };
    Some(Original {
      url: self.sources.get(m.src as usize)?.clone(),
      src: m.src,
      line: m.src_line,
      column: m.src_col,
      name: self.original_name(line, col, v8_name),
    })
  }

  /// The original name of a function V8 calls `v8_name` (its last `.` part), if the
  /// generated text has that identifier just before the function (`function i(`,
  /// `i(` of a method, `var i=function(`, `i=(a)=>`, `i:async function(`) and the map
  /// names the mapping at that identifier.
  fn original_name(&self, line: u32, col: u32, v8_name: &str) -> Option<String> {
    let text = self.text.as_ref()?;
    let (prefix, last) = match v8_name.rfind('.') {
      Some(dot) => (&v8_name[..=dot], &v8_name[dot + 1..]),
      None => ("", v8_name),
    };
    if last.is_empty() {
      return None;
    }
    let source = text.line(line)?;
    let end = text.byte_of(line, source, col)?;
    let at = identifier_before(source.get(..end)?, last)?;
    let ident_col = col.checked_sub(utf16_len(&source[at..end]))?;
    let i = self.at_or_before(line, ident_col)?;
    let m = self.mappings[i];
    if (m.dst_line, m.dst_col) != (line, ident_col) || m.name == NONE {
      return None;
    }
    let name = self.names.get(m.name as usize)?;
    (!name.is_empty() && &**name != last).then(|| format!("{prefix}{name}"))
  }

  /// The original line (0-based) of generated line `line` in source `src`, from column
  /// `from` on: the line every mapping to `src` there comes from. None when they come
  /// from several lines (minified code, tsx's output: V8 counts ticks per generated line,
  /// so which original line they were on is unknown) or there is none.
  pub fn line_of(&self, line: u32, from: u32, src: u32) -> Option<u32> {
    let start = self
      .mappings
      .partition_point(|m| (m.dst_line, m.dst_col) < (line, from));
    let mut lines = self.mappings[start..]
      .iter()
      .take_while(|m| m.dst_line == line)
      .filter(|m| m.src == src)
      .map(|m| m.src_line);
    let first = lines.next()?;
    lines.all(|l| l == first).then_some(first)
  }
}

fn is_ident_char(c: char) -> bool {
  c.is_alphanumeric() || c == '_' || c == '$' || c == '#'
}

/// Byte offset in `s` of UTF-16 column `col` (source maps and V8 count UTF-16 units).
pub(crate) fn byte_of_utf16(s: &str, col: u32) -> Option<usize> {
  let mut units = 0u32;
  for (i, c) in s.char_indices() {
    if units >= col {
      return Some(i);
    }
    units += c.len_utf16() as u32;
  }
  (units >= col).then_some(s.len())
}

pub(crate) fn utf16_len(s: &str) -> u32 {
  s.chars().map(|c| c.len_utf16() as u32).sum()
}

/// Where identifier `name` starts in `before` (the text before a function's position),
/// skipping back over what may separate a function's name from it: `function`, `async`,
/// `*`, then one `=` or `:` (an assignment or a property), and white space.
pub(crate) fn identifier_before(before: &str, name: &str) -> Option<usize> {
  let ends_with_name = |s: &str| -> Option<usize> {
    let s = s.trim_end();
    let start = s.len().checked_sub(name.len())?;
    (s.get(start..)? == name && !s[..start].chars().next_back().is_some_and(is_ident_char)).then_some(start)
  };
  let mut s = before.trim_end();
  if let Some(at) = ends_with_name(s) {
    return Some(at);
  }
  // `function`, `async`, `*` (a generator), in any order, at most a few.
  for _ in 0..3 {
    let t = s.trim_end();
    let stripped = ["function", "async"]
      .iter()
      .find_map(|k| {
        let rest = t.strip_suffix(k)?;
        (!rest.chars().next_back().is_some_and(is_ident_char)).then_some(rest)
      })
      .or_else(|| t.strip_suffix('*'));
    match stripped {
      Some(rest) => s = rest,
      None => break,
    }
  }
  let t = s.trim_end();
  let rest = t.strip_suffix('=').or_else(|| t.strip_suffix(':'))?;
  // Not `==`, `=>`, `!=`, `<=`, `?:`.
  if rest.ends_with(['=', '!', '<', '>', '?']) {
    return None;
  }
  ends_with_name(rest)
}
