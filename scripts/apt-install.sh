#!/usr/bin/env bash
# scripts/apt-install.sh WHO PACKAGE...: installs Debian packages a CI step needs, updating
# the package lists only when the install cannot find them; the log goes to
# /tmp/selfprof-apt-WHO.log, named in the one error line if the install fails.
set -uo pipefail
who=$1
shift
log=/tmp/selfprof-apt-$who.log
echo "$who: apt-get install $*"
export DEBIAN_FRONTEND=noninteractive
if ! apt-get install -y --no-install-recommends "$@" >"$log" 2>&1; then
  if ! { apt-get update >>"$log" 2>&1 && apt-get install -y --no-install-recommends "$@" >>"$log" 2>&1; }; then
    echo "$who: apt-get install $* failed (see $log)" >&2
    exit 1
  fi
fi
