use super::*;

#[test]
fn a_host_without_v8s_api_gets_unavailable_not_a_crash() {
  // The test binary exports no V8: the caller is told to use the inspector.
  let (started, teardown) = start(512 * 1024);
  assert_eq!(started, Started::Unavailable);
  assert!(teardown.is_none());
  assert!(!stop());
}
