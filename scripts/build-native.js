'use strict';
// `npm run build`, and npm's `prepare` (an install from a checkout or from git): builds
// the addon for this machine from source with the napi CLI. That needs Rust (cargo and
// rustc ≥ Cargo.toml's rust-version); without it, this says so in one line, and where the
// prebuilt binaries are, instead of napi's "Internal Error: cargo metadata failed to run".

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

const napi = path.join(root, 'node_modules', '.bin', 'napi');
const build = spawnSync(napi, ['build', '--platform', '--release', '--js', 'binding.js', '--dts', 'binding.d.ts'], {
  cwd: root,
  stdio: 'inherit',
});
if (build.error) {
  console.error(`selfprof: could not run the napi CLI (${build.error.message}); run \`npm install\` in ${root} first`);
  process.exit(1);
}
process.exit(build.status ?? 1);
