//! A source map's JSON into `map::Loaded`, bounded by what it expands to, not only by its
//! size: a small map can name 30,000 sources under a 1 MiB `sourceRoot` (30 GB once each
//! is prefixed), or hold millions of one-byte mappings, names or index-map sections.
//!
//! The JSON is read in place (`RawValue`s borrowed from it), its arrays walked one element
//! at a time, and each part counted against its bound before it is kept: the resolved
//! sources (and the work of resolving them), the names, the decoded mappings (counted in
//! the text first, then decoded into a vector reserved once), and the sources' text when
//! it is wanted. No copy of the map is made on the way (the `sourcemap` crate's decoder made
//! three: its raw struct, its tokens, the prefixed sources).

use super::limits;
use super::locate::{self, Base};
use super::map::{Contents, Loaded, Mapping, NONE};
use serde::de::{self, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde::Deserialize;
use serde_json::value::RawValue;
use std::borrow::Cow;
use std::fmt;
use std::sync::Arc;

/// What a map's top-level fields are, each still the JSON text it was (unparsed).
#[derive(Deserialize)]
struct RawMap<'a> {
  #[serde(borrow, default)]
  sources: Option<&'a RawValue>,
  #[serde(borrow, default, rename = "sourceRoot")]
  source_root: Option<&'a RawValue>,
  #[serde(borrow, default)]
  names: Option<&'a RawValue>,
  #[serde(borrow, default)]
  mappings: Option<&'a RawValue>,
  #[serde(borrow, default, rename = "sourcesContent")]
  sources_content: Option<&'a RawValue>,
  #[serde(borrow, default)]
  sections: Option<&'a RawValue>,
}

#[derive(Deserialize)]
struct RawSection<'a> {
  offset: RawOffset,
  #[serde(borrow, default)]
  map: Option<&'a RawValue>,
  #[serde(default)]
  url: Option<IgnoredAny>,
}

#[derive(Deserialize)]
struct RawOffset {
  line: u32,
  column: u32,
}

/// One element of `sources`, `names` or `sourcesContent`: a string (borrowed unless it
/// has escapes), a number (names may be numbers), or anything else (skipped unread).
enum Item<'a> {
  Str(Cow<'a, str>),
  Num(String),
  Other,
}

impl<'de> Deserialize<'de> for Item<'de> {
  fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Item<'de>, D::Error> {
    struct V;
    impl<'de> Visitor<'de> for V {
      type Value = Item<'de>;
      fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON value")
      }
      fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Item<'de>, E> {
        Ok(Item::Str(Cow::Borrowed(v)))
      }
      fn visit_str<E>(self, v: &str) -> Result<Item<'de>, E> {
        Ok(Item::Str(Cow::Owned(v.to_owned())))
      }
      fn visit_string<E>(self, v: String) -> Result<Item<'de>, E> {
        Ok(Item::Str(Cow::Owned(v)))
      }
      fn visit_i64<E>(self, v: i64) -> Result<Item<'de>, E> {
        Ok(Item::Num(v.to_string()))
      }
      fn visit_u64<E>(self, v: u64) -> Result<Item<'de>, E> {
        Ok(Item::Num(v.to_string()))
      }
      fn visit_f64<E>(self, v: f64) -> Result<Item<'de>, E> {
        Ok(Item::Num(v.to_string()))
      }
      fn visit_bool<E>(self, _: bool) -> Result<Item<'de>, E> {
        Ok(Item::Other)
      }
      fn visit_unit<E>(self) -> Result<Item<'de>, E> {
        Ok(Item::Other)
      }
      fn visit_none<E>(self) -> Result<Item<'de>, E> {
        Ok(Item::Other)
      }
      fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Item<'de>, A::Error> {
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(Item::Other)
      }
      fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Item<'de>, A::Error> {
        while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
        Ok(Item::Other)
      }
    }
    d.deserialize_any(V)
  }
}

