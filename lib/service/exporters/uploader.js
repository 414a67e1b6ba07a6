'use strict';
// The upload machinery every exporter shares: a bounded queue drained one profile at a time,
// a timeout per attempt, retries with jittered backoff on network errors, 5xx and 429, a
// reply's status line and headers read but never its body, redirects not followed, and on
// shutdown one more try for each waiting profile within a bounded wait, after which the
// upload in flight is abandoned and one warning says what was lost. Uploads never keep the
// event loop alive on their own (their sockets and timers are unref'd): only the wait at
// shutdown does, up to its bound. Failures are logged once per kind, never thrown into the
// application, and no message carries a credential.

const http = require('node:http');
const https = require('node:https');
const { performance } = require('node:perf_hooks');
const { warnOnce, warnNow } = require('../../log');

/** setTimeout's largest delay (ms); more overflows to 1 ms. */
const MAX_TIMER_MS = 2 ** 31 - 1;

const DEFAULTS = { timeoutMs: 10_000, retries: 3, backoffMs: 500, queueSize: 4 };

class RetryableError extends Error {}
/** A receiver answered with a redirect: not followed, not retried. */
class RedirectError extends Error {}

/**
 * `text` with every URL's user-info removed and each secret replaced by `***`: what may
 * go into a log. An error may repeat a whole URL, so every message passes through here.
 */
function scrub(text, secrets = []) {
  let out = String(text).replace(/\b([a-z][a-z0-9+.-]*:\/\/)[^/\s@]*@/gi, '$1');
  for (const secret of secrets) {
    if (typeof secret === 'string' && secret.length >= 3) out = out.split(secret).join('***');
  }
  return out;
}

/** A URL without user-info and query, for messages; `base` resolves a relative one. */
function redact(url, base) {
  try {
    const u = new URL(url, base);
    u.username = '';
    u.password = '';
    u.search = '';
    u.hash = '';
    const text = u.toString();
    return text.length > 200 ? `${text.slice(0, 200)}…` : text;
  } catch {
    return '(invalid URL)';
  }
}

/**
 * Sends one request and settles on the reply's status (its body is never read, so a reply
 * without end cannot hold it): throws RetryableError on network errors, timeouts, 5xx and
 * 429, RedirectError on 3xx (not followed: the profile and the credentials go only to the
 * configured url, as dd-trace's exporter does), Error on other 4xx. `signal` aborts it
 * (shutdown); `timeoutMs` bounds it. Its socket is unref'd: an upload alone never keeps the
 * process alive.
 */
async function send(url, init, timeoutMs, signal) {
  const where = redact(url);
  const [bytes, headers] = [await init.body, init.headers ?? {}];
  if (signal?.aborted) throw new Error(`upload to ${where} was abandoned unanswered at shutdown`);
  const u = new URL(url);
  const transport = u.protocol === 'https:' ? https : http;
  return new Promise(/** @param {(value?: void) => void} resolve */ (resolve, reject) => {
    let req;
    let timer;
    const settle = (err) => {
      if (!timer) return;
      clearTimeout(timer);
      timer = undefined;
      signal?.removeEventListener('abort', onAbort);
      req?.destroy();
      if (err) reject(err);
      else resolve();
    };
    const onAbort = () => settle(new Error(`upload to ${where} was abandoned unanswered at shutdown`));
    timer = setTimeout(() => settle(new RetryableError(`upload to ${where} timed out`)), timeoutMs);
    timer.unref();
    signal?.addEventListener('abort', onAbort, { once: true });
    try {
      // Loaded only beside dd-trace (the exit's sender process loads no more than it needs).
      const untraced = global._ddtrace ? require('../../integrations/ddtrace').untraced : (fn) => fn();
      untraced(() => {
        // A connection per upload (one a period): no idle socket to go stale between them.
        req = transport.request(u, { method: init.method ?? 'POST', headers: { ...headers, 'content-length': bytes.length }, agent: false });
      });
    } catch (err) {
      return settle(new Error(`upload to ${where} could not be made (${err.code ?? err.message})`));
    }
    req.on('socket', (socket) => socket.unref());
    req.on('error', (err) => settle(new RetryableError(`upload to ${where} failed (${err.code ?? err.message})`)));
    req.on('response', (res) => {
      const status = res.statusCode;
      if (status >= 300 && status < 400) {
        const to = res.headers.location ? `, a redirect to ${redact(res.headers.location, url)}` : '';
        settle(new RedirectError(`upload to ${where} answered ${status}${to}; not followed (selfprof sends profiles and credentials only to the configured url)`));
      } else if (status === 429 || status >= 500) settle(new RetryableError(`upload to ${where} answered ${status}`));
      else if (status >= 400) settle(new Error(`upload to ${where} was refused: ${status}`));
      else settle();
    });
    req.end(bytes);
  });
}

