//! This isolate's sampling heap profile read through V8's C++ API, with no inspector and
//! no JSON: `v8::HeapProfiler::GetAllocationProfile()` gives the call tree of the live
//! sampled allocations (`v8::AllocationProfile`, v8-profiler.h), walked here into the
//! binary flat form (`formats::heap::flat`) that the heap build reads on the thread pool.
//! On the JS thread this costs V8's copy of its tree, the walk (a name per node, a
//! script's name once per script) and the profile's delete: no JS object is made, and the
//! samples V8 lists one by one (hundreds of thousands at a 1 KiB interval) are not read
//! (each node's allocations already sum them, scaled as the inspector's `selfSize` is).
//!
//! Reading V8's structs takes their layout (`LAYOUT`: `repr(C)` mirrors of
//! `AllocationProfile::Node` and `Allocation`, and the virtual functions' slots), which
//! `scripts/check-v8-layouts.js` checks against each Node's own headers. It is read
//! only on the V8 versions so checked (`V8_VERSIONS`), on 64-bit Linux (the Itanium C++
//! ABI; a `std::vector` is three pointers in libstdc++ and libc++): elsewhere `read` says
//! why not, and JS reads the profile through the inspector as before.
//!
//! - `AllocationProfile` is abstract: its root comes from its first virtual function
//!   (`GetRootNode`), and it is deleted through its deleting destructor, the fourth slot
//!   (`GetRootNode`, `GetSamples`, then the complete and the deleting destructor).
//! - A node's `name` and `script_name` are `Local<String>`s, which is what a Node-API
//!   value is (Node's `V8LocalValueFromJsValue` copies one into the other's bits): they
//!   are read with `napi_get_value_string_utf8`, in a handle scope opened around the read.
//!   V8 interns them (flat strings), so reading them allocates nothing on the JS heap.

use super::heap_sampler;
use crate::formats::heap::flat::HeapWriter;
use napi::sys;
use std::collections::HashMap;
use std::ffi::{c_int, c_uint, c_void};
use std::mem::{offset_of, size_of};

/// The V8 versions (`major.minor`) whose `AllocationProfile` layout was checked against
/// their headers: Node 20, 22, 24 and 26.
pub const V8_VERSIONS: &[&str] = &["11.3", "12.4", "13.6", "14.6"];

/// `v8::UnboundScript::kNoScriptId`.
const NO_SCRIPT_ID: c_int = 0;
/// More nodes than any real profile has (V8 keeps one per allocating stack): past this,
/// what is read is not a profile.
const MAX_NODES: usize = 1 << 24;

/// `std::vector<T>`: begin, end, end of storage.
#[repr(C)]
struct CppVector<T> {
  begin: *const T,
  end: *const T,
  end_of_storage: *const T,
}

impl<T> CppVector<T> {
  /// # Safety
  /// `self` is a live vector of `T`s.
  unsafe fn as_slice(&self) -> &[T] {
    if self.begin.is_null() || self.end <= self.begin {
      return &[];
    }
    // SAFETY: the caller's promise: `begin..end` are its elements.
    unsafe { std::slice::from_raw_parts(self.begin, self.end.offset_from(self.begin) as usize) }
  }
}

/// `v8::AllocationProfile::Allocation`: objects of one size, `count` scaled by V8 to stand
/// for every allocation.
#[repr(C)]
struct Allocation {
  size: usize,
  count: c_uint,
}

/// `v8::AllocationProfile::Node`.
#[repr(C)]
struct Node {
  name: sys::napi_value,
  script_name: sys::napi_value,
  script_id: c_int,
  start_position: c_int,
  /// 1-based; 0 for none (`kNoLineNumberInfo`), as the column.
  line_number: c_int,
  column_number: c_int,
  node_id: u32,
  children: CppVector<*const Node>,
  allocations: CppVector<Allocation>,
}

/// Where things are in V8's structs as this build reads them, for the check against each
/// Node's headers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Layout {
  pub node_size: usize,
  pub name: usize,
  pub script_name: usize,
  pub script_id: usize,
  pub line_number: usize,
  pub column_number: usize,
  pub children: usize,
  pub allocations: usize,
  pub allocation_size: usize,
  pub allocation_count: usize,
  pub vector_size: usize,
  /// The virtual functions' slots: `GetRootNode` and the deleting destructor.
  pub vtable_root: usize,
  pub vtable_delete: usize,
}

