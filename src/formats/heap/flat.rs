//! A sampling heap profile, flattened: V8's allocation tree as a list of nodes, parents
//! before children, node 0 the root, each with its frame and the bytes and objects of its
//! live sampled allocations. It reaches Rust in one of two forms:
//!
//! - JSON (`from_json`), which `lib/capture/heap.js` flattens from the inspector's
//!   `getSamplingProfile`: `{ nodes: [{ parent, name, url, line, column, selfSize }],
//!   samples: [nodeIndex, size, ...], interval }` (the objects are counted from the samples);
//! - binary (`from_binary`), which `capture::heap_profile` writes (`HeapWriter`) from
//!   V8's C++ API with no JSON at all: a name table and fixed-size nodes, each script named
//!   by its index in a list passed beside (the scripts' URLs, which JS makes from V8's
//!   names as it does for the JSON form).
//!
//! The binary form is little-endian: `SPH1`, the name count and each name (length, UTF-8),
//! the node count and each node: parent (i32, -1 for the root), name index (u32), script
//! index (i32, -1 for none), line and column (i32, 0-based, -1 for none), bytes and
//! objects (f64).

use super::super::ConvertError;
use serde::Deserialize;
use std::collections::HashMap;

const MAGIC: &[u8; 4] = b"SPH1";
const NODE_LEN: usize = 4 * 5 + 8 * 2;

/// One node: its frame (`name` and `url` index `FlatHeap::strings`) and what it holds.
#[derive(Debug, Clone, PartialEq)]
pub struct FlatNode {
  pub parent: i64,
  pub name: u32,
  pub url: Option<u32>,
  /// 0-based, -1 for none (as the inspector gives them).
  pub line: i64,
  pub column: i64,
  /// The bytes of its live sampled objects, scaled to stand for every allocation.
  pub bytes: f64,
  /// The objects those stand for.
  pub objects: f64,
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct FlatHeap {
  pub strings: Vec<String>,
  pub nodes: Vec<FlatNode>,
}

fn bad(why: impl std::fmt::Display) -> ConvertError {
  ConvertError(format!("not a sampling heap profile: {why}"))
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct JsonNode {
  parent: i64,
  #[serde(default)]
  name: String,
  #[serde(default)]
  url: String,
  #[serde(default = "minus_one")]
  line: i64,
  #[serde(default = "minus_one")]
  column: i64,
  #[serde(default)]
  self_size: f64,
}

fn minus_one() -> i64 {
  -1
}

#[derive(Deserialize)]
struct JsonHeap {
  nodes: Vec<JsonNode>,
  #[serde(default)]
  samples: Vec<f64>,
  interval: f64,
}

/// Interns strings into a `FlatHeap`'s table.
#[derive(Default)]
struct Strings {
  table: Vec<String>,
  ids: HashMap<String, u32>,
}

impl Strings {
  fn id(&mut self, s: String) -> u32 {
    if let Some(&id) = self.ids.get(&s) {
      return id;
    }
    let id = self.table.len() as u32;
    self.ids.insert(s.clone(), id);
    self.table.push(s);
    id
  }
}

impl FlatHeap {
  /// The JSON form. A node's objects are counted from its samples (V8's scaling); its
  /// bytes are V8's `selfSize`, or the samples' if V8 gave none.
  pub fn from_json(json: &str) -> Result<FlatHeap, ConvertError> {
    let heap: JsonHeap = serde_json::from_str(json).map_err(bad)?;
    let n = heap.nodes.len();
    let mut objects = vec![0f64; n];
    let mut sampled_bytes = vec![0f64; n];
    for pair in heap.samples.chunks_exact(2) {
      let (node, size) = (pair[0], pair[1]);
      if !(node >= 0.0 && (node as usize) < n && size.is_finite()) {
        return Err(bad(format!("a sample names node {node} of {n}")));
      }
      let k = super::scale(size, heap.interval);
      objects[node as usize] += k;
      sampled_bytes[node as usize] += k * size;
    }
    let mut strings = Strings::default();
    let nodes = heap
      .nodes
      .into_iter()
      .enumerate()
      .map(|(i, node)| FlatNode {
        parent: node.parent,
        name: strings.id(node.name),
        url: (!node.url.is_empty()).then(|| strings.id(node.url)),
        line: node.line,
        column: node.column,
        bytes: if node.self_size > 0.0 && node.self_size.is_finite() {
          node.self_size
        } else {
          sampled_bytes[i]
        },
        objects: objects[i],
      })
      .collect();
    Ok(FlatHeap {
      strings: strings.table,
      nodes,
    })
  }

  /// The binary form `HeapWriter` wrote, its script indices naming `urls` (an empty URL:
  /// no script).
  pub fn from_binary(bytes: &[u8], urls: &[String]) -> Result<FlatHeap, ConvertError> {
    let mut r = Reader { bytes, at: 0 };
    if r.take(4)? != MAGIC {
      return Err(bad("not selfprof's binary form"));
    }
    let names = r.u32()? as usize;
    // Each name takes at least its length's 4 bytes: a count past that is a lie.
    if names > bytes.len() / 4 {
      return Err(bad(format!("{names} names in {} bytes", bytes.len())));
    }
    let mut strings = Vec::with_capacity(names + urls.len());
    for _ in 0..names {
      let len = r.u32()? as usize;
      let text = r.take(len)?;
      strings.push(String::from_utf8_lossy(text).into_owned());
    }
    strings.extend(urls.iter().cloned());
    let count = r.u32()? as usize;
    if count.checked_mul(NODE_LEN) != Some(bytes.len() - r.at) {
      return Err(bad(format!("{count} nodes in {} bytes", bytes.len() - r.at)));
    }
    let mut nodes = Vec::with_capacity(count);
    for _ in 0..count {
      let parent = r.i32()?;
      let name = r.u32()?;
      let script = r.i32()?;
      let (line, column) = (r.i32()?, r.i32()?);
      let (node_bytes, objects) = (r.f64()?, r.f64()?);
      if name as usize >= names {
        return Err(bad(format!("a node names string {name} of {names}")));
      }
      let url = match script {
        -1 => None,
        s if s >= 0 && (s as usize) < urls.len() => {
          (!urls[s as usize].is_empty()).then_some((names + s as usize) as u32)
        }
        s => return Err(bad(format!("a node names script {s} of {}", urls.len()))),
      };
      nodes.push(FlatNode {
        parent: i64::from(parent),
        name,
        url,
        line: i64::from(line),
        column: i64::from(column),
        bytes: node_bytes,
        objects,
      });
    }
    Ok(FlatHeap { strings, nodes })
  }
}

struct Reader<'a> {
  bytes: &'a [u8],
  at: usize,
}

impl<'a> Reader<'a> {
  fn take(&mut self, n: usize) -> Result<&'a [u8], ConvertError> {
    let end = self
      .at
      .checked_add(n)
      .filter(|&e| e <= self.bytes.len())
      .ok_or_else(|| bad("cut short"))?;
    let out = &self.bytes[self.at..end];
    self.at = end;
    Ok(out)
  }
  fn u32(&mut self) -> Result<u32, ConvertError> {
    Ok(u32::from_le_bytes(self.take(4)?.try_into().expect("4 bytes")))
  }
  fn i32(&mut self) -> Result<i32, ConvertError> {
    Ok(i32::from_le_bytes(self.take(4)?.try_into().expect("4 bytes")))
  }
  fn f64(&mut self) -> Result<f64, ConvertError> {
    Ok(f64::from_le_bytes(self.take(8)?.try_into().expect("8 bytes")))
  }
}

