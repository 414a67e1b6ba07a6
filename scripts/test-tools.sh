#!/usr/bin/env bash
# The Python tools the backend tests read uploads back with, each in its own virtualenv
# under .venv/ (their pins conflict: ddapm-test-agent wants opentelemetry-proto < 1.37,
# whose profiles proto is older than the v1.10 the Rust crate writes):
#   .venv/ddagent  ddapm-test-agent, Datadog's test agent (a real /profiling/v1/input)
#   .venv/otlp     opentelemetry-proto 1.45.2 (proto v1.10 profiles/v1development, the
#                  same descriptors as the opentelemetry-proto crate 0.33 in Cargo.toml)
# Idempotent: a virtualenv that already imports what it needs is kept.
set -euo pipefail
cd "$(dirname "$0")/.."
DDAGENT_VERSION=1.69.1
OTLP_PROTO_VERSION=1.45.2
started=$SECONDS
make_venv() { # dir check-command packages...
  local dir=$1 check=$2
  shift 2
  if [ -x "$dir/bin/python" ] && "$dir/bin/python" -c "$check" >/dev/null 2>&1; then
    echo "  $dir: present"
    return
  fi
  rm -rf "$dir"
  python3 -m venv "$dir"
  "$dir/bin/pip" install --quiet --disable-pip-version-check "$@"
  echo "  $dir: installed $*"
}
echo "test tools (Python virtualenvs under .venv/) ..."
# npm test runs this first. Outside CI a tool that cannot be installed (no python3-venv,
# no network) is a warning and its tests skip, saying so; under CI it is a failure.
if ! (make_venv .venv/ddagent "import importlib.metadata as m; assert m.version('ddapm-test-agent') == '$DDAGENT_VERSION'" "ddapm-test-agent==$DDAGENT_VERSION" &&
  make_venv .venv/otlp "import importlib.metadata as m; assert m.version('opentelemetry-proto') == '$OTLP_PROTO_VERSION'" "opentelemetry-proto==$OTLP_PROTO_VERSION"); then
  if [ "${CI:-}" = "true" ]; then
    echo "test tools could not be installed" >&2
    exit 1
  fi
  echo "test tools could not be installed: the Datadog agent and OTLP decoder tests will skip" >&2
  exit 0
fi
echo "test tools ready in $((SECONDS - started)) s"