/** `2024-05-01T10:00:00.000Z to 10:00:01.500Z`: a profile's window, the date once. */
function windowOf(profile) {
  const iso = (ms) => (Number.isFinite(ms) ? new Date(ms).toISOString() : '?');
  const [start, end] = [iso(profile.start), iso(profile.end)];
  return `${start} to ${start.slice(0, 11) === end.slice(0, 11) ? end.slice(11) : end}`;
}

/** What a queued profile is, for the warning at shutdown. */
function describe(profile) {
  // A profile sent as two requests (Pyroscope's CPU, then heap) whose first went: its heap.
  const what = profile.heap === true || profile.sent > 0 ? 'heap profile ' : profile.heap ? 'CPU and heap profiles ' : '';
  return `${what}${windowOf(profile)}${profile.snapshot === 'on_shutdown' ? ' (the last)' : ''}`;
}

/**
 * The warning for profiles an exporter could not deliver (`when`: "before shutdown", "at
 * exit"): how many, the first ones and the last (a queue may hold up to 1000), and why.
 * They are listed by when they end: a period's profile may reach the exporter after the
 * shutdown's own one, which is still the last.
 */
function lostMessage(name, given, when, reason) {
  const at = (profile) => (Number.isFinite(profile.end) ? profile.end : Infinity);
  const last = (profile) => (profile.snapshot === 'on_shutdown' ? 1 : 0);
  const profiles = [...given].sort((a, b) => at(a) - at(b) || last(a) - last(b));
  const n = profiles.length;
  const shown = n > 6 ? [...profiles.slice(0, 4).map(describe), `${n - 5} more`, describe(profiles[n - 1])] : profiles.map(describe);
  return `selfprof: ${name} exporter could not ${name === 'file' ? 'write' : 'send'} ${n} profile${n > 1 ? 's' : ''} ${when} (${shown.join(', ')}): ${reason}`;
}

/**
 * Runs `exportOne(profile, timeoutMs, signal)` for queued profiles, one at a time, with
 * retries. `close()` is the shutdown: from then on a profile in its backoff is tried again
 * at once, each waiting one is tried once, all within close's bound.
 */
class Uploader {
  #queue = [];
  #running = null;
  #abort = new AbortController();
  #options;
  #name;
  #exportOne;
  #secrets;
  /** performance.now() by which close() gives up; null until close(). */
  #closeBy = null;
  /** Ends the current backoff early (close). */
  #wake = null;
  /** The profile being sent. */
  #current = null;
  /** What close() could not send: profiles, and the last reason. */
  #lost = { profiles: [], reason: '' };
  /** takeAtExit() ran: what is left is the exit's to deliver. */
  #exited = false;
  dropped = 0;
  failed = 0;
  sent = 0;
  /**
   * What the exporter wants encoded from the trace (src/formats/dialect.rs), where it has
   * a dialect: set by its factory.
   * @type {(() => object) | undefined}
   */
  dialect;
  /**
   * An HTTP exporter's requests for what is left of a profile, made synchronously, for the
   * exit's delivery (`httpUploader`).
   * @type {((profile: any) => { url: string, method: string, headers: Record<string, string>, body: Buffer }[]) | undefined}
   */
  exitRequests;
  /**
   * The file exporter's synchronous write of a profile, for the exit.
   * @type {((profile: any) => void) | undefined}
   */
  exitWrite;

