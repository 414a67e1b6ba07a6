#!/usr/bin/env bash
# What scripts/build-all.js needs, installed from the registries this project uses:
# the Rust standard libraries of every napi target and of Windows (rustup), zig and
# cargo-zigbuild (PyPI; zig links the glibc, musl and macOS targets), Debian's mingw-w64
# (links the Windows target, and declares the Windows DLLs' functions for its check), and
# readelf/llvm-nm/llvm-objdump for the static checks (Debian). Idempotent: present tools
# are left alone.
set -euo pipefail
cd "$(dirname "$0")/.."
start=$SECONDS

# Pinned: the versions the README's numbers were measured with.
ZIG_VERSION=0.15.2
ZIGBUILD_VERSION=0.24.0

targets=$(node -p "[...require('./package.json').napi.targets, ...Object.keys(require('./scripts/pack').WINDOWS)].join(' ')")
missing=()
for t in $targets; do
  rustup target list --installed | grep -qx "$t" || missing+=("$t")
done
if ((${#missing[@]})); then
  echo "setup-cross: rustup target add ${missing[*]}"
  rustup target add "${missing[@]}" >/dev/null
fi

have_zig() { zig version >/dev/null 2>&1 || python3 -m ziglang version >/dev/null 2>&1; }
if ! have_zig || ! cargo zigbuild --help >/dev/null 2>&1; then
  echo "setup-cross: pip install ziglang==$ZIG_VERSION cargo-zigbuild==$ZIGBUILD_VERSION"
  python3 -m pip install --quiet --disable-pip-version-check "ziglang==$ZIG_VERSION" "cargo-zigbuild==$ZIGBUILD_VERSION"
  # pyenv installs console scripts behind shims that need a rehash.
  command -v pyenv >/dev/null 2>&1 && pyenv rehash || true
fi
have_zig || { echo "setup-cross: zig is still not runnable after pip install ziglang" >&2; exit 1; }
cargo zigbuild --help >/dev/null 2>&1 || { echo "setup-cross: cargo zigbuild is still not runnable after pip install cargo-zigbuild" >&2; exit 1; }

apt=()
command -v readelf >/dev/null || apt+=(binutils)
{ command -v llvm-nm >/dev/null && command -v llvm-objdump >/dev/null; } || apt+=(llvm)
command -v x86_64-w64-mingw32-gcc >/dev/null || apt+=(gcc-mingw-w64-x86-64-win32)
if ((${#apt[@]})); then
  bash scripts/apt-install.sh setup-cross "${apt[@]}"
fi
echo "setup-cross: ready in $((SECONDS - start)) s (zig $( (zig version 2>/dev/null || python3 -m ziglang version) | head -1), $(cargo-zigbuild --version 2>/dev/null | head -1))"
