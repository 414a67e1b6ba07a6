//! The trace handed to JS as columns (`TraceColumns`) rather than one JSON string, and
//! the rule that decides which label values repeat (`KeyValueKind`), which pprof's string
//! table (`formats::pprof`) follows too.

use super::{Context, Frame, LineTicks, Marker, Metadata, Stack, Trace};
use crate::parallel::PARALLEL_CONTEXTS;
use serde::Serialize;
use std::collections::HashMap;

/// The trace in the form JS builds its trace object from without parsing one big JSON
/// string on the event loop: the small tables as JSON, the contexts as columns of their
/// label values in pieces, and the samples as columns.
///
/// A context's labels object is its key set's keys (`key_sets[context_keys[c]]`, in the
/// trace's key order) with, in turn, the values of `value_ends`: a value of its piece
/// ends at the next of them, counted in UTF-16 code units (what JS's `slice` counts)
/// from the piece's start; a negative one `-1 - i` is `shared[i]` instead. JS slices the
/// values out of one string per piece rather than parsing JSON, which costs the event
/// loop far less (benchmark/README.md, "Figures behind comments in src/").
pub struct TraceColumns {
  /// `{ resources, frames, stacks, metadata?, lineTicks?, sourceMaps?, sourceText? }`.
  pub tables: String,
  /// The distinct key lists of the contexts, as JSON: `[["endpoint", "span_id"], ...]`.
  pub key_sets: String,
  /// Per context, the index of its key list in `key_sets`.
  pub context_keys: Vec<u32>,
  /// The contexts' label values, concatenated, in pieces of at most `CONTEXTS_PER_PIECE`
  /// contexts (a piece ends once it passes `PIECE_BYTES`).
  pub values: Vec<String>,
  /// Per value, in context then key order, where it ends in its piece (UTF-16 units),
  /// or `-1 - i` for `shared[i]`.
  pub value_ends: Vec<i32>,
  /// Label values that repeat from context to context (see `SharedValues`), one string each.
  pub shared: Vec<String>,
  /// Per piece, how many contexts it holds.
  pub piece_contexts: Vec<u32>,
  pub timestamp: Vec<f64>,
  /// `stackId`, or -1 for none.
  pub stack: Vec<i32>,
  /// 0: none, 1: gc, 2: idle, 3: other.
  pub marker: Vec<u8>,
  /// `contextId`, or -1 for none.
  pub context: Vec<i32>,
  /// `cpuTime`, or NaN for none.
  pub cpu_time: Vec<f64>,
}

/// Contexts per piece of `TraceColumns` (JS makes one piece's per turn of the event loop): at
/// most this many, and a piece ends once it passes `PIECE_BYTES` (label sets can be large).
pub const CONTEXTS_PER_PIECE: usize = 2048;
pub const PIECE_BYTES: usize = 4 << 20;

/// `TraceColumns`' context columns.
#[derive(Default)]
struct ContextColumns<'a> {
  key_sets: Vec<Vec<&'a str>>,
  context_keys: Vec<u32>,
  values: Vec<String>,
  value_ends: Vec<i32>,
  piece_contexts: Vec<u32>,
  shared: Vec<&'a str>,
}

