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
