// Ingest: events enter the outbox by HTTP, by bare SQL in the application's own
// transaction and by the C API; idempotency keys; rolled-back inserts never deliver.
import { test, after, before } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { join } from 'node:path';
import { startDaemon, startSink, sleep, TOOLS, BACKEND } from '../lib/harness.mjs';

let d, sink, ep;
before(async () => {
  d = await startDaemon();
  sink = await startSink();
  ep = await d.createEndpoint({ url: sink.url() });
});
after(async () => { await sink.stop(); assert.equal(await d.stop(), 0, 'hookd exits cleanly'); await d.cleanup(); });

test('POST /v1/events answers 201 with the event and it is delivered', async () => {
  const ev = await d.publish({ type: 'order.paid', account: 'acme', data: { order_id: 1 } });
  assert.match(ev.id, /^evt_[0-9a-f]{32}$/);
  assert.equal(ev.type, 'order.paid');
  await d.waitDelivery(ev.id, 'delivered');
  const got = sink.requests.filter((r) => r.webhook_id === ev.id);
  assert.equal(got.length, 1);
  assert.deepEqual(got[0].body.data, { order_id: 1 });
  assert.equal(got[0].body.type, 'order.paid');
  assert.equal(got[0].body.account, 'acme');
});

test('the same Idempotency-Key twice makes one event', async () => {
  const before = sink.requests.length;
  const a = await d.api('POST', '/v1/events', { type: 'order.paid', data: { n: 7 } }, { 'idempotency-key': 'k-1' });
  const b = await d.api('POST', '/v1/events', { type: 'order.paid', data: { n: 7 } }, { 'idempotency-key': 'k-1' });
  assert.equal(a.status, 201);
  assert.equal(b.status, 200);
  assert.equal(b.body.id, a.body.id);
  assert.equal(d.sql("SELECT count(*) FROM hookd_outbox WHERE idempotency_key = 'k-1'"), '1');
  await d.waitDelivery(a.body.id, 'delivered');
  await sleep(300);
  assert.equal(sink.requests.length - before, 1);
  const c = await d.api('POST', '/v1/events', { type: 'order.refunded', data: { n: 7 } }, { 'idempotency-key': 'k-1' });
  assert.equal(c.status, 409, 'a reused key with other content is a conflict');
});

test('a bare SQL insert committed by another process is delivered', async () => {
  d.sql(`BEGIN; INSERT INTO hookd_outbox(event_type, account, payload) VALUES ('order.shipped', 'acme', '{"sql":true}'); COMMIT;`);
  const id = d.sql("SELECT id FROM hookd_outbox WHERE event_type = 'order.shipped'");
  assert.match(id, /^evt_/);
  await d.waitDelivery(id, 'delivered');
  const got = sink.requests.find((r) => r.webhook_id === id);
  assert.deepEqual(got.body.data, { sql: true });
});

test('a bare SQL insert is judged by the same JSON check as the C API', async () => {
  // An unpaired surrogate escape is refused everywhere (hookd_publish too): its deliveries are dead at once.
  d.sql(`INSERT INTO hookd_outbox(event_type, payload) VALUES ('json.bad', '{"s":"\\uD800"}')`);
  // A number too large for a double is still JSON: delivered as written.
  d.sql(`INSERT INTO hookd_outbox(event_type, payload) VALUES ('json.big', '{"n":1e400}')`);
  const bad = d.sql("SELECT id FROM hookd_outbox WHERE event_type = 'json.bad'");
  const big = d.sql("SELECT id FROM hookd_outbox WHERE event_type = 'json.big'");
  const [dead] = await d.waitDelivery(bad, 'dead');
  assert.equal(dead.last_error, 'payload is not valid JSON');
  await d.waitDelivery(big, 'delivered');
  const got = sink.requests.find((r) => r.webhook_id === big);
  assert.ok(got, 'the sink received it');
  assert.equal(sink.requests.filter((r) => r.webhook_id === bad).length, 0);
});

test('a rolled-back SQL insert is never delivered', async () => {
  d.sql(`BEGIN; INSERT INTO hookd_outbox(event_type, payload) VALUES ('order.rolledback', '{}'); ROLLBACK;`);
  // A committed marker published afterwards proves the relay has moved past the point.
  d.sql(`INSERT INTO hookd_outbox(event_type, payload) VALUES ('order.marker', '{}');`);
  const marker = d.sql("SELECT id FROM hookd_outbox WHERE event_type = 'order.marker'");
  await d.waitDelivery(marker, 'delivered');
  assert.equal(d.sql("SELECT count(*) FROM hookd_outbox WHERE event_type = 'order.rolledback'"), '0');
  assert.equal(sink.requests.filter((r) => r.body?.type === 'order.rolledback').length, 0);
});

// The application's side of the C API: hookd_publish() on a sqlite3 handle, hookd_publish_pg() on a PGconn.
const publishTool = BACKEND === 'postgres'
  ? (args) => execFileSync(join(TOOLS, 'publish_pg_tool'), [d.storeUrl, ...args], { encoding: 'utf8' }).trim()
  : (args) => execFileSync(join(TOOLS, 'publish_tool'), [d.db, ...args], { encoding: 'utf8' }).trim();

test(`hookd_publish${BACKEND === 'postgres' ? '_pg' : ''}() in the caller transaction: commit delivers, rollback does not`, async () => {
  const committed = publishTool(['commit', 'invoice.paid', '{"c":1}']);
  const rolled = publishTool(['rollback', 'invoice.voided', '{"c":2}']);
  assert.match(committed, /^evt_/);
  await d.waitDelivery(committed, 'delivered');
  assert.equal(d.sql(`SELECT count(*) FROM hookd_outbox WHERE id = '${rolled}'`), '0');
  const got = sink.requests.find((r) => r.webhook_id === committed);
  assert.deepEqual(got.body.data, { c: 1 });
});
