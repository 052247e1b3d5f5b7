// A node's window holding deliveries longer than their lease: without renewal
// (t7500 tests it) a delivery that waited in the queue past its lease could be
// sent by this node while another node, having claimed it once the lease ran
// out, sent it too. Forced here: each node sends one request at a
// time (max_in_flight 1) to a sink that takes 300 ms, while the endpoint's cap
// (10) lets a node lease ten at once, with a 2 s lease: the tenth waits about
// 3 s. A node now gives back a lease that cannot cover the attempt instead of
// sending on it. On PostgreSQL with two nodes (the repeat needs a second node);
// on SQLite one node, whose own claims renew what it holds.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { BACKEND, startDaemon, startNodes, startCountingSink, waitFor, sleep } from '../lib/harness.mjs';

const EVENTS = 24;

test('a queue longer than the lease: each delivery sent once, one attempt each', { timeout: 90000 }, async () => {
  let sink, cluster, single;
  try {
    sink = await startCountingSink({ delayMs: () => 300 });
    const env = { HOOKD_DELIVERY_LEASE: '2s', HOOKD_DELIVERY_TIMEOUT: '1s', HOOKD_DELIVERY_MAX_IN_FLIGHT: '1' };
    let nodes;
    if (BACKEND === 'postgres') {
      cluster = await startNodes(2, env);
      nodes = cluster.nodes;
    } else {
      single = await startDaemon(env);
      nodes = [single];
    }
    const [a] = nodes;
    await a.createEndpoint({ url: sink.url('/w'), event_types: ['win.*'], max_in_flight: 10 });
    const values = Array.from({ length: EVENTS }, (_, i) => `('win.x', '{"i":${i}}')`).join(',');
    a.sql(`INSERT INTO hookd_outbox(event_type, payload) VALUES ${values}`);
    await waitFor(() => sink.distinct('/w') >= EVENTS,
      { timeoutMs: 60000, intervalMs: 100, what: `${EVENTS} deliveries (have ${sink.distinct('/w')})` });
    await waitFor(() => a.sql("SELECT count(*) FROM hookd_deliveries WHERE status = 'delivered'") === String(EVENTS),
      { timeoutMs: 15000, intervalMs: 100, what: 'every delivery recorded delivered' });
    await sleep(500); // a late second send would arrive by now
    assert.deepEqual(sink.repeats(), [], 'no webhook-id arrived twice');
    assert.equal(sink.total, EVENTS);
    assert.equal(a.sql('SELECT count(*), count(DISTINCT delivery_id) FROM hookd_attempts_all'), `${EVENTS}|${EVENTS}`);
    for (const d of nodes) assert.equal(await d.stop(), 0);
  } finally {
    await cluster?.cleanup();
    await single?.cleanup();
    await sink?.stop();
  }
});
