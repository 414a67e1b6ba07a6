'use strict';
// `npm run build`, and npm's `prepare` (`npm install` in a checkout, `npm install
// /path/to/checkout`, an install from git): builds the addon for this machine from source
// with the napi CLI (the checkout's, else the lock file's version through `npm exec`). That
// needs Rust (cargo and rustc ≥ Cargo.toml's rust-version); without it, this says so in one
// line, and where the prebuilt binaries are, instead of napi's "Internal Error: cargo
// metadata failed to run".

const { spawnSync } = require('node:child_process');
const fs = require('node:fs');
const path = require('node:path');

const root = path.resolve(__dirname, '..');
const msrv = fs.readFileSync(path.join(root, 'Cargo.toml'), 'utf8').match(/^rust-version\s*=\s*"([0-9.]+)"/m)?.[1] ?? '1.88';

function older(a, b) {
  const pa = a.split('.').map(Number);
  const pb = b.split('.').map(Number);
  for (let i = 0; i < 3; i++) if ((pa[i] ?? 0) !== (pb[i] ?? 0)) return (pa[i] ?? 0) < (pb[i] ?? 0);
  return false;
}

function noRust(why) {
  console.error(
    `selfprof: building from source needs Rust ≥ ${msrv} (cargo and rustc on PATH, https://rustup.rs): ${why}. ` +
      'No Rust is needed with the prebuilt binaries: `npm install selfprof` from the npm registry installs the one for ' +
      'this platform (packages selfprof-linux-x64-gnu, -linux-arm64-gnu, -linux-x64-musl, -linux-arm64-musl, -darwin-x64, -darwin-arm64, -win32-x64).',
  );
  process.exit(1);
}

const cargo = spawnSync('cargo', ['--version'], { encoding: 'utf8' });
if (cargo.error || cargo.status !== 0) noRust('cargo was not found');
const rustc = spawnSync('rustc', ['--version'], { encoding: 'utf8' });
const version = rustc.stdout?.match(/^rustc (\d+\.\d+\.\d+)/)?.[1];
if (!version) noRust('rustc was not found');
if (older(version, msrv)) noRust(`this rustc is ${version}`);

const args = ['build', '--platform', '--release', '--js', 'binding.js', '--dts', 'binding.d.ts'];
const local = path.join(root, 'node_modules', '.bin', 'napi');
let build;
if (fs.existsSync(local)) {
  build = spawnSync(local, args, { cwd: root, stdio: 'inherit' });
} else {
  // A checkout whose own `npm install` has not run: `npm install /path/to/checkout` runs
  // this (npm's prepare) without the checkout's devDependencies. The napi CLI of the lock
  // file, from the registry, through npm (the build needs crates.io all the same).
  const version = napiVersion();
  console.error(`selfprof: building from source with @napi-rs/cli@${version} (fetched by npm exec: this checkout has no node_modules)`);
  const npm = process.env.npm_execpath && fs.existsSync(process.env.npm_execpath)
    ? [process.execPath, [process.env.npm_execpath]]
    : [process.platform === 'win32' ? 'npm.cmd' : 'npm', []];
  build = spawnSync(npm[0], [...npm[1], 'exec', '--yes', `--package=@napi-rs/cli@${version}`, '--', 'napi', ...args], {
    cwd: root,
    stdio: 'inherit',
    shell: process.platform === 'win32',
  });
}
if (build.error) {
  console.error(`selfprof: could not run the napi CLI (${build.error.message}); run \`npm install\` in ${root} first`);
  process.exit(1);
}
process.exit(build.status ?? 1);

/** The napi CLI's version in the lock file (the one `npm install` in the checkout installs). */
function napiVersion() {
  try {
    const lock = JSON.parse(fs.readFileSync(path.join(root, 'package-lock.json'), 'utf8'));
    const v = lock.packages?.['node_modules/@napi-rs/cli']?.version;
    if (typeof v === 'string' && /^\d+\.\d+\.\d+$/.test(v)) return v;
  } catch {
    // No lock file: the range package.json asks for.
  }
  const range = JSON.parse(fs.readFileSync(path.join(root, 'package.json'), 'utf8')).devDependencies?.['@napi-rs/cli'];
  return (range ?? '3').replace(/^[\^~]/, '');
}
