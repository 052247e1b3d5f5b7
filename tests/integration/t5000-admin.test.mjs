// Admin API and CLI: auth, validation with errors that name the field, CRUD of
// endpoints, listing events and deliveries; bad input never loses accepted data.
import { test, after, before } from 'node:test';
import assert from 'node:assert/strict';
import { startDaemon, startSink, TOKEN } from '../lib/harness.mjs';

let d, sink;
before(async () => { d = await startDaemon(); sink = await startSink(); });
after(async () => { await sink.stop(); assert.equal(await d.stop(), 0, 'hookd exits cleanly'); await d.cleanup(); });

test('no or a wrong bearer token → 401', async () => {
  const none = await fetch(`http://127.0.0.1:${d.adminPort}/v1/endpoints`);
  assert.equal(none.status, 401);
  assert.equal((await none.json()).error.code, 'unauthorized');
  const wrong = await d.api('GET', '/v1/endpoints', undefined, { authorization: 'Bearer nope' });
  assert.equal(wrong.status, 401);
});

test('malformed JSON → 400 malformed_json', async () => {
  const r = await d.api('POST', '/v1/events', '{"type": "a.b", "data": {');
  assert.equal(r.status, 400);
  assert.ok(r.body.error.code && r.body.error.message);
});

test('missing type → 400 naming the field', async () => {
  const r = await d.api('POST', '/v1/events', { data: {} });
  assert.equal(r.status, 400);
  assert.match(r.body.error.message, /type/);
  const r2 = await d.api('POST', '/v1/events', { type: 'a.b' });
  assert.equal(r2.status, 400);
  assert.match(r2.body.error.message, /data/);
});

test('invalid endpoint URL → 400 naming url', async () => {
  for (const url of ['ftp://example.com/x', 'not a url', 'http://', 'file:///etc/passwd']) {
    const r = await d.api('POST', '/v1/endpoints', { url });
    assert.equal(r.status, 400, url);
    assert.match(r.body.error.message, /url/, url);
  }
  const r = await d.api('POST', '/v1/endpoints', {});
  assert.equal(r.status, 400);
  assert.match(r.body.error.message, /url/);
});

test('unknown event, endpoint and delivery ids → 404', async () => {
  for (const p of ['/v1/events/evt_nope', '/v1/endpoints/ep_nope', '/v1/deliveries/dlv_nope']) {
    const r = await d.api('GET', p);
    assert.equal(r.status, 404, p);
    assert.equal(r.body.error.code, 'not_found');
  }
});

test('bad input does not disturb accepted events', async () => {
  await d.createEndpoint({ url: sink.url(), event_types: ['keep.*'] });
  const ok = await d.publish({ type: 'keep.one', data: { v: 1 } });
  await d.api('POST', '/v1/events', '{broken');
  await d.api('POST', '/v1/events', { type: '', data: {} });
  await d.waitDelivery(ok.id, 'delivered');
  const list = await d.api('GET', '/v1/events?type=keep.one');
  assert.deepEqual(list.body.data.map((e) => e.id), [ok.id]);
});

test('endpoint create, get, list, update, disable, enable, delete', async () => {
  const ep = await d.createEndpoint({ url: sink.url('/crud'), description: 'crud', event_types: ['crud.*'], account: 'acme' });
  assert.match(ep.id, /^ep_/);
  assert.match(ep.secret, /^whsec_/);
  assert.equal(ep.enabled, true);
  const got = await d.api('GET', `/v1/endpoints/${ep.id}`);
  assert.equal(got.body.url, sink.url('/crud'));
  const list = await d.api('GET', '/v1/endpoints?account=acme');
  assert.ok(list.body.data.some((e) => e.id === ep.id));
  const upd = await d.api('PATCH', `/v1/endpoints/${ep.id}`, { description: 'changed', event_types: ['crud.x'] });
  assert.equal(upd.status, 200);
  assert.equal(upd.body.description, 'changed');
  assert.deepEqual(upd.body.event_types, ['crud.x']);
  const dis = await d.api('POST', `/v1/endpoints/${ep.id}/disable`, { reason: 'maintenance' });
  assert.equal(dis.body.enabled, false);
  assert.equal(dis.body.disabled_reason, 'maintenance');
  const en = await d.api('POST', `/v1/endpoints/${ep.id}/enable`);
  assert.equal(en.body.enabled, true);
  const del = await d.api('DELETE', `/v1/endpoints/${ep.id}`);
  assert.equal(del.status, 204);
  assert.equal((await d.api('GET', `/v1/endpoints/${ep.id}`)).status, 404);
});

test('deliveries list filters by status and endpoint; get shows attempts', async () => {
  const ep = await d.createEndpoint({ url: sink.url('/dl'), event_types: ['dl.*'] });
  const ev = await d.publish({ type: 'dl.x', data: {} });
  await d.waitDelivery(ev.id, 'delivered');
  const list = await d.api('GET', `/v1/deliveries?endpoint_id=${ep.id}&status=delivered`);
  assert.equal(list.status, 200);
  assert.equal(list.body.data.length, 1);
  const one = await d.api('GET', `/v1/deliveries/${list.body.data[0].id}`);
  assert.equal(one.body.attempts.length, 1);
  assert.equal(one.body.attempts[0].status_code, 200);
  const bad = await d.api('GET', '/v1/deliveries?status=bogus');
  assert.equal(bad.status, 400);
  assert.match(bad.body.error.message, /status/);
});

