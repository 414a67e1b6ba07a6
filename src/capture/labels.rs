//! The label sets samples may reference, kept natively (not signal context: JS threads and
//! the trace builders use this, under a mutex).
//!
//! JS publishes a label set's id in its thread's cell; the SIGPROF handler records that id
//! with each sample and tells JS so; JS then saves the set's labels here (`save`), so only
//! sampled sets are kept. A trace build looks the ids of its samples up here: nothing is
//! serialized at stop, and a trace holds exactly the sets its samples reference.
//!
//! - Ids come from one process-wide counter (`reserve_ids`), so copies of the JS module
//!   loaded side by side (jest's registry, hot reload) can never give two sets one id.
//! - Kept sets are bounded by count and by bytes (oldest saved dropped first; a sample
//!   whose set was dropped is counted in the trace's `labelsLostSamples`).
//! - A set is dropped once no unbuilt recording of its thread can reference it: it was
//!   last saved before the oldest unbuilt recording of its thread started.
//! - Sets are encoded one after another into chunks, one thread's at a time (`Chunk`): a
//!   trace build reads ~100k of them in the order they were saved, and holds, then lets
//!   go of, a few chunks rather than a buffer per set.
//! - A kept set can be completed after it was sampled (`amend`: a request's route is known
//!   only once routing ran, after its first samples). Amendments are logged, and a build
//!   looks the sets amended since its recording started up again when it finishes
//!   (`amended_since`), so segments joined earlier get the completed labels too.
//!
//! Just over 600 lines: the store, its encoding and its recordings share one mutex-guarded state, kept together (prefetching is `capture::prefetch`).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};

/// A label set: `(key, value)` pairs, sorted by key.
pub type LabelSet = Vec<(String, String)>;

/// Label sets kept at most, process-wide.
pub const MAX_SETS: usize = 1 << 22;
/// Bytes the kept sets take at most, process-wide (their chunks and bookkeeping):
/// ~1.5M typical `{ endpoint, span_id }` sets, 25 minutes of samples at 1 ms.
pub const MAX_BYTES: usize = 128 << 20;
/// Keys interned at most (a key used by many sets is stored once; past this, inline).
const MAX_KEYS: usize = 4096;
/// What a kept set costs beyond its encoding: its map entry.
const OVERHEAD: usize = 48;
/// A chunk takes sets until it holds this many bytes (one set larger than that has a
/// chunk of its own).
const CHUNK_BYTES: usize = 64 << 10;
/// A chunk's first capacity (it doubles up to `CHUNK_BYTES`).
const FIRST_CHUNK_BYTES: usize = 1 << 10;

/// The next label-set id to hand out (0 means "no labels").
static NEXT_ID: AtomicU32 = AtomicU32::new(1);

/// Ids stay below this: a JS store's id is then a Smi, which the signal handler reads
/// from the store object in place (`signal::frame_context`).
pub const ID_LIMIT: u32 = 1 << 31;

/// Reserves `count` consecutive ids and returns the first. After 2³¹ − 1 ids the counter
/// wraps to 1 (a set is kept for seconds to minutes; ids come back after billions).
pub fn reserve_ids(count: u32) -> u32 {
  let count = count.clamp(1, 1 << 20);
  let mut first = NEXT_ID.load(Ordering::Relaxed);
  loop {
    let (start, next) = match first.checked_add(count) {
      Some(next) if first != 0 && next <= ID_LIMIT => (first, next),
      _ => (1, 1 + count),
    };
    match NEXT_ID.compare_exchange_weak(first, next, Ordering::Relaxed, Ordering::Relaxed) {
      Ok(_) => return start,
      Err(seen) => first = seen,
    }
  }
}

/// A kept set: where its labels are encoded (`Keys::encode`), a few times smaller than a
/// vector of strings (docs/performance.md gives a typical set's size).
#[derive(Clone, Copy)]
struct Saved {
  chunk: u32,
  at: u32,
  len: u32,
  tid: i32,
  saved_ns: u64,
}

/// Encoded sets of one thread, in the order they were saved. Appended to while open; a
/// trace build that reads one of its sets seals it (`Store::packed`): from then on it is
/// shared, not copied, with the traces that reference its sets, and the thread's next
/// sets go to a new chunk. It goes when its last set goes (traces holding it keep it).
struct Chunk {
  data: ChunkData,
  tid: i32,
  /// Kept sets encoded here.
  live: u32,
}

