'use strict';
// Builds the addon for every target in package.json's `napi.targets` on this Linux
// machine, with the napi CLI's own cross build (`napi build -x`: cargo-zigbuild, zig as
// the linker), moves the binaries into the per-platform packages under npm/ (`napi
// artifacts`), and checks each binary statically:
//
// - Linux glibc: built against glibc 2.17 (zig's versioned target) and no symbol needs a
//   newer one; links only libc/libpthread/libdl/libm/libgcc_s.
// - Linux musl: no glibc symbol version and no glibc library; musl's libc only.
// - macOS: a Mach-O of the right CPU that loads only libSystem, and every undefined
//   symbol is one libSystem exports for that architecture (read from the libSystem.tbd
//   that zig ships), so nothing Linux-only is left. It is built here, never run.
// - Windows x64 (`x86_64-pc-windows-gnu`, outside napi's targets: see pack.js `WINDOWS`):
//   built by the napi CLI the way it supports that target, with Debian's mingw-w64 as the
//   linker and no `-x`; Node-API comes from node.exe at load time (napi's `dyn-symbols`), so
//   the libnode.dll napi-build asks for is an empty stand-in. Checked: a 64-bit x64 PE DLL
//   exporting only `napi_register_module_v1`, importing only from DLLs every Windows 10
//   has (or node.exe), each function one mingw-w64's import library for that DLL declares.
//
// Usage: node scripts/build-all.js [triple ...]   (default: every napi target, and Windows)
// Needs: rustup targets, cargo-zigbuild and zig, mingw-w64 (scripts/setup-cross.sh
// installs them), readelf and llvm-nm/llvm-objdump. Prints a line per target and writes
// artifacts/summary.json (sizes, times, checks) for docs/development.md and the pack test.

const { execFileSync, spawn, spawnSync } = require('node:child_process');
const fs = require('node:fs');
const path = require('node:path');
const { WINDOWS } = require('./pack');

const root = path.resolve(__dirname, '..');
const pkg = JSON.parse(fs.readFileSync(path.join(root, 'package.json'), 'utf8'));
const GLIBC_FLOOR = '2.17';
// The oldest macOS that Node 20's builds run on, per CPU (zig would default to 13.0).
const MACOS_FLOOR = { x64: '10.15', arm64: '11.0' };
const artifacts = path.join(root, 'artifacts');
const started = Date.now();

/** napi's platform name of a triple, as its package and file names use it. */
function platformOf(triple) {
  if (WINDOWS[triple]) return WINDOWS[triple];
  const [arch, , os, abi] = triple.split('-');
  const cpu = { x86_64: 'x64', aarch64: 'arm64' }[arch];
  if (!cpu) throw new Error(`build-all: unsupported architecture in ${triple}`);
  if (os === 'darwin') return `darwin-${cpu}`;
  if (os === 'linux' && (abi === 'gnu' || abi === 'musl')) return `linux-${cpu}-${abi}`;
  throw new Error(`build-all: unsupported target ${triple}`);
}

/** Builds still running (the other lane's), ended with the run. */
const running = new Set();

function fail(message) {
  console.error(`build-all: ${message}`);
  for (const child of running) child.kill('SIGTERM');
  process.exit(1);
}

function run(cmd, args, options = {}) {
  return execFileSync(cmd, args, { cwd: root, encoding: 'utf8', maxBuffer: 1 << 26, ...options });
}

