// Retries: transient failures retry on the schedule, Retry-After raises the
// delay, and a delivery that never succeeds is dead after len(schedule)+1 attempts.
import { test, after, before } from 'node:test';
import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import { startDaemon, startSink, freePort, sleep } from '../lib/harness.mjs';

let d;
// Schedule of three delays (100, 200, 300 ms; no jitter): four attempts at most.
before(async () => { d = await startDaemon(); });
after(async () => { assert.equal(await d.stop(), 0, 'hookd exits cleanly'); await d.cleanup(); });

test('500, 500, 200 → delivered after exactly three attempts', async () => {
  const sink = await startSink({ respond: '500,500,200' });
  await d.createEndpoint({ url: sink.url(), event_types: ['r1.*'] });
  const ev = await d.publish({ type: 'r1.x', data: {} });
  const [dl] = await d.waitDelivery(ev.id, 'delivered');
  assert.equal(dl.attempt_count, 3);
  const attempts = (await d.api('GET', `/v1/deliveries/${dl.id}`)).body.attempts;
  assert.deepEqual(attempts.map((a) => a.status_code), [500, 500, 200]);
  assert.deepEqual(attempts.map((a) => a.n), [1, 2, 3]);
  // The same webhook-id on every attempt: the receiver's dedup key.
  assert.deepEqual(new Set(sink.requests.map((r) => r.webhook_id)), new Set([ev.id]));
  // Delays follow the schedule (100 ms, then 200 ms), never earlier.
  const t = attempts.map((a) => Date.parse(a.started_at));
  assert.ok(t[1] - t[0] >= 95, `second attempt after ${t[1] - t[0]} ms`);
  assert.ok(t[2] - t[1] >= 195, `third attempt after ${t[2] - t[1]} ms`);
  await sink.stop();
});

test('always 500 → dead after exactly len(schedule)+1 attempts', async () => {
  const sink = await startSink({ respond: '500,500,500,500,500,500,500' });
  await d.createEndpoint({ url: sink.url(), event_types: ['r2.*'] });
  const ev = await d.publish({ type: 'r2.x', data: {} });
  const [dl] = await d.waitDelivery(ev.id, 'dead');
  assert.equal(dl.attempt_count, 4);
  await sleep(600);
  assert.equal(sink.requests.length, 4);
  assert.ok(dl.last_error, 'the dead delivery says why');
  await sink.stop();
});

test('a timeout is retried', async () => {
  const sink = await startSink({ delay: '3s,0' }); // the daemon's timeout is 2 s
  await d.createEndpoint({ url: sink.url(), event_types: ['r3.*'] });
  const ev = await d.publish({ type: 'r3.x', data: {} });
  const [dl] = await d.waitDelivery(ev.id, 'delivered', 15000);
  assert.equal(dl.attempt_count, 2);
  const attempts = (await d.api('GET', `/v1/deliveries/${dl.id}`)).body.attempts;
  assert.equal(attempts[0].status_code, null);
  assert.match(attempts[0].error, /timeout/i);
  await sink.stop();
});

test('connection refused is retried, then delivered once the receiver is up', async () => {
  const port = await freePort();
  await d.createEndpoint({ url: `http://127.0.0.1:${port}/late`, event_types: ['r4.*'] });
  const ev = await d.publish({ type: 'r4.x', data: {} });
  await d.waitDelivery(ev.id, 'retrying');
  const dl = (await d.deliveriesOf(ev.id))[0];
  assert.match(dl.last_error, /connect/i);
  // Nothing listens; the schedule runs out: dead after 4 attempts.
  const [dead] = await d.waitDelivery(ev.id, 'dead');
  assert.equal(dead.attempt_count, 4);
});

test('Retry-After (seconds) is respected', async () => {
  const sink = await startSink({ respond: '429;retry-after=1,200' });
  await d.createEndpoint({ url: sink.url(), event_types: ['r5.*'] });
  const ev = await d.publish({ type: 'r5.x', data: {} });
  const [dl] = await d.waitDelivery(ev.id, 'delivered', 10000);
  const attempts = (await d.api('GET', `/v1/deliveries/${dl.id}`)).body.attempts;
  assert.deepEqual(attempts.map((a) => a.status_code), [429, 200]);
  const gap = Date.parse(attempts[1].started_at) - Date.parse(attempts[0].started_at);
  assert.ok(gap >= 950, `retried after ${gap} ms, Retry-After asked for 1000`);
  await sink.stop();
});

test('Retry-After as an HTTP date is respected', async () => {
  // A plain node receiver: the date form has commas, which the listen script syntax reserves.
  const seen = [];
  const server = createServer((req, res) => {
    req.resume();
    seen.push(Date.now());
    if (seen.length === 1) {
      res.writeHead(503, { 'retry-after': new Date(Date.now() + 2500).toUTCString() });
    } else {
      res.writeHead(200);
    }
    res.end('ok');
  });
  await new Promise((r) => server.listen(0, '127.0.0.1', r));
  await d.createEndpoint({ url: `http://127.0.0.1:${server.address().port}/h`, event_types: ['r6.*'] });
  const ev = await d.publish({ type: 'r6.x', data: {} });
  const [dl] = await d.waitDelivery(ev.id, 'delivered', 10000);
  assert.equal(dl.attempt_count, 2);
  const gap = seen[1] - seen[0];
  assert.ok(gap >= 1000, `retried after ${gap} ms, the date was about 2.5 s ahead`);
  await new Promise((r) => server.close(r));
});

test('a request that cannot be built (payload past the 8 MiB request cap) is dead at once, not retried', async () => {
  const sink = await startSink();
  await d.createEndpoint({ url: sink.url(), event_types: ['rbig.*'] });
  // 9 MB of JSON, written by plain SQL as an application could: valid, but larger than any request hookd builds.
  const big = d.store.kind === 'sqlite'
    ? `'{"s":"' || replace(hex(zeroblob(4500000)), '0', 'a') || '"}'`
    : `'{"s":"' || repeat('a', 9000000) || '"}'`;
  d.sql(`INSERT INTO hookd_outbox(id, event_type, payload) VALUES ('evt_big_request_1', 'rbig.x', ${big})`);
  const [dl] = await d.waitDelivery('evt_big_request_1', 'dead');
  assert.equal(dl.attempt_count, 1, 'one attempt: a permanent error is not retried');
  assert.match(dl.last_error, /cannot build the request/);
  await sleep(500); // the schedule (100 ms, …) would have retried by now
  const again = (await d.api('GET', `/v1/deliveries/${dl.id}`)).body;
  assert.equal(again.attempt_count, 1);
  assert.equal(again.attempts.length, 1);
  assert.equal(sink.requests.length, 0, 'nothing reached the endpoint');
  await sink.stop();
});
