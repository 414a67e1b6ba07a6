'use strict';
// The conventional environment variables of each backend, parsed as that backend's own
// clients parse them. A bad value is one error naming the variable; a value that may be a
// secret (OTLP headers) is never repeated in a message.

const { decodeUserInfo, checkHeaderValue } = require('./checks');
const { switchValue } = require('../../log');

/** dd-trace's DD_TAGS: `k:v,k2:v2`, or space-separated when there is no comma (config/parsers.js, tagger.js). */
function parseDdTags(raw) {
  const out = {};
  if (!raw) return out;
  const text = raw.includes(',') ? raw : raw.replace(/\s+/g, ',');
  for (const item of text.split(',')) {
    const i = item.indexOf(':');
    const key = (i < 0 ? item : item.slice(0, i)).trim();
    if (key === '') continue;
    out[key] = i < 0 ? '' : item.slice(i + 1).trim();
  }
  return out;
}

/**
 * The Datadog agent's URL as dd-trace finds it: DD_TRACE_AGENT_URL (alias DD_TRACE_URL),
 * else http://DD_AGENT_HOST (alias DD_TRACE_AGENT_HOSTNAME, default 127.0.0.1) :
 * DD_TRACE_AGENT_PORT (default 8126).
 */
function datadogAgentUrl(env) {
  const named = ['DD_TRACE_AGENT_URL', 'DD_TRACE_URL'].find((n) => env[n]);
  if (named) {
    let u;
    try {
      u = new URL(env[named]);
    } catch {
      throw new TypeError(`start: ${named} must be an http(s) URL`);
    }
    if (u.protocol !== 'http:' && u.protocol !== 'https:') {
      throw new TypeError(`start: ${named} must be an http(s) URL (selfprof does not upload over ${u.protocol} sockets)`);
    }
    decodeUserInfo(u, named);
    return u.toString();
  }
  const host = (env.DD_AGENT_HOST || env.DD_TRACE_AGENT_HOSTNAME || '127.0.0.1').trim();
  let port = 8126;
  if (env.DD_TRACE_AGENT_PORT !== undefined && env.DD_TRACE_AGENT_PORT.trim() !== '') {
    const text = env.DD_TRACE_AGENT_PORT.trim();
    port = Number(text);
    if (!/^\d+$/.test(text) || port < 1 || port > 65535) {
      throw new TypeError(`start: DD_TRACE_AGENT_PORT must be a port number from 1 to 65535, got ${JSON.stringify(env.DD_TRACE_AGENT_PORT)}`);
    }
  }
  const hostPart = host.includes(':') && !host.startsWith('[') ? `[${host}]` : host;
  try {
    return new URL(`http://${hostPart}:${port}`).toString();
  } catch {
    throw new TypeError(`start: DD_AGENT_HOST must be a host name or address, got ${JSON.stringify(host)}`);
  }
}

/** The variables that say where the Datadog agent is (datadogAgentUrl reads them). */
const AGENT_VARIABLES = ['DD_TRACE_AGENT_URL', 'DD_TRACE_URL', 'DD_AGENT_HOST', 'DD_TRACE_AGENT_HOSTNAME', 'DD_TRACE_AGENT_PORT'];
/** Datadog's site when DD_SITE is not set (US1). */
const DEFAULT_SITE = 'datadoghq.com';

/**
 * Whether a Datadog exporter without a url uploads agentless, straight to the site's
 * profiling intake, as Datadog's profilers do (`DD_PROFILING_AGENTLESS`; the agent itself
 * forwards to the same intake, `https://intake.profile.<site>/api/v2/profile`, with the
 * key in `DD-API-KEY`). Agentless: with an API key of its own (`apiKey`,
 * SELFPROF_API_KEY), or with DD_API_KEY when DD_PROFILING_AGENTLESS is true or, unset, no
 * variable names an agent. Returns `{ url, apiKey, from }` (from: where the key came
 * from), or null for the agent. The key goes only to that https URL; DD_API_KEY is never
 * sent to an agent. `names`: the variable each option came from, for errors.
 * @param {Record<string, string | undefined>} env
 * @param {{ apiKey?: string, site?: string }} options
 * @param {Record<string, string>} [names]
 */