  constructor(name, exportOne, options = {}, secrets = []) {
    this.#name = name;
    this.#exportOne = exportOne;
    this.#options = { ...DEFAULTS, ...options };
    this.#secrets = secrets;
  }

  #warn(kind, message) {
    warnOnce(`${this.#name}-${kind}`, scrub(message, this.#secrets));
  }

  /**
   * What a period's profile is to this exporter: the items it queues (an exporter may
   * number them, or send a profile as two).
   * @param {any} profile
   * @returns {any[]}
   */
  expand(profile) {
    return [profile];
  }

  /** Queues a period's profile; drops the oldest waiting one past the queue size. */
  push(profile) {
    if (this.#abort.signal.aborted) return;
    for (const item of this.expand(profile)) {
      if (this.#queue.length >= this.#options.queueSize) {
        this.#queue.shift();
        this.dropped++;
        this.#warn('dropped', `selfprof: ${this.#name} exporter fell behind; dropping the oldest profiles`);
      }
      this.#queue.push(item);
    }
    if (!this.#running) this.#running = this.#drain().finally(() => (this.#running = null));
  }

  /**
   * Resolves when the queue is empty, or after `timeoutMs`. Its timer keeps the process
   * alive while someone waits on it (uploads alone do not).
   */
  async flush(timeoutMs = 5000) {
    let timer;
    const deadline = new Promise((resolve) => {
      timer = setTimeout(resolve, Math.min(timeoutMs, MAX_TIMER_MS));
    });
    await Promise.race([this.#running ?? Promise.resolve(), deadline]);
    clearTimeout(timer);
  }

  /**
   * Shutdown: the profile in its backoff is tried again at once and each waiting one once,
   * for up to `timeoutMs`; then the upload in flight is abandoned, the rest dropped, and one
   * warning names what was not sent.
   */
  async close(timeoutMs = 5000) {
    if (this.#closeBy !== null) return;
    this.#closeBy = performance.now() + timeoutMs;
    this.#wake?.();
    await this.flush(timeoutMs);
    // Abandon the upload in flight: it fails at once, and the drain counts it as lost (a
    // file write cannot be cut short: it is not waited for long).
    this.#abort.abort();
    if (this.#running) {
      let timer;
      await Promise.race([this.#running, new Promise((resolve) => (timer = setTimeout(resolve, 100)))]);
      clearTimeout(timer);
      if (this.#current && !this.#lost.profiles.includes(this.#current)) {
        this.#lost.profiles.push(this.#current);
        this.#lost.reason = `the ${this.#name} export under way did not finish before shutdown`;
      }
    }
    this.#lost.profiles.push(...this.#queue);
    this.dropped += this.#queue.length;
    this.#queue.length = 0;
    const { profiles, reason } = this.#lost;
    if (profiles.length && !this.#exited) this.warnLost(profiles, 'before shutdown', reason);
  }

  /**
   * One warning naming the profiles this exporter could not deliver, and why; `now`: at
   * the process's exit, where a warning must be emitted at once.
   */
  warnLost(profiles, when, reason, now = false) {
    const message = scrub(lostMessage(this.#name, profiles, when, reason), this.#secrets);
    const code = `SELFPROF_${this.#name.toUpperCase()}_LOST`;
    if (now) warnNow(message, code);
    else process.emitWarning(message, { code });
  }

  /**
   * The profiles waiting in the queue, taken out (a signal's synchronous delivery); the
   * upload under way and the uploader go on.
   */
  takeWaiting() {
    return this.#exited ? [] : this.#queue.splice(0);
  }

  /**
   * The process is exiting (its 'exit' event: no more turns of the event loop): the
   * uploads stop, and what this exporter has not delivered is returned, oldest first, for
   * the exit's synchronous delivery: the profile under way (it may have arrived: sent
   * again, rather than lost), those waiting, those a shutdown under way could not send,
   * and `last`, the period the exit built.
   */
  takeAtExit(last) {
    if (this.#exited) return [];
    return [...this.#stopTaking(), ...(last ? this.expand(last) : [])];
  }

  /**
   * The shutdown's time ran out and the process ends now (a signal raised again before
   * close() finished): the upload under way is abandoned, and one warning, written at once,
   * names what was not sent.
   */
  abandonNow() {
    if (this.#exited) return;
    const left = this.#stopTaking();
    if (left.length) this.warnLost(left, 'before shutdown', this.#lost.reason || `the ${this.#name} export under way did not finish before shutdown`, true);
  }

  /** The uploads stop for good: what this exporter has not delivered, oldest first (those
   * a shutdown could not send, the one under way, those waiting), taken out. */
  #stopTaking() {
    this.#exited = true;
    this.#abort.abort();
    const left = [...this.#lost.profiles];
    if (this.#current && !left.includes(this.#current)) left.push(this.#current);
    left.push(...this.#queue);
    this.#queue.length = 0;
    this.#lost.profiles = [];
    return left;
  }

  /** Waits `ms`, or less if close() begins meanwhile. */
  #backoff(ms) {
    return new Promise(/** @param {(value?: void) => void} resolve */ (resolve) => {
      const timer = setTimeout(() => this.#wake(), Math.min(ms, MAX_TIMER_MS));
      timer.unref();
      this.#wake = () => {
        clearTimeout(timer);
        this.#wake = null;
        resolve();
      };
    });
  }

  async #drain() {
    const signal = this.#abort.signal;
    while (this.#queue.length > 0 && !signal.aborted) {
      const profile = this.#queue.shift();
      this.#current = profile;
      const { retries, backoffMs, timeoutMs } = this.#options;
      let settled = false;
      for (let attempt = 0; !signal.aborted; attempt++) {
        // An attempt begun at shutdown is the profile's last, and fits in what is left of it.
        const closing = this.#closeBy !== null;
        const timeout = closing ? Math.max(1, Math.min(timeoutMs, this.#closeBy - performance.now())) : timeoutMs;
        try {
          await this.#exportOne(profile, timeout, signal);
          this.sent++;
          settled = true;
          break;
        } catch (err) {
          if (err instanceof RetryableError && attempt < retries && !closing && !signal.aborted) {
            if (this.#closeBy === null) await this.#backoff(Math.min(backoffMs * 2 ** attempt * (0.75 + Math.random() / 2), MAX_TIMER_MS));
            continue;
          }
          this.failed++;
          settled = true;
          if (this.#closeBy !== null) {
            this.#lost.profiles.push(profile);
            this.#lost.reason = err.message;
          } else this.#warn(err.constructor.name, `selfprof: ${this.#name} export failed: ${err.message}`);
          break;
        }
      }
      if (!settled) this.#lost.profiles.push(profile); // shutdown came between two attempts
      this.#current = null;
    }
  }
}

/**
 * An exporter that sends each profile as HTTP requests, in order: `requestsOf(profile,
 * sync)` makes them (`{ url, method, headers, body }`; unless `sync`, a body may be a
 * promise). A retry resumes from the first request not yet answered (`profile.sent`).
 * Its `exitRequests` are those left, made synchronously, for the exit's delivery.
 */
function httpUploader(name, requestsOf, options, secrets) {
  const uploader = new Uploader(
    name,
    async (profile, timeoutMs, signal) => {
      const requests = requestsOf(profile, false);
      for (let i = profile.sent ?? 0; i < requests.length; i++) {
        const { url, ...init } = requests[i];
        await send(url, init, timeoutMs, signal);
        profile.sent = i + 1;
      }
    },
    options,
    secrets,
  );
  uploader.exitRequests = (profile) => requestsOf(profile, true).slice(profile.sent ?? 0);
  return uploader;
}

module.exports = { Uploader, httpUploader, RetryableError, RedirectError, send, redact, scrub, windowOf, MAX_TIMER_MS, DEFAULTS };
