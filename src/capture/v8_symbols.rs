//! V8's C++ functions that the node executable exports, found at run time with `dlsym`,
//! never linked: one build serves every Node version, and a host that does not export a
//! function gets an error (its caller then falls back). Used by `context_frame` (reading
//! the async context frame), `heap_sampler` (the sampling heap profiler) and
//! `heap_profile` (its profile). The names are
//! Itanium-mangled (Linux, macOS); Windows executables export MSVC-mangled names, not
//! looked up here.

use std::ffi::{c_void, CStr};

/// `v8::Isolate::GetCurrent()`: the calling thread's isolate, or null.
pub type GetCurrent = unsafe extern "C" fn() -> *mut c_void;
/// `GetCurrent`'s mangled name.
pub const GET_CURRENT: &CStr = c"_ZN2v87Isolate10GetCurrentEv";

/// The first of `names` (spellings of one function) this process exports.
#[cfg(unix)]
pub fn symbol(names: &[&CStr]) -> Result<*mut c_void, String> {
  names
    .iter()
    .find_map(|name| {
      // SAFETY: dlsym with RTLD_DEFAULT only looks the name up among the loaded objects.
      let p = unsafe { libc::dlsym(libc::RTLD_DEFAULT, name.as_ptr()) };
      (!p.is_null()).then_some(p)
    })
    .ok_or_else(|| {
      let name = names.first().map(|n| n.to_string_lossy()).unwrap_or_default();
      format!("the node executable does not export {name}")
    })
}

/// Not looked up on Windows (see the module comment).
#[cfg(windows)]
pub fn symbol(_names: &[&CStr]) -> Result<*mut c_void, String> {
  Err("V8's C++ API is not looked up on Windows".into())
}

/// The function `names` spell, as type `F`.
///
/// # Safety
/// `F` must be the function's type: an `extern "C" fn` of its C++ signature in the C ABI
/// (`this` first for a non-virtual member; enums as ints).
pub unsafe fn function<F: Copy>(names: &[&CStr]) -> Result<F, String> {
  const { assert!(std::mem::size_of::<F>() == std::mem::size_of::<*mut c_void>()) };
  let f = symbol(names)?;
  // SAFETY: the caller's promise; a function pointer is a data pointer's size (checked).
  Ok(unsafe { std::mem::transmute_copy::<*mut c_void, F>(&f) })
}
