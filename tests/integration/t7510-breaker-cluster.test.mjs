// The breaker is cluster-wide: when an endpoint's failures open its breaker,
// every node stops sending to it, not only the node whose attempts opened it.
// A node sees a breaker opened elsewhere at its next endpoint check (1 s) and
// gives its queued, unsent deliveries back to the store, where they wait for
// the probe. Forced here: two nodes each send one request at a time (a failing
// endpoint that takes 400 ms to answer 500) while the endpoint's cap lets each
// lease many, so both hold a queue when the breaker opens. PostgreSQL only.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { BACKEND, startNodes, startCountingSink, waitFor, sleep } from '../lib/harness.mjs';

const skip = BACKEND === 'postgres' ? false
  : 'a breaker opened by another node needs a shared store: run with HOOKD_TEST_BACKEND=postgres';
const EVENTS = 40;
const CHECK_MS = 1000; // the dispatcher's endpoint check
const SEND_MS = 400;

test('a breaker opened by one node stops the other node\'s queued deliveries', { skip, timeout: 60000 }, async () => {
  let sink, cluster;
  try {
    sink = await startCountingSink({ delayMs: () => SEND_MS, status: () => 500, keepArrivals: true });
    cluster = await startNodes(2, {
      HOOKD_DELIVERY_MAX_IN_FLIGHT: '1',
      HOOKD_DELIVERY_WINDOW: '10', // neither node can lease the whole backlog
      HOOKD_DELIVERY_BREAKER_FAILURES: '3',
      HOOKD_DELIVERY_BREAKER_PROBE: '30s', // no probe within the test
      HOOKD_DELIVERY_RETRY_SCHEDULE: '30s',
      HOOKD_SERVER_LOG_LEVEL: 'info',
    });
    const [a] = cluster.nodes;
    await a.createEndpoint({ url: sink.url('/f'), event_types: ['brk.*'], max_in_flight: EVENTS });
    const values = Array.from({ length: EVENTS }, (_, i) => `('brk.x', '{"i":${i}}')`).join(',');
    a.sql(`INSERT INTO hookd_outbox(event_type, payload) VALUES ${values}`);
    await waitFor(() => cluster.sql("SELECT count(*) FROM hookd_endpoint_state WHERE breaker = 'open'") === '1',
      { timeoutMs: 15000, intervalMs: 20, what: 'the breaker open' });
    const openedAt = Number(cluster.sql('SELECT opened_at FROM hookd_endpoint_state'));
    // Both nodes held queues: leases of both on open deliveries when it opened (or moments before).
    // Each node's queue of up to 10 would take 4 s more to send; seen within the check, it stops.
    await sleep(CHECK_MS + 2000);
    const late = sink.arrivals.filter(([at]) => at > openedAt + CHECK_MS + 800);
    assert.deepEqual(late, [], `no node sent after it saw the breaker (${sink.total} arrivals, ${late.length} late)`);
    // What waited on either node went back to the store unsent: no lease is left, no delivery was lost.
    assert.equal(cluster.sql(`SELECT count(*) FROM hookd_deliveries WHERE lease_owner IS NOT NULL
      AND status IN ('pending', 'retrying')`), '0');
    assert.equal(cluster.sql("SELECT count(*) FROM hookd_deliveries WHERE status IN ('pending', 'retrying')"), String(EVENTS));
    const attempts = Number(cluster.sql('SELECT count(*) FROM hookd_attempts_all'));
    assert.ok(attempts < EVENTS / 2, `${attempts} attempts of ${EVENTS}: the queues stopped`);
    // Both nodes sent before it opened (each held a queue), and the one that did not open it said why.
    const nodes = new Set(cluster.sql('SELECT DISTINCT node FROM hookd_attempts_all').split('\n'));
    assert.equal(nodes.size, 2, 'both nodes were sending');
    for (const d of cluster.nodes) assert.equal(await d.stop(), 0);
    assert.ok(cluster.nodes.some((d) => /breaker is open in the store \(opened by another node/.test(d.logs)),
      'the node that did not open it saw it in the store');
  } finally {
    await cluster?.cleanup();
    await sink?.stop();
  }
});
