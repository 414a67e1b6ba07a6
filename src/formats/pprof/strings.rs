//! The profile's string table, and each context's labels interned in it (on two threads
//! for many contexts).

use super::{Dialect, Label};
use crate::parallel::PARALLEL_CONTEXTS;
use crate::trace::columns::{KeyValueKind, VALUES_TRIED};
use crate::trace::Context;
use std::borrow::Cow;

/// The string table being built. Strings the trace holds are borrowed, not copied (a
/// recording with a span id per request has as many distinct strings as label sets).
pub(crate) struct Strings<'a> {
  table: Vec<Cow<'a, str>>,
  ids: crate::FastMap<Cow<'a, str>, i64>,
  /// Per label key (its string id): whether its values are looked up (see `value_id`).
  values: crate::FastMap<i64, KeyValueKind>,
  /// Label keys seen last, by where their text is, and their ids (see `key_id`).
  recent_keys: Vec<(usize, usize, i64)>,
}

/// Label keys `key_id` remembers by address.
const RECENT_KEYS: usize = 16;

impl<'a> Strings<'a> {
  /// Room for `n` strings, `looked_up` of them in the lookup map (values appended
  /// without a lookup need none).
  pub(crate) fn with_capacities(n: usize, looked_up: usize) -> Self {
    let mut s = Strings {
      table: Vec::with_capacity(n),
      ids: crate::FastMap::with_capacity_and_hasher(looked_up.min(n), Default::default()),
      values: Default::default(),
      recent_keys: Vec::new(),
    };
    s.id("");
    s
  }

  pub(crate) fn new() -> Self {
    Self::with_capacities(16, 16)
  }

  /// Appends `other`'s strings but its first (`""`, id 0, which both tables have) to this
  /// table; returns what an id of `other` is in this one. They are not looked up here
  /// again: one asked for after may be added a second time.
  fn append(&mut self, other: Strings<'a>) -> impl Fn(i64) -> i64 {
    let past = self.table.len() as i64 - 1;
    self.table.extend(other.table.into_iter().skip(1));
    move |id| if id == 0 { 0 } else { id + past }
  }

  /// The table, owned (for a prost message).
  pub(crate) fn into_table(self) -> Vec<String> {
    self.owned()
  }

  pub(crate) fn id(&mut self, s: impl Into<Cow<'a, str>>) -> i64 {
    let s = s.into();
    if let Some(id) = self.ids.get(s.as_ref()) {
      return *id;
    }
    let id = self.table.len() as i64;
    self.ids.insert(s.clone(), id);
    self.table.push(s);
    id
  }

  /// The id of a label key. A kept label set's keys are the label store's interned ones,
  /// so ~100k contexts name the same few keys at the same addresses: those are
  /// recognized by address (the same bytes, borrowed for as long as the table), not
  /// hashed again.
  pub(crate) fn key_id(&mut self, k: Cow<'a, str>) -> i64 {
    let Cow::Borrowed(text) = k else {
      return self.id(k);
    };
    let at = (text.as_ptr() as usize, text.len());
    if let Some(&(_, _, id)) = self.recent_keys.iter().find(|r| (r.0, r.1) == at) {
      return id;
    }
    let id = self.id(text);
    if self.recent_keys.len() < RECENT_KEYS {
      self.recent_keys.push((at.0, at.1, id));
    }
    id
  }

  /// The id of a label's value under key `key` (a string id). A key whose values are
  /// nearly all distinct, such as a span id per request, gets its values appended to the
  /// table without a lookup: the lookup of ~100k distinct values in a table of that size
  /// misses the cache each time, and was the largest part of a labeled stop's encoding.
  /// A value repeated under such a key is stored twice; the profile means the same.
  pub(crate) fn value_id(&mut self, key: i64, v: impl Into<Cow<'a, str>>) -> i64 {
    let state = self.values.get(&key).copied().unwrap_or(KeyValueKind::FIRST);
    match state {
      KeyValueKind::Repeating => return self.id(v),
      KeyValueKind::Unique => {
        self.table.push(v.into());
        return self.table.len() as i64 - 1;
      }
      KeyValueKind::Trying { .. } => {}
    }
    let before = self.table.len();
    let id = self.id(v);
    self.values.insert(key, state.after(self.table.len() > before));
    id
  }

