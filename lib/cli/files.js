'use strict';
// The command line's files: profiles read whole and bounded, converted with one error
// naming the file, and outputs written (their directory made first) under a temporary name
// and renamed, so that a failed write (a full disk) never leaves a truncated file under a
// result's name.

const fs = require('node:fs');
const path = require('node:path');
const { makeDirSync } = require('../make-dir');

/** Input files are read whole: past this (the converters' own input limit, plus room for
 * gzip's framing) a file is refused before it is read. */
const MAX_FILE_BYTES = (256 << 20) + (1 << 20);

/** What a stat says a file is, when it is not a regular file. */
function kindOf(stat) {
  if (stat.isDirectory()) return 'a directory';
  if (stat.isFIFO()) return 'a FIFO';
  if (stat.isCharacterDevice()) return 'a character device';
  if (stat.isBlockDevice()) return 'a block device';
  if (stat.isSocket()) return 'a socket';
  return 'not a file';
}

/**
 * A file's bytes, or one clear error naming the file. Only a regular file is read (a
 * device or FIFO may never end, or block), and never past the limit: a file's size can
 * be 0 (/proc) or grow while it is read.
 */
function readFile(file) {
  let fd;
  try {
    // Non-blocking: opening a FIFO without a writer would otherwise wait for one.
    fd = fs.openSync(file, fs.constants.O_RDONLY | fs.constants.O_NONBLOCK);
    const stat = fs.fstatSync(fd);
    if (!stat.isFile()) throw new Error(`it is ${kindOf(stat)}, not a regular file`);
    if (stat.size > MAX_FILE_BYTES) throw new Error(`is ${Math.round(stat.size / 2 ** 20)} MiB; input is limited to 256 MiB`);
    const chunks = [];
    let total = 0;
    for (;;) {
      const chunk = Buffer.allocUnsafe(Math.min(Math.max(stat.size + 1 - total, 64 << 10), MAX_FILE_BYTES + 1 - total));
      const n = fs.readSync(fd, chunk, 0, chunk.length, null);
      if (n === 0) break;
      chunks.push(n === chunk.length ? chunk : chunk.subarray(0, n));
      total += n;
      if (total > MAX_FILE_BYTES) throw new Error('is over 256 MiB; input is limited to 256 MiB');
    }
    if (total === 0) throw Object.assign(new Error('empty'), { empty: true });
    return chunks.length === 1 ? chunks[0] : Buffer.concat(chunks, total);
  } catch (err) {
    if (err.empty) throw new Error(`${file} is empty`, { cause: err });
    throw new Error(`cannot read ${file}: ${err.code ?? err.message}`, { cause: err });
  } finally {
    if (fd !== undefined) fs.closeSync(fd);
  }
}

/** A trace or pprof file converted to `to`; a bad file is one error naming it. */
function convertFile(file, to, { lines = false, sourceMaps = false, profilerFrames = false } = {}) {
  const bytes = readFile(file);
  const { convert } = require('../..');
  try {
    return convert(bytes, { to, lines, sourceMaps, profilerFrames });
  } catch (err) {
    throw new Error(`${file}: ${err.message.replace(/^convert: /, '')}`, { cause: err });
  }
}

/** What an error code means for a file the CLI writes, where the code alone says little. */
const MEANING = { ENOSPC: 'no space left on its device', EDQUOT: 'over its disk quota', EROFS: 'a read-only file system' };

/** An fs error as a message's end: its code, and what it means. */
function fsReason(err) {
  const code = err.code ?? err.message;
  return MEANING[code] ? `${code} (${MEANING[code]})` : code;
}

/**
 * Writes each `[file, data]` under a temporary name, then renames them all into place: if
 * one cannot be written, none is, the temporary ones are removed, and the files of those
 * names stay as they were. The error names the file; `after`: more to say at its end.
 */
function writeFiles(entries, after = '') {
  const temporary = entries.map(([file]) => `${file}.${process.pid}.tmp`);
  let i = 0;
  try {
    for (; i < entries.length; i++) writeWhole(temporary[i], entries[i][1]);
    for (i = 0; i < entries.length; i++) fs.renameSync(temporary[i], entries[i][0]);
  } catch (err) {
    for (const t of temporary) {
      try {
        fs.rmSync(t, { force: true });
      } catch {
        // left for the user to see: named .tmp
      }
    }
    throw new Error(`cannot write ${entries[i][0]}: ${fsReason(err)}${after}`, { cause: err });
  }
}

/** Text is written in slices of this many characters: never a second copy of a report of 250 MB. */
const SLICE_CHARS = 1 << 24;

/**
 * Writes `data` to `file`: bytes, text (a slice at a time, a surrogate pair never split),
 * or an iterable of texts written one after another (a report made as it is written).
 */
function writeWhole(file, data) {
  if (Buffer.isBuffer(data) || (typeof data === 'string' && data.length <= SLICE_CHARS)) return fs.writeFileSync(file, data);
  const fd = fs.openSync(file, 'w');
  const write = (text) => {
    for (let at = 0; at < text.length; ) {
      let end = Math.min(at + SLICE_CHARS, text.length);
      const last = text.charCodeAt(end - 1);
      if (end < text.length && last >= 0xd800 && last <= 0xdbff) end--;
      const bytes = Buffer.from(text.slice(at, end));
      for (let off = 0; off < bytes.length; ) off += fs.writeSync(fd, bytes, off);
      at = end;
    }
  };
  try {
    if (typeof data === 'string') write(data);
    else for (const text of data) write(text);
  } finally {
    fs.closeSync(fd);
  }
}

function writeOut(out, data) {
  writeFiles([[out, data]]);
}

/**
 * Makes an output file's directory before any work (`report --html out/r.html`): one line
 * naming it if it cannot be made, before a profile is read.
 */
function outDir(out) {
  if (out === undefined) return;
  const dir = path.dirname(path.resolve(out));
  try {
    makeDirSync(dir);
  } catch (err) {
    throw new Error(`cannot create ${dir} for ${out}: ${err.code ?? err.message}`, { cause: err });
  }
}

module.exports = { readFile, convertFile, writeOut, writeFiles, fsReason, outDir };