enum ChunkData {
  Open(Vec<u8>),
  Sealed(Arc<[u8]>),
}

impl Chunk {
  fn bytes(&self) -> usize {
    match &self.data {
      ChunkData::Open(v) => v.capacity(),
      ChunkData::Sealed(a) => a.len(),
    }
  }
}

/// A key stored inline rather than by its interned id.
const INLINE_KEY: u16 = u16::MAX;

/// Interned keys: id -> key (shared with the traces that hold `Packed` sets: append-only,
/// copied only if a key is added while a trace holds them), key -> id.
#[derive(Default)]
struct Keys {
  table: Arc<Vec<Arc<str>>>,
  ids: crate::FastMap<String, u16>,
}

impl Keys {
  /// Appends `labels` to `out` as `[n: u8] then per label: [key: u16 id, or INLINE_KEY and
  /// u16 length and the bytes] [value: u16 length and the bytes]` (keys are at most 256
  /// characters and values 4096: at most 12,288 bytes of UTF-8, and label sets at most
  /// 64). Longer keys and values are cut at a character boundary, so that every encoded
  /// string is UTF-8.
  fn encode(&mut self, labels: &LabelSet, out: &mut Vec<u8>) {
    out.reserve(1 + labels.iter().map(|(k, v)| 4 + v.len() + k.len().min(2)).sum::<usize>());
    out.push(labels.len().min(255) as u8);
    for (k, v) in labels.iter().take(255) {
      let id = match self.ids.get(k.as_str()) {
        Some(id) => Some(*id),
        None if self.table.len() < MAX_KEYS => {
          let id = self.table.len() as u16;
          Arc::make_mut(&mut self.table).push(Arc::from(k.as_str()));
          self.ids.insert(k.clone(), id);
          Some(id)
        }
        None => None,
      };
      match id {
        Some(id) => out.extend_from_slice(&id.to_le_bytes()),
        None => {
          let k = crate::formats::dialect::truncate(k, u16::MAX as usize).as_bytes();
          out.extend_from_slice(&INLINE_KEY.to_le_bytes());
          out.extend_from_slice(&(k.len() as u16).to_le_bytes());
          out.extend_from_slice(k);
        }
      }
      let v = crate::formats::dialect::truncate(v, u16::MAX as usize).as_bytes();
      out.extend_from_slice(&(v.len() as u16).to_le_bytes());
      out.extend_from_slice(v);
    }
  }
}

/// A recording whose trace is not built yet.
#[derive(Clone, Copy)]
struct Unbuilt {
  token: u32,
  start_ns: u64,
  /// The amendment sequence number when it started: its build looks up again the sets
  /// amended from there on.
  amend_mark: u64,
}

struct Store {
  max_sets: usize,
  max_bytes: usize,
  /// By id (`IdMap`: a build's lookups in id order read memory in order).
  sets: crate::capture::id_map::IdMap<Saved>,
  chunks: crate::FastMap<u32, Chunk>,
  /// The chunk each thread's next set goes to.
  open: HashMap<i32, u32>,
  next_chunk: u32,
  keys: Keys,
  /// Unbuilt recordings per thread.
  unbuilt: HashMap<i32, Vec<Unbuilt>>,
  /// Sets replaced by `amend`, in the order amended: `(sequence number, id)`.
  amended: std::collections::VecDeque<(u64, u32)>,
  /// The sequence number of the next amendment.
  amend_seq: u64,
  /// The chunks' bytes and the sets' overhead.
  bytes: usize,
  dropped: u64,
  next_token: u32,
}

impl Default for Store {
  fn default() -> Self {
    Store {
      max_sets: MAX_SETS,
      max_bytes: MAX_BYTES,
      sets: Default::default(),
      chunks: Default::default(),
      open: HashMap::new(),
      next_chunk: 0,
      keys: Keys::default(),
      unbuilt: HashMap::new(),
      amended: Default::default(),
      amend_seq: 0,
      bytes: 0,
      dropped: 0,
      next_token: 0,
    }
  }
}

