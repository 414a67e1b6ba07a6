'use strict';
// An option object's keys checked against the known ones: a typo (`servce`, `directory`) is
// one error naming the key and the nearest known one, never an option silently ignored.

/** The known key nearest to `key` (by edit distance, case, or one being the other's
 * start), if one is near enough. */
function nearest(key, known) {
  const distance = (a, b) => {
    const row = Array.from({ length: b.length + 1 }, (_, j) => j);
    for (let i = 1; i <= a.length; i++) {
      let prev = row[0];
      row[0] = i;
      for (let j = 1; j <= b.length; j++) {
        const here = row[j];
        row[j] = Math.min(row[j] + 1, row[j - 1] + 1, prev + (a[i - 1].toLowerCase() === b[j - 1].toLowerCase() ? 0 : 1));
        prev = here;
      }
    }
    return row[b.length];
  };
  let best;
  let bestDistance = Infinity;
  for (const k of known) {
    // `directory` for `dir`, `url2` for `url`: one is the other's start.
    const [a, b] = [key.toLowerCase(), k.toLowerCase()];
    const d = a.startsWith(b) || b.startsWith(a) ? 1 : distance(key, k);
    if (d < bestDistance) [best, bestDistance] = [k, d];
  }
  return bestDistance <= Math.max(2, Math.floor(key.length / 3)) ? best : undefined;
}

/** Refuses keys of `options` not in `known`, naming the nearest known one. */
function checkKeys(options, known, what) {
  for (const key of Object.keys(options)) {
    if (known.includes(key)) continue;
    const near = nearest(key, known);
    throw new TypeError(`${what}: unknown option ${JSON.stringify(key)}${near ? ` (did you mean ${JSON.stringify(near)}?)` : ''}; known: ${known.join(', ')}`);
  }
}

module.exports = { checkKeys, nearest };
