// Retention against a running daemon (either store): with [retention]
// deliveries and inbox at 1 s, delivered deliveries and their attempts go,
// then their events; dead, skipped and retrying deliveries and their events
// stay; processed inbox items lose their payload but keep their row, so a
// copy sent again is still a duplicate; quarantined items keep everything.
import { test, after, before } from 'node:test';
import assert from 'node:assert/strict';
import { startDaemon, startCountingSink, newSecret, waitFor, sleep } from '../lib/harness.mjs';
import { sendInbound } from '../lib/alerts.mjs';

let d, sink;
const IN = newSecret(), FWD = newSecret();

before(async () => {
  sink = await startCountingSink({ status: (n, req) => (req.url === '/bad' || req.url === '/retry' ? 500
    : req.url === '/app-bad' ? 400 : 200) });
  d = await startDaemon({ HOOKD_RETENTION_DELIVERIES: '1s', HOOKD_RETENTION_INBOX: '1s',
    HOOKD_RETENTION_INTERVAL: '200ms', HOOKD_RETENTION_BATCH: '2', HOOKD_RETENTION_PAUSE: '0s',
    HOOKD_DELIVERY_BREAKER_FAILURES: '0', HOOKD_ALERTS_ENABLED: 'false', HOOKD_SERVER_METRICS_REFRESH: '0s' });
});
after(async () => {
  assert.equal(await d.stop(), 0, 'hookd exits cleanly');
  await d.cleanup();
  await sink.stop();
});

test('the purge takes delivered work and keeps what is unresolved', async () => {
  await d.createEndpoint({ url: sink.url('/good'), event_types: ['good.*'] });
  await d.createEndpoint({ url: sink.url('/bad'), event_types: ['bad.*'] });
  await d.createEndpoint({ url: sink.url('/retry'), event_types: ['retry.*'], retry_schedule: '1h' });
  const off = await d.createEndpoint({ url: sink.url('/off'), event_types: ['off.*'] });
  assert.equal((await d.api('POST', `/v1/endpoints/${off.id}/disable`, {})).status, 200);
  const good = [];
  for (let i = 0; i < 5; i++) good.push(await d.publish({ type: 'good.created', data: { i } }));
  const bad = await d.publish({ type: 'bad.created', data: {} });
  const retry = await d.publish({ type: 'retry.created', data: {} });
  const skipped = await d.publish({ type: 'off.created', data: {} });
  const nobody = await d.publish({ type: 'nobody.created', data: {} });
  const goodDeliveries = [];
  for (const e of good) goodDeliveries.push((await d.waitDelivery(e.id, 'delivered'))[0].id);
  const deadId = (await d.waitDelivery(bad.id, 'dead'))[0].id;
  const retryId = (await d.waitDelivery(retry.id, 'retrying'))[0].id;
  const skippedId = (await d.waitDelivery(skipped.id, 'skipped'))[0].id;

  await waitFor(async () => {
    for (const e of [...good, nobody]) if ((await d.api('GET', `/v1/events/${e.id}`)).status !== 404) return false;
    return true;
  }, { timeoutMs: 15000, what: 'delivered events purged' });
  for (const id of goodDeliveries) assert.equal((await d.api('GET', `/v1/deliveries/${id}`)).status, 404);
  for (const [id, status] of [[deadId, 'dead'], [retryId, 'retrying'], [skippedId, 'skipped']]) {
    const r = await d.api('GET', `/v1/deliveries/${id}`);
    assert.equal(r.status, 200, `${status} kept`);
    assert.equal(r.body.status, status);
  }
  assert.equal((await d.api('GET', `/v1/deliveries/${deadId}`)).body.attempts.length, 4, 'a dead letter keeps its attempts');
  for (const e of [bad, retry, skipped]) assert.equal((await d.api('GET', `/v1/events/${e.id}`)).status, 200);
  const m = (await d.api('GET', '/metrics')).body;
  assert.match(m, /^hookd_retention_purged_total\{kind="deliveries"\} 5$/m);
  assert.match(m, /^hookd_retention_purged_total\{kind="events"\} 6$/m);
  // a replayed dead letter, once delivered and old, goes too
});

test('processed inbox items lose their payload, keep their key; quarantined ones keep everything', async () => {
  for (const [name, path] of [['crm', '/app'], ['crmbad', '/app-bad']]) {
    const r = await d.api('POST', '/v1/sources', { name, verify: { scheme: 'standard-webhooks', secrets: [IN] },
      handler: { forward: { url: sink.url(path), secret: FWD } } });
    assert.equal(r.status, 201, JSON.stringify(r.body));
  }
  assert.equal(await sendInbound(d, 'crm', IN, 'msg_keep'), 200);
  assert.equal(await sendInbound(d, 'crmbad', IN, 'msg_q'), 200);
  const processed = await waitFor(async () => (await d.api('GET', '/v1/inbox?source=crm&status=processed')).body.data[0],
    { what: 'processed' });
  const quarantined = await waitFor(async () =>
    (await d.api('GET', '/v1/inbox?source=crmbad&status=quarantined')).body.data[0], { what: 'quarantined' });
  await waitFor(async () => (await d.api('GET', `/v1/inbox/${processed.id}`)).body.payload === null,
    { timeoutMs: 10000, what: 'the payload purged' });
  const it = (await d.api('GET', `/v1/inbox/${processed.id}`)).body;
  assert.equal(it.status, 'processed');
  assert.equal(it.event_id, 'msg_keep');
  assert.equal(it.payload_sha256.length, 64);
  // the provider sends it again: still a duplicate, not processed twice
  const res = await fetch(`http://127.0.0.1:${d.publicPort}/in/crm`, { method: 'POST', body: '{}' }); // unsigned: refused
  assert.equal(res.status, 401);
  assert.equal(await sendInbound(d, 'crm', IN, 'msg_keep'), 200);
  const again = (await d.api('GET', `/v1/inbox/${processed.id}`)).body;
  assert.equal(again.dup_count, 1);
  assert.equal((await d.api('GET', '/v1/inbox?source=crm')).body.data.length, 1);
  await sleep(1500);
  const q = (await d.api('GET', `/v1/inbox/${quarantined.id}`)).body;
  assert.deepEqual(q.payload, { type: 'order.paid', data: { id: 'msg_q' } }, 'a quarantined item keeps its payload');
});
