'use strict';
// ESLint's recommended rules over the package, its tests, scripts and benchmarks (Node,
// CommonJS), and over the HTML report's client (browser). The report's generator joins
// lib/views/report/client/*.js into one function scope in the page, so each client file
// is linted as a script that sees the top-level names the other client files declare:
// a name none of them declares fails here, not only in a browser.

const fs = require('node:fs');
const path = require('node:path');
const js = require('@eslint/js');
const globals = require('globals');
const { Linter } = require('eslint');

const CLIENT_DIR = 'lib/views/report/client';
const clientOptions = {
  ecmaVersion: 'latest',
  sourceType: 'script',
  // The generator's wrapper starts with 'use strict'.
  parserOptions: { ecmaFeatures: { impliedStrict: true } },
};

// Each client file's top-level declarations (name -> whether another file may assign it:
// a `let` or `var`) and the names it uses but does not declare, read from the scope ESLint
// itself builds for the file.
function clientScopes() {
  const files = fs
    .readdirSync(path.join(__dirname, CLIENT_DIR))
    .filter((f) => f.endsWith('.js'))
    .sort();
  const linter = new Linter({ configType: 'flat' });
  return files.map((f) => {
    const file = `${CLIENT_DIR}/${f}`;
    const seen = { file, declared: new Map(), used: new Set() };
    const collect = {
      create(context) {
        return {
          'Program:exit'(node) {
            const scope = context.sourceCode.getScope(node);
            for (const v of scope.variables) {
              if (v.defs.length === 0) continue;
              const def = v.defs[0];
              seen.declared.set(v.name, def.type === 'Variable' && def.parent.kind !== 'const');
            }
            for (const ref of scope.through) seen.used.add(ref.identifier.name);
          },
        };
      },
    };
    const messages = linter.verify(fs.readFileSync(path.join(__dirname, file), 'utf8'), {
      languageOptions: clientOptions,
      plugins: { scopes: { rules: { collect } } },
      rules: { 'scopes/collect': 'error' },
    });
    // A file that does not parse: its own lint run below reports the syntax error.
    if (messages.some((m) => m.fatal)) seen.declared.clear();
    return seen;
  });
}

function escapeRegExp(s) {
  return s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}

// One config per client file: the browser's globals, less any name a client file declares
// (it shadows the browser's in the joined scope), plus the other files' declarations. A
// declaration another file uses is not unused; one two files share is a redeclaration
// (reported as "already defined as a built-in global variable").
function clientConfigs() {
  const scopes = clientScopes();
  const declaredAnywhere = new Set(scopes.flatMap((s) => [...s.declared.keys()]));
  const browser = Object.fromEntries(Object.entries(globals.browser).filter(([name]) => !declaredAnywhere.has(name)));
  // The functions the generator embeds from lib/views/format.js ahead of the client files.
  const shared = Object.fromEntries(require('./lib/views/format').SHARED.map((f) => [f.name, 'readonly']));
  return scopes.map(({ file, declared }) => {
    const others = scopes.filter((s) => s.file !== file);
    const fromOthers = {};
    for (const s of others) for (const [name, writable] of s.declared) fromOthers[name] = writable ? 'writable' : 'readonly';
    const usedElsewhere = [...declared.keys()].filter((name) => others.some((s) => s.used.has(name)));
    const unused = { ignoreRestSiblings: true };
    if (usedElsewhere.length > 0) unused.varsIgnorePattern = `^(?:${usedElsewhere.map(escapeRegExp).join('|')})$`;
    return {
      files: [file],
      languageOptions: { ...clientOptions, globals: { ...browser, ...shared, ...fromOthers } },
      rules: {
        'no-unused-vars': ['error', unused],
        'no-redeclare': ['error', { builtinGlobals: true }],
      },
    };
  });
}

// An eslint-disable comment says why, on its own line: `// eslint-disable-next-line rule -- reason`.
const disableNeedsReason = {
  meta: { type: 'suggestion', docs: { description: 'an eslint-disable comment gives its reason after --' }, schema: [] },
  create(context) {
    return {
      Program() {
        for (const comment of context.sourceCode.getAllComments()) {
          const m = /^\s*eslint-disable(?:-next-line|-line)?(?:\s|$)/.exec(comment.value);
          if (m && !/\s--\s*\S/.test(comment.value)) {
            context.report({ loc: comment.loc, message: 'eslint-disable without a reason: add `-- why` on the same line' });
          }
        }
      },
    };
  },
};

module.exports = [
  {
    // binding.js and binding.d.ts are written by `napi build`; the rest is not ours.
    ignores: ['binding.js', 'binding.d.ts', 'node_modules/', 'target/', '.venv/', 'out/', 'artifacts/', 'npm/*/'],
  },
  js.configs.recommended,
  {
    plugins: { selfprof: { rules: { 'disable-needs-reason': disableNeedsReason } } },
    rules: {
      'selfprof/disable-needs-reason': 'error',
      // `const { dropped, ...kept } = x` names what it leaves out.
      'no-unused-vars': ['error', { ignoreRestSiblings: true }],
    },
  },
  {
    files: ['**/*.js', '**/*.cjs'],
    languageOptions: {
      ecmaVersion: 'latest',
      sourceType: 'commonjs',
      globals: { ...globals.node },
    },
  },
  {
    files: ['**/*.mjs'],
    languageOptions: { ecmaVersion: 'latest', sourceType: 'module', globals: { ...globals.node } },
  },
  ...clientConfigs(),
  {
    linterOptions: { reportUnusedDisableDirectives: 'error' },
  },
];
