// GET /v1/stats, the dashboard's figures: per-minute events, inbound items and
// attempts over a window, the queue by state, the oldest open work, the inbox
// by status and the refusals by reason, all from the store (rows written by
// SQL count too); a bad window or an unknown parameter is refused, naming it.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startDaemon, startRecordingSink, waitFor } from '../lib/harness.mjs';

let d, sink;
before(async () => {
  sink = await startRecordingSink({ status: (n, req) => (req.url === '/unauth' ? 401 : 200) });
  d = await startDaemon({ HOOKD_DELIVERY_RETRY_SCHEDULE: '50ms', HOOKD_DELIVERY_BREAKER_FAILURES: '0',
    HOOKD_SERVER_METRICS_REFRESH: '0', HOOKD_SERVER_LOG_LEVEL: 'warn' });
});
after(async () => { await sink.stop(); await d.cleanup(); });

const stats = async (q = '') => d.api('GET', `/v1/stats${q}`);

test('an empty store: 60 zero minutes ending now, nothing queued', async () => {
  const r = await stats();
  assert.equal(r.status, 200, JSON.stringify(r.body));
  assert.equal(r.body.window, '1h');
  assert.equal(r.body.step_ms, 60000);
  assert.equal(r.body.minutes.length, 60);
  const last = Date.parse(r.body.minutes[59].at);
  assert.ok(Date.now() - last < 60000 && last <= Date.now(), 'the last minute is the current one');
  assert.equal(Date.parse(r.body.minutes[1].at) - Date.parse(r.body.minutes[0].at), 60000);
  assert.equal(Date.parse(r.body.since), Date.parse(r.body.minutes[0].at));
  assert.deepEqual(r.body.totals, { events: 0, inbound: 0, attempts: 0, successes: 0, failures: 0 });
  assert.deepEqual(r.body.deliveries, { pending: 0, retrying: 0, in_flight: 0, dead: 0, skipped: 0, undispatched: 0 });
  assert.equal(r.body.oldest_open, null);
  assert.deepEqual(r.body.inbox, { pending: 0, deferred: 0, quarantined: 0 });
  assert.deepEqual(r.body.rejected, { total: 0, by_reason: {} });
  assert.equal((await stats('?window=5m')).body.minutes.length, 5);
  assert.equal((await stats('?window=24h')).body.minutes.length, 1440);
});

