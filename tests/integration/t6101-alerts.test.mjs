// Alerts (one node, either store): each rule opens under its condition and
// resolves when it clears, with short thresholds; each change is logged, shown
// by GET /v1/alerts and the metric hookd_alerts_open, and published as an
// operational event through the outbox to an endpoint subscribed to hookd.*
// (an endpoint that takes every type does not get them). Also the list's
// filters and cursor, GET /v1/alerts/{id}, and `hookd alerts`.
import { test, after, before } from 'node:test';
import assert from 'node:assert/strict';
import { BACKEND, startDaemon, startRecordingSink, startCountingSink, newSecret, waitFor, sleep } from '../lib/harness.mjs';
import { ALERT_ENV, alertsOf, waitAlert, opsEvents, waitOpsEvent, sendInbound } from '../lib/alerts.mjs';

let d, ops, sink;
let fail500 = new Set(); // paths the sink answers 500
const IN = newSecret();
const FWD = newSecret();

before(async () => {
  ops = await startRecordingSink();
  sink = await startCountingSink({ status: (n, req) => (fail500.has(req.url) ? 500 : req.url === '/app' ? appStatus : 200) });
  d = await startDaemon(ALERT_ENV);
  await d.createEndpoint({ url: ops.url('/ops'), event_types: ['hookd.*'] });
  await d.createEndpoint({ url: sink.url('/everything') }); // every type: never hookd's own
});
after(async () => {
  assert.equal(await d.stop(), 0, 'hookd exits cleanly');
  await d.cleanup();
  await ops.stop();
  await sink.stop();
});
let appStatus = 400;

async function opensAndResolves(rule, subject, clear) {
  const open = await waitAlert(d, rule, subject, 'open');
  assert.equal(open.status, 'open');
  assert.equal(open.resolved_at, null);
  assert.ok(open.message.length > 0);
  const ev = await waitOpsEvent(ops, rule === 'endpoint_disabled' ? 'hookd.endpoint.disabled' : 'hookd.alert.opened',
    open.id);
  assert.equal(ev.data.rule, rule);
  assert.equal(ev.data.subject, subject);
  assert.equal(ev.data.status, 'open');
  const m = await d.api('GET', '/metrics');
  assert.match(m.body, new RegExp(`hookd_alerts_open\\{rule="${rule}"\\} [1-9]`));
  if (clear) await clear();
  const done = await waitAlert(d, rule, subject, 'resolved');
  assert.equal(done.id, open.id);
  assert.ok(Date.parse(done.resolved_at) >= Date.parse(done.opened_at));
  const rev = await waitOpsEvent(ops, rule === 'endpoint_disabled' ? 'hookd.endpoint.recovered' : 'hookd.alert.resolved',
    open.id);
  assert.equal(rev.data.status, 'resolved');
  return open;
}

test('failing endpoint: error rate, dead letters and no success across accounts open, then resolve after the window', async () => {
  fail500.add('/bad');
  const bad = await d.createEndpoint({ url: sink.url('/bad'), event_types: ['invoice.*'] });
  for (const account of ['acme', 'globex']) await d.publish({ type: 'invoice.created', account, data: {} });
  await Promise.all([
    opensAndResolves('error_rate', bad.id),
    opensAndResolves('dead_letters', bad.id),
    opensAndResolves('no_success', '*'),
  ]);
  const nos = (await alertsOf(d, 'no_success'))[0];
  assert.deepEqual(nos.details.examples.sort(), ['acme', 'globex']);
  assert.equal(nos.details.accounts, 2);
});

test('delivery delayed past sync_warn_after and a growing retry backlog open, and resolve once delivered', async () => {
  fail500.add('/slow');
  const slow = await d.createEndpoint({ url: sink.url('/slow'), event_types: ['slow.*'], retry_schedule: '4s' });
  await sleep(2600); // the evaluator has history for a whole window
  for (let i = 0; i < 3; i++) await d.publish({ type: 'slow.created', data: { i } });
  await Promise.all([
    opensAndResolves('delivery_delayed', slow.id, async () => { fail500.delete('/slow'); }),
    opensAndResolves('retry_backlog', slow.id),
  ]);
  const delayed = (await alertsOf(d, 'delivery_delayed', { subject: slow.id }))[0];
  assert.ok(delayed.details.age_ms > 1000, JSON.stringify(delayed.details));
});

