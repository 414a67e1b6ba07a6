//! Builds the event loop waits on, split across two threads where the work is large.

/// Contexts from which a build splits its work on them across two threads (the label
/// sets' columns or their interning, and letting go of them): below it a thread's start
/// costs about what it saves.
pub const PARALLEL_CONTEXTS: usize = 8192;

/// `(here(), beside())`: `beside` runs on a thread of its own, named `name`, while this
/// thread runs `here`. When no thread can start, `beside` runs here after `here`. A panic
/// in `beside` goes on here.
pub fn both<H, B>(here: impl FnOnce() -> H, name: &str, beside: impl FnOnce() -> B + Send + Clone) -> (H, B)
where
  B: Send,
{
  std::thread::scope(|scope| {
    let spawned = std::thread::Builder::new()
      .name(name.into())
      .spawn_scoped(scope, beside.clone());
    let h = here();
    let b = match spawned {
      Ok(handle) => handle.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic)),
      Err(_) => beside(),
    };
    (h, b)
  })
}

#[cfg(test)]
mod tests;
