#!/usr/bin/env bash
# The gates (`npm run lint`; `npm test` runs them first, and so CI): ESLint over the JS,
# TypeScript's check of lib/ and of the report's client (JSDoc, no build step), rustfmt,
# and clippy with every warning an error. `bash scripts/lint.sh js` runs the JS gates only,
# `rust` the Rust ones. Every gate runs, each failure is listed at the end, and any fails it.
set -uo pipefail
cd "$(dirname "$0")/.."
which=${1:-all}
case "$which" in all | js | rust) ;; *)
  echo "usage: scripts/lint.sh [all|js|rust]" >&2
  exit 2
  ;;
esac
bin=node_modules/.bin
failed=()
gate() { # name command...
  local name=$1 t0=$SECONDS
  shift
  if "$@"; then
    echo "lint: $name passed ($((SECONDS - t0)) s)"
  else
    echo "lint: $name FAILED ($((SECONDS - t0)) s): $*" >&2
    failed+=("$name")
  fi
}
if [ "$which" != rust ]; then
  # The cache (results of unchanged files under an unchanged config) keeps a re-run to a second.
  gate eslint "$bin/eslint" --max-warnings 0 --cache --cache-location node_modules/.cache/eslint/ .
  gate "tsc lib/" "$bin/tsc" -p tsconfig.json
  gate "tsc report client" "$bin/tsc" -p tsconfig.client.json
fi
if [ "$which" != js ]; then
  gate rustfmt cargo fmt --check
  gate clippy cargo clippy --all-targets --quiet -- -D warnings
fi
if [ ${#failed[@]} -gt 0 ]; then
  echo "lint: failed: ${failed[*]}" >&2
  exit 1
fi
