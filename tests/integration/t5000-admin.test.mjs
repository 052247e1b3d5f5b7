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
  const ep = JSON.parse(d.cli(['endpoints', 'create', '--url', sink.url('/cli'), '--types', 'cli.*']));
  assert.match(ep.id, /^ep_/);
  const ev = JSON.parse(d.cli(['events', 'publish', '--type', 'cli.done', '--data', '{"k":1}']));
  await d.waitDelivery(ev.id, 'delivered');
  const got = JSON.parse(d.cli(['events', 'get', ev.id]));
  assert.equal(got.deliveries[0].status, 'delivered');
  const dls = JSON.parse(d.cli(['deliveries', 'list', '--endpoint', ep.id]));
  assert.equal(dls.data.length, 1);
  const one = JSON.parse(d.cli(['deliveries', 'get', dls.data[0].id]));
  assert.equal(one.attempts.length, 1);
  const eps = JSON.parse(d.cli(['endpoints', 'list']));
  assert.ok(eps.data.some((e) => e.id === ep.id));
  d.cli(['endpoints', 'disable', ep.id]);
  assert.equal(JSON.parse(d.cli(['endpoints', 'get', ep.id])).enabled, false);
  d.cli(['endpoints', 'delete', ep.id]);
  assert.throws(() => d.cli(['endpoints', 'get', ep.id]), 'a missing endpoint exits non-zero');
  assert.throws(() => d.cli(['endpoints', 'list'], { HOOKD_ADMIN_TOKEN: 'wrong' + TOKEN }));
});
