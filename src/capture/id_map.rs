//! A hash map for the label-set ids selfprof hands out itself (`capture::labels::reserve_ids`),
//! laid out so that ids close in value are close in memory.
//!
//! Ids are handed out in order, saved in about that order, and a trace build looks ~100k of
//! them up in the order its samples were taken: about that order again. A general hasher
//! scatters consecutive ids over the whole table, so each lookup of a long recording's
//! build was a cache miss (most of the label store's lookup time: benchmark/README.md).
//! Here ids of one block of `BLOCK` go to consecutive buckets from a place that depends
//! on the block: one lookup after another reads memory in order.
//!
//! Only for ids from the counter: each block's place is a hash of the block, so ids a
//! table's size apart do not line up, but nothing is seeded per map.

use std::hash::{BuildHasherDefault, Hasher};

/// Ids per block of consecutive buckets (32 KiB of a store's entries).
const BLOCK: u64 = 1024;
/// hashbrown tells keys in a group apart by the top 7 bits of the hash; they come from the
/// whole id, and never decide the bucket (only a table of 2⁵⁷ buckets would use them).
const TAG: u64 = 0x7f << 57;

/// A `HashMap` keyed by label-set id.
pub type IdMap<V> = std::collections::HashMap<u32, V, BuildHasherDefault<IdHasher>>;

/// An `IdMap` with room for `n` ids.
pub fn with_capacity<V>(n: usize) -> IdMap<V> {
  IdMap::with_capacity_and_hasher(n, Default::default())
}

/// splitmix64's finalizer: every bit of `x` moves every bit of the result.
fn mix(mut x: u64) -> u64 {
  x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
  x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
  x ^ (x >> 31)
}

#[derive(Default, Clone, Copy)]
pub struct IdHasher(u64);

impl Hasher for IdHasher {
  fn finish(&self) -> u64 {
    self.0
  }

  fn write_u32(&mut self, id: u32) {
    let id = u64::from(id);
    let place = mix(id / BLOCK).wrapping_add(id % BLOCK);
    self.0 = (place & !TAG) | (mix(id) & TAG);
  }

  /// Not used by `u32` keys; mixes whatever it is given.
  fn write(&mut self, bytes: &[u8]) {
    for &b in bytes {
      self.0 = mix(self.0 ^ u64::from(b));
    }
  }
}

#[cfg(test)]
mod tests;