// --- preflight: say what is missing in one line each, rather than fail half-way ---------
const wanted = process.argv.slice(2);
const known = [...pkg.napi.targets, ...Object.keys(WINDOWS)];
for (const t of wanted) if (!known.includes(t)) fail(`${JSON.stringify(t)} is not one of package.json's napi.targets or Windows': ${known.join(', ')}`);
const targets = wanted.length ? wanted : known;
const MINGW_LINKER = 'x86_64-w64-mingw32-gcc';
{
  const missing = [];
  const installed = run('rustup', ['target', 'list', '--installed']).split('\n');
  const absent = targets.filter((t) => !installed.includes(t));
  if (absent.length) missing.push(`rustup target add ${absent.join(' ')}`);
  if (spawnSync('cargo', ['zigbuild', '--help'], { stdio: 'ignore' }).status !== 0) missing.push('cargo-zigbuild (pip install cargo-zigbuild)');
  const zig = spawnSync('zig', ['version'], { encoding: 'utf8' });
  const pyzig = zig.status === 0 ? zig : spawnSync('python3', ['-m', 'ziglang', 'version'], { encoding: 'utf8' });
  if (pyzig.status !== 0) missing.push('zig (pip install ziglang)');
  for (const tool of ['readelf', 'llvm-nm', 'llvm-objdump']) {
    if (spawnSync(tool, ['--version'], { stdio: 'ignore' }).status !== 0) missing.push(`${tool} (apt-get install binutils llvm)`);
  }
  if (targets.some((t) => WINDOWS[t]) && spawnSync(MINGW_LINKER, ['--version'], { stdio: 'ignore' }).status !== 0) {
    missing.push(`${MINGW_LINKER} (apt-get install gcc-mingw-w64-x86-64-win32)`);
  }
  if (missing.length) fail(`missing: ${missing.join('; ')}. scripts/setup-cross.sh installs them all.`);
  console.log(`build-all: ${targets.length} targets, zig ${pyzig.stdout.trim()}, glibc floor ${GLIBC_FLOOR}`);
}

// --- static checks ---------------------------------------------------------------------
const ELF_MACHINE = { x64: 0x3e, arm64: 0xb7 };
const MACHO_CPU = { x64: 0x01000007, arm64: 0x0100000c };
/** Linux/glibc-only functions (Mach-O spelling) a macOS build must not need. */
const LINUX_ONLY = ['___errno_location', '_gettid', '_syscall', '_tgkill', '_getauxval', '_prctl', '_memfd_create', '_epoll_create1', '_eventfd', '_secure_getenv', '_pthread_getattr_np', '_gnu_get_libc_version', '_sched_getcpu'];

function versionLess(a, b) {
  const pa = a.split('.').map(Number);
  const pb = b.split('.').map(Number);
  for (let i = 0; i < Math.max(pa.length, pb.length); i++) {
    if ((pa[i] ?? 0) !== (pb[i] ?? 0)) return (pa[i] ?? 0) < (pb[i] ?? 0);
  }
  return false;
}

function checkElf(file, cpu, abi) {
  const head = fs.readFileSync(file).subarray(0, 20);
  if (head.readUInt32BE(0) !== 0x7f454c46) throw new Error('not an ELF file');
  if (head.readUInt16LE(18) !== ELF_MACHINE[cpu]) throw new Error(`ELF machine 0x${head.readUInt16LE(18).toString(16)}, expected ${cpu}`);
  const dynamic = run('readelf', ['-d', '--wide', file]);
  const needed = [...dynamic.matchAll(/\(NEEDED\)\s+Shared library: \[([^\]]+)\]/g)].map((m) => m[1]);
  const versions = [...new Set([...run('readelf', ['-V', '--wide', file]).matchAll(/GLIBC_([0-9.]+)/g)].map((m) => m[1]))];
  versions.sort((a, b) => (versionLess(a, b) ? -1 : 1));
  if (abi === 'gnu') {
    const newest = versions[versions.length - 1];
    if (!newest) throw new Error('no glibc symbol versions: not a glibc build?');
    if (versionLess(GLIBC_FLOOR, newest)) throw new Error(`needs GLIBC_${newest}, above the ${GLIBC_FLOOR} floor`);
    const allowed = /^(libc\.so\.6|libpthread\.so\.0|libdl\.so\.2|libm\.so\.6|libgcc_s\.so\.1|librt\.so\.1|ld-linux-(x86-64|aarch64)\.so\.[12])$/;
    const other = needed.filter((n) => !allowed.test(n));
    if (other.length) throw new Error(`links ${other.join(', ')}`);
    return { needed, glibc: newest, check: `glibc ≤ ${GLIBC_FLOOR} (newest symbol GLIBC_${newest}); needs ${needed.join(' ')}` };
  }
  if (versions.length) throw new Error(`musl build refers to glibc versions ${versions.join(', ')}`);
  const glibcLibs = needed.filter((n) => /^(libc\.so\.6|libpthread\.so\.0|libdl\.so\.2|ld-linux)/.test(n));
  if (glibcLibs.length) throw new Error(`musl build links glibc's ${glibcLibs.join(', ')}`);
  if (!needed.some((n) => /^libc(\.musl-[a-z0-9_]+)?\.so(\.1)?$/.test(n))) throw new Error(`musl build does not link musl's libc (needs ${needed.join(', ')})`);
  return { needed, check: `no glibc symbol or library; needs ${needed.join(' ')}` };
}

