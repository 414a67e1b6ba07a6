//! The process-wide cache of what each script's source map lookup gave: a parsed map,
//! no map, or why its map could not be used. Bounded by entries and by the memory of the
//! parsed maps (least recently used first out); an entry is used only while the script
//! (and its map file) keep the size and modification time they had when it was made.

use super::limits;
use super::locate::Stamp;
use super::map::Loaded;
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

#[derive(Clone)]
pub(crate) enum Outcome {
  NoMap,
  Map(Arc<Loaded>),
  Failed(Arc<str>),
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) enum Key {
  /// A script read from disk.
  Disk(PathBuf),
  /// A map Node holds for a script (its URL, and the JSON's length and hash).
  Runtime(String, usize, u64),
}

pub(crate) struct Slot {
  pub outcome: Outcome,
  /// The script's stamp when the slot was made (disk scripts).
  pub script: Option<Stamp>,
  /// The map file and its stamp then.
  pub map_file: Option<(PathBuf, Stamp)>,
}

impl Slot {
  fn bytes(&self) -> usize {
    match &self.outcome {
      Outcome::Map(m) => m.bytes(),
      _ => 0,
    }
  }

  fn is_map(&self) -> bool {
    matches!(self.outcome, Outcome::Map(_))
  }
}

pub(crate) struct Cache {
  slots: HashMap<Key, (Slot, u64)>,
  clock: u64,
  maps: usize,
  others: usize,
  bytes: usize,
  /// Slots dropped to the bounds (for tests and diagnostics).
  pub evicted: u64,
  /// Maps parsed (for tests and diagnostics: a map kept is parsed once).
  pub parsed: u64,
  /// The bounds: parsed maps, their bytes, other slots (`limits`, smaller in tests).
  pub max_maps: usize,
  pub max_bytes: usize,
  pub max_others: usize,
}

impl Default for Cache {
  fn default() -> Cache {
    Cache {
      slots: HashMap::new(),
      clock: 0,
      maps: 0,
      others: 0,
      bytes: 0,
      evicted: 0,
      parsed: 0,
      max_maps: limits::CACHE_MAPS,
      max_bytes: limits::CACHE_BYTES,
      max_others: limits::CACHE_OTHERS,
    }
  }
}

/// What the cache holds: parsed maps, their bytes, other slots; slots evicted and maps
/// parsed so far.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CacheStats {
  pub maps: usize,
  pub bytes: usize,
  pub others: usize,
  pub evicted: u64,
  pub parsed: u64,
}

impl Cache {
  /// The slot for `key` if `valid` says it is still current (else it is dropped).
  pub fn get(&mut self, key: &Key, valid: impl FnOnce(&Slot) -> bool) -> Option<Outcome> {
    let (slot, _) = self.slots.get(key)?;
    if !valid(slot) {
      self.remove(key);
      return None;
    }
    self.clock += 1;
    let clock = self.clock;
    let (slot, used) = self.slots.get_mut(key)?;
    *used = clock;
    Some(slot.outcome.clone())
  }

  fn remove(&mut self, key: &Key) {
    if let Some((slot, _)) = self.slots.remove(key) {
      if slot.is_map() {
        self.maps -= 1;
        self.bytes -= slot.bytes();
      } else {
        self.others -= 1;
      }
    }
  }

  /// Keeps `slot` (unless a parsed map alone is over the bytes bound, which the parser's
  /// own bounds prevent), then drops the least recently used slots of its kind until the
  /// bounds hold.
  pub fn put(&mut self, key: Key, slot: Slot) {
    let bytes = slot.bytes();
    if bytes > self.max_bytes {
      return;
    }
    self.remove(&key);
    let is_map = slot.is_map();
    if is_map {
      self.maps += 1;
      self.bytes += bytes;
    } else {
      self.others += 1;
    }
    self.clock += 1;
    self.slots.insert(key, (slot, self.clock));
    while self.maps > self.max_maps || self.bytes > self.max_bytes {
      self.evict(true);
    }
    while self.others > self.max_others {
      self.evict(false);
    }
  }

  fn evict(&mut self, maps: bool) {
    let oldest = self
      .slots
      .iter()
      .filter(|(_, (s, _))| s.is_map() == maps)
      .min_by_key(|(_, (_, used))| *used)
      .map(|(k, _)| k.clone());
    match oldest {
      Some(k) => {
        self.remove(&k);
        self.evicted += 1;
      }
      None => {
        // Cannot happen (the counts say there is one); never loop on it.
        self.maps = 0;
        self.bytes = 0;
        self.others = 0;
      }
    }
  }

  pub fn stats(&self) -> CacheStats {
    CacheStats {
      maps: self.maps,
      bytes: self.bytes,
      others: self.others,
      evicted: self.evicted,
      parsed: self.parsed,
    }
  }

  pub fn clear(&mut self) {
    *self = Cache::default();
  }
}

static CACHE: Mutex<Option<Cache>> = Mutex::new(None);

/// Runs `f` on the process-wide cache (a panic elsewhere never makes it unusable).
pub(crate) fn with<R>(f: impl FnOnce(&mut Cache) -> R) -> R {
  let mut guard = CACHE.lock().unwrap_or_else(|e| e.into_inner());
  f(guard.get_or_insert_with(Cache::default))
}
