// Three nodes, 30,000 events × 10 endpoints, one node killed with SIGKILL
// mid-run (issue 14): nothing is lost, what arrives twice is at most what the
// dead node had in flight at the kill (its leases, unrecorded sends included),
// never two requests of one delivery at once, and the delivery log ends with
// one delivered delivery per event and endpoint. PostgreSQL only (nodes share
// a store).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { BACKEND, startNodes, startCountingSink, waitFor } from '../lib/harness.mjs';

const skip = BACKEND === 'postgres' ? false : 'several nodes need a shared store (PostgreSQL)';
const EVENTS = 30000, ENDPOINTS = 10;
const rows = (text) => (text ? text.split('\n').map((l) => l.split('|')) : []);

test('3 nodes, 30,000 events x 10 endpoints, one node killed: none lost, repeats within what it held', { skip, timeout: 900000 }, async () => {
  let sink, cluster;
  try {
    sink = await startCountingSink({ checkBody: true });
    cluster = await startNodes(3, { HOOKD_DELIVERY_LEASE: '3s', HOOKD_SERVER_LOG_LEVEL: 'warn', HOOKD_DELIVERY_TIMEOUT: '10s' });
    const [a] = cluster.nodes;
    const path = {};
    for (let i = 0; i < ENDPOINTS; i++) {
      const ep = await a.createEndpoint({ url: sink.url(`/e${i}`), event_types: ['scale.*'] });
      path[ep.id] = `/e${i}`;
    }
    const total = EVENTS * ENDPOINTS;
    cluster.sql(`INSERT INTO hookd_outbox(event_type, payload)
      SELECT 'scale.e', json_build_object('i', g)::text FROM generate_series(1, ${EVENTS}) g`);
    await waitFor(() => sink.total >= total / 3, { timeoutMs: 300000, intervalMs: 100, what: `a third of ${total} arrivals` });
    // The node holding the most leases (claimed or unrecorded: all are in hookd_inflight) dies,
    // at a moment it holds some: leases turn over in milliseconds, and between two claims a
    // node can hold none, so the kill waits for a node that holds at least 20.
    let victim;
    await waitFor(() => {
      const top = rows(cluster.sql('SELECT owner, count(*) FROM hookd_inflight GROUP BY owner ORDER BY 2 DESC LIMIT 1'));
      victim = top.length && Number(top[0][1]) >= 20 ? cluster.nodes.find((d) => d.node === top[0][0]) : undefined;
      return victim !== undefined;
    }, { timeoutMs: 60000, intervalMs: 5, what: 'a node holding at least 20 leases' });
    await victim.kill9();
    const held = new Set(rows(cluster.sql(`SELECT x.endpoint_id, COALESCE(x.event_id, d.event_id)
      FROM hookd_inflight x LEFT JOIN hookd_deliveries d ON d.id = x.delivery_id WHERE x.owner = '${victim.node}'`))
      .map(([ep, ev]) => `${path[ep]} ${ev}`));
    assert.ok(sink.distinct() < total, `killed mid-run (${sink.distinct()} of ${total} had arrived)`);
    assert.ok(held.size > 0, 'the killed node held leases');

    await waitFor(() => sink.distinct() >= total,
      { timeoutMs: 600000, intervalMs: 200, what: `all ${total} deliveries (have ${sink.distinct()})` });
    for (let i = 0; i < ENDPOINTS; i++) assert.equal(sink.distinct(`/e${i}`), EVENTS, `every event at /e${i}`);
    assert.equal(sink.bodyMismatches, 0, 'every arrival carries its event id as webhook-id');
    assert.equal(sink.overlaps, 0, 'never two requests of one delivery at once');
    const repeats = sink.repeats();
    for (const [p, id] of repeats) assert.ok(held.has(`${p} ${id}`), `${p} ${id} repeated but the dead node did not hold it`);
    assert.ok(repeats.length <= held.size, `${repeats.length} repeats, the dead node held ${held.size}`);
    console.log(`# the dead node held ${held.size} leases; ${repeats.length} deliveries repeated`);
    await waitFor(() => cluster.sql("SELECT count(*) FROM hookd_deliveries WHERE status = 'delivered'") === String(total),
      { timeoutMs: 60000, intervalMs: 200, what: 'every delivery recorded delivered' });
    assert.equal(cluster.sql('SELECT count(*), count(DISTINCT (event_id, endpoint_id)) FROM hookd_deliveries'),
      `${total}|${total}`, 'one delivery per event and endpoint');
    for (const d of cluster.nodes) if (d !== victim) assert.equal(await d.stop(), 0);
  } finally {
    await cluster?.cleanup();
    await sink?.stop();
  }
});
