//! Finding a script's source map on this machine: the script's last
//! `//# sourceMappingURL=` comment (a file next to it, a path, a `file://` URL or an inline
//! `data:` URL), else a `.map` file beside it; and the `file://` URL and path forms of
//! the places involved. Everything read is bounded (`super::limits`); a map that cannot
//! be had is a reason, never a panic or an error that reaches the trace.

use super::limits;
use std::fs;
use std::io::{Read, Seek, SeekFrom};
use std::path::{Component, Path, PathBuf};
use std::time::SystemTime;

/// Where a map's relative `sources` resolve from: the directory of the map file (or of
/// the script, for an inline or runtime map).
#[derive(Debug, Clone)]
pub(crate) struct Base {
  pub dir: PathBuf,
}

/// A file's identity for the cache: its size and modification time.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Stamp {
  pub len: u64,
  pub modified: Option<SystemTime>,
}

impl Stamp {
  pub fn of(meta: &fs::Metadata) -> Stamp {
    Stamp {
      len: meta.len(),
      modified: meta.modified().ok(),
    }
  }

  /// The stamp of a regular file at `path` now, if it is one.
  pub fn now(path: &Path) -> Option<Stamp> {
    fs::metadata(path).ok().filter(|m| m.is_file()).map(|m| Stamp::of(&m))
  }
}

/// A script's source map, found and read (not parsed yet).
pub(crate) struct Found {
  pub json: Vec<u8>,
  pub base: Base,
  /// `file://` URL of the map file, or `inline`.
  pub origin: String,
  /// The map file and its stamp (none for an inline map).
  pub map_file: Option<(PathBuf, Stamp)>,
}

pub(crate) enum Lookup {
  NoMap,
  Map(Found),
  Failed(String),
}

fn mib(n: u64) -> String {
  format!("{:.1} MiB", n as f64 / (1u64 << 20) as f64)
}

/// The script's source map, if it names one or has one beside it.
pub(crate) fn find_on_disk(script: &Path, len: u64) -> Lookup {
  let dir = script.parent().map_or_else(|| PathBuf::from("/"), Path::to_path_buf);
  let annotation = match read_annotation(script, len) {
    Ok(a) => a,
    Err(reason) => return Lookup::Failed(reason),
  };
  let Some(url) = annotation else {
    // No comment: a map beside the script (esbuild's `--sourcemap=external`, webpack's
    // hidden source maps).
    let mut beside = script.as_os_str().to_owned();
    beside.push(".map");
    let beside = PathBuf::from(beside);
    return match Stamp::now(&beside) {
      Some(_) => read_map_file(&beside),
      None => Lookup::NoMap,
    };
  };
  if let Some(rest) = url.strip_prefix("data:") {
    return match decode_data_url(rest) {
      Ok(json) => Lookup::Map(Found {
        json,
        base: Base { dir },
        origin: "inline".into(),
        map_file: None,
      }),
      Err(reason) => Lookup::Failed(reason),
    };
  }
  let path = match map_path(&url, &dir) {
    Ok(p) => p,
    Err(reason) => return Lookup::Failed(reason),
  };
  read_map_file(&path)
}

/// Where a `sourceMappingURL` that is not a data URL points, as a path.
fn map_path(url: &str, dir: &Path) -> Result<PathBuf, String> {
  let plain = url.split(['?', '#']).next().unwrap_or("");
  if plain.starts_with("file:") {
    return file_url_to_path(plain).ok_or_else(|| format!("the source map URL {url} is not a local file"));
  }
  if has_scheme(plain) {
    return Err(format!("the source map is at {url}, not a file (not fetched)"));
  }
  let decoded = percent_decode(plain);
  let rel = Path::new(std::ffi::OsStr::new(bytes_as_os(&decoded)));
  Ok(normalize(&dir.join(rel)))
}

fn read_map_file(path: &Path) -> Lookup {
  let url = path_to_file_url(path);
  let meta = match fs::metadata(path) {
    Ok(m) if m.is_file() => m,
    Ok(_) => return Lookup::Failed(format!("the source map {url} is not a file")),
    Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
      return Lookup::Failed(format!("the source map {url} is not there"))
    }
    Err(e) => return Lookup::Failed(format!("the source map {url} cannot be read: {e}")),
  };
  if meta.len() > limits::MAP_BYTES {
    return Lookup::Failed(format!(
      "the source map {url} is {}; maps are read up to {}",
      mib(meta.len()),
      mib(limits::MAP_BYTES)
    ));
  }
  let mut json = Vec::with_capacity(meta.len() as usize);
  let read = fs::File::open(path).and_then(|f| f.take(limits::MAP_BYTES + 1).read_to_end(&mut json));
  if let Err(e) = read {
    return Lookup::Failed(format!("the source map {url} cannot be read: {e}"));
  }
  if json.len() as u64 > limits::MAP_BYTES {
    return Lookup::Failed(format!(
      "the source map {url} grew past {} while read",
      mib(limits::MAP_BYTES)
    ));
  }
  Lookup::Map(Found {
    json,
    base: Base {
      dir: path.parent().map_or_else(|| PathBuf::from("/"), Path::to_path_buf),
    },
    origin: url,
    map_file: Some((path.to_path_buf(), Stamp::of(&meta))),
  })
}

