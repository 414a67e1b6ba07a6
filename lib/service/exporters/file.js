'use strict';
// File: `<dir>/<service>-<ISO time>.pb.gz`, and with `trace: true` the spec trace of the
// same recording beside it.

const fs = require('node:fs');
const path = require('node:path');
const { Uploader } = require('./uploader');

/** A service name as a file-name part: no path separators, no `..`, nothing odd. */
function fileSafe(name) {
  return String(name).replace(/[^\w.-]/g, '_').replace(/^\.+/, '_').slice(0, 200) || '_';
}

function file(options, meta) {
  return new Uploader(
    'file',
    async (profile) => {
      await fs.promises.mkdir(options.dir, { recursive: true });
      const stamp = new Date(profile.start).toISOString().replace(/[:.]/g, '-');
      const base = path.join(options.dir, `${fileSafe(meta.service)}-${stamp}`);
      await fs.promises.writeFile(`${base}.pb.gz`, profile.pprof);
      if (options.trace && profile.trace) await fs.promises.writeFile(`${base}.trace.json.gz`, profile.trace);
      if (profile.heap) await fs.promises.writeFile(`${base}.heap.pb.gz`, profile.heap);
      if (options.trace && profile.heapTrace) await fs.promises.writeFile(`${base}.heap.trace.json.gz`, profile.heapTrace);
    },
    { ...options, retries: 0 },
  );
}

module.exports = { file, fileSafe };