let libSystemCache;
/** Symbols libSystem (and the libraries it re-exports) exports, per architecture, from zig's libSystem.tbd. */
function libSystemExports() {
  if (libSystemCache) return libSystemCache;
  let libDir;
  const zig = spawnSync('zig', ['env'], { encoding: 'utf8' });
  if (zig.status === 0) libDir = JSON.parse(zig.stdout).lib_dir;
  else libDir = path.join(run('python3', ['-c', 'import ziglang, os; print(os.path.dirname(ziglang.__file__))']).trim(), 'lib');
  const tbd = fs.readFileSync(path.join(libDir, 'libc', 'darwin', 'libSystem.tbd'), 'utf8');
  const out = { x64: new Set(), arm64: new Set() };
  // TBD v4: under `exports:`, `- targets: [ ... ]` then `symbols:`/`weak-symbols:`/... lists.
  let targets = [];
  let inList = null;
  const add = (text) => {
    for (const m of text.matchAll(/'([^']+)'|([A-Za-z0-9_$.]+)/g)) {
      const sym = m[1] ?? m[2];
      for (const t of targets) {
        if (t.startsWith('x86_64-macos')) out.x64.add(sym);
        if (t.startsWith('arm64-macos')) out.arm64.add(sym);
      }
    }
  };
  let targetText = null;
  for (const line of tbd.split('\n')) {
    if (targetText !== null) {
      targetText += line;
      if (line.includes(']')) {
        targets = targetText.replace(/.*\[/, '').replace(/\].*/, '').split(',').map((s) => s.trim());
        targetText = null;
      }
      continue;
    }
    const tm = line.match(/^\s*- targets:\s*\[(.*)$/);
    if (tm) {
      inList = null;
      if (tm[1].includes(']')) targets = tm[1].replace(/\].*/, '').split(',').map((s) => s.trim());
      else targetText = tm[1];
      continue;
    }
    const lm = line.match(/^\s*(symbols|weak-symbols|thread-local-symbols):\s*\[(.*)$/);
    if (lm) {
      inList = !lm[2].includes(']');
      add(lm[2].replace(/\].*/, ''));
      continue;
    }
    if (inList) {
      add(line.replace(/\].*/, ''));
      if (line.includes(']')) inList = null;
    } else if (/^\S/.test(line)) {
      targets = [];
    }
  }
  libSystemCache = out;
  return out;
}

