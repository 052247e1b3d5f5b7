// Reconciliation (DESIGN §7 rule 4 and gaps): a source declares the
// provider's API; an event without a version, and a contiguous gap that has
// waited past [inbox] reconcile_after, make hookd fetch the entity from it
// (a scripted provider that fails, then answers). The fetched state and
// version become the entity's (`reconciled`); versions at or below it turn
// stale, later ones apply. Header values from the environment; literal ones
// are secrets (sealed, never shown).
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import { startDaemon, startSink, waitFor } from '../lib/harness.mjs';

const cleanups = [];
after(async () => { for (const c of cleanups) await c(); });

const ORDER = {
  name: 'order', versioning: 'contiguous',
  transitions: [
    { on: 'order.created', from: [null], to: 'created' },
    { on: 'order.paid', from: ['created'], to: 'paid' },
    { on: 'order.fulfilled', from: ['paid'], to: 'fulfilled' },
    { on: 'order.refunded', from: ['paid', 'fulfilled'], to: 'refunded' },
    { on: 'order.cancelled', from: ['created'], to: 'cancelled' },
  ],
  emit: 'order.status_changed',
};

/** A provider API: GET /orders/{id}; answers[id] is a list consumed per request ({status} or {body}). */
async function startProvider(answers) {
  const hits = [];
  const server = createServer((req, res) => {
    const id = decodeURIComponent(req.url.replace(/^\/orders\//, ''));
    hits.push({ id, auth: req.headers.authorization, tenant: req.headers['x-tenant'], accept: req.headers.accept });
    const list = answers[id] || [];
    const a = list.length > 1 ? list.shift() : list[0] || { status: 404 };
    res.writeHead(a.status || 200, { 'content-type': 'application/json' });
    res.end(a.body ? JSON.stringify(a.body) : '{"error": "nope"}');
  });
  await new Promise((r) => server.listen(0, '127.0.0.1', r));
  return { hits, url: `http://127.0.0.1:${server.address().port}`, stop: () => new Promise((r) => server.close(r)) };
}

async function setup(answers) {
  const provider = await startProvider(answers);
  cleanups.push(() => provider.stop());
  const sink = await startSink();
  cleanups.push(() => sink.stop());
  const d = await startDaemon({ HOOKD_INBOX_RECONCILE_AFTER: '300ms', PROVIDER_TOKEN: 'tok-from-env' });
  cleanups.push(() => d.cleanup());
  let r = await d.api('POST', '/v1/machines', ORDER);
  assert.equal(r.status, 201, JSON.stringify(r.body));
  r = await d.api('POST', '/v1/sources', {
    name: 'shop', verify: { scheme: 'none' }, event_id: '/id', event_type: '/type',
    entity: { kind: 'order', id: '/data/order', version: '/data/version' },
    handler: { machine: 'order' }, retry_schedule: '10s', max_defer: '1m',
    reconcile: { url: `${provider.url}/orders/{entity_id}`, headers: { Authorization: 'env:PROVIDER_TOKEN', 'X-Tenant': 'acme-literal-secret' },
      state: '/order/status', version: '/order/version' },
  });
  assert.equal(r.status, 201, JSON.stringify(r.body));
  await d.createEndpoint({ url: sink.url('/app'), event_types: ['order.status_changed'] });
  const send = async (id, type, order, version) => {
    const data = { order };
    if (version !== undefined) data.version = version;
    const res = await fetch(`http://127.0.0.1:${d.publicPort}/in/shop`, {
      method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ id, type, data }),
    });
    assert.equal(res.status, 200);
    return (await res.json()).id;
  };
  const entity = async (id) => (await d.api('GET', `/v1/entities/order/${encodeURIComponent(id)}`)).body;
  const item = async (id) => (await d.api('GET', `/v1/inbox/${id}`)).body;
  return { d, sink, provider, send, entity, item };
}

