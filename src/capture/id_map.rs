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
mod tests {
  use super::*;
  use std::hash::BuildHasher;

  fn hash(id: u32) -> u64 {
    BuildHasherDefault::<IdHasher>::default().hash_one(id)
  }

  #[test]
  fn ids_of_a_block_go_to_consecutive_buckets() {
    let mask = (1u64 << 17) - 1;
    let first = 5 * BLOCK as u32;
    for id in first..first + BLOCK as u32 - 1 {
      assert_eq!((hash(id + 1) & mask).wrapping_sub(hash(id) & mask) & mask, 1, "id {id}");
    }
    // The tags of neighbours differ (those of 1,024 ids all but never agree in a row).
    let same = (first..first + 1023)
      .filter(|&i| hash(i) >> 57 == hash(i + 1) >> 57)
      .count();
    assert!(same < 64, "{same} of 1023 neighbours share a tag");
  }

  #[test]
  fn ids_a_tables_size_apart_do_not_share_a_bucket() {
    // Were the bucket the id itself, these would all want bucket 7 of a 2¹⁶-bucket table.
    let mask = (1u64 << 16) - 1;
    let mut buckets: Vec<u64> = (0..64u32).map(|i| hash(7 + (i << 16)) & mask).collect();
    buckets.sort_unstable();
    buckets.dedup();
    assert!(buckets.len() >= 60, "{} distinct buckets of 64", buckets.len());
  }

  #[test]
  fn a_map_keeps_every_id_whatever_their_spacing() {
    for step in [1u32, 7, 1024, 1 << 16, 1 << 20] {
      let mut m = with_capacity(0);
      let ids: Vec<u32> = (0..5000u32).map(|i| i.wrapping_mul(step).wrapping_add(3)).collect();
      for &id in &ids {
        m.insert(id, id ^ 0x5555);
      }
      assert_eq!(m.len(), ids.iter().collect::<std::collections::HashSet<_>>().len());
      for &id in &ids {
        assert_eq!(m.get(&id), Some(&(id ^ 0x5555)), "step {step}, id {id}");
      }
      assert_eq!(m.get(&2), None);
    }
  }
}