function checkMachO(file, cpu, floor) {
  const head = fs.readFileSync(file).subarray(0, 8);
  if (head.readUInt32LE(0) !== 0xfeedfacf) throw new Error('not a 64-bit Mach-O file');
  if (head.readUInt32LE(4) !== MACHO_CPU[cpu]) throw new Error(`Mach-O cputype 0x${head.readUInt32LE(4).toString(16)}, expected ${cpu}`);
  const headers = run('llvm-objdump', ['--macho', '--private-headers', file]);
  const dylibs = [...headers.matchAll(/cmd LC_(?:LOAD|LOAD_WEAK|REEXPORT)_DYLIB\n\s+cmdsize \d+\n\s+name (\S+)/g)].map((m) => m[1]);
  // libiconv and libcharset come with Rust's libc crate (a link attribute); they are in
  // every macOS's /usr/lib (dyld shared cache), and no symbol is taken from them (below).
  const osLibs = ['/usr/lib/libSystem.B.dylib', '/usr/lib/libiconv.2.dylib', '/usr/lib/libcharset.1.dylib'];
  const foreign = dylibs.filter((d) => !osLibs.includes(d));
  if (!dylibs.includes(osLibs[0]) || foreign.length) throw new Error(`loads ${dylibs.join(', ')}; expected libSystem (and libiconv/libcharset) only`);
  const minos = headers.match(/cmd LC_BUILD_VERSION[\s\S]*?minos (\S+)/)?.[1] ?? headers.match(/cmd LC_VERSION_MIN_MACOSX[\s\S]*?version (\S+)/)?.[1];
  if (!minos || versionLess(floor, minos)) throw new Error(`built for macOS ≥ ${minos}, above the ${floor} floor`);
  const undefinedSyms = run('llvm-nm', ['--undefined-only', '--just-symbol-name', file]).split('\n').filter(Boolean);
  const exported = libSystemExports()[cpu];
  if (exported.size < 1000) throw new Error(`read only ${exported.size} symbols from libSystem.tbd`);
  const unresolved = undefinedSyms.filter((s) => !exported.has(s));
  if (unresolved.length) throw new Error(`undefined symbols libSystem does not export: ${unresolved.join(', ')}`);
  // Belt and braces: what the Linux handler calls (and its usual neighbours) is absent.
  const linuxOnly = undefinedSyms.filter((s) => LINUX_ONLY.includes(s));
  if (linuxOnly.length) throw new Error(`Linux-only symbols: ${linuxOnly.join(', ')}`);
  const signalSide = ['_pthread_threadid_np', '___error', '_mach_absolute_time', '_mach_timebase_info', '_clock_gettime', '_sigaction'];
  const absent = signalSide.filter((s) => !undefinedSyms.includes(s));
  if (absent.length) throw new Error(`the macOS signal side is not linked in: ${absent.join(', ')} missing`);
  return {
    needed: dylibs,
    minos,
    undefinedSymbols: undefinedSyms.length,
    check: `loads ${dylibs.map((d) => path.basename(d)).join(' ')}; all ${undefinedSyms.length} undefined symbols exported by libSystem (${cpu}), none Linux-only; macOS ≥ ${minos}`,
  };
}

/**
 * The DLLs every Windows 10 (x64) has that the binary may import from, by lower-case
 * name, with mingw-w64's import library that declares their functions (a list where it
 * has none). node.exe exports Node-API (napi loads it at run time, but an import would do).
 */
const WINDOWS_DLLS = {
  'kernel32.dll': 'kernel32',
  'ntdll.dll': 'ntdll',
  'msvcrt.dll': 'msvcrt',
  'advapi32.dll': 'advapi32',
  'ws2_32.dll': 'ws2_32',
  'userenv.dll': 'userenv',
  'api-ms-win-core-synch-l1-2-0.dll': 'synchronization',
  // Rust's std draws its random seeds from here (Windows 10's).
  'bcryptprimitives.dll': ['ProcessPrng'],
  'node.exe': null,
};
const MINGW_LIB = '/usr/x86_64-w64-mingw32/lib';
const importLibCache = new Map();
/** The functions (and data) mingw-w64's import library `lib<name>.a` declares. */
function importLib(name) {
  if (!importLibCache.has(name)) {
    const file = path.join(MINGW_LIB, `lib${name}.a`);
    if (!fs.existsSync(file)) throw new Error(`no ${file} to check imports against (apt-get install mingw-w64-x86-64-dev)`);
    const syms = run('llvm-nm', ['--just-symbol-name', file]).split('\n');
    importLibCache.set(name, new Set(syms.filter((n) => n.startsWith('__imp_')).map((n) => n.slice(6))));
  }
  return importLibCache.get(name);
}