/// Calls `f` on each element of the JSON array `raw` (`what` names it in errors), as it is
/// read: nothing of the array is held but the element at hand. `null` is an empty array.
fn each<'a, T: Deserialize<'a>>(
  raw: &'a RawValue,
  what: &str,
  mut f: impl FnMut(T) -> Result<(), String>,
) -> Result<(), String> {
  struct Each<'f, T, F> {
    f: &'f mut F,
    stopped: &'f mut Option<String>,
    _t: std::marker::PhantomData<T>,
  }
  impl<'de, T: Deserialize<'de>, F: FnMut(T) -> Result<(), String>> Visitor<'de> for Each<'_, T, F> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
      f.write_str("an array")
    }
    fn visit_unit<E>(self) -> Result<(), E> {
      Ok(())
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
      while let Some(item) = seq.next_element::<T>()? {
        if let Err(reason) = (self.f)(item) {
          *self.stopped = Some(reason);
          return Err(de::Error::custom("stopped"));
        }
      }
      Ok(())
    }
  }
  let mut stopped = None;
  let mut d = serde_json::Deserializer::from_str(raw.get());
  let result = d.deserialize_any(Each {
    f: &mut f,
    stopped: &mut stopped,
    _t: std::marker::PhantomData,
  });
  match (stopped, result) {
    (Some(reason), _) => Err(reason),
    (None, Ok(())) => Ok(()),
    (None, Err(e)) => Err(format!("not a valid source map: {what}: {e}")),
  }
}

/// A JSON string's text, borrowed unless it has escapes; `None` if it is not a string.
fn string_of(raw: &RawValue) -> Option<Cow<'_, str>> {
  let mut d = serde_json::Deserializer::from_str(raw.get());
  match <&str>::deserialize(&mut d) {
    Ok(s) => Some(Cow::Borrowed(s)),
    Err(_) => serde_json::from_str::<String>(raw.get()).ok().map(Cow::Owned),
  }
}

/// `n` with thousands separators (for messages).
pub(crate) fn thousands(n: usize) -> String {
  let digits = n.to_string();
  let mut out = String::new();
  for (i, c) in digits.chars().enumerate() {
    if i > 0 && (digits.len() - i).is_multiple_of(3) {
      out.push(',');
    }
    out.push(c);
  }
  out
}

fn mib(n: usize) -> usize {
  n >> 20
}

/// The mappings (non-empty segments) of a `mappings` string.
fn count_segments(mappings: &str) -> usize {
  let mut n = 0;
  let mut in_segment = false;
  for b in mappings.bytes() {
    if b == b',' || b == b';' {
      n += usize::from(in_segment);
      in_segment = false;
    } else {
      in_segment = true;
    }
  }
  n + usize::from(in_segment)
}

const NESTING: u32 = 4;

/// The mappings of a map and of all its sections (nested index maps included).
fn count_all(raw: &RawMap, depth: u32) -> Result<usize, String> {
  if depth > NESTING {
    return Err("an index map nested too deep".into());
  }
  let Some(sections) = raw.sections else {
    return Ok(raw.mappings.and_then(string_of).map_or(0, |m| count_segments(&m)));
  };
  let mut total = 0usize;
  each::<RawSection>(sections, "sections", |s| {
    let Some(map) = s.map else { return Ok(()) };
    let inner: RawMap =
      serde_json::from_str(map.get()).map_err(|e| format!("not a valid source map: a section: {e}"))?;
    total = total.saturating_add(count_all(&inner, depth + 1)?);
    Ok(())
  })?;
  Ok(total)
}

/// Parses `json` (the map file's bytes) into a `Loaded`. `keep_content`: keep the sources'
/// text (`sourcesContent`) too, if the map stays within `limits::PARSED_BYTES` with it.
pub(crate) fn parse(json: &[u8], base: &Base, origin: String, keep_content: bool) -> Result<Loaded, String> {
  parse_within(json, base, origin, keep_content, limits::PARSED_BYTES)
}

