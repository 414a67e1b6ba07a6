//! What JS sees of the native side besides `src/lib.rs`'s bindings: the objects it
//! passes and gets (`objects`), the thread-pool tasks the async bindings return
//! (`tasks`), and the bindings of a thread's own state (`threads`).

pub mod objects;
pub mod tasks;
pub mod threads;
