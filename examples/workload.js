'use strict';
// A small service-shaped workload: "requests" that parse JSON, render HTML,
// search for primes and sort, interleaved with awaits like real handlers.

const { setImmediate: tick } = require('node:timers/promises');
const { withLabels } = require('..');

const ENDPOINTS = ['GET /invoices/:id', 'POST /orders', 'GET /primes'];

function parseOrder(i) {
  const body = JSON.stringify({ id: i, items: Array.from({ length: 200 }, (_, k) => ({ sku: `sku-${k}`, qty: k % 7 })) });
  return JSON.parse(body);
}

function renderInvoice(order) {
  let html = '<table>';
  for (const item of order.items) html += `<tr><td>${item.sku}</td><td>${item.qty}</td></tr>`;
  return `${html}</table>`;
}

function countPrimes(limit) {
  let count = 0;
  for (let n = 2; n < limit; n++) {
    let prime = true;
    for (let d = 2; d * d <= n; d++) {
      if (n % d === 0) {
        prime = false;
        break;
      }
    }
    if (prime) count++;
  }
  return count;
}

function rankItems(order) {
  return order.items.map((it) => ({ ...it, score: Math.sin(it.qty) * it.sku.length })).sort((a, b) => a.score - b.score);
}

// Each endpoint does a different mix of the work, so the profile differs per endpoint.
async function handleRequest(i) {
  const endpoint = ENDPOINTS[i % ENDPOINTS.length];
  return withLabels({ endpoint, request_id: i }, async () => {
    const order = parseOrder(i);
    await tick();
    if (endpoint === 'GET /invoices/:id') return renderInvoice(order).length;
    if (endpoint === 'POST /orders') return rankItems(order).length;
    await tick();
    return countPrimes(20_000 + (i % 5) * 1000);
  });
}

/** Serves labeled requests, 8 at a time, for `durationMs`; resolves to the number served. */
async function run({ durationMs = 1000, concurrency = 8 } = {}) {
  const end = Date.now() + durationMs;
  let served = 0;
  const worker = async () => {
    while (Date.now() < end) await handleRequest(served++);
  };
  await Promise.all(Array.from({ length: concurrency }, worker));
  return served;
}

module.exports = { run, handleRequest, ENDPOINTS };