/// `parse`, with the sources' text kept only within `parsed_bytes` (smaller in tests).
pub(crate) fn parse_within(
  json: &[u8],
  base: &Base,
  origin: String,
  keep_content: bool,
  parsed_bytes: usize,
) -> Result<Loaded, String> {
  let json = strip_header(json);
  let text = std::str::from_utf8(json).map_err(|e| format!("not a valid source map: {e}"))?;
  let raw: RawMap = serde_json::from_str(text).map_err(|e| format!("not a valid source map: {e}"))?;
  let total = count_all(&raw, 0)?;
  if total > limits::MAP_MAPPINGS {
    return Err(format!(
      "it has {} mappings; maps are used up to {}",
      thousands(total),
      thousands(limits::MAP_MAPPINGS)
    ));
  }
  let mut b = Builder {
    loaded: Loaded::empty(origin),
    base,
    source_bytes: 0,
    name_bytes: 0,
    keep_content,
    content_limit: parsed_bytes,
    content: String::new(),
    ranges: Vec::new(),
    had_content: false,
    content_over: false,
  };
  b.loaded.mappings.reserve_exact(total);
  b.add(&raw, (0, 0), 0)?;
  let Builder {
    mut loaded,
    content,
    mut ranges,
    had_content,
    content_over,
    ..
  } = b;
  loaded.contents = match (had_content, keep_content, content_over) {
    (false, ..) => Contents::None,
    (true, false, _) => Contents::NotAsked,
    (true, true, true) => Contents::TooLarge,
    (true, true, false) => {
      ranges.resize(loaded.sources.len(), None);
      Contents::Kept {
        text: content.into_boxed_str(),
        ranges: ranges.into_boxed_slice(),
      }
    }
  };
  // With its text, all of it within what the cache holds, or without the text.
  if matches!(loaded.contents, Contents::Kept { .. }) && loaded.bytes() > parsed_bytes {
    loaded.contents = Contents::TooLarge;
  }
  // Tools write each line's mappings in order; an index map's sections, or a hand-made
  // map, may not.
  if !loaded
    .mappings
    .windows(2)
    .all(|w| (w[0].dst_line, w[0].dst_col) <= (w[1].dst_line, w[1].dst_col))
  {
    loaded.mappings.sort_unstable_by_key(|m| (m.dst_line, m.dst_col));
  }
  Ok(loaded)
}

/// A map's JSON without the `)]}'` line some servers put before it to stop it being run
/// as script, and without a byte order mark.
fn strip_header(json: &[u8]) -> &[u8] {
  let json = json.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(json);
  if json.first().is_some_and(|b| matches!(b, b')' | b']' | b'}' | b'\'')) {
    if let Some(nl) = json.iter().position(|&b| b == b'\n') {
      return &json[nl + 1..];
    }
  }
  json
}

struct Builder<'b> {
  loaded: Loaded,
  base: &'b Base,
  /// What resolving the sources took (the longer of each prefixed and resolved URL).
  source_bytes: usize,
  name_bytes: usize,
  keep_content: bool,
  /// Past this, the sources' text is not kept (it cannot be, with the rest, within it).
  content_limit: usize,
  /// The sources' text, one after another, and each source's range of it.
  content: String,
  ranges: Vec<Option<(u32, u32)>>,
  had_content: bool,
  content_over: bool,
}

