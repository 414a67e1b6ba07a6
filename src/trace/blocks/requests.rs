//! A block's requests: its samples' contexts merged by request as `Facts::same_request`
//! tells (one's labels hold all of the other's), each context joining the first request so
//! far that it matches. The candidates come from two indexes instead of every request so
//! far, so that a block of many requests (a long busy stretch of a saturated service, or a
//! trace made to be slow given to the CLI) costs about its samples, not their square.

use super::Facts;
use std::collections::{HashMap, HashSet};

type Pair<'a> = (&'a str, &'a str);

/// Requests compared with one sample's context at most. Real label sets find theirs in one
/// or two (a span id is held by one request); only a trace built to defeat the indexes
/// (many distinct sets of common pairs) gets here, and its context then counts as a request
/// of its own.
const MAX_CHECKS: usize = 256;

pub(super) struct Requests<'f, 'a> {
  f: &'f Facts<'a>,
  /// Per request: the context whose labels stand for it (the fullest so far), and its samples.
  pub(super) entries: Vec<(u32, u32)>,
  /// How many of the block's contexts hold each pair. A set's key is its rarest pair.
  count: HashMap<Pair<'a>, u32>,
  /// Per pair, the requests whose labels hold it, in order: a context whose labels a
  /// request's hold is in its key's list.
  holding: HashMap<Pair<'a>, Vec<usize>>,
  /// Per pair, the requests whose key it is, in order: a request whose labels a context's
  /// hold is in the list of one of the context's pairs.
  keyed: HashMap<Pair<'a>, Vec<usize>>,
}

impl<'f, 'a> Requests<'f, 'a> {
  /// Ready for the samples `indices` (a block's).
  pub(super) fn new(f: &'f Facts<'a>, indices: &[usize]) -> Self {
    let mut count: HashMap<Pair<'a>, u32> = HashMap::new();
    let mut seen = HashSet::new();
    for c in indices.iter().filter_map(|&i| f.request_of(i)) {
      if seen.insert(c) {
        for &p in &f.request[c as usize] {
          *count.entry(p).or_default() += 1;
        }
      }
    }
    Requests {
      f,
      entries: Vec::new(),
      count,
      holding: HashMap::new(),
      keyed: HashMap::new(),
    }
  }

  /// The pair of context `c`'s labels that the fewest of the block's contexts hold (ties by
  /// the pair); none where it names no request.
  fn key(&self, c: u32) -> Option<Pair<'a>> {
    self.f.request[c as usize]
      .iter()
      .min_by_key(|p| (self.count.get(*p).copied().unwrap_or(0), **p))
      .copied()
  }

  /// Counts a sample of context `c`, a request's, to the first request it matches, or to a
  /// new one.
  pub(super) fn add(&mut self, c: u32) {
    let Some(key) = self.key(c) else {
      return;
    };
    let pairs = &self.f.request[c as usize];
    // Every request that matches is in one of these lists: the first in each that matches
    // is that list's earliest, and the earliest of those is the first of all.
    let lists = std::iter::once(self.holding.get(&key)).chain(pairs.iter().map(|p| self.keyed.get(p)));
    let (mut first, mut checks) = (None::<usize>, 0);
    for list in lists.flatten() {
      for &e in list {
        if first.is_some_and(|f| e >= f) || checks == MAX_CHECKS {
          break;
        }
        checks += 1;
        if self.f.same_request(self.entries[e].0, c) {
          first = Some(e);
          break;
        }
      }
    }
    match first {
      Some(e) => {
        self.entries[e].1 += 1;
        // Keep the fuller label set of the two (it holds the other's).
        if pairs.len() > self.f.request[self.entries[e].0 as usize].len() {
          self.entries[e].0 = c;
          self.index(e, key);
        }
      }
      None => {
        self.entries.push((c, 1));
        self.index(self.entries.len() - 1, key);
      }
    }
  }

  /// Lists request `e` under its labels' pairs and their key, `key` (its labels only grow).
  fn index(&mut self, e: usize, key: Pair<'a>) {
    insert_in_order(self.keyed.entry(key).or_default(), e);
    for &p in &self.f.request[self.entries[e].0 as usize] {
      insert_in_order(self.holding.entry(p).or_default(), e);
    }
  }
}

fn insert_in_order(list: &mut Vec<usize>, e: usize) {
  if let Err(at) = list.binary_search(&e) {
    list.insert(at, e);
  }
}