test('quarantined inbound events open an alert; a replay that processes them resolves it', async () => {
  const r = await d.api('POST', '/v1/sources', { name: 'crm', verify: { scheme: 'standard-webhooks', secrets: [IN] },
    handler: { forward: { url: sink.url('/app'), secret: FWD } } });
  assert.equal(r.status, 201, JSON.stringify(r.body));
  appStatus = 400;
  assert.equal(await sendInbound(d, 'crm', IN, 'msg_q1'), 200);
  const item = await waitFor(async () => (await d.api('GET', '/v1/inbox?source=crm&status=quarantined')).body.data[0],
    { what: 'the item quarantined' });
  await opensAndResolves('quarantined', 'crm', async () => {
    appStatus = 200;
    assert.equal((await d.api('POST', `/v1/inbox/${item.id}/replay`)).status, 202);
  });
});

test('a spike of signature rejections opens an alert for the source; it resolves after the window', async () => {
  assert.equal((await d.api('POST', '/v1/sources', { name: 'pay', verify: { scheme: 'standard-webhooks',
    secrets: [IN] } })).status, 201);
  for (let i = 0; i < 3; i++) assert.equal(await sendInbound(d, 'pay', IN, `msg_bad${i}`, { bad: true }), 401);
  await opensAndResolves('signature_rejections', 'pay');
});

test('a disabled endpoint publishes hookd.endpoint.disabled, enabling it hookd.endpoint.recovered', async () => {
  const ep = await d.createEndpoint({ url: sink.url('/x'), event_types: ['x.*'] });
  assert.equal((await d.api('POST', `/v1/endpoints/${ep.id}/disable`, { reason: 'bad "quote"\nline' })).status, 200);
  const open = await opensAndResolves('endpoint_disabled', ep.id, async () => {
    assert.equal((await d.api('POST', `/v1/endpoints/${ep.id}/enable`)).status, 200);
  });
  assert.equal(open.details.reason, 'bad "quote"\nline', 'the reason is data, carried escaped');
});

test('a disabled endpoint that is deleted resolves its alert as hookd.alert.resolved, never as recovered', async () => {
  const ep = await d.createEndpoint({ url: sink.url('/gone'), event_types: ['x.*'] });
  assert.equal((await d.api('POST', `/v1/endpoints/${ep.id}/disable`, {})).status, 200);
  const open = await waitAlert(d, 'endpoint_disabled', ep.id, 'open');
  await waitOpsEvent(ops, 'hookd.endpoint.disabled', open.id);
  assert.equal((await d.api('DELETE', `/v1/endpoints/${ep.id}`)).status, 204);
  const done = await waitAlert(d, 'endpoint_disabled', ep.id, 'resolved');
  assert.equal(done.id, open.id);
  const ev = await waitOpsEvent(ops, 'hookd.alert.resolved', open.id);
  assert.equal(ev.data.status, 'resolved');
  await sleep(300);
  assert.ok(!opsEvents(ops).some((e) => e.type === 'hookd.endpoint.recovered' && e.data.id === open.id),
    'a deleted endpoint did not recover');
});

test('operational events reach only endpoints that ask for hookd.*, each exactly once', async () => {
  const got = opsEvents(ops);
  assert.ok(got.length >= 12, `${got.length} operational events`);
  assert.equal(new Set(got.map((e) => e.webhookId)).size, got.length, 'no event twice');
  for (const e of got) assert.match(e.type, /^hookd\.(alert\.(opened|resolved)|endpoint\.(disabled|recovered))$/);
  assert.equal([...(sink.byPath.get('/everything')?.keys() || [])].filter((id) => id.startsWith('alr_')).length, 0,
    'an endpoint taking every type gets no hookd.* event');
  // Every operational event is in the outbox like any other, with its deliveries.
  const ev = await d.api('GET', `/v1/events/${got[0].webhookId}`);
  assert.equal(ev.status, 200);
  assert.equal(ev.body.deliveries.length, 1);
});