impl Builder<'_> {
  /// Adds a map's sources, names, mappings (its generated positions shifted by `offset`:
  /// an index map's section; the column applies to its first line) and sources' text.
  fn add(&mut self, raw: &RawMap, offset: (u32, u32), depth: u32) -> Result<(), String> {
    if let Some(sections) = raw.sections {
      if depth > NESTING {
        return Err("an index map nested too deep".into());
      }
      return each::<RawSection>(sections, "sections", |s| {
        let Some(map) = s.map else {
          return Err(if s.url.is_some() {
            "an index map whose sections point to other files (not supported)".into()
          } else {
            "an index map section without a map".into()
          });
        };
        let inner: RawMap =
          serde_json::from_str(map.get()).map_err(|e| format!("not a valid source map: a section: {e}"))?;
        let line = s
          .offset
          .line
          .checked_add(offset.0)
          .ok_or("an index map section past the last line")?;
        let col = if line == offset.0 {
          s.offset.column.saturating_add(offset.1)
        } else {
          s.offset.column
        };
        self.add(&inner, (line, col), depth + 1)
      });
    }
    let src_base = self.loaded.sources.len() as u32;
    let name_base = self.loaded.names.len() as u32;
    self.add_sources(raw)?;
    self.add_names(raw)?;
    let sources = self.loaded.sources.len() as u32 - src_base;
    let names = self.loaded.names.len() as u32 - name_base;
    if let Some(mappings) = raw.mappings {
      let text = string_of(mappings).ok_or("not a valid source map: mappings is not a string")?;
      self.add_mappings(&text, offset, (src_base, sources), (name_base, names))?;
    }
    self.add_content(raw, src_base)
  }

  fn add_sources(&mut self, raw: &RawMap) -> Result<(), String> {
    let Some(sources) = raw.sources else { return Ok(()) };
    let root = raw.source_root.and_then(string_of).filter(|r| !r.is_empty());
    let root = root.as_deref().map(|r| r.strip_suffix('/').unwrap_or(r));
    let over = || {
      format!(
        "its sources expand to more than {} MiB (sourceRoot × sources)",
        mib(limits::MAP_SOURCE_BYTES)
      )
    };
    each::<Item>(sources, "sources", |item| {
      let source: Cow<str> = match item {
        Item::Str(s) => s,
        _ => Cow::Borrowed(""),
      };
      // `sourceRoot` is prefixed to each source that is not absolute (as the `sourcemap`
      // crate, and browsers, do). Counted before it is made.
      let absolute =
        !source.is_empty() && (source.starts_with('/') || source.starts_with("http:") || source.starts_with("https:"));
      let prefixed_len = match root {
        Some(r) if !absolute => r.len() + 1 + source.len(),
        _ => source.len(),
      };
      if self.source_bytes + prefixed_len > limits::MAP_SOURCE_BYTES {
        return Err(over());
      }
      let prefixed: Cow<str> = match root {
        Some(r) if !absolute => Cow::Owned(format!("{r}/{source}")),
        _ => source,
      };
      let resolved = locate::resolve_source(&prefixed, self.base);
      self.source_bytes += prefixed.len().max(resolved.len()) + 32;
      if self.source_bytes > limits::MAP_SOURCE_BYTES {
        return Err(over());
      }
      self.loaded.sources.push(Arc::from(resolved));
      Ok(())
    })
  }

  fn add_names(&mut self, raw: &RawMap) -> Result<(), String> {
    let Some(names) = raw.names else { return Ok(()) };
    each::<Item>(names, "names", |item| {
      // Counted before it is kept (a name is its text and a 16-byte pointer).
      let name: Cow<str> = match item {
        Item::Str(s) => s,
        Item::Num(n) => Cow::Owned(n),
        Item::Other => Cow::Borrowed(""),
      };
      self.name_bytes += name.len() + 16;
      if self.name_bytes > limits::MAP_NAME_BYTES {
        return Err(format!(
          "its names expand to more than {} MiB",
          mib(limits::MAP_NAME_BYTES)
        ));
      }
      self.loaded.names.push(name.into());
      Ok(())
    })
  }

  /// Decodes `mappings` (their count was checked, and room reserved, before).
  fn add_mappings(
    &mut self,
    mappings: &str,
    offset: (u32, u32),
    (src_base, sources): (u32, u32),
    (name_base, names): (u32, u32),
  ) -> Result<(), String> {
    // Running values: each segment holds deltas from the previous one (the column only
    // within a line).
    let (mut src, mut src_line, mut src_col, mut name) = (0u32, 0u32, 0u32, 0u32);
    let mut fields = [0i64; 5];
    for (line, text) in mappings.split(';').enumerate() {
      if text.is_empty() {
        continue;
      }
      let dst_line = u32::try_from(line).ok().and_then(|l| l.checked_add(offset.0));
      let mut col = 0u32;
      for segment in text.split(',') {
        if segment.is_empty() {
          continue;
        }
        let n = vlq(segment, &mut fields)?;
        if !matches!(n, 1 | 4 | 5) {
          return Err(format!("not a valid source map: a mapping of {n} fields"));
        }
        col = (i64::from(col) + fields[0]) as u32;
        let mut m = Mapping {
          dst_line: 0,
          dst_col: if line == 0 { col.saturating_add(offset.1) } else { col },
          src: NONE,
          src_line: NONE,
          src_col: NONE,
          name: NONE,
        };
        if n > 1 {
          src = (i64::from(src) + fields[1]) as u32;
          src_line = (i64::from(src_line) + fields[2]) as u32;
          src_col = (i64::from(src_col) + fields[3]) as u32;
          if src >= sources {
            return Err(format!(
              "not a valid source map: a mapping to source {src} of {sources}"
            ));
          }
          (m.src, m.src_line, m.src_col) = (src + src_base, src_line, src_col);
          if n == 5 {
            name = (i64::from(name) + fields[4]) as u32;
            if name >= names {
              return Err(format!("not a valid source map: a mapping to name {name} of {names}"));
            }
            m.name = name + name_base;
          }
        }
        // A line past u32 (a section far down) is dropped, as the deltas still count.
        if let Some(l) = dst_line {
          m.dst_line = l;
          self.loaded.mappings.push(m);
        }
      }
    }
    Ok(())
  }

  fn add_content(&mut self, raw: &RawMap, src_base: u32) -> Result<(), String> {
    let Some(content) = raw.sources_content else {
      return Ok(());
    };
    if content.get() == "null" {
      return Ok(());
    }
    self.had_content = true;
    if !self.keep_content || self.content_over {
      return Ok(());
    }
    let sources = self.loaded.sources.len();
    self.ranges.resize(src_base as usize, None);
    let mut i = src_base as usize;
    let result = each::<Item>(content, "sourcesContent", |item| {
      if i >= sources {
        return Ok(()); // more texts than sources: the rest are for no source
      }
      i += 1;
      let range = match item {
        Item::Str(s) => {
          if self.content.len() + s.len() > self.content_limit {
            return Err(String::new());
          }
          let start = self.content.len() as u32;
          self.content.push_str(&s);
          Some((start, self.content.len() as u32))
        }
        _ => None,
      };
      self.ranges.push(range);
      Ok(())
    });
    match result {
      Ok(()) => Ok(()),
      // Over its bound: the map is used without its sources' text.
      Err(reason) if reason.is_empty() => {
        self.content_over = true;
        self.content = String::new();
        self.ranges = Vec::new();
        Ok(())
      }
      Err(reason) => Err(reason),
    }
  }
}

