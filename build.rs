fn main() {
  napi_build::setup();
  // Reads no file of the package: without this, cargo lists the whole package directory to
  // fingerprint the script, and a parallel napi build's transaction files, gone mid-listing,
  // failed it (the cross builds, two at a time).
  println!("cargo:rerun-if-changed=build.rs");
}
