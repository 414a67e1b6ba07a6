use super::*;

#[test]
fn both_runs_each_once_and_returns_their_results_in_order() {
  let here_thread = std::thread::current().id();
  let ((h, h_thread), (b, b_thread)) = both(
    || (1, std::thread::current().id()),
    "selfprof-test",
    || (2, std::thread::current().id()),
  );
  assert_eq!((h, b), (1, 2));
  assert_eq!(h_thread, here_thread);
  assert_ne!(b_thread, here_thread, "beside runs on a thread of its own");
}