impl Store {
  /// Keeps set `id` of thread `tid` (replacing what it held), saved at `now_ns`.
  fn save(&mut self, tid: i32, id: u32, labels: &LabelSet, now_ns: u64) {
    self.remove(id);
    // At most this many bytes (keys stored inline, nothing cut): a chunk is not grown
    // past CHUNK_BYTES, and a set larger than that has one of its own.
    let most = 1 + labels.iter().map(|(k, v)| 6 + k.len() + v.len()).sum::<usize>();
    let fits = |v: &Vec<u8>| v.len() + most <= CHUNK_BYTES;
    let open = match self
      .open
      .get(&tid)
      .and_then(|c| self.chunks.get(c).map(|chunk| (*c, chunk)))
    {
      Some((c, chunk)) if matches!(&chunk.data, ChunkData::Open(v) if fits(v)) => c,
      _ => {
        let c = self.next_chunk;
        self.next_chunk = self.next_chunk.wrapping_add(1);
        self.chunks.insert(
          c,
          Chunk {
            // Doubling from a power of two reaches CHUNK_BYTES exactly.
            data: ChunkData::Open(Vec::with_capacity(FIRST_CHUNK_BYTES)),
            tid,
            live: 0,
          },
        );
        self.open.insert(tid, c);
        self.bytes += FIRST_CHUNK_BYTES;
        c
      }
    };
    let Some(chunk) = self.chunks.get_mut(&open) else {
      return;
    };
    let ChunkData::Open(data) = &mut chunk.data else {
      return;
    };
    let (at, before) = (data.len(), data.capacity());
    self.keys.encode(labels, data);
    let len = data.len() - at;
    self.bytes = self.bytes + data.capacity() - before + OVERHEAD;
    chunk.live += 1;
    self.sets.insert(
      id,
      Saved {
        chunk: open,
        at: at as u32,
        len: len as u32,
        tid,
        saved_ns: now_ns,
      },
    );
  }

  /// Set `saved`'s labels, read in place: its chunk is sealed (if still open) and shared.
  fn packed(&mut self, saved: &Saved) -> Option<Packed> {
    let chunk = self.chunks.get_mut(&saved.chunk)?;
    if let ChunkData::Open(v) = &mut chunk.data {
      let before = v.capacity();
      let sealed: Arc<[u8]> = Arc::from(std::mem::take(v));
      self.bytes = self.bytes + sealed.len() - before;
      chunk.data = ChunkData::Sealed(sealed);
      if self.open.get(&chunk.tid) == Some(&saved.chunk) {
        self.open.remove(&chunk.tid);
      }
    }
    let ChunkData::Sealed(data) = &chunk.data else {
      return None;
    };
    Some(Packed {
      data: Arc::clone(data),
      at: saved.at,
      len: saved.len,
      keys: Arc::clone(&self.keys.table),
    })
  }

  /// The labels of set `id`, if kept.
  fn lookup(&mut self, id: u32) -> Option<Packed> {
    let saved = *self.sets.get(&id)?;
    self.packed(&saved)
  }

  /// A set no longer kept: its chunk goes with its last set.
  fn release(&mut self, saved: &Saved) {
    self.bytes -= OVERHEAD;
    let Some(chunk) = self.chunks.get_mut(&saved.chunk) else {
      return;
    };
    chunk.live -= 1;
    if chunk.live == 0 {
      self.bytes -= chunk.bytes();
      let tid = chunk.tid;
      self.chunks.remove(&saved.chunk);
      if self.open.get(&tid) == Some(&saved.chunk) {
        self.open.remove(&tid);
      }
    }
  }

  fn remove(&mut self, id: u32) -> bool {
    match self.sets.remove(&id) {
      Some(s) => {
        self.release(&s);
        true
      }
      None => false,
    }
  }

  /// Past a bound, drops the oldest eighth of the saved sets (counted as dropped): rare,
  /// so a scan is cheaper than keeping an order.
  fn evict(&mut self) {
    if self.sets.len() <= self.max_sets && self.bytes <= self.max_bytes {
      return;
    }
    let mut ages: Vec<(u64, u32)> = self.sets.iter().map(|(id, s)| (s.saved_ns, *id)).collect();
    let n = (ages.len() / 8).max(1);
    ages.select_nth_unstable(n - 1);
    for &(_, id) in &ages[..n] {
      if self.remove(id) {
        self.dropped += 1;
      }
    }
  }

