'use strict';
// What the fuzz harness (scripts/fuzz.js, CI's `npm run test:fuzz`) makes: its JSON inputs
// stay within what selfprof reads at all, however its duplications nest, so a case process
// never dies making an input; and a death making one is named as the harness's.
const { test } = require('node:test');
const assert = require('node:assert/strict');
const { sourceMapSeeds, mutateSourceMap, mutateJson, prng, jsonLength, MAX_JSON_INPUT } = require('../scripts/fuzz');

test("the harness's JSON length is JSON.stringify's, with shared and repeated parts", () => {
  const shared = { line: 'x'.repeat(50), ticks: [1, 2, null], u: undefined, '\ud800': '\u2028"' };
  const docs = [
    ...sourceMapSeeds().sourcemaps,
    { nodes: Array(30).fill(shared), empty: [], none: {}, n: [NaN, -0, 1e308, 0.5, true, 'é'] },
    [[], [{}], [shared, [shared]]],
  ];
  for (const doc of docs) assert.equal(jsonLength(doc), JSON.stringify(doc).length);
});

test('the harness makes no source map past 32 MiB, where duplicated sections nest', () => {
  // Seed 7's map 506 was 160 MiB (a section repeated inside sections repeated); one map in
  // ~10,000 was, up to past a JS string's length, and CI's case process ran out of heap
  // making one. Maps are made from fixed seeds, so the same cases come back here.
  const seeds = sourceMapSeeds();
  const r = prng(7);
  for (let i = 0; i < 520; i++) {
    const map = mutateSourceMap(r, seeds);
    assert.ok(map.length <= MAX_JSON_INPUT, `map ${i} is ${(map.length / 2 ** 20).toFixed(0)} MiB`);
  }
});

test('a document whose duplications multiply past the bound is mutated as bytes instead', () => {
  // A section in sections in sections: with these seeds two duplications nest (2,872: 44
  // MiB; 540 and 1,130: past a JS string's length, which threw or ran out of heap).
  const inner = { version: 3, mappings: 'A'.repeat(4096) };
  const bytes = Buffer.from(JSON.stringify({ version: 3, sections: [{ map: { sections: [inner] } }] }));
  for (const seed of [540, 1130, 2872]) {
    const out = mutateJson(prng(seed), bytes);
    assert.ok(out.length <= MAX_JSON_INPUT, `seed ${seed}: ${out.length} bytes`);
  }
});
