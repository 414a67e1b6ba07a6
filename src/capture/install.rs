//! Putting selfprof's SIGPROF handler (`signal::handle_sigprof`) in the chain, and asking
//! whether it is there. Runs on a JS thread, never in signal context (it takes a mutex,
//! calls `sigaction` and `raise`); the statics the handler reads (`NEXT_ACTION`,
//! `NEXT_FLAGS`, the probe's) stay in `signal.rs` with the handler.

use super::signal::init_clock;
#[cfg(unix)]
use super::signal::{gettid, our_action, NEXT_ACTION, NEXT_FLAGS, PROBE_HIT, PROBE_TID};
#[cfg(unix)]
use std::sync::atomic::Ordering;

/// What `install` found and did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Install {
  /// Installed in front of the handler that was there.
  Chained,
  /// Ours was already the installed handler; nothing changed.
  AlreadyInstalled,
  /// Another handler is installed in front of ours and chains to it (a second SIGPROF
  /// user that started after us): ours stays where it is, so the chain cannot loop.
  BehindAnother,
  /// No SIGPROF handler is installed (V8's sampler is not running): nothing to chain.
  NoSampler,
  /// V8 samples without a signal here (Windows): nothing to install.
  NoSignals,
}

#[cfg(unix)]
fn current_action() -> std::io::Result<libc::sigaction> {
  // SAFETY: a zeroed sigaction is a valid out-parameter; a null new action only reads.
  unsafe {
    let mut cur: libc::sigaction = std::mem::zeroed();
    if libc::sigaction(libc::SIGPROF, std::ptr::null(), &mut cur) != 0 {
      return Err(std::io::Error::last_os_error());
    }
    Ok(cur)
  }
}

/// Whether a SIGPROF raised on this thread may reach our handler through the installed
/// chain. `raise` returns after the handlers ran. Handlers in front of ours see one extra
/// signal; ours takes no sample for it and does not pass it on, so V8 records nothing.
/// Where SIGPROF is blocked on this thread the chain cannot be asked, and the answer is
/// yes: staying out of the chain is safe, chaining into a loop is not.
#[cfg(unix)]
fn reaches_us() -> std::io::Result<bool> {
  // SAFETY: reads this thread's signal mask into a zeroed set.
  let blocked = unsafe {
    let mut set: libc::sigset_t = std::mem::zeroed();
    if libc::pthread_sigmask(libc::SIG_BLOCK, std::ptr::null(), &mut set) != 0 {
      return Err(std::io::Error::last_os_error());
    }
    libc::sigismember(&set, libc::SIGPROF) == 1
  };
  if blocked {
    return Ok(true);
  }
  PROBE_HIT.store(false, Ordering::Release);
  PROBE_TID.store(gettid(), Ordering::Release);
  // SAFETY: a handler (not SIG_DFL/SIG_IGN: the caller checked) is installed.
  let rc = unsafe { libc::raise(libc::SIGPROF) };
  PROBE_TID.store(0, Ordering::Release);
  if rc != 0 {
    return Err(std::io::Error::last_os_error());
  }
  Ok(PROBE_HIT.load(Ordering::Acquire))
}

/// Serializes installs (workers start profilers on their own threads).
#[cfg(unix)]
static INSTALL: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Puts our handler in front of the installed SIGPROF handler. Call right after V8's
/// profiler starts (V8 installs its handler as its sampler starts).
///
/// The rules, with other SIGPROF users about (a second copy of selfprof,
/// @datadog/pprof, a native profiler): ours is installed at most once per chain. If the
/// installed handler is not ours but the chain still reaches ours (someone chained in
/// front of us), nothing changes: chaining again would make a loop. Otherwise (first
/// install, or our handler left with V8's when V8 stopped) ours goes in front of
/// whatever is there and calls it, so no handler is dropped.
#[cfg(unix)]
pub fn install() -> std::io::Result<Install> {
  let _serial = INSTALL.lock().unwrap_or_else(|e| e.into_inner());
  init_clock();
  let cur = current_action()?;
  if cur.sa_sigaction == our_action() {
    return Ok(Install::AlreadyInstalled);
  }
  if cur.sa_sigaction == libc::SIG_DFL || cur.sa_sigaction == libc::SIG_IGN {
    return Ok(Install::NoSampler);
  }
  let ever_installed = NEXT_ACTION.load(Ordering::Acquire) != libc::SIG_DFL;
  if ever_installed && reaches_us()? {
    return Ok(Install::BehindAnother);
  }
  // Publish the next handler before ours can run.
  NEXT_FLAGS.store(cur.sa_flags, Ordering::Relaxed);
  NEXT_ACTION.store(cur.sa_sigaction, Ordering::Release);
  // SAFETY: installs a handler with a valid function pointer and V8's signal mask.
  unsafe {
    let mut ours: libc::sigaction = std::mem::zeroed();
    ours.sa_sigaction = our_action();
    ours.sa_flags = libc::SA_SIGINFO | libc::SA_RESTART | libc::SA_ONSTACK;
    ours.sa_mask = cur.sa_mask;
    if libc::sigaction(libc::SIGPROF, &ours, std::ptr::null_mut()) != 0 {
      return Err(std::io::Error::last_os_error());
    }
  }
  Ok(Install::Chained)
}

/// V8 samples without a signal on Windows: nothing to install (the clock is set up for
/// the switch log).
#[cfg(windows)]
pub fn install() -> std::io::Result<Install> {
  init_clock();
  Ok(Install::NoSignals)
}

/// Whether our handler is the installed one.
#[cfg(windows)]
pub fn installed() -> bool {
  false
}

/// Whether our handler is the installed one.
#[cfg(unix)]
pub fn installed() -> bool {
  current_action()
    .map(|a| a.sa_sigaction == our_action())
    .unwrap_or(false)
}
