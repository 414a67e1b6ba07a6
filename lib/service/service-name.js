'use strict';
// The service's name when neither start() nor the environment gives one, found as dd-trace
// finds it, so that profiles and traces are filed under one service: the `name` of the
// nearest package.json above the main module's directory (the working directory when there
// is no main module yet, as under `-r selfprof/start`), normalized as dd-trace normalizes an
// inferred name (`@acme/Checkout` -> `acme/checkout`); else `node`.

const fs = require('node:fs');
const path = require('node:path');

/** dd-trace's longest service name (config/normalize-service.js). */
const MAX_SERVICE_LENGTH = 100;

/** An inferred name as dd-trace normalizes it: lower case, [a-z0-9_:./-], starting with a letter or digit. */
function normalizeService(name) {
  const n = String(name)
    .toLowerCase()
    .replace(/[^a-z0-9_:./-]/g, '_')
    .replace(/^[^a-z0-9]+/, '');
  return n.slice(0, MAX_SERVICE_LENGTH);
}

/** The nearest package.json at or above `dir`, or undefined. */
function findPackageJson(dir) {
  for (let d = path.resolve(dir); ; d = path.dirname(d)) {
    const file = path.join(d, 'package.json');
    if (fs.existsSync(file)) return file;
    if (path.dirname(d) === d) return undefined;
  }
}

/**
 * `{ name, from }`: the app's package name and the package.json it is from, or `{ name:
 * 'node' }` when there is none (or it has no usable name). Never throws.
 */
function inferService() {
  try {
    const main = require.main?.filename;
    const file = findPackageJson(main ? path.dirname(main) : process.cwd());
    if (file) {
      const name = normalizeService(JSON.parse(fs.readFileSync(file, 'utf8'))?.name ?? '');
      if (name) return { name, from: file };
    }
  } catch {
    // An unreadable or malformed package.json names nothing.
  }
  return { name: 'node' };
}

module.exports = { inferService, normalizeService };
