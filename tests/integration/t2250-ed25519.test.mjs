// Delivery: endpoints signing with ed25519 (Standard Webhooks v1a). Each
// delivery is verified by an independent verifier, Node's crypto.verify with
// the raw public key of the endpoint object (the npm standardwebhooks library
// verifies v1 only, so it checks the HMAC side of a switch).
import { test, after, before } from 'node:test';
import assert from 'node:assert/strict';
import { createPublicKey, verify as edVerify } from 'node:crypto';
import swh from 'standardwebhooks';
import { startDaemon, startRecordingSink } from '../lib/harness.mjs';

let d, sink;
before(async () => {
  d = await startDaemon({ HOOKD_DELIVERY_ROTATE_GRACE: '1h' });
  sink = await startRecordingSink();
});
after(async () => { await sink.stop(); assert.equal(await d.stop(), 0, 'hookd exits cleanly'); await d.cleanup(); });

const publicKey = (whpk) => {
  assert.match(whpk, /^whpk_[A-Za-z0-9+/]{43}=$/);
  const raw = Buffer.from(whpk.slice(5), 'base64');
  assert.equal(raw.length, 32);
  return createPublicKey({ key: { kty: 'OKP', crv: 'Ed25519', x: raw.toString('base64url') }, format: 'jwk' });
};

/** The entries of a webhook-signature header by version. */
const entries = (r) => r.headers['webhook-signature'].split(' ').map((e) => e.split(','));

/** True when some v1a entry of r verifies under whpk. */
function v1aVerifies(whpk, r) {
  const msg = Buffer.from(`${r.headers['webhook-id']}.${r.headers['webhook-timestamp']}.${r.body}`);
  return entries(r).some(([v, sig]) => v === 'v1a' && edVerify(null, msg, publicKey(whpk), Buffer.from(sig, 'base64')));
}

async function deliverOne(ep, path, tag) {
  const ev = await d.publish({ type: `ed.${tag}`, data: { tag } });
  await d.waitDelivery(ev.id, 'delivered');
  const r = sink.at(path).find((x) => x.headers['webhook-id'] === ev.id);
  assert.ok(r, `delivery of ${ev.id}`);
  return r;
}

test('an ed25519 endpoint signs v1a with its generated key; the object carries the public key, never the private one after create', async () => {
  const ep = await d.createEndpoint({ url: sink.url('/ed'), event_types: ['ed.gen'], signing: 'ed25519' });
  assert.equal(ep.signing, 'ed25519');
  assert.match(ep.secret, /^whsk_/, 'the private key once, in the create answer');
  const got = (await d.api('GET', `/v1/endpoints/${ep.id}`)).body;
  assert.equal(got.public_key, ep.public_key);
  assert.equal(got.secret, null, 'no private key after create');
  assert.ok(!JSON.stringify(got).includes(ep.secret.slice(5)), 'no private key material in GET');
  const list = (await d.api('GET', '/v1/endpoints')).body;
  assert.ok(!JSON.stringify(list).includes(ep.secret.slice(5)), 'none in the list');
  const r = await deliverOne(ep, '/ed', 'gen');
  assert.deepEqual(entries(r).map(([v]) => v), ['v1a']);
  assert.ok(v1aVerifies(ep.public_key, r), 'verified by crypto.verify');
  // A tampered body does not verify: the check above can fail.
  assert.ok(!v1aVerifies(ep.public_key, { ...r, body: r.body.replace('gen', 'gex') }));
});

test('a given whsk_ key is accepted; a whsec_ secret with signing ed25519 is refused', async () => {
  const first = await d.createEndpoint({ url: sink.url('/tmp'), event_types: ['ed.none'], signing: 'ed25519' });
  await d.api('DELETE', `/v1/endpoints/${first.id}`);
  const ep = await d.createEndpoint({ url: sink.url('/given'), event_types: ['ed.given'], secret: first.secret });
  assert.equal(ep.signing, 'ed25519');
  assert.equal(ep.public_key, first.public_key, 'the public key of the given private key');
  assert.ok(v1aVerifies(ep.public_key, await deliverOne(ep, '/given', 'given')));
  const bad = await d.api('POST', '/v1/endpoints', { url: sink.url('/x'), signing: 'ed25519', secret: swhSecret() });
  assert.equal(bad.status, 400);
  assert.match(JSON.stringify(bad.body), /signing \\"ed25519\\" takes a \\"whsk_\\" key/);
  const word = await d.api('POST', '/v1/endpoints', { url: sink.url('/x'), signing: 'rsa' });
  assert.equal(word.status, 400);
});

function swhSecret() { return `whsec_${Buffer.alloc(32, 7).toString('base64')}`; }

test('rotation signs with every live key: several v1a entries during the grace', async () => {
  const ep = await d.createEndpoint({ url: sink.url('/rot'), event_types: ['ed.rot'], signing: 'ed25519' });
  const rot = await d.api('POST', `/v1/endpoints/${ep.id}/secret/rotate`, {});
  assert.equal(rot.status, 200, JSON.stringify(rot.body));
  assert.equal(rot.body.signing, 'ed25519');
  assert.notEqual(rot.body.public_key, ep.public_key, 'a new key pair');
  assert.equal(rot.body.secret, null);
  assert.deepEqual(rot.body.secrets.map((s) => s.public_key), [rot.body.public_key, ep.public_key],
    'older live public keys listed like secrets');
  const r = await deliverOne(ep, '/rot', 'rot');
  assert.deepEqual(entries(r).map(([v]) => v), ['v1a', 'v1a']);
  assert.ok(v1aVerifies(rot.body.public_key, r) && v1aVerifies(ep.public_key, r));
});

test('PATCH hmac → ed25519 → hmac: both kinds are sent during the grace, each verifies', async () => {
  const ep = await d.createEndpoint({ url: sink.url('/sw'), event_types: ['ed.sw1', 'ed.sw2'] });
  assert.equal(ep.signing, 'hmac');
  assert.equal(ep.public_key, undefined);
  const toEd = await d.api('PATCH', `/v1/endpoints/${ep.id}`, { signing: 'ed25519' });
  assert.equal(toEd.status, 200, JSON.stringify(toEd.body));
  assert.equal(toEd.body.signing, 'ed25519');
  const r1 = await deliverOne(ep, '/sw', 'sw1');
  assert.deepEqual(entries(r1).map(([v]) => v).sort(), ['v1', 'v1a']);
  assert.ok(v1aVerifies(toEd.body.public_key, r1), 'the new ed25519 key verifies');
  assert.equal(new swh.Webhook(ep.secret).verify(r1.body, r1.headers).data.tag, 'sw1', 'the old HMAC secret still verifies');
  // The same signing again changes nothing.
  const same = await d.api('PATCH', `/v1/endpoints/${ep.id}`, { signing: 'ed25519' });
  assert.equal(same.body.public_key, toEd.body.public_key);
  const back = await d.api('PATCH', `/v1/endpoints/${ep.id}`, { signing: 'hmac' });
  assert.equal(back.status, 200);
  assert.equal(back.body.signing, 'hmac');
  assert.match(back.body.secret, /^whsec_/);
  assert.notEqual(back.body.secret, ep.secret, 'a new HMAC secret');
  const r2 = await deliverOne(ep, '/sw', 'sw2');
  assert.equal(new swh.Webhook(back.body.secret).verify(r2.body, r2.headers).data.tag, 'sw2');
  assert.ok(v1aVerifies(toEd.body.public_key, r2), 'the ed25519 key in its grace');
});
