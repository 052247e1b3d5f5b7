// Delivery outcomes: one attempt on 200, 410 disables the endpoint, other 4xx are
// dead at once, redirects are not followed; filters and accounts route events.
import { test, after, before } from 'node:test';
import assert from 'node:assert/strict';
import { startDaemon, startSink, sleep, newSecret } from '../lib/harness.mjs';

let d;
before(async () => { d = await startDaemon(); });
after(async () => { assert.equal(await d.stop(), 0, 'hookd exits cleanly'); await d.cleanup(); });

async function attemptsOf(deliveryId) {
  return (await d.api('GET', `/v1/deliveries/${deliveryId}`)).body.attempts;
}

test('200 → delivered after exactly one attempt, signed and verifiable', async () => {
  const secret = newSecret();
  const sinkV = await startSink({ secrets: [secret] });
  const ep = await d.createEndpoint({ url: sinkV.url(), event_types: ['t200.*'], secret });
  assert.equal(ep.secret, secret);
  const ev = await d.publish({ type: 't200.done', data: { x: 1 } });
  const [dl] = await d.waitDelivery(ev.id, 'delivered');
  assert.equal(dl.attempt_count, 1);
  assert.equal(dl.last_status_code, 200);
  await sleep(300);
  const got = sinkV.requests.filter((r) => r.webhook_id === ev.id);
  assert.equal(got.length, 1);
  assert.equal(got[0].verified, true);
  assert.match(String(got[0].webhook_timestamp), /^\d{10}$/);
  assert.equal((await attemptsOf(dl.id)).length, 1);
  await sinkV.stop();
});

test('410 → dead and the endpoint disabled', async () => {
  const sink = await startSink({ status: ['/gone=410'] });
  const ep = await d.createEndpoint({ url: sink.url('/gone'), event_types: ['t410.*'] });
  const ev = await d.publish({ type: 't410.x', data: {} });
  const [dl] = await d.waitDelivery(ev.id, 'dead');
  assert.equal(dl.attempt_count, 1);
  assert.equal(dl.last_status_code, 410);
  const got = (await d.api('GET', `/v1/endpoints/${ep.id}`)).body;
  assert.equal(got.enabled, false);
  assert.ok(got.disabled_reason);
  // Later events for a disabled endpoint are recorded as skipped, not sent.
  const ev2 = await d.publish({ type: 't410.y', data: {} });
  await d.waitDelivery(ev2.id, 'skipped');
  assert.equal(sink.requests.length, 1);
  await sink.stop();
});

for (const code of [400, 404, 422]) {
  test(`${code} → dead without retry`, async () => {
    const sink = await startSink({ respond: `${code},200,200` });
    await d.createEndpoint({ url: sink.url(), event_types: [`t${code}.*`] });
    const ev = await d.publish({ type: `t${code}.x`, data: {} });
    const [dl] = await d.waitDelivery(ev.id, 'dead');
    await sleep(500); // the retry schedule is 100 ms: a retry would have happened by now
    assert.equal(sink.requests.length, 1);
    assert.equal(dl.attempt_count, 1);
    assert.equal(dl.last_status_code, code);
    await sink.stop();
  });
}

test('302 → not followed, dead', async () => {
  const target = await startSink();
  const sink = await startSink({ respond: `302;location=${target.url('/elsewhere')}` });
  await d.createEndpoint({ url: sink.url(), event_types: ['t302.*'] });
  const ev = await d.publish({ type: 't302.x', data: {} });
  const [dl] = await d.waitDelivery(ev.id, 'dead');
  assert.equal(dl.last_status_code, 302);
  await sleep(300);
  assert.equal(target.requests.length, 0, 'the redirect target was never called');
  await sink.stop(); await target.stop();
});

test('event-type filters and accounts decide who receives what', async () => {
  const a = await startSink(); const b = await startSink(); const c = await startSink();
  await d.createEndpoint({ url: a.url(), event_types: ['flt.order.*'] });
  await d.createEndpoint({ url: b.url(), event_types: ['flt.invoice.paid'], account: 'acme' });
  await d.createEndpoint({ url: c.url(), event_types: ['flt.*'], account: 'globex' });
  const e1 = await d.publish({ type: 'flt.order.created', account: 'acme', data: {} });
  const e2 = await d.publish({ type: 'flt.invoice.paid', account: 'acme', data: {} });
  const e3 = await d.publish({ type: 'flt.invoice.paid', account: 'globex', data: {} });
  for (const e of [e1, e2, e3]) await d.waitDelivery(e.id, 'delivered');
  await sleep(200);
  assert.deepEqual(a.requests.map((r) => r.webhook_id), [e1.id]);
  assert.deepEqual(b.requests.map((r) => r.webhook_id), [e2.id]);
  assert.deepEqual(c.requests.map((r) => r.webhook_id), [e3.id]);
  await a.stop(); await b.stop(); await c.stop();
});