impl<'a> ContextColumns<'a> {
  fn of(contexts: &'a [Context]) -> ContextColumns<'a> {
    let mut out = ContextColumns {
      context_keys: Vec::with_capacity(contexts.len()),
      ..Default::default()
    };
    let mut key_set_ids: HashMap<Vec<&'a str>, u32> = HashMap::new();
    let mut repeats = SharedValues::default();
    let mut piece = String::new();
    let (mut in_piece, mut piece_units) = (0u32, 0usize);
    for c in contexts {
      // Most contexts have the key set of the one before: no lookup, no allocation.
      let same = out.context_keys.last().is_some_and(|&last| {
        c.labels
          .iter()
          .map(|(k, _)| k)
          .eq(out.key_sets[last as usize].iter().copied())
      });
      let id = if same {
        *out.context_keys.last().unwrap_or(&0)
      } else {
        let keys: Vec<&'a str> = c.labels.iter().map(|(k, _)| k).collect();
        *key_set_ids.entry(keys).or_insert_with_key(|keys| {
          out.key_sets.push(keys.clone());
          (out.key_sets.len() - 1) as u32
        })
      };
      out.context_keys.push(id);
      for (k, v) in c.labels.iter() {
        if let Some(i) = repeats.shared(k, v, &mut out.shared) {
          out.value_ends.push(-1 - i as i32);
          continue;
        }
        piece.push_str(v);
        piece_units += utf16_len(v);
        out.value_ends.push(piece_units as i32);
      }
      in_piece += 1;
      if in_piece as usize == CONTEXTS_PER_PIECE || piece.len() >= PIECE_BYTES {
        out.values.push(std::mem::take(&mut piece));
        out.piece_contexts.push(in_piece);
        (in_piece, piece_units) = (0, 0);
      }
    }
    if in_piece > 0 {
      out.values.push(piece);
      out.piece_contexts.push(in_piece);
    }
    out
  }

  /// Appends the columns of the contexts after these (`later`'s pieces after these ones,
  /// its shared values after these ones: a value both share is then there twice).
  fn append(&mut self, later: ContextColumns<'a>) {
    let ids: Vec<u32> = later
      .key_sets
      .into_iter()
      .map(|keys| match self.key_sets.iter().position(|k| *k == keys) {
        Some(i) => i as u32,
        None => {
          self.key_sets.push(keys);
          (self.key_sets.len() - 1) as u32
        }
      })
      .collect();
    self
      .context_keys
      .extend(later.context_keys.into_iter().map(|id| ids[id as usize]));
    self.values.extend(later.values);
    let past = self.shared.len() as i32;
    self
      .value_ends
      .extend(later.value_ends.into_iter().map(|e| if e < 0 { e - past } else { e }));
    self.shared.extend(later.shared);
    self.piece_contexts.extend(later.piece_contexts);
  }
}

/// Which label values go to JS once, in `TraceColumns::shared`, rather than once per context. A
/// value that repeats (a request's endpoint, method or tenant) is then one JS string for
/// all its contexts but the first, not a string each: fewer objects for V8's scavenges to
/// copy as the trace object is made (benchmark/README.md, "Figures behind comments in
/// src/"). A key whose
/// values are nearly all new (a span id per request) has its values sliced from the
/// piece, as before, and no longer looked up.
#[derive(Default)]
struct SharedValues<'a> {
  /// Per label key (at most `KEYS_TRACKED`, by its text): how its values fare.
  keys: Vec<(&'a str, KeyValueKind)>,
  /// Values seen: their index in `shared`, or `ONCE` (seen once, sliced).
  ids: crate::FastMap<&'a str, u32>,
}

/// How a label key's values fare where each could be looked up in a table of those seen:
/// the first `VALUES_TRIED` are; if nearly all of them were new (a span id per request),
/// the key's values are unique and no longer looked up (a lookup of ~100k distinct values
/// misses the cache each time), else they repeat and are looked up from then on. pprof's
/// string table (`formats::pprof`) and `TraceColumns::shared` decide alike.
#[derive(Clone, Copy)]
pub(crate) enum KeyValueKind {
  /// Looked up so far: how many, and how many of them were new.
  Trying {
    tried: u32,
    new: u32,
  },
  Repeating,
  Unique,
}

/// A key's values looked up before deciding whether they repeat.
pub(crate) const VALUES_TRIED: u32 = 1024;
/// Past `VALUES_TRIED`, a key with at least this many new values in 1,024 is unique per
/// label set: its values are no longer looked up.
const VALUES_NEW: u32 = 960;

impl KeyValueKind {
  /// A key none of whose values was looked up yet.
  pub(crate) const FIRST: KeyValueKind = KeyValueKind::Trying { tried: 0, new: 0 };