test('an event without a version: the provider fails twice, then answers; the entity is reconciled', { timeout: 60000 }, async () => {
  const { d, sink, provider, send, entity, item } = await setup({
    'o 1': [{ status: 500 }, { status: 503 }, { body: { order: { status: 'paid', version: 7 } } }],
  });
  const i = await send('nv1', 'order.paid', 'o 1');
  await waitFor(async () => (await item(i)).status === 'processed', { timeoutMs: 20000, what: 'reconciled' });
  const it = await item(i);
  assert.equal(it.result, 'reconciled');
  assert.equal(provider.hits.length, 3, 'two failures, then the answer');
  assert.ok(provider.hits.every((h) => h.id === 'o 1' && h.auth === 'tok-from-env' && h.tenant === 'acme-literal-secret'));
  assert.equal(provider.hits[0].accept, 'application/json');
  const e = await entity('o 1');
  assert.equal(e.state, 'paid');
  assert.equal(e.version, 7);
  const tr = (await d.api('GET', `/v1/entities/order/${encodeURIComponent('o 1')}/trace`)).body;
  assert.deepEqual(tr.events.map((x) => [x.to, x.result]), [['paid', 'reconciled']]);
  await sink.waitCount(1);
  const body = typeof sink.requests[0].body === 'string' ? JSON.parse(sink.requests[0].body) : sink.requests[0].body;
  assert.equal(body.data.state, 'paid');
  assert.equal(body.data.version, 7);
  assert.equal(body.data.reconciled, true);
  // While it failed, the item was deferred with the provider's answer as its error.
  assert.ok(Number(d.sql(`SELECT attempts FROM hookd_inbox WHERE id = '${i}'`)) >= 3);
  // Later versions apply on the reconciled state; lower ones are stale.
  const v8 = await send('nv2', 'order.fulfilled', 'o 1', 8);
  const v6 = await send('nv3', 'order.created', 'o 1', 6);
  await waitFor(async () => (await item(v8)).status === 'processed' && (await item(v6)).status === 'processed', { what: '8 and 6 decided' });
  assert.equal((await item(v8)).result, 'applied');
  assert.equal((await item(v6)).result, 'stale');
  assert.equal((await entity('o 1')).state, 'fulfilled');
});

test('version 4 before 2 and 3 (gap): deferred, reconciled from the provider after reconcile_after, later versions applied', { timeout: 60000 }, async () => {
  const { d, send, entity, item, provider } = await setup({
    o2: [{ status: 502 }, { body: { order: { status: 'paid', version: 3 } } }],
  });
  const i1 = await send('g1', 'order.created', 'o2', 1);
  await waitFor(async () => (await item(i1)).status === 'processed', { what: 'v1 applied' });
  const i4 = await send('g4', 'order.fulfilled', 'o2', 4);
  await waitFor(async () => (await item(i4)).status === 'deferred', { what: 'v4 deferred' });
  assert.match((await item(i4)).error, /waiting for version 2/);
  await waitFor(async () => (await item(i4)).status === 'processed', { timeoutMs: 20000, what: 'v4 applied after reconciliation' });
  assert.equal((await item(i4)).result, 'applied');
  assert.ok(provider.hits.length >= 2, 'the failure was retried');
  let e = await entity('o2');
  assert.equal(e.state, 'fulfilled');
  assert.equal(e.version, 4);
  // The versions the provider's answer covered arrive late: stale.
  const i2 = await send('g2', 'order.paid', 'o2', 2);
  const i3 = await send('g3', 'order.updated', 'o2', 3);
  const i5 = await send('g5', 'order.refunded', 'o2', 5);
  await waitFor(async () => (await item(i5)).status === 'processed' && (await item(i2)).status === 'processed'
    && (await item(i3)).status === 'processed', { what: 'late versions decided' });
  assert.equal((await item(i2)).result, 'stale');
  assert.equal((await item(i3)).result, 'stale');
  assert.equal((await item(i5)).result, 'applied');
  e = await entity('o2');
  assert.equal(e.state, 'refunded');
  assert.equal(e.version, 5);
  const results = d.sql("SELECT result || ':' || coalesce(version, 0) FROM hookd_transitions WHERE entity_id = 'o2' AND result <> 'deferred' ORDER BY seq").split('\n');
  assert.deepEqual(results, ['applied:1', 'reconciled:3', 'applied:4', 'stale:2', 'stale:3', 'applied:5']);
  const audit = (await d.api('GET', '/v1/audit?source=shop')).body;
  assert.equal(audit.checks.applied_twice.count, 0);
  assert.equal(audit.checks.unprocessed_changes.count, 0);
});

