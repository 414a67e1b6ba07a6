use super::*;

#[test]
fn the_layout_is_v8s_on_64_bit_targets() {
  // v8-profiler.h's AllocationProfile::Node: two handles, five ints, two vectors.
  assert_eq!(LAYOUT.node_size, 88);
  assert_eq!((LAYOUT.name, LAYOUT.script_name, LAYOUT.script_id), (0, 8, 16));
  assert_eq!((LAYOUT.line_number, LAYOUT.column_number), (24, 28));
  assert_eq!((LAYOUT.children, LAYOUT.allocations), (40, 64));
  assert_eq!(
    (LAYOUT.allocation_size, LAYOUT.allocation_count, LAYOUT.vector_size),
    (16, 8, 24)
  );
}

#[test]
fn only_checked_v8_versions_are_read() {
  let why = unreadable("14.1.146.11-node.14").unwrap();
  assert!(why.contains("V8 14.1.146.11-node.14 is not a version"), "{why}");
  assert!(unreadable("").is_some());
}

#[test]
fn a_host_without_v8s_api_is_told_why_not_a_crash() {
  // The test binary exports no V8.
  // SAFETY: it stops at the missing symbol, before it uses the environment.
  let why = unsafe { read(std::ptr::null_mut(), "11.3.244.8-node.38") }
    .err()
    .unwrap();
  assert!(why.contains("does not export"), "{why}");
}