  /// After one more of the key's values was looked up (`new`: not seen before).
  pub(crate) fn after(self, new: bool) -> KeyValueKind {
    let KeyValueKind::Trying { tried, new: fresh } = self else {
      return self;
    };
    let (tried, fresh) = (tried + 1, fresh + u32::from(new));
    match tried {
      VALUES_TRIED if fresh >= VALUES_NEW => KeyValueKind::Unique,
      VALUES_TRIED => KeyValueKind::Repeating,
      _ => KeyValueKind::Trying { tried, new: fresh },
    }
  }
}

const ONCE: u32 = u32::MAX;
/// Label keys whose values are considered for sharing (the rest are sliced).
const KEYS_TRACKED: usize = 32;
/// At most this many values remembered; later new ones are sliced.
const VALUES_SEEN: usize = 1 << 16;

impl<'a> SharedValues<'a> {
  /// The index in `shared` of value `v` of key `k`, if it goes there: from its second
  /// context on.
  fn shared(&mut self, k: &'a str, v: &'a str, shared: &mut Vec<&'a str>) -> Option<u32> {
    // The keys of a kept label set are the store's interned strings: the same address.
    let slot = match self
      .keys
      .iter()
      .position(|(key, _)| (std::ptr::eq(key.as_ptr(), k.as_ptr()) && key.len() == k.len()) || *key == k)
    {
      Some(slot) => slot,
      None if self.keys.len() < KEYS_TRACKED => {
        self.keys.push((k, KeyValueKind::FIRST));
        self.keys.len() - 1
      }
      None => return None,
    };
    let state = self.keys[slot].1;
    if let KeyValueKind::Unique = state {
      return None;
    }
    let seen = self.ids.len() < VALUES_SEEN;
    let (id, new) = match self.ids.get_mut(v) {
      Some(id) if *id == ONCE => {
        *id = shared.len() as u32;
        shared.push(v);
        (Some(*id), false)
      }
      Some(id) => (Some(*id), false),
      None => {
        if seen {
          self.ids.insert(v, ONCE);
        }
        (None, true)
      }
    };
    self.keys[slot].1 = state.after(new);
    id
  }
}

/// The length of `s` in UTF-16 code units.
fn utf16_len(s: &str) -> usize {
  if s.is_ascii() {
    s.len()
  } else {
    s.chars().map(char::len_utf16).sum()
  }
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Tables<'a> {
  resources: &'a [String],
  frames: &'a [Frame],
  stacks: &'a [Stack],
  #[serde(skip_serializing_if = "Option::is_none")]
  metadata: Option<&'a Metadata>,
  #[serde(skip_serializing_if = "<[LineTicks]>::is_empty")]
  line_ticks: &'a [LineTicks],
  #[serde(skip_serializing_if = "Option::is_none")]
  source_maps: Option<&'a crate::symbolize::SourceMapsInfo>,
  #[serde(skip_serializing_if = "Option::is_none")]
  source_text: Option<&'a crate::symbolize::SourceText>,
}

impl Trace {
  /// The trace as `TraceColumns`. With many contexts, half of them have their columns made
  /// on a thread of their own: reading label sets stored seconds earlier misses the cache.
  pub fn columns(&self) -> TraceColumns {
    let tables = Tables {
      resources: &self.resources,
      frames: &self.frames,
      stacks: &self.stacks,
      metadata: self.metadata.as_ref(),
      line_ticks: &self.line_ticks,
      source_maps: self.source_maps.as_ref(),
      source_text: self.source_text.as_ref(),
    };
    // Serializing plain structs of strings and numbers cannot fail.
    let tables = serde_json::to_string(&tables).unwrap_or_default();
    let contexts = if self.contexts.len() >= PARALLEL_CONTEXTS {
      // Split at a piece's end, so that each half's pieces are whole.
      let mid = self.contexts.len() / 2 / CONTEXTS_PER_PIECE * CONTEXTS_PER_PIECE;
      let (first, second) = self.contexts.split_at(mid);
      let (mut columns, rest) = crate::parallel::both(
        || ContextColumns::of(first),
        "selfprof-parts",
        || ContextColumns::of(second),
      );
      columns.append(rest);
      columns
    } else {
      ContextColumns::of(&self.contexts)
    };
    let n = self.samples.len();
    let mut p = TraceColumns {
      tables,
      key_sets: serde_json::to_string(&contexts.key_sets).unwrap_or_default(),
      context_keys: contexts.context_keys,
      values: contexts.values,
      value_ends: contexts.value_ends,
      shared: contexts.shared.into_iter().map(str::to_owned).collect(),
      piece_contexts: contexts.piece_contexts,
      timestamp: Vec::with_capacity(n),
      stack: Vec::with_capacity(n),
      marker: Vec::with_capacity(n),
      context: Vec::with_capacity(n),
      cpu_time: Vec::with_capacity(n),
    };
    for s in &self.samples {
      p.timestamp.push(s.timestamp);
      p.stack.push(s.stack_id.map_or(-1, |id| id as i32));
      p.marker.push(match s.marker {
        None => 0,
        Some(Marker::Gc) => 1,
        Some(Marker::Idle) => 2,
        Some(Marker::Other) => 3,
      });
      p.context.push(s.context_id.map_or(-1, |id| id as i32));
      p.cpu_time.push(s.cpu_time.unwrap_or(f64::NAN));
    }
    p
  }
}

#[cfg(test)]
mod tests;