  /// Keeps set `id` of thread `tid` with the labels of kept set `of`, saved at `now_ns`:
  /// the encoding is `of`'s own (its chunk held once more), nothing is encoded again. False
  /// if `of` is not kept. Amending one of them later leaves the other as it was.
  fn alias(&mut self, tid: i32, id: u32, of: u32, now_ns: u64) -> bool {
    if id == of {
      return self.sets.contains_key(&id);
    }
    if !self.sets.contains_key(&of) {
      return false;
    }
    self.remove(id);
    let Some(saved) = self.sets.get(&of).copied() else {
      return false;
    };
    let Some(chunk) = self.chunks.get_mut(&saved.chunk) else {
      return false;
    };
    chunk.live += 1;
    self.bytes += OVERHEAD;
    self.sets.insert(
      id,
      Saved {
        tid,
        saved_ns: now_ns,
        ..saved
      },
    );
    true
  }

  /// Replaces kept set `id` with `labels`, completed after it was sampled, and logs it
  /// for the builds under way. A set no longer kept stays gone: nothing references it.
  fn amend(&mut self, tid: i32, id: u32, labels: &LabelSet, now_ns: u64) -> bool {
    if !self.sets.contains_key(&id) {
      return false;
    }
    self.save(tid, id, labels, now_ns);
    self.amended.push_back((self.amend_seq, id));
    self.amend_seq += 1;
    self.trim_amended();
    true
  }

  /// Drops what no build needs of the amendment log: entries older than every unbuilt
  /// recording, and, once the log outgrows the kept sets, those of sets no longer kept.
  fn trim_amended(&mut self) {
    let oldest = self
      .unbuilt
      .values()
      .flatten()
      .map(|u| u.amend_mark)
      .min()
      .unwrap_or(self.amend_seq);
    while self.amended.front().is_some_and(|(seq, _)| *seq < oldest) {
      self.amended.pop_front();
    }
    if self.amended.len() > 2 * self.sets.len() + 1024 {
      let sets = &self.sets;
      self.amended.retain(|(_, id)| sets.contains_key(id));
    }
  }

  /// The ids amended from mark `mark` on, in the order amended (an id may repeat).
  fn amended_since(&self, mark: u64) -> Vec<u32> {
    let start = self.amended.partition_point(|(seq, _)| *seq < mark);
    self.amended.range(start..).map(|(_, id)| *id).collect()
  }

  /// Drops thread `tid`'s sets that no unbuilt recording of it can reference.
  fn prune(&mut self, tid: i32) {
    let cutoff = self
      .unbuilt
      .get(&tid)
      .and_then(|r| r.iter().map(|u| u.start_ns).min())
      .unwrap_or(u64::MAX);
    let mut gone = Vec::new();
    self.sets.retain(|_, s| {
      let keep = s.tid != tid || s.saved_ns >= cutoff;
      if !keep {
        gone.push(*s);
      }
      keep
    });
    for s in &gone {
      self.release(s);
    }
  }
}

static STORE: Mutex<Option<Store>> = Mutex::new(None);

fn with_store<T>(f: impl FnOnce(&mut Store) -> T) -> T {
  let mut guard = STORE.lock().unwrap_or_else(|e| e.into_inner());
  f(guard.get_or_insert_with(Store::default))
}

/// A label set from `[key, value, key, value, ...]`, sorted by key (the last of a
/// repeated key wins); `None` for an odd-length list.
pub fn label_set(flat: Vec<String>) -> Option<LabelSet> {
  if !flat.len().is_multiple_of(2) {
    return None;
  }
  let mut set: LabelSet = Vec::with_capacity(flat.len() / 2);
  let mut it = flat.into_iter();
  while let (Some(k), Some(v)) = (it.next(), it.next()) {
    set.push((k, v));
  }
  set.reverse();
  set.sort_by(|a, b| a.0.cmp(&b.0));
  set.dedup_by(|a, b| a.0 == b.0);
  Some(set)
}

/// Saves (or refreshes) label set `id` of thread `tid`, sampled by time `now_ns`.
pub fn save(tid: i32, id: u32, labels: LabelSet, now_ns: u64) {
  save_each(tid, vec![(id, labels)], now_ns);
}

