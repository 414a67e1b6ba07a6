# shellcheck shell=bash
# The suite's test files run one at a time under an emulator (qemu-user, wine): sourced by
# scripts/qemu-arm64.sh and scripts/wine-win64.sh, which define `run` (their Node under the
# emulator, arguments as node's), `work` (a scratch directory) and the counters `passed`
# and `failed`, which these add to.

# emulated_tree <binary>: a copy of the package in $work/tree with <binary> in place of the
# host's, as the tests load it; prints its path.
emulated_tree() {
  local tree=$work/tree
  mkdir -p "$tree"
  cp -r package.json index.js binding.js start.js lib __test__ "$tree/"
  ln -s "$PWD/node_modules" "$tree/node_modules"
  cp "$1" "$tree/"
  echo "$tree"
}

# emulated_tests <tree> <platform> <lines to show> <name>...: runs __test__/<name>.test.js
# for each name in <tree>, its report to $work/<name>.log (wine cannot write to a pipe);
# shows the lines matching the extended regex <lines to show>, counts, and on a failure the
# failing tests.
emulated_tests() {
  local tree=$1 platform=$2 shown=$3 t t0 status p f
  shift 3
  for t in "$@"; do
    t0=$SECONDS
    if (cd "$tree" && run --test-reporter=spec "__test__/$t.test.js" </dev/null >"$work/$t.log" 2>&1); then status=ok; else status=FAIL; fi
    grep -aE "^ℹ (tests|pass|fail|skipped) |$shown" "$work/$t.log" | sed 's/^/  /'
    # Wine's Node ends its lines with \r\n.
    p=$(sed -n 's/^ℹ pass \([0-9]*\)\r\{0,1\}$/\1/p' "$work/$t.log" | tail -1)
    f=$(sed -n 's/^ℹ fail \([0-9]*\)\r\{0,1\}$/\1/p' "$work/$t.log" | tail -1)
    passed=$((passed + ${p:-0}))
    failed=$((failed + ${f:-0}))
    if [ "$status" = FAIL ] && [ "${f:-0}" = 0 ]; then failed=$((failed + 1)); cat "$work/$t.log"; fi
    [ "$status" = FAIL ] && sed -n '/failing tests:/,$p' "$work/$t.log" | head -60 || true
    echo "  $status __test__/$t.test.js on $platform ($((SECONDS - t0)) s)"
  done
}