test('the CLI covers endpoints, events and deliveries', async () => {
  const ep = JSON.parse(d.cli(['endpoints', 'create', '--url', sink.url('/cli'), '--types', 'cli.*', '--json']));
  assert.match(ep.id, /^ep_/);
  const ev = JSON.parse(d.cli(['events', 'publish', '--type', 'cli.done', '--data', '{"k":1}', '--json']));
  await d.waitDelivery(ev.id, 'delivered');
  const got = JSON.parse(d.cli(['events', 'get', ev.id, '--json']));
  assert.equal(got.deliveries[0].status, 'delivered');
  const dls = JSON.parse(d.cli(['deliveries', 'list', '--endpoint', ep.id, '--json']));
  assert.equal(dls.data.length, 1);
  const one = JSON.parse(d.cli(['deliveries', 'get', dls.data[0].id, '--json']));
  assert.equal(one.attempts.length, 1);
  const eps = JSON.parse(d.cli(['endpoints', 'list', '--json']));
  assert.ok(eps.data.some((e) => e.id === ep.id));
  d.cli(['endpoints', 'disable', ep.id]);
  assert.equal(JSON.parse(d.cli(['endpoints', 'get', ep.id, '--json'])).enabled, false);
  d.cli(['endpoints', 'delete', ep.id]);
  assert.throws(() => d.cli(['endpoints', 'get', ep.id]), 'a missing endpoint exits non-zero');
  assert.throws(() => d.cli(['endpoints', 'list'], { HOOKD_ADMIN_TOKEN: 'wrong' + TOKEN }));
});

// Every list route reads its query string through a table: an unknown filter, a repeated one, or a
// cursor the route did not make is a 400 naming it, never ignored; its own cursors page through.
const listRoutes = [
  { path: '/v1/endpoints', unknown: 'event_type=x.y' },
  { path: '/v1/events', unknown: 'status=dead' },
  { path: '/v1/deliveries', unknown: 'state=dead' },
];

test('an unknown or repeated filter on a list → 400 naming it', async () => {
  for (const { path, unknown } of listRoutes) {
    const name = unknown.split('=')[0];
    const r = await d.api('GET', `${path}?limit=5&${unknown}`);
    assert.equal(r.status, 400, `${path}?${unknown}`);
    assert.equal(r.body.error.code, 'unknown_field', path);
    assert.ok(r.body.error.message.startsWith(`${name}:`), r.body.error.message);
    const twice = await d.api('GET', `${path}?limit=5&limit=6`);
    assert.equal(twice.status, 400, path);
    assert.match(twice.body.error.message, /^limit:/);
  }
});

test('a malformed or foreign cursor on a list → 400 naming cursor', async () => {
  // A cursor made by another list, a plain id or number (what cursors were before), junk, a truncation.
  await d.createEndpoint({ url: sink.url('/c'), account: 'cursor-probe' });
  await d.createEndpoint({ url: sink.url('/c'), account: 'cursor-probe' });
  const page = await d.api('GET', '/v1/endpoints?account=cursor-probe&limit=1');
  const foreign = page.body.next_cursor;
  assert.ok(foreign, 'a full page has a next cursor');
  for (const { path } of listRoutes) {
    const bad = ['bogus', '12345', 'ep_0123456789abcdef', foreign.slice(0, -2), ''];
    if (path !== '/v1/endpoints') bad.push(foreign);
    for (const cursor of bad) {
      const r = await d.api('GET', `${path}?cursor=${encodeURIComponent(cursor)}`);
      assert.equal(r.status, 400, `${path}?cursor=${cursor}`);
      assert.equal(r.body.error.code, 'invalid_field');
      assert.match(r.body.error.message, /^cursor:/);
    }
  }
});

/** Follows next_cursor from the first page of path (limit 2) to the end; returns the ids in order. */
async function walk(path) {
  const ids = [];
  let cursor = null;
  for (let pages = 0; pages < 10; pages++) {
    const sep = path.includes('?') ? '&' : '?';
    const r = await d.api('GET', `${path}${sep}limit=2${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`);
    assert.equal(r.status, 200, JSON.stringify(r.body));
    assert.ok(r.body.data.length <= 2);
    ids.push(...r.body.data.map((x) => x.id));
    cursor = r.body.next_cursor;
    if (!cursor) return ids;
    assert.match(cursor, /^[A-Za-z0-9_-]+$/, 'cursors are opaque and URL-safe');
  }
  throw new Error(`${path}: more pages than expected`);
}

test('each list pages through its own cursors: every item once, newest first', async () => {
  const ep = await d.createEndpoint({ url: sink.url('/pages'), event_types: ['pages.*'], account: 'pages' });
  const others = [ // they receive the events too (an account, every type): more deliveries, not in ep's list
    await d.createEndpoint({ url: sink.url('/pages'), account: 'pages' }),
    await d.createEndpoint({ url: sink.url('/pages'), account: 'pages' }),
  ];
  const evs = [];
  for (let i = 0; i < 5; i++) evs.push(await d.publish({ type: 'pages.x', account: 'pages', data: { i } }));
  for (const ev of evs) await d.waitDelivery(ev.id, 'delivered');

  const eps = await walk('/v1/endpoints?account=pages');
  assert.deepEqual([...eps].sort(), [ep.id, ...others.map((o) => o.id)].sort());
  assert.equal(new Set(eps).size, 3);
  const events = await walk('/v1/events?type=pages.x');
  assert.deepEqual(events, evs.map((e) => e.id).reverse());
  const dls = await walk(`/v1/deliveries?endpoint_id=${ep.id}`);
  assert.equal(dls.length, 5);
  assert.equal(new Set(dls).size, 5);
  const all = (await d.api('GET', `/v1/deliveries?endpoint_id=${ep.id}`)).body.data.map((x) => x.id);
  assert.deepEqual(dls, all, 'pages join into the one-page list');
});
