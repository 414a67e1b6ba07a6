use super::*;
use crate::capture::signal::context_of;
use crate::capture::signal::slot;

#[test]
fn a_thread_slot_is_freed_and_cleared_only_for_its_holder() {
  std::thread::spawn(|| {
    let tid = gettid();
    let (i, fresh) = register_thread().expect("a free slot");
    assert!(fresh);
    THREADS[i].cell[slot::CONTEXT].store(7, Ordering::Relaxed);
    unregister_thread(i, tid + 1);
    assert_eq!(register_thread(), Some((i, false)), "another tid cannot free it");
    assert_eq!(context_of(tid).0, 7, "nor clear its context");
    unregister_thread(i, tid);
    assert_eq!(context_of(tid), (0, 0));
    assert_eq!(
      THREADS[i].cell[slot::CONTEXT].load(Ordering::Relaxed),
      0,
      "cleared for the next holder"
    );
  })
  .join()
  .unwrap();
}