function checkPe(file) {
  const bytes = fs.readFileSync(file);
  if (bytes.readUInt16LE(0) !== 0x5a4d) throw new Error('not a PE file (no MZ header)');
  const pe = bytes.readUInt32LE(0x3c);
  if (bytes.readUInt32LE(pe) !== 0x00004550) throw new Error('not a PE file (no PE signature)');
  const machine = bytes.readUInt16LE(pe + 4);
  if (machine !== 0x8664) throw new Error(`PE machine 0x${machine.toString(16)}, expected x64 (0x8664)`);
  if ((bytes.readUInt16LE(pe + 22) & 0x2000) === 0) throw new Error('not a DLL');
  if (bytes.readUInt16LE(pe + 24) !== 0x20b) throw new Error('not a PE32+ (64-bit) image');
  const dump = run('llvm-objdump', ['-p', file]);
  const exports = [...(dump.split('Export Table:')[1] ?? '').matchAll(/^\s+\d+\s+0x[0-9a-f]+\s+(\S+)$/gm)].map((m) => m[1]);
  if (exports.join() !== 'napi_register_module_v1') throw new Error(`exports ${exports.join(', ') || 'nothing'}; expected napi_register_module_v1 only`);
  const imports = new Map();
  let dll = null;
  for (const line of (dump.split('The Import Tables:')[1] ?? '').split('Export Table:')[0].split('\n')) {
    const d = line.match(/^\s+DLL Name: (\S+)/);
    if (d) {
      dll = d[1].toLowerCase();
      if (!imports.has(dll)) imports.set(dll, []); // a DLL may have two tables (KERNEL32, kernel32)
      continue;
    }
    const f = line.match(/^\s+\d+\s+([A-Za-z_][\w@?$]*)$/);
    if (f && dll) imports.get(dll).push(f[1]);
  }
  if (!imports.has('kernel32.dll')) throw new Error(`imports ${[...imports.keys()].join(', ')}: no kernel32.dll, the import table was not read`);
  const foreign = [...imports.keys()].filter((d) => !(d in WINDOWS_DLLS));
  if (foreign.length) throw new Error(`imports from ${foreign.join(', ')}, not a DLL every Windows 10 has`);
  let functions = 0;
  for (const [name, fns] of imports) {
    const known = WINDOWS_DLLS[name];
    if (known === null) continue;
    const declared = Array.isArray(known) ? new Set(known) : importLib(known);
    const unknown = fns.filter((f) => !declared.has(f));
    if (unknown.length) throw new Error(`imports from ${name} what its import library does not declare: ${unknown.join(', ')}`);
    functions += fns.length;
  }
  return {
    needed: [...imports.keys()],
    check: `PE32+ x64 DLL exporting napi_register_module_v1; ${functions} functions from ${[...imports.keys()].join(' ')}`,
  };
}

/**
 * The empty stand-in for the libnode.dll napi-build links Windows GNU builds against:
 * `-lnode` finds the empty archive; the napi functions are loaded from node.exe.
 */
function libnodeStandIn() {
  const dir = path.join(root, 'target', 'selfprof-libnode');
  fs.mkdirSync(dir, { recursive: true });
  fs.writeFileSync(path.join(dir, 'libnode.a'), '!<arch>\n');
  fs.writeFileSync(path.join(dir, 'libnode.dll'), '');
  return dir;
}

// --- build -----------------------------------------------------------------------------
// Only this run's targets are rebuilt; `napi artifacts` wants every target's binary, so
// a run for some targets keeps the others' from an earlier run.
fs.mkdirSync(artifacts, { recursive: true });
for (const t of targets) fs.rmSync(path.join(artifacts, `${pkg.napi.binaryName}.${platformOf(t)}.node`), { force: true });
// Windows builds go apart: `napi artifacts` takes every binary under artifacts/ for one of
// napi's targets.
const windowsOut = path.join(root, 'target', 'selfprof-windows');
fs.rmSync(windowsOut, { recursive: true, force: true });
const napi = path.join(root, 'node_modules', '.bin', 'napi');
// Two builds at a time: a release build ends in one long single-threaded step (fat LTO, one
// codegen unit), which the other lane's build overlaps. Each lane has its own cargo target
// directory (cargo locks one per build); lane 0 keeps the usual target/.
const LANES = Math.min(2, targets.length);
const laneDir = (lane) => (lane === 0 ? 'target' : path.join('target', `selfprof-lane-${lane}`));