/// Base64 digit values (-1: not one).
const B64: [i8; 256] = {
  let mut t = [-1i8; 256];
  let digits = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  let mut i = 0;
  while i < 64 {
    t[digits[i] as usize] = i as i8;
    i += 1;
  }
  t
};

/// The VLQ values of one segment into `out`: how many (at most 5, else an error).
fn vlq(segment: &str, out: &mut [i64; 5]) -> Result<usize, String> {
  let mut n = 0;
  let mut value = 0i64;
  let mut shift = 0u32;
  for b in segment.bytes() {
    let digit = B64[b as usize];
    if digit < 0 {
      return Err(format!("not a valid source map: {:?} in its mappings", b as char));
    }
    let digit = i64::from(digit);
    if shift > 60 {
      return Err("not a valid source map: a mapping value too large".into());
    }
    value |= (digit & 31) << shift;
    shift += 5;
    if digit & 32 == 0 {
      if n == 5 {
        return Err("not a valid source map: a mapping of more than 5 fields".into());
      }
      let magnitude = value >> 1;
      out[n] = if value & 1 == 1 { -magnitude } else { magnitude };
      n += 1;
      value = 0;
      shift = 0;
    }
  }
  if shift != 0 {
    return Err("not a valid source map: a mapping value cut short".into());
  }
  Ok(n)
}