/// The script's `sourceMappingURL`, from its end: the last `//# sourceMappingURL=` (or
/// `//@`, or `/*# … */`) comment line, skipping blank lines and other comment lines after
/// it; a line of code after it means none. Only the script's last `TAIL_BYTES` are read,
/// unless its last line starts before them (an inline map): then the whole script, up to
/// `SCRIPT_BYTES`.
fn read_annotation(script: &Path, len: u64) -> Result<Option<String>, String> {
  if len == 0 {
    return Ok(None);
  }
  let read = |from: u64, n: u64| -> std::io::Result<Vec<u8>> {
    let mut f = fs::File::open(script)?;
    f.seek(SeekFrom::Start(from))?;
    let mut buf = Vec::with_capacity(n as usize);
    f.take(n).read_to_end(&mut buf)?;
    Ok(buf)
  };
  let io = |e: std::io::Error| format!("the script cannot be read: {e}");
  let n = len.min(limits::TAIL_BYTES);
  let tail = read(len - n, n).map_err(io)?;
  match annotation(&tail, n == len) {
    Scan::Found(url) => Ok(Some(url)),
    Scan::None => Ok(None),
    Scan::Truncated => {
      if len > limits::SCRIPT_BYTES {
        // A long last line: an inline map if it looks like base64, else minified code.
        let base64 = tail
          .iter()
          .rev()
          .skip_while(|b| b.is_ascii_whitespace())
          .take(4096)
          .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'+' | b'/' | b'='));
        return if base64 {
          Err(format!(
            "the script is {}; a script with an inline map is read up to {}",
            mib(len),
            mib(limits::SCRIPT_BYTES)
          ))
        } else {
          Ok(None)
        };
      }
      let all = read(0, len).map_err(io)?;
      Ok(match annotation(&all, true) {
        Scan::Found(url) => Some(url),
        _ => None,
      })
    }
  }
}

#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Scan {
  Found(String),
  None,
  /// The last line that matters starts before `text` (which is a file's tail).
  Truncated,
}

/// Scans `text` (a script, or its tail when `whole` is false) from its end for the
/// `sourceMappingURL` comment.
pub(crate) fn annotation(text: &[u8], whole: bool) -> Scan {
  let mut end = text.len();
  loop {
    // The line ending at `end`: back to the previous line terminator.
    let start = text[..end]
      .iter()
      .rposition(|&b| b == b'\n' || b == b'\r')
      .map(|i| i + 1);
    let line_start = start.unwrap_or(0);
    let line = &text[line_start..end];
    let trimmed = trim_ascii(line);
    if start.is_none() && !whole && !trimmed.is_empty() {
      return Scan::Truncated;
    }
    if !trimmed.is_empty() {
      if let Some(url) = comment_url(trimmed) {
        return Scan::Found(url);
      }
      if !(trimmed.starts_with(b"//") || (trimmed.starts_with(b"/*") && trimmed.ends_with(b"*/"))) {
        return Scan::None; // code after any comment: no map
      }
    }
    match start {
      Some(s) => end = s - 1,
      None => return Scan::None,
    }
  }
}

fn trim_ascii(mut s: &[u8]) -> &[u8] {
  while let [first, rest @ ..] = s {
    if first.is_ascii_whitespace() {
      s = rest;
    } else {
      break;
    }
  }
  while let [rest @ .., last] = s {
    if last.is_ascii_whitespace() {
      s = rest;
    } else {
      break;
    }
  }
  s
}

/// The URL of a `//# sourceMappingURL=URL` (or `//@`, `/*# … */`) comment line.
fn comment_url(line: &[u8]) -> Option<String> {
  let (body, block) = if let Some(rest) = line.strip_prefix(b"//") {
    (rest, false)
  } else {
    (line.strip_prefix(b"/*")?.strip_suffix(b"*/")?, true)
  };
  let body = body.strip_prefix(b"#").or_else(|| body.strip_prefix(b"@"))?;
  let body = trim_ascii(body).strip_prefix(b"sourceMappingURL=")?;
  let url = trim_ascii(body);
  if url.is_empty() || url.iter().any(|b| b.is_ascii_whitespace()) || (!block && url.contains(&b'"')) {
    return None;
  }
  std::str::from_utf8(url).ok().map(str::to_owned)
}

