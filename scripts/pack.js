'use strict';
// The release tarballs, with `npm pack`: the main package `selfprof` (JS only: no binary)
// and one package per platform under npm/<platform>/ (its binary, put there by
// `npm run build:all`). The packed main package lists the platform packages as
// optionalDependencies, so npm installs only the host's; the checkout's package.json does
// not (they are not on the registry yet, and an unresolvable dependency keeps them out of
// the lock file, which `npm ci` then refuses): the main package is packed from a staging
// copy whose package.json adds them, and keeps only the fields an installed package reads
// (no scripts: a `prepare` there would make npm warn of an install script it cannot run).
//
//   node scripts/pack.js [--out DIR] [platform ...]   pack into DIR (default
//                                                     artifacts/packages/): the main package
//                                                     and the given platforms' (default:
//                                                     every platform built here)
//   node scripts/pack.js --check                      what prepublishOnly runs: refuse a
//                                                     main package that would ship a binary
//
// A source build (`npm install` in a checkout) leaves selfprof.<platform>.node in the
// root, which the main package's `files` takes (so an install from git works from
// source); the staging copy leaves it out. Where npm/<platform>/ has no binary of this
// machine's platform, that source build is its package's binary: on a machine with only
// Node and Rust, `npm install && node scripts/pack.js` packs the main package and this
// machine's.

const { execFileSync } = require('node:child_process');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { hostPlatform } = require('../lib/native');

const root = path.resolve(__dirname, '..');
const pkg = JSON.parse(fs.readFileSync(path.join(root, 'package.json'), 'utf8'));
/** The fields of the packed main package.json: what npm and Node read from an installed package. */
const INSTALLED_FIELDS = [
  'name',
  'version',
  'description',
  'keywords',
  'homepage',
  'bugs',
  'repository',
  'license',
  'author',
  'main',
  'types',
  'exports',
  'bin',
  'files',
  'engines',
  'dependencies',
  'optionalDependencies',
];
/**
 * Targets built apart from napi's (scripts/build-all.js), with their platform: napi's
 * generated loader looks for an MSVC build on Windows, and lib/native.js loads this one.
 */
const WINDOWS = { 'x86_64-pc-windows-gnu': 'win32-x64' };
const platforms = [...pkg.napi.targets.map(platformOf), ...Object.values(WINDOWS)];

function platformOf(triple) {
  if (WINDOWS[triple]) return WINDOWS[triple];
  const [arch, , osName, abi] = triple.split('-');
  const cpu = { x86_64: 'x64', aarch64: 'arm64' }[arch];
  return osName === 'darwin' ? `darwin-${cpu}` : `linux-${cpu}-${abi}`;
}