function datadogIntake(env, options, names = {}) {
  const agentless = switchValue(env.DD_PROFILING_AGENTLESS);
  if (agentless === null) {
    throw new TypeError(`start: DD_PROFILING_AGENTLESS must be true or false, got ${JSON.stringify(String(env.DD_PROFILING_AGENTLESS).slice(0, 100))}`);
  }
  let apiKey = options.apiKey;
  let from = names.apiKey ?? 'exporter apiKey';
  if (apiKey === undefined && env.DD_API_KEY !== undefined && env.DD_API_KEY.trim() !== '') {
    const agentNamed = AGENT_VARIABLES.some((n) => env[n] !== undefined && env[n].trim() !== '');
    if (agentless === true || (agentless === undefined && !agentNamed)) {
      apiKey = env.DD_API_KEY.trim();
      from = 'DD_API_KEY';
      checkHeaderValue(apiKey, from);
    }
  }
  if (agentless === false || apiKey === undefined) {
    if (agentless === true) throw new TypeError('start: DD_PROFILING_AGENTLESS=true needs an API key: set DD_API_KEY (or SELFPROF_API_KEY)');
    if (options.site !== undefined) throw new TypeError('start: the datadog exporter\'s site goes with an apiKey (agentless uploads); an agent knows its own site');
    return null;
  }
  const siteName = options.site !== undefined ? 'exporter site' : 'DD_SITE';
  const site = String(options.site ?? (env.DD_SITE?.trim() || DEFAULT_SITE)).trim().toLowerCase();
  // A host name: the site is the tail of the intake's host, nothing more (no port, path or user).
  if (!/^(?=.{1,200}$)[a-z0-9](?:[a-z0-9-]*[a-z0-9])?(?:\.[a-z0-9](?:[a-z0-9-]*[a-z0-9])?)+$/.test(site)) {
    throw new TypeError(`start: ${siteName} must be a Datadog site such as datadoghq.com, us3.datadoghq.com or datadoghq.eu, got ${JSON.stringify(site.slice(0, 100))}`);
  }
  return { url: `https://intake.profile.${site}/api/v2/profile`, apiKey, from };
}

/**
 * OpenTelemetry's `key=value,key2=value2` lists (OTEL_RESOURCE_ATTRIBUTES,
 * OTEL_EXPORTER_OTLP_HEADERS): W3C-baggage-like, values percent-decoded, surrounding
 * spaces trimmed. `secret`: the values must not appear in an error. `check(key, value,
 * where)` may refuse an entry (`where`: "NAME entry N").
 * @param {string | undefined} raw
 * @param {string} name
 * @param {{ secret?: boolean, check?: (key: string, value: string, where: string) => void }} [options]
 */
function parseOtelList(raw, name, { secret = false, check } = {}) {
  const out = [];
  if (raw === undefined || raw.trim() === '') return out;
  const entries = raw.split(',');
  entries.forEach((entry, i) => {
    if (entry.trim() === '') return;
    const eq = entry.indexOf('=');
    const where = `${name} entry ${i + 1}`;
    if (eq <= 0 || entry.slice(0, eq).trim() === '') {
      throw new TypeError(`start: ${where} must be key=value${secret ? '' : `, got ${JSON.stringify(entry)}`}`);
    }
    const decode = (s) => {
      try {
        return decodeURIComponent(s.trim());
      } catch {
        throw new TypeError(`start: ${where} is not valid percent-encoding${secret ? '' : `: ${JSON.stringify(entry)}`}`);
      }
    };
    const pair = [decode(entry.slice(0, eq)), decode(entry.slice(eq + 1))];
    check?.(pair[0], pair[1], where);
    out.push(pair);
  });
  return out;
}

/** The OTLP profiles endpoint: the signal's own variable as-is, else the base one + /v1development/profiles. */
function otlpProfilesUrl(env) {
  if (env.OTEL_EXPORTER_OTLP_PROFILES_ENDPOINT) {
    checkUrl(env.OTEL_EXPORTER_OTLP_PROFILES_ENDPOINT, 'OTEL_EXPORTER_OTLP_PROFILES_ENDPOINT');
    return env.OTEL_EXPORTER_OTLP_PROFILES_ENDPOINT.trim();
  }
  const base = env.OTEL_EXPORTER_OTLP_ENDPOINT ? checkUrl(env.OTEL_EXPORTER_OTLP_ENDPOINT, 'OTEL_EXPORTER_OTLP_ENDPOINT') : 'http://localhost:4318/';
  return `${base.replace(/\/+$/, '')}/v1development/profiles`;
}

function checkUrl(text, name) {
  let u;
  try {
    u = new URL(text);
  } catch {
    throw new TypeError(`start: ${name} must be an http(s) URL`);
  }
  if (u.protocol !== 'http:' && u.protocol !== 'https:') throw new TypeError(`start: ${name} must be an http(s) URL`);
  decodeUserInfo(u, name);
  return u.toString();
}

module.exports = { parseDdTags, datadogAgentUrl, datadogIntake, parseOtelList, otlpProfilesUrl, DEFAULT_SITE };
