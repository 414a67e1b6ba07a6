//! Capture: what runs while a profiler samples. `signal` is the SIGPROF handler and the
//! static state it writes (the only code that runs in signal context); `ring` reads what
//! the handler wrote and joins it to V8's samples; `install` puts the handler in the chain
//! and `threads` manages the table of threads it reads; `labels` keeps the label sets that
//! samples reference, by id (`id_map`: a map laid out for those ids), and `prefetch` looks
//! a recording's up while V8 stops; `drain` copies the ring into per-thread logs. Where V8
//! samples without a signal (Windows), `switches` logs the label switches with their time
//! instead. `context_frame` sets the handler up to read the async context frame,
//! `heap_sampler` runs V8's heap sampler and `heap_profile` reads its profile, all through
//! V8's C++ functions (`v8_symbols`).

pub mod context_frame;
pub mod drain;
pub mod heap_profile;
pub mod heap_sampler;
pub mod id_map;
pub mod install;
pub mod labels;
pub mod prefetch;
pub mod ring;
pub mod signal;
pub mod switches;
pub mod threads;
pub mod v8_symbols;

/// Whether samples are joined to labels by time, through `switches` (Windows: V8 samples
/// without a signal), rather than by the signal that took them.
pub const BY_TIME: bool = cfg!(windows);
