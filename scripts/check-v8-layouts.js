'use strict';
// Checks the V8 layouts this build reads against the headers each Node ships: the frame
// reader's table (src/capture/context_frame.rs `LAYOUTS`: v8-internal.h's constants) and
// the heap profile reader's structs and virtual slots (src/capture/heap_profile.rs
// `LAYOUT`: v8-profiler.h's `AllocationProfile`). For every Node install given, small C++
// programs compiled against its include/node, with the defines Node's config.gypi says its
// V8 was built with, print what the headers say; it must equal this build's entry for that
// V8 version. The heap program also calls the slots the build uses on a class of its own
// derived from `AllocationProfile`, to see they are `GetRootNode` and the deleting
// destructor. Usage: node scripts/check-v8-layouts.js NODE_PREFIX... (a prefix holds
// include/node and bin/node). Needs a C++ compiler (g++ or $CXX).

const { execFileSync } = require('node:child_process');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { native } = require('../lib/native');

const FRAME_SOURCE = `#include <cstdio>
#include "v8-internal.h"
int main() {
  using I = v8::internal::Internals;
  std::printf("%d %d %d %d\\n", I::kContinuationPreservedEmbedderDataOffset, I::kMapInstanceTypeOffset, I::kJSObjectHeaderSize, I::kFixedArrayHeaderSize);
}
`;

const HEAP_SOURCE = `#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <vector>
#include "v8-profiler.h"
using Node = v8::AllocationProfile::Node;
using Allocation = v8::AllocationProfile::Allocation;
static bool destroyed = false, freed = false;
// A profile whose virtual functions say which they are: only the deleting destructor
// both destroys and frees.
struct Probe final : v8::AllocationProfile {
  Node* GetRootNode() override { return reinterpret_cast<Node*>(0x1234); }
  const std::vector<Sample>& GetSamples() override { return samples; }
  ~Probe() override { destroyed = true; }
  static void operator delete(void* p) { freed = true; ::operator delete(p); }
  std::vector<Sample> samples;
};
int main(int argc, char** argv) {
  int rootSlot = std::atoi(argv[1]), deleteSlot = std::atoi(argv[2]);
  v8::AllocationProfile* p = new Probe();
  void** vtable = *reinterpret_cast<void***>(p);
  bool root = reinterpret_cast<Node* (*)(void*)>(vtable[rootSlot])(p) == reinterpret_cast<Node*>(0x1234);
  reinterpret_cast<void (*)(void*)>(vtable[deleteSlot])(p);
  std::printf("%zu %zu %zu %zu %zu %zu %zu %zu %zu %zu %zu %d %d\\n", sizeof(Node), offsetof(Node, name), offsetof(Node, script_name),
              offsetof(Node, script_id), offsetof(Node, line_number), offsetof(Node, column_number), offsetof(Node, children),
              offsetof(Node, allocations), sizeof(Allocation), offsetof(Allocation, count), sizeof(std::vector<int>), root ? 1 : 0, destroyed && freed ? 1 : 0);
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

/** Compiles `source` against `include` in `dir` and runs it with `args`: its output's numbers. */
function run(dir, name, source, include, args = []) {
  fs.writeFileSync(path.join(dir, `${name}.cc`), source);
  const bin = path.join(dir, name);
  execFileSync(process.env.CXX || 'g++', ['-std=c++20', '-Wno-invalid-offsetof', ...defines(include), '-I', include, path.join(dir, `${name}.cc`), '-o', bin]);
  return execFileSync(bin, args, { encoding: 'utf8' }).trim().split(' ').map(Number);
}

function compare(what, headers, ours) {
  if (JSON.stringify(headers) !== JSON.stringify(ours)) throw new Error(`${what}: the headers say ${JSON.stringify(headers)}, this build ${JSON.stringify(ours)}`);
  console.log(`${what}: matches its headers ${JSON.stringify(headers)}`);
}

function check(prefix) {
  const include = path.join(prefix, 'include', 'node');
  const v8 = execFileSync(path.join(prefix, 'bin', 'node'), ['-p', 'process.versions.v8'], { encoding: 'utf8' }).trim();
  const majorMinor = v8.split('.').slice(0, 2).join('.');
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'selfprof-layout-'));
  try {
    // The frame reader: Node ≥ 22 (V8 ≥ 12); Node 20 carries labels through async_hooks only.
    const entry = native.frameLayouts().find((l) => l.v8 === majorMinor);
    if (entry) {
      const [cped, mapInstanceType, jsObjectHeader, fixedArrayHeader] = run(dir, 'frame', FRAME_SOURCE, include);
      compare(`frame layout of V8 ${v8}`, { cped, mapInstanceType, jsObjectHeader, fixedArrayHeader }, {
        cped: entry.cped,
        mapInstanceType: entry.mapInstanceType,
        jsObjectHeader: entry.jsObjectHeader,
        fixedArrayHeader: entry.fixedArrayHeader,
      });
    } else if (Number(v8.split('.')[0]) >= 12) {
      throw new Error(`V8 ${v8} (${prefix}) has no entry in the frame reader's table`);
    }
    const heap = native.heapProfileLayout();
    if (!heap.v8.includes(majorMinor)) throw new Error(`V8 ${v8} (${prefix}) is not a version the heap profile reader reads`);
    const keys = ['nodeSize', 'name', 'scriptName', 'scriptId', 'lineNumber', 'columnNumber', 'children', 'allocations', 'allocationSize', 'allocationCount', 'vectorSize'];
    const out = run(dir, 'heap', HEAP_SOURCE, include, [String(heap.vtableRoot), String(heap.vtableDelete)]);
    const headers = Object.fromEntries(keys.map((k, i) => [k, out[i]]));
    headers.vtableRoot = out[keys.length] === 1 ? heap.vtableRoot : 'not GetRootNode';
    headers.vtableDelete = out[keys.length + 1] === 1 ? heap.vtableDelete : 'not the destructor';
    compare(`heap profile layout of V8 ${v8}`, headers, Object.fromEntries([...keys, 'vtableRoot', 'vtableDelete'].map((k) => [k, heap[k]])));
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

const prefixes = process.argv.slice(2);
if (!prefixes.length) {
  console.error('usage: node scripts/check-v8-layouts.js NODE_PREFIX...');
  process.exit(2);
}
let failed = 0;
for (const prefix of prefixes) {
  try {
    check(prefix);
  } catch (err) {
    failed++;
    console.error(`check-v8-layouts: ${err.message}`);
  }
}
process.exitCode = failed ? 1 : 0;
