// Ordering modes per endpoint. latest: versions 1, 2, 3 of one resource
// published while the endpoint is down reach it as version 3 only (1 and 2
// superseded, never sent after it recovers). key: resource A's endpoint answers
// 500 for a while; resource B's events keep flowing, and A's arrive in version
// order after recovery, never one before the previous is delivered. none: the
// same failures hold nothing back.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import { BACKEND, startDaemon, waitFor, sleep } from '../lib/harness.mjs';

const env = {
  HOOKD_DELIVERY_RETRY_SCHEDULE: '100ms,200ms,200ms,300ms,300ms,300ms,300ms,300ms,300ms,300ms',
  HOOKD_DELIVERY_BREAKER_FAILURES: '1000000', // about ordering, not the breaker
  HOOKD_SERVER_LOG_LEVEL: 'warn',
};

/** A receiver that logs each request's resource and version and answers fail(body) ? 500 : 200. */
async function startResourceSink(fail) {
  const sink = { log: [] };
  const server = createServer((req, res) => {
    const chunks = [];
    req.on('data', (c) => chunks.push(c));
    req.on('end', () => {
      const body = JSON.parse(Buffer.concat(chunks).toString());
      const status = fail(body) ? 500 : 200;
      sink.log.push({ at: Date.now(), id: body.id, res: body.resource?.id, v: body.resource?.version, status });
      res.writeHead(status).end();
    });
  });
  await new Promise((r) => server.listen(0, '127.0.0.1', r));
  sink.url = `http://127.0.0.1:${server.address().port}/hook`;
  sink.ok = (res) => sink.log.filter((x) => x.status === 200 && (res === undefined || x.res === res));
  sink.stop = () => new Promise((r) => { server.closeAllConnections(); server.close(() => r()); });
  return sink;
}

const publish = (d, res, v) => d.publish({ type: 'sub.updated', resource: { type: 'sub', id: res, version: v }, data: { v } });

test(`latest: versions 1, 2, 3 published while down arrive as version 3 only (${BACKEND})`, { timeout: 60000 }, async () => {
  let d, sink;
  let down = true;
  try {
    sink = await startResourceSink(() => down);
    d = await startDaemon(env);
    await d.createEndpoint({ url: sink.url, ordering: 'latest', event_types: ['sub.*'] });
    const evs = [];
    for (let v = 1; v <= 3; v++) {
      evs.push(await publish(d, 'A', v));
      await sleep(150); // each one's first attempt has failed before the next version comes
    }
    await waitFor(async () => (await d.deliveriesOf(evs[1].id))[0].status === 'superseded', { what: 'v2 superseded' });
    const recoveredAt = Date.now();
    down = false;
    const [v3] = await d.waitDelivery(evs[2].id, 'delivered');
    assert.equal(v3.status, 'delivered');
    for (const e of evs.slice(0, 2)) assert.equal((await d.deliveriesOf(e.id))[0].status, 'superseded');
    await sleep(500);
    assert.deepEqual(sink.ok().map((x) => x.v), [3], 'only version 3 was delivered');
    assert.deepEqual(sink.log.filter((x) => x.at >= recoveredAt).map((x) => x.v), [3],
      'after recovery only version 3 was sent');
    // An older version published after a newer one was delivered is superseded at once, never sent.
    const late = await publish(d, 'A', 2);
    await d.waitDelivery(late.id, 'superseded');
    await sleep(300);
    assert.deepEqual(sink.ok().map((x) => x.v), [3]);
  } finally {
    await d?.cleanup();
    await sink?.stop();
  }
});

/** Publishes A1..A3 and B1..B3 interleaved; A fails until recovered; returns the sink and events. */
async function keyScenario(d, sink, ordering, state) {
  await d.createEndpoint({ url: sink.url, ordering, event_types: ['sub.*'] });
  const evs = [];
  for (let v = 1; v <= 3; v++) {
    evs.push(await publish(d, 'A', v));
    evs.push(await publish(d, 'B', v));
  }
  // B flows while A fails.
  await waitFor(() => sink.ok('B').length === 3, { what: 'B delivered while A fails' });
  return evs;
}

test(`key: a failing resource holds only itself back, and arrives in version order (${BACKEND})`, { timeout: 60000 }, async () => {
  let d, sink;
  const state = { aDown: true };
  try {
    sink = await startResourceSink((b) => b.resource.id === 'A' && state.aDown);
    d = await startDaemon(env);
    const evs = await keyScenario(d, sink, 'key', state);
    assert.deepEqual(sink.ok('B').map((x) => x.v), [1, 2, 3], 'B in order');
    // While A1 fails, A2 and A3 are never sent.
    await sleep(400);
    assert.ok(sink.log.filter((x) => x.res === 'A').every((x) => x.v === 1), 'only A1 is tried while it fails');
    state.aDown = false;
    for (const e of evs) await d.waitDelivery(e.id, 'delivered');
    const a = sink.log.filter((x) => x.res === 'A');
    assert.deepEqual(sink.ok('A').map((x) => x.v), [1, 2, 3], 'A in version order after recovery');
    // Each version was first sent after the previous one was delivered.
    for (let v = 2; v <= 3; v++) {
      const prevOk = a.findIndex((x) => x.v === v - 1 && x.status === 200);
      const first = a.findIndex((x) => x.v === v);
      assert.ok(prevOk >= 0 && first > prevOk, `A${v} first sent after A${v - 1} was delivered`);
    }
  } finally {
    await d?.cleanup();
    await sink?.stop();
  }
});

test(`none: a failing resource holds nothing back (${BACKEND})`, { timeout: 60000 }, async () => {
  let d, sink;
  const state = { aDown: true };
  try {
    sink = await startResourceSink((b) => b.resource.id === 'A' && state.aDown);
    d = await startDaemon(env);
    const evs = await keyScenario(d, sink, 'none', state);
    await waitFor(() => new Set(sink.log.filter((x) => x.res === 'A').map((x) => x.v)).size === 3,
      { what: 'A2 and A3 sent while A1 fails' });
    state.aDown = false;
    for (const e of evs) await d.waitDelivery(e.id, 'delivered');
  } finally {
    await d?.cleanup();
    await sink?.stop();
  }
});
