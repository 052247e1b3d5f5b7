// Replay: deliveries to a disabled endpoint are recorded `skipped`, never
// dropped; POST /v1/deliveries/{id}/replay sends a skipped, dead or delivered
// delivery again through the normal path with the same webhook-id and a fresh
// timestamp and signature; an open one (pending, retrying, in flight) answers
// 409 and is never sent twice.
import { test, after, before } from 'node:test';
import assert from 'node:assert/strict';
import swh from 'standardwebhooks';
import { startDaemon, startRecordingSink, waitFor, sleep } from '../lib/harness.mjs';

let d, sink;
let failing = true; // /dead answers 500 while set
before(async () => {
  d = await startDaemon();
  sink = await startRecordingSink({
    status: (n, req) => (req.url === '/dead' && failing ? 500 : 200),
    delayMs: (n, req) => (req.url === '/slow' ? 1500 : 0),
  });
});
after(async () => { await sink.stop(); assert.equal(await d.stop(), 0, 'hookd exits cleanly'); await d.cleanup(); });

const verify = (secret, r) => new swh.Webhook(secret).verify(r.body, r.headers);
const replay = (id) => d.api('POST', `/v1/deliveries/${id}/replay`);
const deliveryOf = async (eventId, endpointId) =>
  (await d.deliveriesOf(eventId)).find((x) => x.endpoint_id === endpointId);

test('a disabled endpoint gets skipped deliveries; after enable, replay delivers them signed, same webhook-id', async () => {
  const ep = await d.createEndpoint({ url: sink.url('/skip'), event_types: ['skip.*'] });
  assert.equal((await d.api('POST', `/v1/endpoints/${ep.id}/disable`, {})).status, 200);
  const evs = [];
  for (let i = 0; i < 3; i++) evs.push(await d.publish({ type: 'skip.test', data: { i } }));
  for (const ev of evs) await d.waitDelivery(ev.id, 'skipped');
  const listed = (await d.api('GET', `/v1/deliveries?endpoint_id=${ep.id}&status=skipped`)).body.data;
  assert.equal(listed.length, 3, 'visible in the delivery list as skipped');
  await sleep(200);
  assert.equal(sink.at('/skip').length, 0, 'nothing sent while disabled');

  assert.equal((await d.api('POST', `/v1/endpoints/${ep.id}/enable`, {})).status, 200);
  const t0 = Math.floor(Date.now() / 1000);
  for (const x of listed) {
    const r = await replay(x.id);
    assert.equal(r.status, 202);
    assert.equal(r.body.id, x.id);
    assert.equal(r.body.status, 'pending');
  }
  for (const ev of evs) await d.waitDelivery(ev.id, 'delivered');
  const got = sink.at('/skip');
  assert.equal(got.length, 3);
  assert.deepEqual(got.map((r) => r.headers['webhook-id']).sort(), evs.map((e) => e.id).sort());
  for (const r of got) {
    assert.equal(verify(ep.secret, r).id, r.headers['webhook-id'], 'signature valid, body id = webhook-id');
    assert.ok(Number(r.headers['webhook-timestamp']) >= t0 - 1, 'timestamp of the replay');
  }
});

test('a dead delivery replayed after the endpoint is fixed: delivered, same webhook-id, new timestamp and signature', async () => {
  const ep = await d.createEndpoint({ url: sink.url('/dead'), event_types: ['dead.*'] });
  const ev = await d.publish({ type: 'dead.test', data: { x: 1 } });
  const [dead] = await d.waitDelivery(ev.id, 'dead');
  const before = sink.at('/dead');
  assert.ok(before.length >= 2, 'retried before it died');
  failing = false;
  await sleep(1100); // the next second: the replay's timestamp must be new
  const r = await replay(dead.id);
  assert.equal(r.status, 202);
  assert.equal(r.body.status, 'pending');
  assert.equal(r.body.attempt_count, 0, 'a fresh retry schedule');
  await d.waitDelivery(ev.id, 'delivered');
  const all = sink.at('/dead');
  assert.equal(all.length, before.length + 1, 'one send for the replay');
  const last = all[all.length - 1];
  assert.equal(last.headers['webhook-id'], ev.id);
  assert.ok(Number(last.headers['webhook-timestamp']) > Number(before[before.length - 1].headers['webhook-timestamp']));
  assert.notEqual(last.headers['webhook-signature'], before[before.length - 1].headers['webhook-signature']);
  assert.equal(verify(ep.secret, last).id, ev.id);
  const full = (await d.api('GET', `/v1/deliveries/${dead.id}`)).body;
  assert.equal(full.attempts.length, before.length + 1, 'earlier attempts are kept');
  assert.equal(full.attempts[full.attempts.length - 1].status_code, 200, 'in the order they were made');

  // A delivered one may be sent again on request (support resending): once more, same id.
  const again = await replay(dead.id);
  assert.equal(again.status, 202);
  await waitFor(() => sink.at('/dead').length === before.length + 2, { what: 'the resend' });
  await d.waitDelivery(ev.id, 'delivered');
  assert.equal(sink.at('/dead').at(-1).headers['webhook-id'], ev.id);
});

test('replaying a pending or in-flight delivery answers 409 and sends it once', async () => {
  await d.createEndpoint({ url: sink.url('/slow'), event_types: ['slow.*'] });
  const ev = await d.publish({ type: 'slow.test', data: {} });
  const dl = await waitFor(async () => {
    const x = (await d.deliveriesOf(ev.id))?.[0];
    return x && x.status === 'pending' && sink.at('/slow').length === 1 && x;
  }, { what: 'the delivery recorded and at the sink' });
  // In flight now (the sink holds its answer 1.5 s): several replays at once, each refused.
  const rs = await Promise.all([replay(dl.id), replay(dl.id), replay(dl.id)]);
  for (const r of rs) {
    assert.equal(r.status, 409);
    assert.equal(r.body.error.code, 'not_replayable');
    assert.match(r.body.error.message, /is pending/);
  }
  await d.waitDelivery(ev.id, 'delivered');
  await sleep(500);
  assert.equal(sink.at('/slow').length, 1, 'sent once');
  assert.equal((await d.api('GET', `/v1/deliveries/${dl.id}`)).body.attempts.length, 1);
});

test('replay of an unknown delivery is 404; a body with fields is 400', async () => {
  assert.equal((await replay('dlv_nope')).status, 404);
  assert.equal((await replay('bad id!')).status, 404);
  const ev = await d.publish({ type: 'skip.other', data: {} });
  const x = await waitFor(async () => (await d.deliveriesOf(ev.id))?.[0], { what: 'a delivery' });
  const r = await d.api('POST', `/v1/deliveries/${x.id}/replay`, { endpoint_id: 'x' });
  assert.equal(r.status, 400);
  assert.equal(r.body.error.code, 'unknown_field');
});