pub const LAYOUT: Layout = Layout {
  node_size: size_of::<Node>(),
  name: offset_of!(Node, name),
  script_name: offset_of!(Node, script_name),
  script_id: offset_of!(Node, script_id),
  line_number: offset_of!(Node, line_number),
  column_number: offset_of!(Node, column_number),
  children: offset_of!(Node, children),
  allocations: offset_of!(Node, allocations),
  allocation_size: size_of::<Allocation>(),
  allocation_count: offset_of!(Allocation, count),
  vector_size: size_of::<CppVector<u8>>(),
  vtable_root: 0,
  vtable_delete: 3,
};

type GetRootNode = unsafe extern "C" fn(profile: *mut c_void) -> *const Node;
type DeletingDestructor = unsafe extern "C" fn(profile: *mut c_void);

/// A read profile: the binary flat form, and the names of the scripts it indexes.
pub struct Read {
  pub bytes: Vec<u8>,
  pub scripts: Vec<String>,
}

/// Why this thread's heap profile cannot be read here, or None if it can.
pub fn unreadable(v8_version: &str) -> Option<String> {
  if !(cfg!(target_os = "linux") && cfg!(target_pointer_width = "64")) {
    return Some("V8's heap profile is read through its C++ API on 64-bit Linux only".into());
  }
  let mut parts = v8_version.split('.');
  let major_minor = format!("{}.{}", parts.next().unwrap_or(""), parts.next().unwrap_or(""));
  if !V8_VERSIONS.contains(&major_minor.as_str()) {
    return Some(format!(
      "V8 {v8_version} is not a version whose heap profile layout this build was checked against ({})",
      V8_VERSIONS.join(", ")
    ));
  }
  match heap_sampler::api() {
    Some(api) if api.get_allocation_profile.is_some() => None,
    _ => Some("the node executable does not export V8's heap profiler API".into()),
  }
}

/// Deletes a profile (through its virtual destructor) when dropped.
struct Owned(*mut c_void);

impl Owned {
  fn vtable(&self) -> *const usize {
    // SAFETY: a live polymorphic object starts with its vtable pointer.
    unsafe { *(self.0 as *const *const usize) }
  }
}

impl Drop for Owned {
  fn drop(&mut self) {
    // SAFETY: the slot `LAYOUT.vtable_delete` of an AllocationProfile is its deleting
    // destructor (checked against the headers); the profile is ours to delete, once.
    unsafe {
      let delete: DeletingDestructor = std::mem::transmute(*self.vtable().add(LAYOUT.vtable_delete));
      delete(self.0);
    }
  }
}

/// A Node-API handle scope, closed when dropped.
struct HandleScope(sys::napi_env, sys::napi_handle_scope);

impl Drop for HandleScope {
  fn drop(&mut self) {
    // SAFETY: the scope this thread opened, the innermost one (nothing opened since).
    unsafe { sys::napi_close_handle_scope(self.0, self.1) };
  }
}

/// The UTF-8 of the string `value` (empty for an empty handle), in `buf`.
///
/// # Safety
/// `value` is a live handle of this thread's isolate, to a string.
unsafe fn utf8(env: sys::napi_env, value: sys::napi_value, buf: &mut Vec<u8>) -> Result<&[u8], String> {
  buf.clear();
  if value.is_null() {
    return Ok(buf);
  }
  let mut copied = 0usize;
  let fill = |buf: &mut Vec<u8>, copied: &mut usize| {
    // SAFETY: `buf` has `capacity` bytes to write (its contents then set by its length).
    let status =
      unsafe { sys::napi_get_value_string_utf8(env, value, buf.as_mut_ptr().cast(), buf.capacity(), copied) };
    if status != sys::Status::napi_ok {
      return Err(format!(
        "a name in V8's heap profile could not be read (Node-API status {status})"
      ));
    }
    // SAFETY: Node-API wrote `copied` bytes.
    unsafe { buf.set_len(*copied) };
    Ok(())
  };
  buf.reserve(256);
  fill(buf, &mut copied)?;
  // A string cut at the buffer's end stops before a whole character (up to 4 bytes): one
  // that comes that close is read again at its full length.
  if copied + 4 >= buf.capacity() {
    let mut len = 0usize;
    // SAFETY: with no buffer, Node-API gives the length.
    let status = unsafe { sys::napi_get_value_string_utf8(env, value, std::ptr::null_mut(), 0, &mut len) };
    if status != sys::Status::napi_ok {
      return Err(format!(
        "a name in V8's heap profile could not be read (Node-API status {status})"
      ));
    }
    buf.clear();
    buf.reserve(len + 1);
    fill(buf, &mut copied)?;
  }
  Ok(buf)
}