/// Writes the binary form, a node at a time (parents first), names interned.
#[derive(Default)]
pub struct HeapWriter {
  ids: HashMap<Vec<u8>, u32>,
  names: Vec<u8>,
  nodes: Vec<u8>,
  node_count: u32,
}

impl HeapWriter {
  /// The index of name `text` (UTF-8), added the first time.
  pub fn name(&mut self, text: &[u8]) -> u32 {
    if let Some(&id) = self.ids.get(text) {
      return id;
    }
    let id = self.ids.len() as u32;
    self.ids.insert(text.to_vec(), id);
    self.names.extend_from_slice(&(text.len() as u32).to_le_bytes());
    self.names.extend_from_slice(text);
    id
  }

  /// Adds a node; returns its index. `script` indexes the URLs passed beside (-1: none).
  #[allow(clippy::too_many_arguments)]
  pub fn node(&mut self, parent: i32, name: u32, script: i32, line: i32, column: i32, bytes: f64, objects: f64) -> i32 {
    for word in [
      parent.to_le_bytes(),
      name.to_le_bytes(),
      script.to_le_bytes(),
      line.to_le_bytes(),
      column.to_le_bytes(),
    ] {
      self.nodes.extend_from_slice(&word);
    }
    self.nodes.extend_from_slice(&bytes.to_le_bytes());
    self.nodes.extend_from_slice(&objects.to_le_bytes());
    self.node_count += 1;
    self.node_count as i32 - 1
  }

  pub fn finish(self) -> Vec<u8> {
    let mut out = Vec::with_capacity(12 + self.names.len() + self.nodes.len());
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&(self.ids.len() as u32).to_le_bytes());
    out.extend_from_slice(&self.names);
    out.extend_from_slice(&self.node_count.to_le_bytes());
    out.extend_from_slice(&self.nodes);
    out
  }
}

#[cfg(test)]
mod tests;
