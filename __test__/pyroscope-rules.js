'use strict';
// Pyroscope's ingest rules, re-implemented here from the server's Go code (grafana/pyroscope)
// to check selfprof's uploads against them. Each function names its source.
const zlib = require('node:zlib');
const { Profile } = require('pprof-format');

const RESERVED = '__name__';

/** api/model/labelset/validate.go IsLabelNameRuneAllowed / IsServiceNameRuneAllowed. */
const labelRune = (r) => /[a-zA-Z0-9_.]/.test(r);
const serviceRune = (r) => r === '-' || r === '.' || r === '/' || labelRune(r);

/** api/model/labelset/validate.go ValidateLabelName. */
function validateLabelName(k) {
  if (k.length === 0) throw new Error('label name is required');
  for (const r of k) if (!labelRune(r)) throw new Error(`invalid label name: ${k}: character is not allowed: ${JSON.stringify(r)}`);
  if (k === RESERVED) throw new Error(`label name is reserved: ${k}`);
}

function validateServiceName(n) {
  if (n.length === 0) throw new Error('service name is required');
  for (const r of n) if (!serviceRune(r)) throw new Error(`invalid service name: ${n}: character is not allowed: ${JSON.stringify(r)}`);
}

/** api/model/labelset/labelset.go Parse: the `name` query parameter's state machine. */
function parseLabelSet(name) {
  const labels = {};
  let state = 'name';
  let key = '';
  let value = '';
  for (const r of `${name}{`) {
    if (state === 'name') {
      if (r === '{') {
        state = 'key';
        const service = value.trim();
        validateServiceName(service);
        labels.__name__ = service;
      } else value += r;
    } else if (state === 'key') {
      if (r === '}') state = 'done';
      else if (r === '=') {
        state = 'value';
        value = '';
      } else key += r;
    } else if (state === 'value') {
      if (r === ',' || r === '}') {
        state = 'key';
        const k = key.trim();
        if (k !== RESERVED) validateLabelName(k);
        labels[k] = value.trim();
        key = '';
      } else value += r;
    }
  }
  return labels;
}

/** pkg/og/convert/pprof/profile.go metricName: `wall` if a sample type is wall, else by kind. */
function metricName(types) {
  if (types.includes('wall')) return 'wall';
  for (const st of types) if (st.includes('cpu')) return 'process_cpu';
  return types.at(-1);
}

/** pkg/validation/validate.go SanitizeLegacyLabelName: dots become _, others invalid. */
function sanitizeName(name) {
  if (name.length === 0) return null;
  for (let i = 0; i < name.length; i++) {
    const b = name[i];
    if (!/[a-zA-Z_]/.test(b) && !(/[0-9]/.test(b) && i > 0) && b !== '.') return null;
  }
  return name.replace(/\./g, '_');
}

/** pkg/validation/validate.go ValidateLabels with the default limits (pkg/validation/limits.go). */
function validateSeries(labels) {
  const names = Object.keys(labels);
  if (names.length > 30) throw new Error(`max label names per series exceeded: ${names.length}`);
  if (!labels.service_name) throw new Error('service name is not provided');
  const seen = new Set();
  for (const [name, value] of Object.entries(labels)) {
    if (Buffer.byteLength(name) > 1024) throw new Error(`label name too long: ${name}`);
    if (Buffer.byteLength(value) > 2048) throw new Error(`label value too long: ${name}`);
    const clean = sanitizeName(name);
    if (clean === null) throw new Error(`invalid label name '${name}'`);
    if (!value.isWellFormed()) throw new Error(`invalid label value '${value}'`);
    if (seen.has(clean)) throw new Error(`duplicate label name ${clean}`);
    seen.add(clean);
  }
}

/**
 * One /ingest?format=pprof request as the server sees it: the series it writes (labels →
 * samples) and the profile type ids. pkg/ingester/pyroscope/ingest_handler.go (the raw body
 * is the profile), pkg/og/convert/pprof/profile.go createLabels, pkg/model/pprofsplit
 * VisitSampleSeries (sample string labels but span_id/trace_id become series labels; a
 * label already on the series wins), pkg/model/profile.go (type ids).
 */
function ingest(url, body) {
  const q = new URL(url, 'http://x').searchParams;
  if (q.get('format') !== 'pprof') throw new Error('not a pprof upload');
  const set = parseLabelSet(q.get('name'));
  const p = Profile.decode(body[0] === 0x1f ? zlib.gunzipSync(body) : body);
  const str = (i) => p.stringTable.strings[Number(i)];
  const types = p.sampleType.map((v) => str(v.type));
  const base = { __name__: metricName(types), __delta__: 'false', pyroscope_spy: q.get('spyName') || 'unknown' };
  if (!('service_name' in set)) base.service_name = set.__name__;
  for (const [k, v] of Object.entries(set)) if (!k.startsWith('__')) base[k] = v;
  const typeIds = p.sampleType.map((v) => `${base.__name__}:${str(v.type)}:${str(v.unit)}:${str(p.periodType.type)}:${str(p.periodType.unit)}`);
  const series = new Map();
  for (const s of p.sample) {
    const labels = { ...base };
    const kept = {};
    for (const l of s.label) {
      const k = str(l.key) === 'profile_id' ? 'span_id' : str(l.key);
      if (Number(l.str) <= 0) continue;
      if (k === 'span_id' || k === 'trace_id') kept[k] = str(l.str);
      else if (!(k in labels) || labels[k] === '') labels[k] = str(l.str);
    }
    const key = JSON.stringify(Object.entries(labels).sort());
    if (!series.has(key)) series.set(key, { labels, samples: [] });
    series.get(key).samples.push({ sample: s, kept });
  }
  for (const { labels } of series.values()) validateSeries(labels);
  return { set, typeIds, series: [...series.values()], profile: p, str };
}

module.exports = { parseLabelSet, validateLabelName, ingest, metricName };
