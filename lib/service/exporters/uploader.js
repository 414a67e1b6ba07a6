'use strict';
// The upload machinery every exporter shares: a bounded queue drained one profile at a time,
// a timeout per attempt, retries with jittered backoff on network errors, 5xx and 429,
// replies read only as far as a small bounded prefix, and on shutdown a bounded wait after
// which the in-flight upload is aborted (a receiver that never answers must not hold the
// process open). Failures are logged once per kind, never thrown into the application, and
// no message carries a credential.

const { warnOnce } = require('../../log');
const { untraced } = require('../../integrations/ddtrace');

/** setTimeout's largest delay (ms); more overflows to 1 ms. */
const MAX_TIMER_MS = 2 ** 31 - 1;
/** How much of a receiver's reply is read (the rest is discarded unread). */
const MAX_REPLY_BYTES = 64 * 1024;

const DEFAULTS = { timeoutMs: 10_000, retries: 3, backoffMs: 500, queueSize: 4 };

class RetryableError extends Error {}

/**
 * `text` with every URL's user-info removed and each secret replaced by `***`: what may
 * go into a log. Node's fetch repeats the whole URL in some errors, and a receiver may echo
 * a header, so every message passes through here.
 */
function scrub(text, secrets = []) {
  let out = String(text).replace(/\b([a-z][a-z0-9+.-]*:\/\/)[^/\s@]*@/gi, '$1');
  for (const secret of secrets) {
    if (typeof secret === 'string' && secret.length >= 3) out = out.split(secret).join('***');
  }
  return out;
}

/** A URL without user-info and query, for messages. */
function redact(url) {
  try {
    const u = new URL(url);
    u.username = '';
    u.password = '';
    u.search = '';
    return u.toString();
  } catch {
    return '(invalid URL)';
  }
}

/** Reads at most MAX_REPLY_BYTES of a reply's body, then drops the rest unread. */
async function drainReply(res) {
  if (!res.body) return;
  const reader = res.body.getReader();
  let read = 0;
  try {
    while (read <= MAX_REPLY_BYTES) {
      const { done, value } = await reader.read();
      if (done) return;
      read += value.byteLength;
    }
    await reader.cancel();
  } catch {
    // A reply cut short or aborted: nothing to keep from it.
  }
}

/**
 * Sends one request; throws RetryableError on network errors, timeouts, 5xx and 429.
 * `signal` aborts it (shutdown); `timeoutMs` bounds each attempt, reply included.
 */
async function send(url, init, timeoutMs, signal) {
  const timeout = AbortSignal.timeout(timeoutMs);
  const both = signal ? AbortSignal.any([timeout, signal]) : timeout;
  let res;
  try {
    res = await untraced(() => fetch(url, { ...init, signal: both }));
  } catch (err) {
    if (signal?.aborted) throw new Error(`upload to ${redact(url)} was abandoned at shutdown`);
    const kind = timeout.aborted ? 'timed out' : `failed (${err.cause?.code ?? err.message})`;
    throw new RetryableError(`upload to ${redact(url)} ${kind}`);
  }
  await drainReply(res);
  if (res.status === 429 || res.status >= 500) {
    throw new RetryableError(`upload to ${redact(url)} answered ${res.status}`);
  }
  if (res.status >= 400) throw new Error(`upload to ${redact(url)} was refused: ${res.status}`);
}

/** Runs `exportOne(profile, timeoutMs, signal)` for queued profiles, one at a time, with retries. */
class Uploader {
  #queue = [];
  #running = null;
  #abort = new AbortController();
  #options;
  #name;
  #exportOne;
  #secrets;
  dropped = 0;
  failed = 0;
  sent = 0;

  constructor(name, exportOne, options = {}, secrets = []) {
    this.#name = name;
    this.#exportOne = exportOne;
    this.#options = { ...DEFAULTS, ...options };
    this.#secrets = secrets;
  }

  #warn(kind, message) {
    warnOnce(`${this.#name}-${kind}`, scrub(message, this.#secrets));
  }

  /** Queues a profile; drops the oldest waiting one past the queue size. */
  push(profile) {
    if (this.#abort.signal.aborted) return;
    if (this.#queue.length >= this.#options.queueSize) {
      this.#queue.shift();
      this.dropped++;
      this.#warn('dropped', `selfprof: ${this.#name} exporter fell behind; dropping the oldest profiles`);
    }
    this.#queue.push(profile);
    if (!this.#running) this.#running = this.#drain().finally(() => (this.#running = null));
  }

  /** Resolves when the queue is empty, or after `timeoutMs`. */
  async flush(timeoutMs = 5000) {
    let timer;
    const deadline = new Promise((resolve) => {
      timer = setTimeout(resolve, Math.min(timeoutMs, MAX_TIMER_MS));
      timer.unref();
    });
    await Promise.race([this.#running ?? Promise.resolve(), deadline]);
    clearTimeout(timer);
  }

  /** Waits up to `timeoutMs` for the queue, then aborts the upload in flight and drops the rest. */
  async close(timeoutMs = 5000) {
    await this.flush(timeoutMs);
    this.#abort.abort();
    this.dropped += this.#queue.length;
    this.#queue.length = 0;
  }

  async #drain() {
    const signal = this.#abort.signal;
    while (this.#queue.length > 0 && !signal.aborted) {
      const profile = this.#queue.shift();
      const { retries, backoffMs, timeoutMs } = this.#options;
      for (let attempt = 0; !signal.aborted; attempt++) {
        try {
          await this.#exportOne(profile, timeoutMs, signal);
          this.sent++;
          break;
        } catch (err) {
          if (err instanceof RetryableError && attempt < retries && !signal.aborted) {
            const delay = Math.min(backoffMs * 2 ** attempt * (0.75 + Math.random() / 2), MAX_TIMER_MS);
            await new Promise((r) => setTimeout(r, delay).unref());
            continue;
          }
          this.failed++;
          this.#warn(err.constructor.name, `selfprof: ${this.#name} export failed: ${err.message}`);
          break;
        }
      }
    }
  }
}

module.exports = { Uploader, RetryableError, send, redact, scrub, MAX_TIMER_MS, DEFAULTS };
