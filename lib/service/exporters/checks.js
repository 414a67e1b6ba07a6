'use strict';
// What an upload's HTTP request cannot carry, checked once at start() so that no upload
// fails for it later: header values with control characters or characters outside Latin-1,
// headers HTTP sets itself for each request, URL user-info that is not valid
// percent-encoding. Messages name the option or variable, never the value (it may be a
// secret).

const http = require('node:http');

/**
 * Headers HTTP sets for each request or connection (framing and hop-by-hop ones): set by
 * hand, they break every upload or make the receiver wait for a body that never comes.
 */
const HTTP_OWN = new Set(['content-length', 'transfer-encoding', 'connection', 'keep-alive', 'proxy-connection', 'upgrade', 'te', 'trailer', 'expect']);

/** Throws a TypeError naming `name` if `value` has a character a header value cannot carry. */
function checkHeaderValue(value, name) {
  const i = value.search(/[^\t\x20-\x7e\x80-\xff]/);
  if (i < 0) return;
  const c = value.charCodeAt(i);
  const kind = c === 10 || c === 13 ? 'a line break' : c < 0x20 || c === 0x7f ? 'a control character' : 'a character outside Latin-1';
  throw new TypeError(`start: ${name} has ${kind} (character ${i + 1} of ${value.length}), which an HTTP header cannot carry`);
}

/** A header name as HTTP takes it: a token; null if it is not one. */
function validHeaderName(name) {
  try {
    http.validateHeaderName(name);
    return true;
  } catch {
    return false;
  }
}

/** `name` in lower case if HTTP sets that header itself, else null. */
function httpOwnHeader(name) {
  const lower = name.toLowerCase();
  return HTTP_OWN.has(lower) ? lower : null;
}

/**
 * The URL's user name and password decoded (they become a Basic header); a TypeError naming
 * `name` when one is not valid percent-encoding (a raw `%`).
 */
function decodeUserInfo(url, name) {
  const decode = (part, what) => {
    try {
      return decodeURIComponent(part);
    } catch {
      throw new TypeError(`start: ${name}'s ${what} is not valid percent-encoding (write a % in it as %25)`);
    }
  };
  return { user: decode(url.username, 'user name'), password: decode(url.password, 'password') };
}

module.exports = { checkHeaderValue, validHeaderName, httpOwnHeader, decodeUserInfo, HTTP_OWN };