/// Saves (or refreshes) several label sets of thread `tid` in one hold of the store: a
/// drain of the sampled sets, one call however many it holds.
pub fn save_each(tid: i32, sets: Vec<(u32, LabelSet)>, now_ns: u64) {
  with_store(|s| {
    for (id, labels) in sets.iter().filter(|(id, _)| *id != 0) {
      s.save(tid, *id, labels, now_ns);
    }
    s.evict();
  });
}

/// Keeps each `(id, of)` of thread `tid`: set `id` with the labels of kept set `of` (a
/// drain's samples of one request under several ids), in one hold of the store. Returns,
/// for each, whether `of` was kept (if not, `id` is not either: the caller saves it).
pub fn alias_each(tid: i32, pairs: &[(u32, u32)], now_ns: u64) -> Vec<bool> {
  with_store(|s| {
    let kept = pairs
      .iter()
      .map(|&(id, of)| id != 0 && of != 0 && s.alias(tid, id, of, now_ns))
      .collect();
    s.evict();
    kept
  })
}

/// The label sets of `ids` from `flat`, where set `ids[i]` is the next `lengths[i]`
/// strings (`[key, value, ...]`, as `label_set` takes them); why not, if they do not fit.
pub fn label_sets(ids: Vec<u32>, lengths: Vec<u32>, flat: Vec<String>) -> Result<Vec<(u32, LabelSet)>, String> {
  if ids.len() != lengths.len() {
    return Err(format!("{} ids but {} lengths", ids.len(), lengths.len()));
  }
  let total: u64 = lengths.iter().map(|&n| u64::from(n)).sum();
  if total != flat.len() as u64 {
    return Err(format!(
      "the lengths add up to {total}, not the {} strings given",
      flat.len()
    ));
  }
  let mut strings = flat.into_iter();
  ids
    .into_iter()
    .zip(lengths)
    .map(|(id, n)| {
      let set = label_set(strings.by_ref().take(n as usize).collect())
        .ok_or_else(|| format!("set {id} has {n} strings: labels come as key, value pairs"))?;
      Ok((id, set))
    })
    .collect()
}

/// Replaces kept set `id` of thread `tid` with `labels`: a request's labels completed
/// after the set was sampled (its route, known once routing ran). Builds under way look it
/// up again when they finish. Returns whether the set was kept.
pub fn amend(tid: i32, id: u32, labels: LabelSet, now_ns: u64) -> bool {
  id != 0 && with_store(|s| s.amend(tid, id, &labels, now_ns))
}

/// Where the amendment log is now: a build takes it as it starts when it has no recording
/// token (`recording_amend_mark`).
pub fn amend_mark() -> u64 {
  with_store(|s| s.amend_seq)
}

/// The amendment mark of unbuilt recording `token` of thread `tid`: the log's position
/// when it started.
pub fn recording_amend_mark(tid: i32, token: u32) -> Option<u64> {
  with_store(|s| {
    s.unbuilt
      .get(&tid)?
      .iter()
      .find(|u| u.token == token)
      .map(|u| u.amend_mark)
  })
}

/// The ids of the sets amended from `mark` on (a finished build looks them up again).
pub fn amended_since(mark: u64) -> Vec<u32> {
  with_store(|s| s.amended_since(mark))
}

/// The labels of set `id`, if kept: shared with the store, not copied (a trace build looks
/// up one per distinct context, ~100k in a long labeled recording).
pub fn lookup(id: u32) -> Option<Packed> {
  with_store(|s| s.lookup(id))
}

/// The sets of `ids` that are kept (`prefetch`: one hold of the store's mutex per batch).
pub(super) fn lookup_each(ids: &[u32], out: &mut Vec<(u32, Option<Packed>)>) {
  with_store(|s| out.extend(ids.iter().filter_map(|&id| Some((id, Some(s.lookup(id)?))))));
}

/// Whether recording `token` of thread `tid` is not built yet.
pub(super) fn unbuilt(tid: i32, token: u32) -> bool {
  with_store(|s| s.unbuilt.get(&tid).is_some_and(|l| l.iter().any(|u| u.token == token)))
}

/// A kept label set as the store encodes it, read in place: its `(key, value)` pairs in
/// key order, without a copy of each string.
#[derive(Clone)]
pub struct Packed {
  /// The chunk, and where in it the set is.
  data: Arc<[u8]>,
  at: u32,
  len: u32,
  keys: Arc<Vec<Arc<str>>>,
}