test('events, attempts and inbound items are counted in their minute; refusals by reason', async () => {
  const ok = await d.createEndpoint({ url: sink.url('/ok'), event_types: ['ok.*'] });
  const bad = await d.createEndpoint({ url: sink.url('/unauth'), event_types: ['bad.*'], retry_schedule: '50ms' });
  const ids = [];
  for (let i = 0; i < 3; i++) ids.push((await d.publish({ type: 'ok.x', data: { i } })).id);
  const badId = (await d.publish({ type: 'bad.x', data: {} })).id;
  for (const id of ids) await d.waitDelivery(id, 'delivered');
  await d.waitDelivery(badId, 'dead');
  // A row an application wrote by hand, now: it counts as an event of this minute.
  d.sql("INSERT INTO hookd_outbox(event_type, payload) VALUES ('none.x', '{}')");

  const src = await d.api('POST', '/v1/sources', { name: 'shop', verify: { scheme: 'none' }, event_id: '/id' });
  assert.equal(src.status, 201, JSON.stringify(src.body));
  const inbound = (body) => fetch(`http://127.0.0.1:${d.publicPort}/in/shop`, { method: 'POST',
    headers: { 'content-type': 'application/json' }, body });
  assert.equal((await inbound(JSON.stringify({ id: 'a', type: 't' }))).status, 200);
  assert.equal((await inbound(JSON.stringify({ id: 'a', type: 't' }))).status, 200); // a duplicate: no new item
  assert.equal((await inbound(JSON.stringify({ id: 'b', type: 't' }))).status, 200);
  assert.equal((await inbound('{not json')).status, 400);
  assert.equal((await inbound('{"type": "no id"}')).status, 400);
  assert.equal((await inbound('[]')).status, 400);

  const r = await waitFor(async () => {
    const s = (await stats()).body;
    return s.totals.attempts === 4 && s.totals.events === 5 && s.deliveries.dead === 1 && s.rejected.total === 3 && s;
  }, { what: 'the figures' });
  // The 401 is not retried: one attempt, dead.
  assert.deepEqual(r.totals, { events: 5, inbound: 2, attempts: 4, successes: 3, failures: 1 });
  const nonzero = r.minutes.filter((m) => m.events || m.attempts || m.inbound);
  assert.ok(nonzero.length >= 1 && nonzero.length <= 2, 'all within the last minute or two');
  for (const m of r.minutes) assert.equal(m.failures, m.attempts - m.successes);
  assert.equal(r.deliveries.dead, 1);
  assert.deepEqual(r.rejected, { total: 3, by_reason: { invalid_field: 1, malformed_json: 1, missing_field: 1 } });
  assert.equal(r.inbox.pending + r.inbox.deferred + r.inbox.quarantined <= 2, true);
  // Ordinary publishing, delivered: the hand-written row waits for the relay, then there is nothing open.
  await waitFor(async () => (await stats()).body.deliveries.undispatched === 0, { what: 'the relay' });
  // One endpoint's attempts alone; the events and inbound counts are not per endpoint.
  const one = (await stats(`?endpoint_id=${bad.id}&window=10m`)).body;
  assert.equal(one.endpoint_id, bad.id);
  assert.equal(one.minutes.length, 10);
  assert.deepEqual(one.totals, { events: null, inbound: null, attempts: 1, successes: 0, failures: 1 });
  assert.equal(one.minutes.at(-1).events, null);
  assert.deepEqual((await stats(`?endpoint_id=${ok.id}`)).body.totals,
    { events: null, inbound: null, attempts: 3, successes: 3, failures: 0 });
  assert.equal(r.endpoint_id, null);
});

test('work still open shows as the oldest open, with its age', async () => {
  const ep = await d.createEndpoint({ url: 'http://127.0.0.1:9/never', event_types: ['slow.*'], retry_schedule: '1h' });
  const ev = await d.publish({ type: 'slow.x', data: {} });
  const r = await waitFor(async () => {
    const s = (await stats()).body;
    return s.deliveries.retrying === 1 && s;
  }, { what: 'a retrying delivery' });
  assert.ok(r.oldest_open, JSON.stringify(r));
  assert.ok(r.oldest_open.age_ms >= 0 && r.oldest_open.age_ms < 60000);
  assert.ok(Date.parse(r.oldest_open.created_at) <= Date.now());
  assert.ok(ev.id && ep.id);
});

test('a bad window or an unknown parameter is 400 naming it; the token is needed', async () => {
  for (const [q, code, field] of [['?window=0m', 'invalid_field', 'window'], ['?window=25h', 'invalid_field', 'window'],
    ['?window=90s', 'invalid_field', 'window'], ['?window=abc', 'invalid_field', 'window'],
    ['?window=1h&window=2h', 'invalid_field', 'window'], ['?colour=red', 'unknown_field', 'colour'],
    ['?endpoint_id=%3Cscript%3E', 'invalid_field', 'endpoint_id'], ['?endpoint_id=', 'invalid_field', 'endpoint_id']]) {
    const r = await stats(q);
    assert.equal(r.status, 400, q);
    assert.equal(r.body.error.code, code, q);
    assert.match(r.body.error.message, new RegExp(field), q);
  }
  const missing = await stats('?endpoint_id=ep_0000000000000000000000000000');
  assert.equal(missing.status, 404);
  assert.equal(missing.body.error.code, 'not_found');
  const r = await fetch(`http://127.0.0.1:${d.adminPort}/v1/stats`);
  assert.equal(r.status, 401);
});
