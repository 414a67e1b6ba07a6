# Sourced by .ci/run (bash, set -euo pipefail): its two ways of running steps.

# A step: the command, between lines that say what runs and how long it took; its status
# is the command's. (Bash ignores set -e inside a function called before `&&`, as in a
# lane's `step a && step b`: a failing `a` must still fail the step and end the lane.)
step() {
  local t0=$SECONDS status=0
  echo "::: $*"
  "$@" || status=$?
  echo "::: $* took $((SECONDS - t0)) s"
  return "$status"
}

# Steps run beside each other: each's output is printed whole once all have ended, and a
# failure in any fails CI.
together() {
  local dir t0=$SECONDS failed=0 i=0 pids=()
  dir=$(mktemp -d)
  echo "::: together: $*"
  for f in "$@"; do
    "$f" >"$dir/$i" 2>&1 &
    pids+=($!)
    i=$((i + 1))
  done
  for i in "${!pids[@]}"; do
    wait "${pids[$i]}" || failed=1
  done
  for i in "${!pids[@]}"; do cat "$dir/$i"; done
  rm -rf "$dir"
  echo "::: together: $* took $((SECONDS - t0)) s"
  if [ "$failed" != 0 ]; then
    echo "ci: a step run beside others failed: its output is above" >&2
    exit 1
  fi
}
