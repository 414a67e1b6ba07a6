//! Capture: what runs while a profiler samples. `signal` is the SIGPROF handler and the
//! static state it writes (the only code that runs in signal context); `ring` reads what
//! the handler wrote and joins it to V8's samples; `labels` keeps the label sets that
//! samples reference.

pub mod drain;
pub mod labels;
pub mod ring;
pub mod signal;