/// The JSON of a `data:` URL (what follows `data:`): `application/json` (any
/// `charset` parameter), base64 or percent-encoded.
pub(crate) fn decode_data_url(rest: &str) -> Result<Vec<u8>, String> {
  let (meta, data) = rest.split_once(',').ok_or("an inline source map URL without data")?;
  let mut params = meta.split(';');
  let mime = params.next().unwrap_or("").trim().to_ascii_lowercase();
  if mime != "application/json" && mime != "text/json" && !mime.is_empty() {
    return Err(format!("an inline source map of type {mime}"));
  }
  let base64 = params.any(|p| p.trim().eq_ignore_ascii_case("base64"));
  let limit = if base64 {
    limits::MAP_BYTES.div_ceil(3) * 4 + 4
  } else {
    limits::MAP_BYTES * 3
  };
  if data.len() as u64 > limit {
    return Err(format!(
      "the inline source map is {}; maps are read up to {}",
      mib(data.len() as u64 * if base64 { 3 } else { 1 } / if base64 { 4 } else { 1 }),
      mib(limits::MAP_BYTES)
    ));
  }
  if base64 {
    let cleaned: Vec<u8> = data.bytes().filter(|b| !b.is_ascii_whitespace()).collect();
    let unpadded = cleaned
      .strip_suffix(b"==")
      .or_else(|| cleaned.strip_suffix(b"="))
      .unwrap_or(&cleaned);
    data_encoding::BASE64_NOPAD
      .decode(unpadded)
      .map_err(|e| format!("an inline source map that is not base64: {e}"))
  } else {
    Ok(percent_decode(data))
  }
}

fn has_scheme(s: &str) -> bool {
  let mut chars = s.chars();
  chars.next().is_some_and(|c| c.is_ascii_alphabetic())
    && s.find(':').is_some_and(|colon| {
      s[..colon]
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'))
    })
}

/// `%XX` decoded (a malformed escape is kept as it is).
pub(crate) fn percent_decode(s: &str) -> Vec<u8> {
  let b = s.as_bytes();
  let mut out = Vec::with_capacity(b.len());
  let mut i = 0;
  while i < b.len() {
    if b[i] == b'%' && i + 2 < b.len() {
      let hex = |c: u8| (c as char).to_digit(16);
      if let (Some(h), Some(l)) = (hex(b[i + 1]), hex(b[i + 2])) {
        out.push((h * 16 + l) as u8);
        i += 3;
        continue;
      }
    }
    out.push(b[i]);
    i += 1;
  }
  out
}

#[cfg(unix)]
fn bytes_as_os(b: &[u8]) -> &std::ffi::OsStr {
  use std::os::unix::ffi::OsStrExt;
  std::ffi::OsStr::from_bytes(b)
}

#[cfg(not(unix))]
fn bytes_as_os(b: &[u8]) -> &std::ffi::OsStr {
  std::ffi::OsStr::new(std::str::from_utf8(b).unwrap_or(""))
}

#[cfg(unix)]
fn os_bytes(p: &Path) -> &[u8] {
  use std::os::unix::ffi::OsStrExt;
  p.as_os_str().as_bytes()
}

#[cfg(not(unix))]
fn os_bytes(p: &Path) -> &[u8] {
  p.to_str().unwrap_or("").as_bytes()
}

/// The path of a `file://` URL (empty host or `localhost`), percent-decoded; `None` for
/// another host or scheme.
pub(crate) fn file_url_to_path(url: &str) -> Option<PathBuf> {
  let rest = url.strip_prefix("file://")?;
  let rest = rest.split(['?', '#']).next().unwrap_or("");
  let path = if rest.starts_with('/') {
    rest
  } else {
    rest.strip_prefix("localhost")?
  };
  if !path.starts_with('/') {
    return None;
  }
  let decoded = percent_decode(path);
  if decoded.contains(&0) {
    return None;
  }
  Some(PathBuf::from(bytes_as_os(&decoded)))
}

/// A path's `file://` URL, percent-encoded as Node's `pathToFileURL` does.
pub(crate) fn path_to_file_url(path: &Path) -> String {
  const HEX: &[u8; 16] = b"0123456789ABCDEF";
  let bytes = os_bytes(path);
  let mut url = String::with_capacity(7 + bytes.len());
  url.push_str("file://");
  for &b in bytes {
    if b.is_ascii_alphanumeric() || b"-._/;=@:!$&'()*+,".contains(&b) {
      url.push(b as char);
    } else {
      url.push('%');
      url.push(HEX[usize::from(b >> 4)] as char);
      url.push(HEX[usize::from(b & 15)] as char);
    }
  }
  url
}

/// `.` and `..` taken out, lexically (no file system access: the files may not exist).
pub(crate) fn normalize(path: &Path) -> PathBuf {
  let mut out = PathBuf::from("/");
  for c in path.components() {
    match c {
      Component::RootDir | Component::CurDir | Component::Prefix(_) => {}
      Component::ParentDir => {
        out.pop();
      }
      Component::Normal(part) => out.push(part),
    }
  }
  out
}

/// A map's `sources` entry (with `sourceRoot` applied) as an absolute URL: relative ones
/// and absolute paths become `file://` URLs (resolved against the map's directory); URLs
/// with a scheme stay as they are (`webpack://…`), but `file://` ones are normalized.
pub(crate) fn resolve_source(source: &str, base: &Base) -> String {
  if source.starts_with("file:") {
    return file_url_to_path(source).map_or_else(|| source.to_owned(), |p| path_to_file_url(&normalize(&p)));
  }
  if has_scheme(source) {
    return source.to_owned();
  }
  let plain = source.split(['?', '#']).next().unwrap_or("");
  let decoded = percent_decode(plain);
  let rel = Path::new(bytes_as_os(&decoded));
  path_to_file_url(&normalize(&base.dir.join(rel)))
}
