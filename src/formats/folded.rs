//! Folded stacks (`outer;...;leaf N`), as flamegraph.pl, inferno and speedscope read them.
//!
//! Linear in the output: stacks are merged by frame name into a trie (two frames named
//! alike under one caller are one line), each node's line length is known from its
//! parent's before anything is written (so output a JS string cannot hold is refused
//! first), and the lines are written by one depth-first walk with a running path. Order:
//! samples without a stack first (`(garbage collector)`, `(idle)`, `(program)`, `(root)`),
//! then stacks depth first, callers before callees and siblings by name.

use super::{limits, name, pseudo, too_long, ConvertError};
use crate::formats::pprof::Weight;
use crate::trace::Trace;
use std::collections::{BTreeMap, HashMap};

/// Folded stacks of a trace, one line per distinct stack.
pub fn to_folded(t: &Trace) -> String {
  to_folded_weighted(t, None).unwrap_or_default()
}

/// Folded stacks, each sample counted `weights[i].count` times if given.
pub fn to_folded_weighted(t: &Trace, weights: Option<&[Weight]>) -> Result<String, ConvertError> {
  // A weighted trace (a heap profile): each sample counts its bytes.
  let weight = |i: usize| match &t.weight {
    Some(w) => w.values.get(i).map_or(0, |v| v.max(0.0).round() as u64),
    None => weights.and_then(|w| w.get(i)).map_or(1, |w| w.count.max(0) as u64),
  };
  // Names, ';' made ':' so that it cannot split a line, interned.
  let mut name_ids: HashMap<String, u32> = HashMap::new();
  let mut names: Vec<String> = Vec::new();
  let frame_name: Vec<u32> = (0..t.frames.len() as u32)
    .map(|f| {
      let n = name(t, f).replace(';', ":");
      let next = names.len() as u32;
      *name_ids.entry(n.clone()).or_insert_with(|| {
        names.push(n);
        next
      })
    })
    .collect();
  // The trie: node 0 is the root; `node_of[stack]` its node (parents come before children).
  let mut children: HashMap<(u32, u32), u32> = HashMap::new();
  let mut parent_of: Vec<u32> = vec![0];
  let mut name_of: Vec<u32> = vec![0];
  let mut node_of: Vec<u32> = Vec::with_capacity(t.stacks.len());
  for s in &t.stacks {
    let parent = s.parent_id.map_or(0, |p| node_of[p as usize]);
    let n = frame_name[s.frame_id as usize];
    let next = parent_of.len() as u32;
    let node = *children.entry((parent, n)).or_insert(next);
    if node == next {
      parent_of.push(parent);
      name_of.push(n);
    }
    node_of.push(node);
  }
  let mut count = vec![0u64; parent_of.len()];
  let mut pseudo_counts: BTreeMap<&'static str, u64> = BTreeMap::new();
  for (i, s) in t.samples.iter().enumerate() {
    match s.stack_id {
      Some(id) => count[node_of[id as usize] as usize] += weight(i),
      None => *pseudo_counts.entry(pseudo(s.marker)).or_default() += weight(i),
    }
  }
  // Bytes: a node's path is its parent's, ';', its name; a line adds ' N\n'.
  let mut path_len = vec![0u64; parent_of.len()];
  let mut total: u64 = pseudo_counts
    .iter()
    .map(|(p, n)| p.len() as u64 + 22 + (*n > 0) as u64)
    .sum();
  for node in 1..parent_of.len() {
    let parent = parent_of[node] as usize;
    let sep = (parent != 0) as u64;
    path_len[node] = path_len[parent] + sep + names[name_of[node] as usize].len() as u64;
    if count[node] > 0 {
      total = total.saturating_add(path_len[node] + 22);
    }
  }
  if total > limits::TEXT_BYTES as u64 {
    return Err(too_long("folded output", total));
  }
  // Depth first, siblings by name.
  let mut kids: Vec<Vec<u32>> = vec![Vec::new(); parent_of.len()];
  for node in 1..parent_of.len() {
    kids[parent_of[node] as usize].push(node as u32);
  }
  for k in kids.iter_mut() {
    k.sort_by(|a, b| names[name_of[*a as usize] as usize].cmp(&names[name_of[*b as usize] as usize]));
  }
  let mut out = String::with_capacity(total.min(1 << 24) as usize);
  for (p, n) in &pseudo_counts {
    out.push_str(&format!("{p} {n}\n"));
  }
  let mut path = String::new();
  // (node, path length before it): enter pushes the name, the children follow.
  let mut stack: Vec<(u32, usize)> = kids[0].iter().rev().map(|k| (*k, 0)).collect();
  while let Some((node, before)) = stack.pop() {
    path.truncate(before);
    if before > 0 {
      path.push(';');
    }
    path.push_str(&names[name_of[node as usize] as usize]);
    if count[node as usize] > 0 {
      out.push_str(&path);
      out.push_str(&format!(" {}\n", count[node as usize]));
    }
    let here = path.len();
    stack.extend(kids[node as usize].iter().rev().map(|k| (*k, here)));
  }
  Ok(out)
}