/// Reads this thread's isolate's sampling heap profile: None when no sampler runs, an
/// error saying why where it cannot be read here (`unreadable`, or a profile that does not
/// read as one).
///
/// # Safety
/// On a JS thread, in a Node-API call whose environment is `env`.
pub unsafe fn read(env: sys::napi_env, v8_version: &str) -> Result<Option<Read>, String> {
  if let Some(why) = unreadable(v8_version) {
    return Err(why);
  }
  let api = heap_sampler::api().ok_or("V8's heap profiler API is not reachable")?;
  let get = api
    .get_allocation_profile
    .ok_or("V8's heap profiler API is not reachable")?;
  let profiler = heap_sampler::profiler(api).ok_or("this thread has no isolate")?;
  let mut scope = std::ptr::null_mut();
  // SAFETY: a JS thread in a Node-API call.
  if unsafe { sys::napi_open_handle_scope(env, &mut scope) } != sys::Status::napi_ok {
    return Err("no handle scope could be opened".into());
  }
  let _scope = HandleScope(env, scope);
  // SAFETY: `profiler` is this isolate's; the result is ours to delete (null: no sampler).
  let profile = unsafe { get(profiler) };
  if profile.is_null() {
    return Ok(None);
  }
  let profile = Owned(profile);
  // SAFETY: slot `LAYOUT.vtable_root` is `GetRootNode` (checked against the headers).
  let root = unsafe {
    let get_root: GetRootNode = std::mem::transmute(*profile.vtable().add(LAYOUT.vtable_root));
    get_root(profile.0)
  };
  if root.is_null() {
    return Err("V8's heap profile has no root".into());
  }
  // SAFETY: `root` and every node under it live until `profile` is deleted, after the walk;
  // their handles live in `_scope`.
  unsafe { walk(env, root) }.map(Some)
}

/// The tree under `root`, parents first, into the binary flat form.
///
/// # Safety
/// `root` is a live `AllocationProfile::Node` whose handles are live.
unsafe fn walk(env: sys::napi_env, root: *const Node) -> Result<Read, String> {
  let mut out = HeapWriter::default();
  let mut scripts: Vec<String> = Vec::new();
  let mut script_of: HashMap<c_int, i32> = HashMap::new();
  let mut buf = Vec::with_capacity(256);
  let mut todo: Vec<(*const Node, i32)> = vec![(root, -1)];
  let mut count = 0usize;
  while let Some((node, parent)) = todo.pop() {
    count += 1;
    if count > MAX_NODES || node.is_null() {
      return Err("V8's heap profile does not read as one".into());
    }
    // SAFETY: the caller's promise, for the root and each child V8 lists.
    let node = unsafe { &*node };
    // SAFETY: V8's handles to its strings.
    let text = unsafe { utf8(env, node.name, &mut buf)? };
    if parent == -1 && text != b"(root)" {
      return Err(format!(
        "V8's heap profile does not read as one (its root is named {:?})",
        String::from_utf8_lossy(text)
      ));
    }
    let name = out.name(text);
    let script = if node.script_id == NO_SCRIPT_ID {
      -1
    } else if let Some(&s) = script_of.get(&node.script_id) {
      s
    } else {
      // SAFETY: as the name.
      let text = unsafe { utf8(env, node.script_name, &mut buf)? };
      let s = if text.is_empty() {
        -1
      } else {
        scripts.push(String::from_utf8_lossy(text).into_owned());
        scripts.len() as i32 - 1
      };
      script_of.insert(node.script_id, s);
      s
    };
    let (mut bytes, mut objects) = (0f64, 0f64);
    // SAFETY: V8's vectors, live with the node.
    for a in unsafe { node.allocations.as_slice() } {
      bytes += a.size as f64 * f64::from(a.count);
      objects += f64::from(a.count);
    }
    // 0-based, -1 for none, as the inspector gives them.
    let index = out.node(
      parent,
      name,
      script,
      node.line_number - 1,
      node.column_number - 1,
      bytes,
      objects,
    );
    // SAFETY: as above.
    for &child in unsafe { node.children.as_slice() }.iter().rev() {
      todo.push((child, index));
    }
  }
  Ok(Read {
    bytes: out.finish(),
    scripts,
  })
}

#[cfg(test)]
mod tests;