  /// The table as prost's field holds it.
  pub(super) fn owned(&self) -> Vec<String> {
    self.table.iter().map(|s| s.to_string()).collect()
  }

  /// Writes the table as `Profile.string_table` (field 6) entries.
  pub(super) fn encode(&self, buf: &mut Vec<u8>) {
    for s in &self.table {
      prost::encoding::encode_key(6, prost::encoding::WireType::LengthDelimited, buf);
      prost::encoding::encode_varint(s.len() as u64, buf);
      buf.extend_from_slice(s.as_bytes());
    }
  }
}

/// Each context's labels as the dialect names them, interned in `strings`: one array, and
/// each context's range in it. Many contexts (a span id per request: nearly one per
/// sample, most of their cost a cache miss per label set) are split in two:
/// the second half is interned on a second thread into a table of its own, appended to
/// `strings` after, its ids moved past the first's (the event loop's thread waits for the
/// build meanwhile, so the core is otherwise idle). A string both
/// halves use is then in the table twice (a request's endpoint, say); the profile means
/// the same. `count`: how many labels the contexts hold (the room to make: counting
/// them again would read every label set once more).
pub(super) fn intern_labels<'a>(
  contexts: &'a [Context],
  count: usize,
  dialect: &Dialect,
  strings: &mut Strings<'a>,
) -> (Vec<Label>, Vec<(u32, u32)>) {
  // Room for all of them (a second half's are appended): no copy as they grow.
  let mut labels = Vec::with_capacity(count);
  let mut ranges = Vec::with_capacity(contexts.len());
  if contexts.len() < PARALLEL_CONTEXTS {
    intern_labels_into(contexts, dialect, strings, &mut labels, &mut ranges);
    return (labels, ranges);
  }
  let (first, second) = contexts.split_at(contexts.len() / 2);
  // The second half's labels, ranges and strings (a table of its own, ~a value per set).
  let second_half = || {
    let mut own = Strings::with_capacities(second.len() + 16, 16 + VALUES_TRIED as usize);
    let (mut labels, mut ranges) = (Vec::with_capacity(count / 2 + 16), Vec::with_capacity(second.len()));
    intern_labels_into(second, dialect, &mut own, &mut labels, &mut ranges);
    (labels, ranges, own)
  };
  let ((), later) = crate::parallel::both(
    || intern_labels_into(first, dialect, strings, &mut labels, &mut ranges),
    "selfprof-labels",
    second_half,
  );
  let (later_labels, later_ranges, later_strings) = later;
  let moved = strings.append(later_strings);
  let at = labels.len() as u32;
  labels.extend(later_labels.into_iter().map(|l| Label {
    key: moved(l.key),
    str: moved(l.str),
    num: l.num,
    num_unit: moved(l.num_unit),
  }));
  ranges.extend(later_ranges.into_iter().map(|(a, b)| (a + at, b + at)));
  (labels, ranges)
}

/// Appends each context's labels to `labels`, and its range in them to `ranges`.
fn intern_labels_into<'a>(
  contexts: &'a [Context],
  dialect: &Dialect,
  strings: &mut Strings<'a>,
  labels: &mut Vec<Label>,
  ranges: &mut Vec<(u32, u32)>,
) {
  let mut out_labels = Vec::new();
  for c in contexts {
    let start = labels.len() as u32;
    dialect.labels_into(&c.labels, &mut out_labels);
    labels.extend(out_labels.drain(..).map(|l| l.encode(strings)));
    ranges.push((start, labels.len() as u32));
  }
}
