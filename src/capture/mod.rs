//! Capture: what runs while a profiler samples. `signal` is the SIGPROF handler and the
//! static state it writes (the only code that runs in signal context); `ring` reads what
//! the handler wrote and joins it to V8's samples; `labels` keeps the label sets that
//! samples reference, by id (`id_map`: a map laid out for those ids).

pub mod context_frame;
pub mod drain;
pub mod heap_sampler;
pub mod id_map;
pub mod labels;
pub mod ring;
pub mod signal;