/** `cmd args` run to its end: its status, its output, the seconds it took. */
function spawnCollect(cmd, args, options) {
  const t0 = Date.now();
  return new Promise((resolve) => {
    const child = spawn(cmd, args, { ...options, stdio: ['ignore', 'pipe', 'pipe'] });
    running.add(child);
    child.on('close', () => running.delete(child));
    let output = '';
    child.stdout.on('data', (d) => (output += d));
    child.stderr.on('data', (d) => (output += d));
    child.on('error', (err) => resolve({ status: null, output: `${output}${err.message}\n`, seconds: (Date.now() - t0) / 1000 }));
    child.on('close', (status) => resolve({ status, output, seconds: (Date.now() - t0) / 1000 }));
  });
}

/** Builds `triple` in `lane`'s target directory, checks the binary, and says how it went. */
async function buildTarget(triple, lane) {
  const platform = platformOf(triple);
  const windows = Boolean(WINDOWS[triple]);
  // zig takes the glibc version after the triple: the floor the binary is linked against.
  const buildTarget = triple.endsWith('-linux-gnu') ? `${triple}.${GLIBC_FLOOR}` : triple;
  const [, cpu, abi] = platform.split('-');
  const env = { ...process.env };
  if (platform.startsWith('darwin')) env.MACOSX_DEPLOYMENT_TARGET = MACOS_FLOOR[cpu];
  if (windows) {
    env.LIBNODE_PATH = libnodeStandIn();
    env.CARGO_PROFILE_RELEASE_STRIP = 'symbols';
  }
  const outputDir = windows ? path.relative(root, windowsOut) : 'artifacts';
  // The type definitions go to the lane's directory: two lanes never write one file.
  const dts = path.relative(path.join(root, outputDir), path.join(root, laneDir(lane), 'binding.d.ts'));
  const common = ['build', '--platform', '--release', '--target', buildTarget, '--target-dir', laneDir(lane), '--output-dir', outputDir, '--no-js', '--dts', dts];
  // Windows GNU: the napi CLI's own route (`-x` would hand it to cargo-xwin, MSVC only).
  const build = await spawnCollect(napi, windows ? common : [...common, '-x'], { cwd: root, env });
  const { seconds } = build;
  if (build.status !== 0) {
    process.stderr.write(build.output);
    fail(`napi build --target ${buildTarget} failed (exit ${build.status}) after ${seconds.toFixed(0)} s`);
  }
  // napi names the Windows GNU build win32-x64-gnu; its package is win32-x64.
  const file = windows
    ? path.join(windowsOut, `${pkg.napi.binaryName}.${platform}-gnu.node`)
    : path.join(artifacts, `${pkg.napi.binaryName}.${platform}.node`);
  if (!fs.existsSync(file)) fail(`napi build --target ${buildTarget} wrote no ${path.relative(root, file)}`);
  let info;
  try {
    if (windows) info = checkPe(file);
    else info = platform.startsWith('darwin') ? checkMachO(file, cpu, MACOS_FLOOR[cpu]) : checkElf(file, cpu, abi);
  } catch (err) {
    fail(`${platform}: ${err.message}`);
  }
  const bytes = fs.statSync(file).size;
  if (windows) {
    const dest = path.join(root, 'npm', platform, `${pkg.napi.binaryName}.${platform}.node`);
    if (!fs.existsSync(path.dirname(dest))) fail(`npm/${platform}/ is missing (its package.json is in the repository)`);
    fs.copyFileSync(file, dest);
  }
  console.log(`  ${platform.padEnd(17)} ${seconds.toFixed(0).padStart(4)} s  ${(bytes / 1024).toFixed(0).padStart(5)} KiB  ${info.check}`);
  return { triple, buildTarget, platform, seconds, bytes, ...info };
}

