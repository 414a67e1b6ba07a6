#!/usr/bin/env bash
# Sanitizer runs of the Rust code, where the toolchain allows (nightly rustc):
#  - AddressSanitizer (and LeakSanitizer) over every Rust test: the trace builder, pprof
#    encoder/decoder, converters, the ring, and the real SIGPROF handler under signal
#    storms (tests/signal_safety.rs);
#  - Miri (undefined behaviour, data races in its model) over the ring buffer's
#    lock-free reads and writes: tests that do no FFI (Miri cannot run signals or napi).
#    SANITIZE_MIRI_FORMATS=1 runs it over the converters and the pprof code too; CI leaves
#    that out, as formats:: has no unsafe code of selfprof's (Miri there checks zlib-rs).
# Each part says so and is skipped when its toolchain piece is missing; under CI (CI set)
# a missing piece is a failure instead, so CI cannot pass without ASan and Miri.
set -uo pipefail
cd "$(dirname "$0")/.."
status=0
# Miri's budget per run, in seconds (see below): checked before anything runs.
budget=${MIRI_BUDGET_S:-480}
if ! [[ "$budget" =~ ^[1-9][0-9]{0,5}$ ]]; then
  echo "sanitize: MIRI_BUDGET_S must be a whole number of seconds from 1 to 999999, not '$budget'"
  exit 2
fi
if ! cargo +nightly --version >/dev/null 2>&1; then
  if [ -n "${CI:-}" ]; then
    echo "sanitize: no nightly toolchain (rustup toolchain install nightly): CI must run ASan and Miri" >&2
    exit 1
  fi
  echo "sanitize: no nightly toolchain (rustup toolchain install nightly): skipped"
  exit 0
fi
host=$(rustc -vV | sed -n 's/^host: //p')

echo "=== AddressSanitizer: cargo +nightly test (lib and tests/) ==="
if RUSTFLAGS="-Zsanitizer=address" RUSTDOCFLAGS="-Zsanitizer=address" \
  cargo +nightly test --quiet --target "$host" --target-dir target/asan --lib --tests; then
  echo "asan: pass"
else
  echo "asan: FAIL"; status=1
fi

echo "=== Miri: ring buffer${SANITIZE_MIRI_FORMATS:+, converters, pprof} ==="
if ! cargo +nightly miri --version >/dev/null 2>&1; then
  rustup component add miri --toolchain nightly >/dev/null 2>&1 || true
fi
if cargo +nightly miri --version >/dev/null 2>&1; then
  # formats:: has no unsafe code of ours; its gzip goes through zlib-rs, whose deallocation
  # in Deflate's drop Miri's (experimental) Stacked Borrows rejects. Its aliasing model is
  # left off for that run only; ring:: (and everything else Miri checks) keeps it.
  # Each run has a budget (CI as a whole has 30 minutes): a test too slow under Miri ends
  # the run with a failure naming the budget instead of stretching CI past its limit. A
  # test of scale rather than memory safety is marked #[cfg_attr(miri, ignore)].
  miri_run() {
    timeout --kill-after=10 "$budget" "$@"
    local rc=$?
    if [ $rc -eq 124 ] || [ $rc -eq 137 ]; then
      echo; echo "miri: '$*' ran past its ${budget} s budget: find the slow test (-Z unstable-options --report-time) and mark it #[cfg_attr(miri, ignore)] if it tests scale"
    fi
    return $rc
  }
  if miri_run cargo +nightly miri test --lib -- ring:: &&
    { [ "${SANITIZE_MIRI_FORMATS:-}" != 1 ] ||
      MIRIFLAGS="${MIRIFLAGS:-} -Zmiri-disable-stacked-borrows" miri_run cargo +nightly miri test --lib -- formats::; }; then
    echo "miri: pass"
  else
    echo "miri: FAIL"; status=1
  fi
elif [ -n "${CI:-}" ]; then
  echo "miri: not available for the nightly toolchain (rustup component add miri --toolchain nightly): CI must run it" >&2
  status=1
else
  echo "miri: not available for the nightly toolchain: skipped"
fi
exit $status
