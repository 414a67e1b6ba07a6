'use strict';
// A directory and its missing parents made, as `mkdir -p` does, for the CLI's outputs and
// the file exporter. Not Node's `mkdir(dir, { recursive: true })`: where mkdir of a missing
// directory fails with ENOENT under a parent that exists (/proc), Node's retries that
// parent forever (Node 20 to 26); here any error but EEXIST of a directory is thrown.

const fs = require('node:fs');
const path = require('node:path');

/** The parents of `dir` that do not exist yet, outermost first, and `dir` (all absolute). */
function missing(dir, exists) {
  const out = [];
  for (let d = path.resolve(dir); !exists(d); d = path.dirname(d)) {
    out.unshift(d);
    if (path.dirname(d) === d) break;
  }
  return out;
}

/** Whether `dir` is a directory (following links). */
function isDirSync(dir) {
  try {
    return fs.statSync(dir).isDirectory();
  } catch {
    return false;
  }
}

/** Makes `dir` and its missing parents; throws the first error (its `code`: ENOENT, ENOTDIR, EACCES, ...). */
function makeDirSync(dir) {
  for (const d of missing(dir, isDirSync)) {
    try {
      fs.mkdirSync(d);
    } catch (err) {
      if (!(err.code === 'EEXIST' && isDirSync(d))) throw err;
    }
  }
}

/** makeDirSync on the thread pool. */
async function makeDir(dir) {
  const isDir = (d) =>
    fs.promises.stat(d).then(
      (s) => s.isDirectory(),
      () => false,
    );
  // The parents are few: looked at one after another.
  const chain = [];
  for (let d = path.resolve(dir); !(await isDir(d)); d = path.dirname(d)) {
    chain.unshift(d);
    if (path.dirname(d) === d) break;
  }
  for (const d of chain) {
    try {
      await fs.promises.mkdir(d);
    } catch (err) {
      if (!(err.code === 'EEXIST' && (await isDir(d)))) throw err;
    }
  }
}

module.exports = { makeDirSync, makeDir };
