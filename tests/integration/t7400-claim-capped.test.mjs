// The claim's list of capped endpoints (those that have not answered within
// 100 ms) was counted and then filled in two passes, each reading the clock:
// an endpoint whose last answer turned 100 ms old between the two was counted
// out and filled in, past the end of the list (a heap overflow; under ASan the
// node aborts with exit code 1, its leases run out and other nodes send those
// deliveries again). Many endpoints answering about every 100 ms, and claims
// running all the time (a small window over a backlog), keep endpoints
// crossing that line while claims are made. The crash is timing-dependent:
// before the fix this scenario aborted a node under ASan on PostgreSQL (two
// nodes: claims run after every fan-out that leaves rows to the caps) on a
// loaded machine; on SQLite claims are rarer and it did not show. Both stores
// run it; a node lost to it would also show as deliveries sent twice.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { BACKEND, startDaemon, startNodes, startCountingSink, waitFor } from '../lib/harness.mjs';

const ENDPOINTS = 200;
const EVENTS = 12;

test('claims while endpoints keep crossing the 100 ms answering line: no node dies, each delivery once', { timeout: 90000 }, async () => {
  let sink, cluster, single;
  try {
    // About 100 ms per answer, one request at a time per endpoint: each endpoint's
    // last answer keeps turning 100 ms old, again and again.
    sink = await startCountingSink({ delayMs: (n) => 90 + (n % 21) });
    const env = { HOOKD_DELIVERY_WINDOW: '64', HOOKD_SERVER_LOG_LEVEL: 'warn', HOOKD_DELIVERY_TIMEOUT: '10s' };
    let nodes;
    if (BACKEND === 'postgres') {
      cluster = await startNodes(2, env);
      nodes = cluster.nodes;
    } else {
      single = await startDaemon(env);
      nodes = [single];
    }
    const [a] = nodes;
    for (let k = 0; k < ENDPOINTS; k++)
      await a.createEndpoint({ url: sink.url(`/c${k}`), event_types: ['cap.*'], max_in_flight: 1 });
    const values = Array.from({ length: EVENTS }, (_, i) => `('cap.x', '{"i":${i}}')`).join(',');
    a.sql(`INSERT INTO hookd_outbox(event_type, payload) VALUES ${values}`);
    const want = ENDPOINTS * EVENTS;
    await waitFor(() => sink.distinct() >= want || nodes.some((d) => d.child.exitCode !== null),
      { timeoutMs: 75000, intervalMs: 100, what: `${want} deliveries (have ${sink.distinct()})` });
    for (const d of nodes) {
      assert.equal(d.child.exitCode, null, `node ${d.node} died: ${d.child.stderrText.slice(0, 2000)}`);
      assert.doesNotMatch(d.child.stderrText, /AddressSanitizer|runtime error/);
    }
    assert.equal(sink.distinct(), want);
    assert.deepEqual(sink.repeats().slice(0, 5), [], 'no webhook-id arrived twice at one endpoint');
    for (const d of nodes) assert.equal(await d.stop(), 0, `node ${d.node} exits cleanly`);
  } finally {
    await cluster?.cleanup();
    await single?.cleanup();
    await sink?.stop();
  }
});
