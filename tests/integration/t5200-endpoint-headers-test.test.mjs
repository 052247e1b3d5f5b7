// Admin: static custom headers per endpoint (sent on every delivery, never
// one of the signature or framing headers) and POST /v1/endpoints/{id}/test,
// a signed hookd.ping through the normal path to that endpoint only.
import { test, after, before } from 'node:test';
import assert from 'node:assert/strict';
import swh from 'standardwebhooks';
import { startDaemon, startRecordingSink, waitFor, sleep } from '../lib/harness.mjs';

let d, sink;
before(async () => {
  d = await startDaemon();
  sink = await startRecordingSink();
});
after(async () => { await sink.stop(); assert.equal(await d.stop(), 0, 'hookd exits cleanly'); await d.cleanup(); });

const verify = (secret, r) => new swh.Webhook(secret).verify(r.body, r.headers);

test('custom headers arrive at the receiver on every delivery, beside intact signature headers', async () => {
  const ep = await d.createEndpoint({ url: sink.url('/h'), event_types: ['hdr.*'],
    headers: { 'X-Tenant': 'acme', Authorization: 'Bearer static-token', 'X-Tab': 'a\tb' } });
  assert.deepEqual(ep.headers, { 'X-Tenant': 'acme', Authorization: 'Bearer static-token', 'X-Tab': 'a\tb' });
  assert.deepEqual((await d.api('GET', `/v1/endpoints/${ep.id}`)).body.headers, ep.headers);
  const evs = [await d.publish({ type: 'hdr.one', data: { n: 1 } }), await d.publish({ type: 'hdr.two', data: { n: 2 } })];
  for (const ev of evs) await d.waitDelivery(ev.id, 'delivered');
  const got = sink.at('/h');
  assert.equal(got.length, 2);
  for (const r of got) {
    assert.equal(r.headers['x-tenant'], 'acme');
    assert.equal(r.headers.authorization, 'Bearer static-token');
    assert.equal(r.headers['x-tab'], 'a\tb');
    assert.equal(r.headers['content-type'], 'application/json');
    assert.match(r.headers['user-agent'], /^hookd\//);
    assert.equal(verify(ep.secret, r).id, r.headers['webhook-id']);
    const names = [];
    for (let i = 0; i < r.rawHeaders.length; i += 2) names.push(r.rawHeaders[i].toLowerCase());
    assert.equal(names.filter((n) => n === 'x-tenant').length, 1, 'sent once');
  }

  // PATCH replaces the set; null clears it.
  const p = await d.api('PATCH', `/v1/endpoints/${ep.id}`, { headers: { 'X-Other': 'v2' } });
  assert.equal(p.status, 200);
  assert.deepEqual(p.body.headers, { 'X-Other': 'v2' });
  const ev3 = await d.publish({ type: 'hdr.three', data: {} });
  await d.waitDelivery(ev3.id, 'delivered');
  const r3 = sink.at('/h').find((r) => r.headers['webhook-id'] === ev3.id);
  assert.equal(r3.headers['x-other'], 'v2');
  assert.equal(r3.headers['x-tenant'], undefined);
  const cleared = await d.api('PATCH', `/v1/endpoints/${ep.id}`, { headers: null });
  assert.deepEqual(cleared.body.headers, {});
});

test('a refused header gives 400 naming it', async () => {
  const refused = [
    [{ 'webhook-id': 'forged' }, /webhook-id is set by hookd/],
    [{ 'Webhook-Signature': 'v1,forged' }, /Webhook-Signature is set by hookd/],
    [{ 'webhook-timestamp': '1' }, /webhook-timestamp/],
    [{ 'Content-Type': 'text/plain' }, /Content-Type/],
    [{ 'content-length': '1' }, /content-length/],
    [{ Host: 'evil.example' }, /Host/],
    [{ 'Transfer-Encoding': 'chunked' }, /Transfer-Encoding/],
    [{ 'User-Agent': 'x' }, /User-Agent/],
    [{ Connection: 'close' }, /Connection/],
    [{ 'X-Inject': 'a\r\nX-Evil: yes' }, /X-Inject value must not contain CR, LF/],
    [{ 'X-Empty': '' }, /X-Empty value must be a string of 1 to 1024/],
    [{ 'X-Blank': ' v' }, /must not start or end with a blank/],
    [{ 'X Bad': 'v' }, /X Bad is not a valid header name/],
    [{ 'X-Colon:': 'v' }, /is not a valid header name/],
    [{ '': 'v' }, /header name must be 1 to 64/],
    [{ 'X-Num': 5 }, /X-Num: value must be a string/],
    [{ 'X-A': '1', 'x-a': '2' }, /x-a is given twice/],
    [Object.fromEntries(Array.from({ length: 17 }, (_, i) => [`X-H${i}`, 'v'])), /at most 16 headers/],
    [{ 'X-Long': 'v'.repeat(1025) }, /X-Long value must be a string of 1 to 1024/],
    ['not an object', /must be an object/],
  ];
  for (const [headers, why] of refused) {
    const r = await d.api('POST', '/v1/endpoints', { url: sink.url('/never'), headers });
    assert.equal(r.status, 400, JSON.stringify(headers).slice(0, 80));
    assert.equal(r.body.error.code, 'invalid_field');
    assert.match(r.body.error.message, /^headers: /);
    assert.match(r.body.error.message, why);
  }
  // A NUL cannot even be read from the body (jansson refuses \u0000): 400 all the same.
  const nul = await d.api('POST', '/v1/endpoints', { url: sink.url('/never'), headers: { 'X-Nul': 'a\u0000b' } });
  assert.equal(nul.status, 400);
  const ep = await d.createEndpoint({ url: sink.url('/never'), event_types: ['never.*'] });
  const r = await d.api('PATCH', `/v1/endpoints/${ep.id}`, { headers: { 'webhook-id': 'x' } });
  assert.equal(r.status, 400);
  assert.deepEqual((await d.api('GET', `/v1/endpoints/${ep.id}`)).body.headers, {}, 'unchanged');
});

test('POST /v1/endpoints/{id}/test sends a signed hookd.ping to that endpoint only', async () => {
  const a = await d.createEndpoint({ url: sink.url('/ping-a'), event_types: ['hookd.*'], headers: { 'X-Test': 'a' } });
  await d.createEndpoint({ url: sink.url('/ping-b'), event_types: ['hookd.*'] });
  await d.createEndpoint({ url: sink.url('/ping-c') }); // every type
  const r = await d.api('POST', `/v1/endpoints/${a.id}/test`);
  assert.equal(r.status, 202);
  assert.equal(r.body.type, 'hookd.ping');
  assert.match(r.body.id, /^evt_/);
  assert.equal(r.body.data.endpoint_id, a.id);
  assert.deepEqual(r.body.deliveries.map((x) => x.endpoint_id), [a.id]);
  await d.waitDelivery(r.body.id, 'delivered');
  const got = sink.at('/ping-a');
  assert.equal(got.length, 1);
  const payload = verify(a.secret, got[0]);
  assert.equal(payload.type, 'hookd.ping');
  assert.equal(payload.id, r.body.id);
  assert.equal(got[0].headers['x-test'], 'a', 'the normal path: custom headers too');
  await sleep(500);
  assert.equal(sink.at('/ping-b').length, 0, 'not fanned out to another hookd.* subscriber');
  assert.equal(sink.at('/ping-c').length, 0);
  const ds = await d.deliveriesOf(r.body.id);
  assert.deepEqual(ds.map((x) => x.endpoint_id), [a.id]);

  assert.equal((await d.api('POST', '/v1/endpoints/ep_nope/test')).status, 404);
  assert.equal((await d.api('POST', `/v1/endpoints/${a.id}/disable`, {})).status, 200);
  const off = await d.api('POST', `/v1/endpoints/${a.id}/test`);
  assert.equal(off.status, 409);
  assert.equal(off.body.error.code, 'endpoint_disabled');
  assert.equal((await d.api('POST', `/v1/endpoints/${a.id}/test`, { x: 1 })).status, 400);
});
