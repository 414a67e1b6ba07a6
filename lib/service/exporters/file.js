'use strict';
// File: `<dir>/<service>-<ISO time>.pb.gz`, and with `trace: true` the spec trace of the
// same recording beside it. Each file is written under a temporary name and renamed, so a
// write cut short (a full disk, the process ending) never leaves a truncated profile under
// a profile's name. At exit (`exitWrite`) the same files are written synchronously.

const fs = require('node:fs');
const path = require('node:path');
const { Uploader } = require('./uploader');
const { makeDir, makeDirSync } = require('../../make-dir');

/** A service name as a file-name part: no path separators, no `..`, nothing odd. */
function fileSafe(name) {
  return String(name).replace(/[^\w.-]/g, '_').replace(/^\.+/, '_').slice(0, 200) || '_';
}

function file(options, meta) {
  /** `[path, bytes]` of each file of `profile`. */
  const filesOf = (profile) => {
    const stamp = new Date(profile.start).toISOString().replace(/[:.]/g, '-');
    const base = path.join(options.dir, `${fileSafe(meta.service)}-${stamp}`);
    return [
      [`${base}.pb.gz`, profile.pprof],
      options.trace && profile.trace && [`${base}.trace.json.gz`, profile.trace],
      profile.heap && [`${base}.heap.pb.gz`, profile.heap],
      options.trace && profile.heapTrace && [`${base}.heap.trace.json.gz`, profile.heapTrace],
    ].filter(Boolean);
  };
  // The process id in the temporary name: two processes of one service never share one.
  const temporary = (to) => `${to}.${process.pid}.tmp`;
  const uploader = new Uploader(
    'file',
    async (profile) => {
      await makeDir(options.dir);
      for (const [to, bytes] of filesOf(profile)) {
        try {
          await fs.promises.writeFile(temporary(to), bytes);
          await fs.promises.rename(temporary(to), to);
        } catch (err) {
          await fs.promises.rm(temporary(to), { force: true }).catch(() => {});
          throw err;
        }
      }
    },
    { ...options, retries: 0 },
  );
  uploader.exitWrite = (profile) => {
    makeDirSync(options.dir);
    for (const [to, bytes] of filesOf(profile)) {
      try {
        fs.writeFileSync(temporary(to), bytes);
        fs.renameSync(temporary(to), to);
      } catch (err) {
        try {
          fs.rmSync(temporary(to), { force: true });
        } catch {
          // nothing was left to remove
        }
        throw err;
      }
    }
  };
  return uploader;
}

module.exports = { file, fileSafe };
