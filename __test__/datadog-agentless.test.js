'use strict';
// Agentless uploads to Datadog, end to end over the network as in production: DD_API_KEY and
// DD_SITE=datadoghq.eu send each profile to https://intake.profile.datadoghq.eu/api/v2/profile,
// the intake the Datadog agent forwards to, with the key in DD-API-KEY. The intake is played
// inside a network and mount namespace (unshare) where that name resolves to the loopback
// and a certificate made here is trusted (fixtures/datadog-intake.js). The key is never
// printed, never sent to an agent, and an agent named in the environment keeps the uploads.
const { test } = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { spawnSync } = require('node:child_process');

const KEY = 'DDAPIKEY0123456789abcdefSECRET';

/** Why this machine cannot play the intake (no unshare, ip or openssl), or null. */
function unavailable() {
  if (process.platform !== 'linux') return 'Linux namespaces';
  if (spawnSync('openssl', ['version']).status !== 0) return 'openssl';
  const ns = spawnSync('unshare', ['-rmn', 'sh', '-c', 'ip link set lo up'], { encoding: 'utf8' });
  return ns.status === 0 ? null : `unshare -rmn with ip (${(ns.stderr || ns.error?.message || '').trim()})`;
}

function intakeRun(t, cases) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'selfprof-intake-'));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  const cert = spawnSync('openssl', ['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-keyout', path.join(dir, 'key.pem'), '-out', path.join(dir, 'cert.pem'), '-days', '2',
    '-subj', '/CN=intake.profile.datadoghq.eu', '-addext', 'subjectAltName=DNS:intake.profile.datadoghq.eu'], { encoding: 'utf8' });
  assert.equal(cert.status, 0, cert.stderr);
  fs.writeFileSync(path.join(dir, 'hosts'), '127.0.0.1 localhost\n127.0.0.1 intake.profile.datadoghq.eu\n');
  const r = spawnSync('unshare', ['-rmn', 'sh', '-c', 'ip link set lo up && mount --bind "$INTAKE_DIR/hosts" /etc/hosts && exec "$INTAKE_NODE" "$INTAKE_FIXTURE"'], {
    encoding: 'utf8',
    timeout: 120_000,
    env: {
      ...Object.fromEntries(Object.entries(process.env).filter(([k]) => !/^(DD_|SELFPROF_|OTEL_)/.test(k))),
      INTAKE_DIR: dir,
      INTAKE_NODE: process.execPath,
      INTAKE_FIXTURE: path.join(__dirname, 'fixtures', 'datadog-intake.js'),
      INTAKE_CASES: JSON.stringify(cases),
    },
  });
  assert.equal(r.status, 0, r.stderr);
  return JSON.parse(r.stdout);
}

test('DD_API_KEY and DD_SITE: agentless uploads to the site\'s profiling intake over https, the key in DD-API-KEY only there, never printed', (t) => {
  const why = unavailable();
  if (why) {
    if (process.env.CI) throw new Error(`${why} is needed (CI must not skip this test)`);
    return t.skip(`needs ${why}`);
  }
  const out = intakeRun(t, [
    { name: 'agentless', env: { SELFPROF_EXPORTER: 'datadog', SELFPROF_SERVICE: 'checkout', DD_API_KEY: KEY, DD_SITE: 'datadoghq.eu' } },
    { name: 'refused', status: 403, env: { SELFPROF_EXPORTER: 'datadog', SELFPROF_SERVICE: 'checkout', DD_API_KEY: KEY, DD_SITE: 'datadoghq.eu' } },
    { name: 'agent named', env: { SELFPROF_EXPORTER: 'datadog', SELFPROF_SERVICE: 'checkout', DD_API_KEY: KEY, DD_SITE: 'datadoghq.eu', DD_TRACE_AGENT_PORT: '$AGENT_PORT' } },
    { name: 'agentless off', env: { SELFPROF_EXPORTER: 'datadog', SELFPROF_SERVICE: 'checkout', DD_API_KEY: KEY, DD_SITE: 'datadoghq.eu', DD_PROFILING_AGENTLESS: 'false', DD_TRACE_AGENT_URL: 'http://127.0.0.1:$AGENT_PORT' } },
  ]);
  for (const [name, c] of Object.entries(out)) {
    assert.equal(c.code, 0, `${name}: ${c.stderr}`);
    assert.match(c.stdout, /app ran/, name);
    assert.ok(!c.stderr.includes(KEY) && !c.stdout.includes(KEY), `${name}: the key is never printed: ${c.stderr}`);
  }
  const agentless = out.agentless;
  assert.match(agentless.stderr, /^selfprof: profiling "checkout" at 99 Hz; a profile every 60 s to datadog https:\/\/intake\.profile\.datadoghq\.eu\/api\/v2\/profile \(agentless, the key from DD_API_KEY\)$/m);
  assert.equal(agentless.intake.length, 1, 'the last profile, shipped at exit');
  const [upload] = agentless.intake;
  assert.equal(upload.method, 'POST');
  assert.equal(upload.url, '/api/v2/profile');
  assert.equal(upload.headers.host, 'intake.profile.datadoghq.eu');
  assert.equal(upload.headers['dd-api-key'], KEY);
  assert.match(upload.headers['content-type'], /^multipart\/form-data; boundary=/);
  assert.match(upload.body, /name="event"; filename="event\.json"/);
  assert.match(upload.body, /"family":"node"/);
  assert.match(upload.body, /service:checkout/);
  assert.match(upload.body, /name="wall\.pprof"; filename="wall\.pprof"/);
  assert.equal(agentless.agent.length, 0);
  // Refused (a wrong key): one warning with the status, no key.
  assert.match(out.refused.stderr, /intake\.profile\.datadoghq\.eu\/api\/v2\/profile was refused: 403/);
  // With an agent named in the environment, or agentless turned off, the agent gets the
  // uploads, and DD_API_KEY stays here.
  for (const name of ['agent named', 'agentless off']) {
    const c = out[name];
    assert.equal(c.intake.length, 0, name);
    assert.equal(c.agent.length, 1, `${name}: ${c.stderr}`);
    assert.equal(c.agent[0].url, '/profiling/v1/input', name);
    assert.equal(c.agent[0].headers['dd-api-key'], undefined, `${name}: no key to the agent`);
    assert.match(c.stderr, /to datadog http:\/\/127\.0\.0\.1:\d+\/$/m, name);
  }
});

