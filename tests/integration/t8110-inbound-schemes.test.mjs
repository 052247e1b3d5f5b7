// Sources of every provider scheme end to end: `hookd send` signs as the
// provider does and posts to /in/{source}; the item is stored, forwarded to
// the app (a `hookd listen` sink) and processed. hmac with sha512, base64, a
// prefix and a timestamp header; github; stripe. A wrong secret is 401 and
// stores nothing; a bad hmac setting is 400 naming the field.
import { test, after, before } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { startDaemon, startSink, newSecret, waitFor, HOOKD } from '../lib/harness.mjs';

let d, app;
const FWD = newSecret();

before(async () => {
  app = await startSink({ secrets: [FWD] });
  d = await startDaemon();
});
after(async () => { assert.equal(await d.stop(), 0, 'hookd exits cleanly'); await d.cleanup(); await app.stop(); });

function send(source, args) {
  try {
    const out = execFileSync(HOOKD, ['send', source, ...args], {
      env: { ...process.env, HOOKD_PUBLIC_URL: `http://127.0.0.1:${d.publicPort}` }, encoding: 'utf8', timeout: 10000,
    });
    return { code: 0, out };
  } catch (e) {
    return { code: e.status, out: e.stdout };
  }
}

async function roundTrip(name, verify, args, extra = {}) {
  const r = await d.api('POST', '/v1/sources', {
    name, verify, handler: { forward: { url: app.url(`/${name}`), secret: FWD } }, ...extra,
  });
  assert.equal(r.status, 201, JSON.stringify(r.body));
  const data = JSON.stringify({ id: `evt_${name}_${Date.now()}`, type: `${name}.test`, data: { n: 1 } });
  const bad = send(name, [...args.map((a) => (a === verify.secrets[0] ? 'wrong-secret-value' : a)), '--data', data]);
  assert.equal(bad.code, 1, bad.out);
  assert.match(bad.out, /^401/);
  const ok = send(name, [...args, '--data', data]);
  assert.equal(ok.code, 0, ok.out);
  assert.match(ok.out, /^200/);
  const id = JSON.parse(ok.out.slice(ok.out.indexOf('{'))).id;
  const it = await waitFor(async () => {
    const x = (await d.api('GET', `/v1/inbox/${id}`)).body;
    return x.status === 'processed' && x;
  }, { what: `${name} item processed` });
  assert.equal(it.result, 'forwarded');
  const list = (await d.api('GET', `/v1/inbox?source=${name}`)).body.data;
  assert.equal(list.length, 1, 'the refused request stored nothing');
  const seen = app.requests.find((q) => q.path === `/${name}`);
  assert.ok(seen, 'the app got the forward');
  assert.equal(seen.verified, true, 'the forward verifies with the handler secret');
  assert.equal(seen.webhook_id, id);
  assert.deepEqual(typeof seen.body === 'string' ? JSON.parse(seen.body) : seen.body, JSON.parse(data));
  return it;
}

test('hmac: sha512, base64, prefix and timestamp header', async () => {
  const secret = 'hmac-secret-1';
  await roundTrip('hm', {
    scheme: 'hmac', secrets: [secret], header: 'X-Sig', algorithm: 'sha512', encoding: 'base64',
    prefix: 'sha512=', timestamp_header: 'X-Ts',
  }, ['--scheme', 'hmac', '--secret', secret, '--header', 'X-Sig', '--algorithm', 'sha512', '--encoding', 'base64',
    '--prefix', 'sha512=', '--timestamp-header', 'X-Ts']);
  const src = (await d.api('GET', '/v1/sources/hm')).body;
  assert.equal(src.verify.tolerance, null, 'tolerance defaults (300 s)');
  assert.equal(src.verify.template, null);
});

test('github: X-Hub-Signature-256, id and type from its headers', async () => {
  const secret = 'gh-secret';
  const it = await roundTrip('gh', { scheme: 'github', secrets: [secret] },
    ['--scheme', 'github', '--secret', secret, '--id', `gh-delivery-${Date.now()}`]);
  assert.match(it.event_id, /^gh-delivery-/);
});

test('stripe: Stripe-Signature t=,v1=', async () => {
  const secret = 'whsec_stripe_test_secret';
  const it = await roundTrip('st', { scheme: 'stripe', secrets: [secret] }, ['--scheme', 'stripe', '--secret', secret]);
  assert.match(it.event_id, /^evt_st_/);
  assert.equal(it.event_type, 'st.test');
});

test('hmac settings are checked at create and update, naming the field', async () => {
  const cases = [
    [{ scheme: 'hmac', secrets: ['k'] }, /verify\.header/],
    [{ scheme: 'hmac', secrets: ['k'], header: 'X-Sig', template: '{body}{body}' }, /verify\.template/],
    [{ scheme: 'hmac', secrets: ['k'], header: 'X-Sig', template: '{timestamp}.{body}' }, /verify\.template/],
    [{ scheme: 'hmac', secrets: ['k'], header: 'X-Sig', algorithm: 'md5' }, /verify\.algorithm/],
    [{ scheme: 'hmac', secrets: ['k'], header: 'X-Sig', template: '{header:x-sig}.{body}' }, /verify\.template.*signature header/],
    [{ scheme: 'stripe', secrets: ['k'], header: 'X-Sig' }, /settings of "hmac"/],
  ];
  for (const [verify, message] of cases) {
    const r = await d.api('POST', '/v1/sources', { name: 'hbad', verify });
    assert.equal(r.status, 400, JSON.stringify(verify));
    assert.match(r.body.error.message, message);
  }
  const ok = await d.api('POST', '/v1/sources', { name: 'hgood', verify: { scheme: 'hmac', secrets: ['k'], header: 'X-Sig' } });
  assert.equal(ok.status, 201);
  const bad = await d.api('PATCH', '/v1/sources/hgood', { verify: { scheme: 'hmac', header: 'X-Sig', template: 'no body' } });
  assert.equal(bad.status, 400);
  assert.match(bad.body.error.message, /verify\.template/);
});
