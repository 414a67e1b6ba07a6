'use strict';
// The README's quick start as a user copies it: its code blocks, for the tests that run
// them (quick-start.test.js, and scripts/pack-test.js from the installed tarballs).

const fs = require('node:fs');
const path = require('node:path');

const README = path.join(__dirname, '..', 'README.md');

/** The first ```lang block under "## Quick start" (`js` or `ts`); throws if there is none. */
function quickStart(lang) {
  const readme = fs.readFileSync(README, 'utf8');
  const at = readme.indexOf('## Quick start');
  const section = readme.slice(at, readme.indexOf('\n## ', at + 1));
  const m = new RegExp('```' + lang + '\\n([\\s\\S]*?)```').exec(section);
  if (at < 0 || !m) throw new Error(`the README's quick start has no ${lang} block`);
  return m[1];
}

/** The quick start's output, `{ endpoint: samples }`, checked: POST /orders works 4× as long as GET. */
function checkQuickStart(output) {
  const counts = eval(`(${output.trim().split('\n').pop()})`); // the object it logs
  const post = counts['POST /orders'] ?? 0;
  const get = counts['GET /users/:id'] ?? 0;
  if (!(post > get && get > 0)) throw new Error(`the quick start's counts are not as its work: ${output}`);
  return counts;
}

/** A tsconfig as a TypeScript user has one for Node: --strict, Node's module resolution, no @types/node. */
const TSCONFIG = { compilerOptions: { strict: true, module: 'nodenext', moduleResolution: 'nodenext', target: 'es2022', types: [], outDir: 'dist' } };

module.exports = { quickStart, checkQuickStart, TSCONFIG };
