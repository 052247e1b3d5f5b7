// Interop: receivers built on the reference Standard Webhooks library (npm
// `standardwebhooks`) verify hookd's signatures, before, during and after a
// secret rotation.
import { test, after, before } from 'node:test';
import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import swh from 'standardwebhooks';
import { startDaemon, startSink, waitFor, sleep } from '../lib/harness.mjs';

const { Webhook } = swh;
let d, server, port;
const arrivals = []; // { id, verifiedWith: { old, new } }
const secrets = { old: null, new: null };

function verifies(secret, body, headers) {
  if (!secret) return false;
  try { new Webhook(secret).verify(body, headers); return true; } catch { return false; }
}

before(async () => {
  d = await startDaemon({ HOOKD_DELIVERY_ROTATE_GRACE: '2s' });
  server = createServer((req, res) => {
    const chunks = [];
    req.on('data', (c) => chunks.push(c));
    req.on('end', () => {
      const body = Buffer.concat(chunks).toString('utf8');
      const headers = {
        'webhook-id': req.headers['webhook-id'],
        'webhook-timestamp': req.headers['webhook-timestamp'],
        'webhook-signature': req.headers['webhook-signature'],
      };
      arrivals.push({
        id: headers['webhook-id'],
        signatures: headers['webhook-signature'].split(' ').length,
        old: verifies(secrets.old, body, headers),
        new: verifies(secrets.new, body, headers),
      });
      res.writeHead(200).end();
    });
  });
  await new Promise((r) => server.listen(0, '127.0.0.1', r));
  port = server.address().port;
});
after(async () => { server.close(); assert.equal(await d.stop(), 0); await d.cleanup(); });

async function deliverOne(type) {
  const ev = await d.publish({ type, data: { hello: 'world', n: 42, text: 'ünïcødé "quoted"' } });
  await d.waitDelivery(ev.id, 'delivered');
  return waitFor(() => arrivals.find((a) => a.id === ev.id), { what: `arrival of ${ev.id}` });
}

test('the reference library verifies a hookd signature', async () => {
  const ep = await d.createEndpoint({ url: `http://127.0.0.1:${port}/swh`, event_types: ['swh.*'] });
  secrets.old = ep.secret;
  const a = await deliverOne('swh.first');
  assert.equal(a.old, true);
  assert.equal(a.signatures, 1);

  // Rotation: during the grace period both secrets sign, so receivers on either verify.
  const rot = await d.api('POST', `/v1/endpoints/${ep.id}/secret/rotate`);
  assert.equal(rot.status, 200);
  assert.notEqual(rot.body.secret, secrets.old);
  secrets.new = rot.body.secret;
  const b = await deliverOne('swh.during');
  assert.equal(b.signatures, 2);
  assert.equal(b.old, true, 'old secret still verifies during the grace period');
  assert.equal(b.new, true, 'new secret verifies');

  // After the grace period only the new secret signs.
  await sleep(2300);
  const c = await deliverOne('swh.after');
  assert.equal(c.signatures, 1);
  assert.equal(c.new, true);
  assert.equal(c.old, false, 'old secret no longer signs after the grace period');
});

test('hookd listen verifies what the reference library signs, and refuses tampering', async () => {
  const secret = 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw';
  const sink = await startSink({ secrets: [secret] });
  const wh = new Webhook(secret);
  const send = async (id, signedBody, sentBody) => {
    const ts = new Date();
    const res = await fetch(sink.url('/ref'), {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        'webhook-id': id,
        'webhook-timestamp': String(Math.floor(ts.getTime() / 1000)),
        'webhook-signature': wh.sign(id, ts, signedBody),
      },
      body: sentBody,
    });
    await res.arrayBuffer();
    return res.status;
  };
  assert.equal(await send('msg_good', '{"a":1}', '{"a":1}'), 200);
  assert.equal(await send('msg_bad', '{"a":1}', '{"a":2}'), 401);
  await sink.waitCount(2);
  assert.equal(sink.requests.find((r) => r.webhook_id === 'msg_good').verified, true);
  assert.equal(sink.requests.find((r) => r.webhook_id === 'msg_bad').verified, false);
  await sink.stop();
});