test('agentless settings: where each combination sends, and a bad one is one error naming the variable, never the key', () => {
  const { createExporter } = require('../lib/service/exporters');
  const meta = { service: 's', host: 'h', profilerVersion: '0', tags: {} };
  const where = (options, env) => createExporter({ type: 'datadog', ...options }, meta, env).destination;
  const intake = (site) => `https://intake.profile.${site}/api/v2/profile`;
  assert.equal(where({}, { DD_API_KEY: KEY }), `${intake('datadoghq.com')} (agentless, the key from DD_API_KEY)`);
  assert.equal(where({}, { DD_API_KEY: KEY, DD_SITE: ' US3.datadoghq.com ' }), `${intake('us3.datadoghq.com')} (agentless, the key from DD_API_KEY)`);
  assert.equal(where({ apiKey: KEY, site: 'ap1.datadoghq.com' }, {}), `${intake('ap1.datadoghq.com')} (agentless, the key from exporter apiKey)`);
  assert.equal(where({}, { DD_API_KEY: KEY, DD_AGENT_HOST: 'agent' }), 'http://agent:8126/');
  assert.equal(where({}, { DD_API_KEY: KEY, DD_AGENT_HOST: 'agent', DD_PROFILING_AGENTLESS: 'true' }), `${intake('datadoghq.com')} (agentless, the key from DD_API_KEY)`);
  assert.equal(where({}, { DD_API_KEY: KEY, DD_PROFILING_AGENTLESS: '0' }), 'http://127.0.0.1:8126/');
  assert.equal(where({ url: 'http://agent:8126' }, { DD_API_KEY: KEY }), 'http://agent:8126/', 'a url is the agent');
  assert.equal(where({}, {}), 'http://127.0.0.1:8126/', 'no key: the agent');
  const bad = [
    [{}, { DD_API_KEY: KEY, DD_SITE: 'evil.example/steal?' }, /DD_SITE must be a Datadog site such as datadoghq\.com/],
    [{}, { DD_API_KEY: KEY, DD_SITE: 'datadoghq.com:8443' }, /DD_SITE must be a Datadog site/],
    [{}, { DD_API_KEY: KEY, DD_SITE: 'user@datadoghq.com' }, /DD_SITE must be a Datadog site/],
    [{ apiKey: KEY, site: 'localhost' }, {}, /exporter site must be a Datadog site/],
    [{}, { DD_PROFILING_AGENTLESS: 'maybe' }, /DD_PROFILING_AGENTLESS must be true or false, got "maybe"/],
    [{}, { DD_PROFILING_AGENTLESS: 'true' }, /DD_PROFILING_AGENTLESS=true needs an API key: set DD_API_KEY/],
    [{ site: 'datadoghq.eu' }, {}, /site goes with an apiKey/],
    [{ url: 'http://agent:8126', apiKey: KEY, site: 'datadoghq.eu' }, {}, /site goes with an apiKey and no url/],
    [{}, { DD_API_KEY: `${KEY}\r\nX-Evil: 1` }, /DD_API_KEY has a line break/],
  ];
  for (const [options, env, message] of bad) {
    assert.throws(() => where(options, env), (err) => message.test(err.message) && !err.message.includes(KEY), `${JSON.stringify(options)} ${JSON.stringify(env)}`);
  }
});