function npmPack(dir, dest) {
  // --ignore-scripts: `prepare` would build the addon from source into the root again.
  const out = execFileSync('npm', ['pack', '--json', '--ignore-scripts', '--pack-destination', dest], {
    cwd: dir,
    encoding: 'utf8',
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const [info] = JSON.parse(out.slice(out.indexOf('[')));
  return { file: path.join(dest, info.filename), size: info.size, files: info.files.map((f) => f.path) };
}

/** Problems with the package metadata that would make a broken release, as lines. */
function metadataProblems() {
  const problems = [];
  for (const p of platforms) {
    const name = `${pkg.name}-${p}`;
    const file = path.join(root, 'npm', p, 'package.json');
    if (!fs.existsSync(file)) {
      problems.push(`npm/${p}/package.json is missing (npx napi create-npm-dirs${p.startsWith('win32') ? '; Windows\'s is in the repository' : ''})`);
      continue;
    }
    const sub = JSON.parse(fs.readFileSync(file, 'utf8'));
    if (sub.name !== name || sub.version !== pkg.version) problems.push(`npm/${p}/package.json is ${sub.name}@${sub.version}, expected ${name}@${pkg.version} (npx napi version)`);
  }
  if (!fs.existsSync(path.join(root, 'binding.js'))) problems.push('binding.js is missing: run `npm run build` once (napi generates it)');
  return problems;
}

/**
 * Whether a 64-bit little-endian ELF file (the Linux binaries) keeps its symbol table, a
 * section of type SHT_SYMTAB (release builds are stripped: Cargo.toml); null when the file
 * is not one.
 */
function elfSymbolTable(file) {
  const b = fs.readFileSync(file);
  if (b.length < 64 || b.readUInt32BE(0) !== 0x7f454c46 || b[4] !== 2 || b[5] !== 1) return null;
  const shoff = Number(b.readBigUInt64LE(0x28));
  const size = b.readUInt16LE(0x3a);
  const count = b.readUInt16LE(0x3c);
  for (let i = 0; i < count; i++) {
    const at = shoff + i * size;
    if (at + 8 > b.length) break;
    if (b.readUInt32LE(at + 4) === 2) return true;
  }
  return false;
}

/** The platform packages, as the published main package lists them. */
function optionalDependencies() {
  return Object.fromEntries(platforms.map((p) => [`${pkg.name}-${p}`, pkg.version]));
}

/** The main package's package.json as it is packed: INSTALLED_FIELDS, and the platform packages. */
function installedManifest() {
  const manifest = Object.fromEntries(INSTALLED_FIELDS.filter((k) => pkg[k] !== undefined).map((k) => [k, pkg[k]]));
  manifest.optionalDependencies = { ...manifest.optionalDependencies, ...optionalDependencies() };
  return manifest;
}

/**
 * Packs the main package from a staging copy of its files (package.json's `files`, no
 * source build) whose package.json lists the platform packages.
 */
function packMain(dest) {
  const stage = fs.mkdtempSync(path.join(os.tmpdir(), 'selfprof-stage-'));
  try {
    const isBuild = (f) => f.startsWith(`${pkg.napi.binaryName}.`) && f.endsWith('.node');
    for (const entry of pkg.files) {
      const names = entry.includes('*')
        ? fs.readdirSync(root).filter((f) => new RegExp(`^${entry.replace(/\./g, '\\.').replace(/\*/g, '.*')}$`).test(f))
        : [entry.replace(/\/$/, '')];
      for (const name of names) {
        if (isBuild(name) || !fs.existsSync(path.join(root, name))) continue;
        fs.cpSync(path.join(root, name), path.join(stage, name), { recursive: true });
      }
    }
    for (const f of ['README.md', 'LICENSE']) if (fs.existsSync(path.join(root, f))) fs.copyFileSync(path.join(root, f), path.join(stage, f));
    const manifest = installedManifest();
    fs.writeFileSync(path.join(stage, 'package.json'), `${JSON.stringify(manifest, null, 2)}\n`);
    const main = npmPack(stage, dest);
    const binaries = main.files.filter((f) => f.endsWith('.node'));
    if (binaries.length) throw new Error(`the main package would ship ${binaries.join(', ')}`);
    return main;
  } finally {
    fs.rmSync(stage, { recursive: true, force: true });
  }
}

/**
 * Where platform's binary is: its package's directory npm/<platform>/ (`npm run
 * build:all`), else, for this machine's platform, the source build in the root (`npm
 * install`, `npm run build`); null when it is in neither.
 */
function binaryOf(platform) {
  const name = `${pkg.napi.binaryName}.${platform}.node`;
  const built = path.join(root, 'npm', platform, name);
  if (fs.existsSync(built)) return { file: built, from: `npm/${platform}/` };
  const source = path.join(root, name);
  if (platform === hostPlatform() && fs.existsSync(source)) return { file: source, from: 'the source build of `npm install`' };
  return null;
}

function packPlatform(platform, dest) {
  const dir = path.join(root, 'npm', platform);
  const binary = `${pkg.napi.binaryName}.${platform}.node`;
  const found = binaryOf(platform);
  if (!found) {
    const how = platform === hostPlatform() ? '`npm install` (or `npm run build`) builds this machine\'s' : '`npm run build:all` builds it (docs/development.md)';
    throw new Error(`there is no ${binary} in npm/${platform}/${platform === hostPlatform() ? ' or the package root' : ''}: ${how}`);
  }
  let out;
  if (found.file === path.join(dir, binary)) out = npmPack(dir, dest);
  else {
    // The platform package's files with the root's binary, staged.
    const stage = fs.mkdtempSync(path.join(os.tmpdir(), 'selfprof-stage-'));
    try {
      for (const f of fs.readdirSync(dir)) if (!f.endsWith('.node')) fs.cpSync(path.join(dir, f), path.join(stage, f), { recursive: true });
      fs.copyFileSync(found.file, path.join(stage, binary));
      out = npmPack(stage, dest);
    } finally {
      fs.rmSync(stage, { recursive: true, force: true });
    }
  }
  if (!out.files.includes(binary)) throw new Error(`${path.basename(out.file)} lacks ${binary}`);
  return { ...out, from: found.from };
}

function main() {
  const args = process.argv.slice(2);
  if (args[0] === '--check') {
    const problems = metadataProblems();
    const builds = fs.readdirSync(root).filter((f) => f.endsWith('.node'));
    if (builds.length) {
      problems.push(`a source build (${builds.join(', ')}) is in the package root and would be published in the main package: publish the tarballs of \`node scripts/pack.js\` instead`);
    }
    for (const p of problems) console.error(`pack: ${p}`);
    process.exit(problems.length ? 1 : 0);
  }
  let out = path.join(root, 'artifacts', 'packages');
  const outAt = args.indexOf('--out');
  if (outAt >= 0) {
    out = path.resolve(args[outAt + 1]);
    args.splice(outAt, 2);
  }
  for (const p of args) if (!platforms.includes(p)) throw new Error(`unknown platform ${p}: one of ${platforms.join(', ')}`);
  const problems = metadataProblems();
  if (problems.length) throw new Error(problems.join('; '));
  // Default: every platform whose binary is here; none at all is an error (packPlatform's).
  const built = platforms.filter((p) => binaryOf(p));
  const wanted = args.length ? args : built.length ? built : [hostPlatform()];
  fs.mkdirSync(out, { recursive: true });
  const platformPackages = wanted.map((p) => packPlatform(p, out));
  const packed = [packMain(out), ...platformPackages];
  const shown = (f) => (path.relative(root, f).startsWith('..') ? f : path.relative(root, f));
  for (const p of packed) console.log(`  ${shown(p.file)}  ${(p.size / 1024).toFixed(0)} KiB packed, ${p.files.length} files${p.from ? `; binary from ${p.from}` : ''}`);
  const left = platforms.filter((p) => !wanted.includes(p));
  if (!args.length && left.length) console.log(`  not built here, not packed: ${left.join(', ')} (\`npm run build:all\` builds them: docs/development.md)`);
}

module.exports = { packMain, packPlatform, binaryOf, elfSymbolTable, installedManifest, metadataProblems, optionalDependencies, platforms, platformOf, INSTALLED_FIELDS, WINDOWS };

if (require.main === module) {
  try {
    main();
  } catch (err) {
    console.error(`pack: ${err.message}`);
    process.exit(1);
  }
}