test('GET /v1/alerts: filters, cursor, one alert, and refusals', async () => {
  const all = (await d.api('GET', '/v1/alerts?limit=1000')).body.data;
  assert.ok(all.length >= 7);
  const ids = all.map((a) => a.id);
  assert.deepEqual([...ids].sort().reverse(), ids, 'newest first');
  const page1 = await d.api('GET', '/v1/alerts?limit=2');
  assert.equal(page1.body.data.length, 2);
  assert.ok(page1.body.next_cursor);
  const page2 = await d.api('GET', `/v1/alerts?limit=2&cursor=${page1.body.next_cursor}`);
  assert.equal(page2.body.data[0].id, ids[2]);
  const resolved = (await d.api('GET', '/v1/alerts?status=resolved&limit=1000')).body.data;
  assert.ok(resolved.every((a) => a.status === 'resolved'));
  const one = await d.api('GET', `/v1/alerts/${ids[0]}`);
  assert.equal(one.status, 200);
  assert.deepEqual(one.body, all[0]);
  assert.equal((await d.api('GET', '/v1/alerts/alr_nope')).status, 404);
  assert.equal((await d.api('GET', '/v1/alerts/bad%0aid')).status, 404);
  for (const [q, field] of [['status=closed', 'status'], ['rule=nope', 'rule'], ['colour=red', 'colour'],
    ['cursor=abc', 'cursor'], ['limit=0', 'limit'], ['status=open&status=open', 'status']]) {
    const r = await d.api('GET', `/v1/alerts?${q}`);
    assert.equal(r.status, 400, q);
    assert.match(r.body.error.message, new RegExp(field), q);
  }
  assert.equal((await fetch(`http://127.0.0.1:${d.adminPort}/v1/alerts`)).status, 401);
});

test('hookd alerts prints a table, --json the API\'s JSON', async () => {
  const json = JSON.parse(d.cli(['alerts', '--json', '--limit', '1000']));
  const api = (await d.api('GET', '/v1/alerts?limit=1000')).body;
  assert.deepEqual(json, api);
  const table = d.cli(['alerts', '--limit', '1000']).trimEnd().split('\n');
  assert.match(table[0], /^ID\s+RULE\s+SUBJECT\s+STATUS\s+OPENED\s+RESOLVED\s+MESSAGE/);
  assert.equal(table.length, api.data.length + 1);
  for (let i = 0; i < api.data.length; i++) {
    assert.ok(table[i + 1].startsWith(api.data[i].id), table[i + 1]);
    assert.ok(table[i + 1].includes(api.data[i].rule));
  }
  const open = d.cli(['alerts', '--status', 'resolved', '--json']);
  assert.ok(JSON.parse(open).data.every((a) => a.status === 'resolved'));
  const one = d.cli(['alerts', 'get', api.data[0].id]);
  assert.match(one, new RegExp(`^id\\s+${api.data[0].id}$`, 'm'));
  assert.match(one, /^rule\s+\S+$/m);
  assert.throws(() => d.cli(['alerts', '--status', 'closed']), /status/);
});

// PostgreSQL refuses bytes that are not UTF-8 in a text column; SQLite stores whatever the SQL writes.
test('an alert row written by SQL with bytes that are not UTF-8 is shown, not a 500',
  { skip: BACKEND === 'postgres' && 'PostgreSQL text holds only valid UTF-8' }, async () => {
    d.sql(`INSERT INTO hookd_alerts(id, rule, subject, message, details, opened_at, resolved_at)
      VALUES ('alr_bytes', 'dead_letters', 'ep_' || CAST(X'FF' AS TEXT), 'bad ' || CAST(X'C328' AS TEXT) || ' text',
              CAST(X'7B2278223A22FF227D' AS TEXT), 1700000000000, 1700000001000)`);
    const one = await d.api('GET', '/v1/alerts/alr_bytes');
    assert.equal(one.status, 200, JSON.stringify(one.body));
    assert.equal(one.body.subject, 'ep_\uFFFD');
    assert.match(one.body.message, /^bad \uFFFD/);
    assert.deepEqual(one.body.details, {}, 'details that are not JSON text are shown empty');
    const list = await d.api('GET', '/v1/alerts?status=resolved&limit=1000');
    assert.equal(list.status, 200);
    assert.ok(list.body.data.some((a) => a.id === 'alr_bytes'));
    d.sql("DELETE FROM hookd_alerts WHERE id = 'alr_bytes'");
  });