/** Every target built, `LANES` at a time (lane i takes targets i, i + LANES, ...), in targets' order. */
async function buildAll() {
  const lanes = Array.from({ length: LANES }, async (_, lane) => {
    const done = [];
    for (let i = lane; i < targets.length; i += LANES) done.push(await buildTarget(targets[i], lane));
    return done;
  });
  const byLane = await Promise.all(lanes);
  return targets.map((_, i) => byLane[i % LANES][Math.floor(i / LANES)]);
}

async function main() {
  const results = await buildAll();

  // --- into the per-platform packages, with the napi CLI's own commands ---------------------
  // `napi artifacts` also copies every binary into the package root (where the loader would
  // take them before the packages, and npm pack would ship them) and removes the root's
  // binaries of targets it found no artifact for. So napi works on a scratch copy of the
  // manifest, npm/ and artifacts/, and only npm/ comes back: the root's own build is never
  // touched, not even for a moment (a test or app loading the addon meanwhile gets it whole).
  // (A run for Windows only has none of napi's to move; its binary is in place already.)
  const napiSteps = targets.some((t) => !WINDOWS[t])
    ? [
        ['version'], // npm/*/package.json versions = the root's
        ['artifacts', '--output-dir', 'artifacts', '--npm-dir', 'npm'], // artifacts/*.node -> npm/<platform>/
      ]
    : [];
  const scratch = fs.mkdtempSync(path.join(require('node:os').tmpdir(), 'selfprof-napi-'));
  let napiFailure = null;
  try {
    fs.copyFileSync(path.join(root, 'package.json'), path.join(scratch, 'package.json'));
    fs.cpSync(path.join(root, 'npm'), path.join(scratch, 'npm'), { recursive: true });
    fs.mkdirSync(path.join(scratch, 'artifacts'));
    for (const f of fs.readdirSync(artifacts)) {
      if (f.endsWith('.node')) fs.copyFileSync(path.join(artifacts, f), path.join(scratch, 'artifacts', f));
    }
    for (const args of napiSteps) {
      const r = spawnSync(napi, args, { cwd: scratch, encoding: 'utf8' });
      if (r.status !== 0) {
        napiFailure = `napi ${args[0]} failed:\n${r.stdout}${r.stderr}`;
        break;
      }
    }
    for (const platform of napiFailure === null ? fs.readdirSync(path.join(scratch, 'npm')) : []) {
      const from = path.join(scratch, 'npm', platform);
      if (!fs.existsSync(path.join(root, 'npm', platform))) continue;
      for (const f of fs.readdirSync(from)) {
        if (f === 'package.json' || f.endsWith('.node')) fs.copyFileSync(path.join(from, f), path.join(root, 'npm', platform, f));
      }
    }
  } finally {
    fs.rmSync(scratch, { recursive: true, force: true });
  }
  if (napiFailure) fail(napiFailure);
  for (const r of results) {
    const dest = path.join(root, 'npm', r.platform, `${pkg.napi.binaryName}.${r.platform}.node`);
    if (!fs.existsSync(dest)) fail(`napi artifacts did not put ${r.platform}'s binary in ${path.relative(root, dest)}`);
    const built = WINDOWS[r.triple] ? null : path.join(artifacts, `${pkg.napi.binaryName}.${r.platform}.node`);
    if (built && !fs.readFileSync(dest).equals(fs.readFileSync(built))) fail(`${path.relative(root, dest)} is not the binary this run built`);
    const version = JSON.parse(fs.readFileSync(path.join(root, 'npm', r.platform, 'package.json'), 'utf8')).version;
    if (version !== pkg.version) fail(`npm/${r.platform}/package.json is version ${version}, the root ${pkg.version}`);
  }

  const total = (Date.now() - started) / 1000;
  fs.writeFileSync(path.join(artifacts, 'summary.json'), `${JSON.stringify({ glibcFloor: GLIBC_FLOOR, seconds: total, targets: results }, null, 2)}\n`);
  console.log(`build-all: ${results.length} targets built and checked in ${total.toFixed(0)} s; binaries in npm/<platform>/`);
}

main();