impl Packed {
  /// The set's encoding (empty if it is not where it should be: never, as `save` wrote it).
  fn bytes(&self) -> &[u8] {
    let at = self.at as usize;
    self.data.get(at..at.saturating_add(self.len as usize)).unwrap_or(&[])
  }

  /// The pairs the encoding holds (its count byte: `encode` wrote it).
  pub fn len(&self) -> usize {
    self.bytes().first().copied().unwrap_or(0) as usize
  }

  pub fn is_empty(&self) -> bool {
    self.len() == 0
  }

  pub fn iter(&self) -> PackedIter<'_> {
    let data = self.bytes();
    PackedIter {
      data,
      keys: &self.keys,
      at: 1,
      left: data.first().copied().unwrap_or(0),
    }
  }

  pub fn to_set(&self) -> LabelSet {
    self.iter().map(|(k, v)| (k.to_owned(), v.to_owned())).collect()
  }
}

/// The pairs of a `Packed` set. A malformed encoding (never written by `encode`) ends the
/// iteration rather than reading past it.
#[derive(Clone)]
pub struct PackedIter<'a> {
  data: &'a [u8],
  keys: &'a [Arc<str>],
  at: usize,
  left: u8,
}

impl<'a> PackedIter<'a> {
  fn take(&mut self, n: usize) -> Option<&'a [u8]> {
    let s = self.data.get(self.at..self.at.checked_add(n)?)?;
    self.at += n;
    Some(s)
  }

  fn u16(&mut self) -> Option<u16> {
    self.take(2).map(|b| u16::from_le_bytes([b[0], b[1]]))
  }

  fn str(&mut self, len: usize) -> Option<&'a str> {
    std::str::from_utf8(self.take(len)?).ok()
  }
}

impl<'a> Iterator for PackedIter<'a> {
  type Item = (&'a str, &'a str);

  fn next(&mut self) -> Option<Self::Item> {
    if self.left == 0 {
      return None;
    }
    let pair = (|| {
      let key = match self.u16()? {
        INLINE_KEY => {
          let len = self.u16()? as usize;
          self.str(len)?
        }
        id => self.keys.get(id as usize)?,
      };
      let len = self.u16()? as usize;
      Some((key, self.str(len)?))
    })();
    self.left = if pair.is_some() { self.left - 1 } else { 0 };
    pair
  }
}

/// A recording of thread `tid` started at `start_ns`; returns its token.
pub fn recording_started(tid: i32, start_ns: u64) -> u32 {
  with_store(|s| {
    s.next_token = s.next_token.wrapping_add(1).max(1);
    let token = s.next_token;
    let amend_mark = s.amend_seq;
    s.unbuilt.entry(tid).or_default().push(Unbuilt {
      token,
      start_ns,
      amend_mark,
    });
    token
  })
}

/// The trace of recording `token` was built (or never will be): its sets may go. Once per
/// token: a second call (JS after a build that already let go) costs nothing.
pub fn recording_built(tid: i32, token: u32) {
  with_store(|s| {
    let Some(list) = s.unbuilt.get_mut(&tid) else {
      return;
    };
    let before = list.len();
    list.retain(|u| u.token != token);
    if list.len() == before {
      return;
    }
    if list.is_empty() {
      s.unbuilt.remove(&tid);
    }
    s.prune(tid);
    s.trim_amended();
  });
  super::prefetch::forget_recording(token);
}

/// Thread `tid` is gone (a worker ended): everything it kept goes.
pub fn forget_thread(tid: i32) {
  with_store(|s| {
    s.unbuilt.remove(&tid);
    s.prune(tid);
  });
  super::prefetch::forget_thread(tid);
}

/// What the label store holds now (`stats`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StoreStats {
  /// Label sets kept.
  pub sets: usize,
  /// The bytes they hold.
  pub bytes: usize,
  /// Sets dropped to the bounds, since the process started.
  pub dropped: u64,
  /// Recordings not built yet.
  pub unbuilt: usize,
}

/// What the label store holds now, for tests and diagnostics.
pub fn stats() -> StoreStats {
  with_store(|s| StoreStats {
    sets: s.sets.len(),
    bytes: s.bytes,
    dropped: s.dropped,
    unbuilt: s.unbuilt.values().map(Vec::len).sum(),
  })
}

#[cfg(test)]
mod tests;
