'use strict';
// The first few of many items in an order, for the views' top-N tables: a profile may name
// a million functions, and sorting them all (or making an object of each) to print 20
// costs seconds and hundreds of MB.

/**
 * The first `limit` of the items 0..n-1 in the order `before(x, y) < 0` gives (stable: of
 * equal ones, the lower first): a full sort for many, else one pass keeping the best few.
 * @param {number} n
 * @param {number} limit
 * @param {(x: number, y: number) => number} before
 * @param {(i: number) => boolean} [keep] only the items it keeps
 * @returns {number[]}
 */
function firstInOrder(n, limit, before, keep = () => true) {
  if (limit >= n / 8) {
    const all = [];
    for (let i = 0; i < n; i++) if (keep(i)) all.push(i);
    return all.sort((x, y) => before(x, y) || x - y).slice(0, limit);
  }
  const best = [];
  for (let j = 0; j < n; j++) {
    if (!keep(j) || (best.length === limit && before(j, best[limit - 1]) >= 0)) continue;
    let at = best.length;
    while (at > 0 && before(j, best[at - 1]) < 0) at--;
    best.splice(at, 0, j);
    if (best.length > limit) best.pop();
  }
  return best;
}

module.exports = { firstInOrder };
