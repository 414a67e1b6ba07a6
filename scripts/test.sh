#!/usr/bin/env bash
# npm test: the gates (scripts/lint.sh) beside the set-up of the backend tests' readers
# (scripts/test-tools.sh: Python virtualenvs, mostly pip's downloads), then the Rust tests
# and the node:test suite, two test files at a time (most of a file's time is spent
# waiting for samples, children and receivers). The set-up's output follows the gates'.
set -uo pipefail
cd "$(dirname "$0")/.."
tools_log=$(mktemp)
bash scripts/test-tools.sh >"$tools_log" 2>&1 &
tools=$!
lint=0
bash scripts/lint.sh || lint=$?
tools_status=0
wait "$tools" || tools_status=$?
cat "$tools_log"
rm -f "$tools_log"
if [ "$lint" != 0 ] || [ "$tools_status" != 0 ]; then exit 1; fi
cargo test --quiet || exit 1
node --test --test-concurrency=2 __test__/*.test.js