test('reconcile: validated, literal header values sealed and never shown', { timeout: 60000 }, async () => {
  const { d } = await setup({});
  const r = await d.api('GET', '/v1/sources/shop');
  assert.equal(r.status, 200);
  assert.deepEqual(r.body.reconcile.headers, { Authorization: 'env:PROVIDER_TOKEN', 'X-Tenant': { set: true } });
  assert.equal(r.body.reconcile.state, '/order/status');
  const row = d.sql("SELECT definition || ' ' || secrets FROM hookd_sources WHERE name = 'shop'");
  assert.ok(!row.includes('acme-literal-secret'), 'the literal value is sealed at rest');
  const bad = async (reconcile, field, extra = {}) => {
    const res = await d.api('POST', '/v1/sources', { name: 'bad', verify: { scheme: 'none' },
      entity: { kind: 'order', id: '/id' }, handler: { machine: 'order' }, reconcile, ...extra });
    assert.equal(res.status, 400, JSON.stringify(res.body));
    assert.match(res.body.error.message, field);
  };
  await bad({ url: 'http://x.example/orders', state: '/s' }, /reconcile\.url/);
  await bad({ url: 'http://x.example/{entity_id}/{other}', state: '/s' }, /reconcile\.url/);
  await bad({ url: 'ftp://x.example/{entity_id}', state: '/s' }, /reconcile\.url/);
  await bad({ url: 'http://x.example/{entity_id}' }, /reconcile\.state/);
  await bad({ url: 'http://x.example/{entity_id}', state: 'status' }, /reconcile\.state/);
  await bad({ url: 'http://x.example/{entity_id}', state: '/s', version: 'v' }, /reconcile\.version/);
  await bad({ url: 'http://x.example/{entity_id}', state: '/s', headers: { 'X-A': 'a\r\nX-B: b' } }, /reconcile\.headers\.X-A/);
  await bad({ url: 'http://x.example/{entity_id}', state: '/s', headers: { 'Bad Name': 'a' } }, /reconcile\.headers/);
  await bad({ url: 'http://x.example/{entity_id}', state: '/s', headers: { 'X-A': 'env:1BAD' } }, /reconcile\.headers\.X-A/);
  await bad({ url: 'http://x.example/{entity_id}', state: '/s', colour: 1 }, /reconcile\.colour/);
  const res = await d.api('POST', '/v1/sources', { name: 'fwd', verify: { scheme: 'none' },
    handler: { forward: { url: 'http://127.0.0.1:9/x', secret: 'whsec_' + Buffer.alloc(24, 1).toString('base64') } },
    reconcile: { url: 'http://x.example/{entity_id}', state: '/s' } });
  assert.equal(res.status, 400);
  assert.match(res.body.error.message, /reconcile/);
});

test('hookd apply of the source without reconcile clears it (fields the file leaves out become null)', async () => {
  const { d } = await setup({});
  assert.notEqual((await d.api('GET', '/v1/sources/shop')).body.reconcile, null);
  const { writeFileSync, mkdtempSync } = await import('node:fs');
  const { join } = await import('node:path');
  const { tmpdir } = await import('node:os');
  const file = join(mkdtempSync(join(tmpdir(), 'hookd-apply-')), 'a.json');
  writeFileSync(file, JSON.stringify({ sources: [{ name: 'shop', verify: { scheme: 'none' }, event_id: '/id',
    event_type: '/type', entity: { kind: 'order', id: '/data/order', version: '/data/version' },
    handler: { machine: 'order' }, retry_schedule: '10s', max_defer: '1m' }] }));
  const report = JSON.parse(d.cli(['apply', '--json', file]));
  assert.deepEqual(report.items.map((i) => [i.kind, i.name, i.result]), [['source', 'shop', 'updated']]);
  assert.equal((await d.api('GET', '/v1/sources/shop')).body.reconcile, null);
});
