'use strict';
// Formatting shared by the Node views (summary.js) and the HTML report's page: the report
// builder embeds each function of SHARED into the page's script by its source text, so
// these must be self-contained (no names from outside the function).

/** Bytes as people read them: 512 B, 1.5 KiB, 12.3 MiB. */
function formatBytes(n) {
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let u = 0;
  let v = n;
  while (Math.abs(v) >= 1024 && u < units.length - 1) {
    v /= 1024;
    u++;
  }
  return u === 0 ? `${Math.round(v)} B` : `${v.toFixed(1)} ${units[u]}`;
}

/** The functions the report's page uses too. */
const SHARED = [formatBytes];

module.exports = { formatBytes, SHARED };
