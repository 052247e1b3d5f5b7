// Three nodes on one database drain a backlog to endpoints that answer at
// once: most deliveries must go out unrecorded (the fan-out's lease, then one
// row written by the first result), not through pending rows and claims.
// Before, a node waited only for endpoints it held jobs of: the nodes not
// sending to an endpoint at that moment (another node's sends filled its cap)
// put every event's delivery to it into the store, and from then on that
// backlog kept every fan-out out: 98 % of a 3-node drain went through claims.
// The caps still hold over the cluster, and each delivery arrives once.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { BACKEND, startNodes, startCountingSink, waitFor } from '../lib/harness.mjs';

const ENDPOINTS = 4;
const EVENTS = 1500;
const CAP = 8;

test('3 nodes drain a backlog mostly unrecorded, within the caps across nodes', {
  timeout: 120000, skip: BACKEND !== 'postgres' && 'several nodes share a PostgreSQL store only',
}, async () => {
  let sink, cluster;
  try {
    sink = await startCountingSink();
    cluster = await startNodes(3, { HOOKD_SERVER_LOG_LEVEL: 'warn' });
    const [a] = cluster.nodes;
    for (let k = 0; k < ENDPOINTS; k++)
      await a.createEndpoint({ url: sink.url(`/u${k}`), event_types: ['drain.*'], max_in_flight: CAP });
    // The backlog is committed while the nodes are down, and they start together (bench/'s drain).
    assert.deepEqual(await cluster.stopAll(), [0, 0, 0]);
    const values = Array.from({ length: EVENTS }, (_, i) => `('drain.x', '{"i":${i}}')`).join(',');
    cluster.sql(`INSERT INTO hookd_outbox(event_type, payload) VALUES ${values}`);
    await Promise.all(cluster.nodes.map((d) => d.start()));
    const want = ENDPOINTS * EVENTS;
    await waitFor(() => sink.distinct() >= want, { timeoutMs: 90000, intervalMs: 100,
      what: `${want} deliveries (have ${sink.distinct()})` });
    // Every result is recorded: each delivery has its row, the unrecorded ones with their attempt inline.
    await waitFor(() => Number(cluster.sql("SELECT count(*) FROM hookd_deliveries WHERE status = 'delivered'")) >= want,
      { timeoutMs: 20000, intervalMs: 100, what: 'every delivery recorded' });
    const unrecorded = Number(cluster.sql('SELECT count(*) FROM hookd_deliveries WHERE attempt1_started_at IS NOT NULL'));
    assert.ok(unrecorded >= 0.8 * want, `${unrecorded} of ${want} deliveries went out unrecorded (want 80 % at least)`);
    for (let k = 0; k < ENDPOINTS; k++)
      assert.ok(sink.maxOpenByPath.get(`/u${k}`) <= CAP, `endpoint ${k}: ${sink.maxOpenByPath.get(`/u${k}`)} open at once, cap ${CAP}`);
    assert.deepEqual(sink.repeats().slice(0, 5), [], 'no webhook-id arrived twice at one endpoint');
    assert.equal(sink.distinct(), want);
  } finally {
    await cluster?.cleanup();
    await sink?.stop();
  }
});
