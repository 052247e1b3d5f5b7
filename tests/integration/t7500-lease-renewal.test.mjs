// Lease renewal: a node extends the leases of the deliveries it holds every
// third of the lease, so an attempt that takes longer than the lease (a slow
// endpoint, its timeout well past the lease) is sent once, never again by
// another node meanwhile; a node killed mid-attempt stops renewing, and
// another node takes its delivery over once the lease has run out, within
// about the lease. On PostgreSQL with two nodes; on SQLite one node (renewal
// runs there too and must not disturb anything).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { BACKEND, startDaemon, startNodes, startCountingSink, waitFor, sleep } from '../lib/harness.mjs';

const LEASE_MS = 1000;
const SLOW_MS = 3500; // three and a half leases
const EVENTS = 6;

/** Nodes on one store: two on PostgreSQL, one on SQLite. */
async function nodesFor(env) {
  if (BACKEND === 'postgres') {
    const cluster = await startNodes(2, env);
    return { nodes: cluster.nodes, cleanup: () => cluster.cleanup() };
  }
  const d = await startDaemon(env);
  return { nodes: [d], cleanup: () => d.cleanup() };
}

test('attempts longer than the lease: each sent once, the lease kept alive meanwhile', { timeout: 60000 }, async () => {
  let sink, set;
  try {
    sink = await startCountingSink({ delayMs: () => SLOW_MS });
    set = await nodesFor({ HOOKD_DELIVERY_LEASE: `${LEASE_MS}ms`, HOOKD_DELIVERY_TIMEOUT: '10s' });
    const [a] = set.nodes;
    await a.createEndpoint({ url: sink.url('/slow'), event_types: ['renew.*'], max_in_flight: EVENTS });
    const values = Array.from({ length: EVENTS }, (_, i) => `('renew.x', '{"i":${i}}')`).join(',');
    a.sql(`INSERT INTO hookd_outbox(event_type, payload) VALUES ${values}`);
    await waitFor(() => sink.distinct('/slow') >= EVENTS,
      { timeoutMs: 15000, intervalMs: 50, what: `${EVENTS} arrivals (have ${sink.distinct('/slow')})` });
    // Two leases into the attempts: every lease still runs, held by the node that sends it.
    await sleep(2 * LEASE_MS);
    const now = Date.now();
    // On PostgreSQL a first attempt is unrecorded (DESIGN §3): its lease is its hookd_inflight row, and the
    // delivery's row is written with its result.
    const leases = a.sql(BACKEND === 'postgres'
      ? 'SELECT owner, lease_until FROM hookd_inflight'
      : `SELECT lease_owner, lease_until FROM hookd_deliveries WHERE status IN ('pending', 'retrying')`)
      .split('\n').filter(Boolean).map((l) => l.split('|'));
    assert.equal(leases.length, EVENTS, 'every delivery still open (in flight)');
    for (const [owner, until] of leases) {
      assert.ok(owner, 'leased');
      assert.ok(Number(until) > now, `the lease runs (ends ${Number(until) - now} ms from now)`);
    }
    if (BACKEND === 'postgres') {
      // The caps count hookd_inflight: it follows the renewed leases.
      assert.equal(a.sql(`SELECT count(*) FROM hookd_inflight WHERE lease_until > ${now}`), String(EVENTS));
    }
    await waitFor(() => a.sql("SELECT count(*) FROM hookd_deliveries WHERE status = 'delivered'") === String(EVENTS),
      { timeoutMs: 15000, intervalMs: 100, what: 'every delivery recorded delivered' });
    await sleep(LEASE_MS + 500); // a second send by another node would have started by now
    assert.deepEqual(sink.repeats(), [], 'no webhook-id arrived twice');
    assert.equal(sink.total, EVENTS);
    assert.equal(a.sql('SELECT count(*), count(DISTINCT delivery_id) FROM hookd_attempts_all'), `${EVENTS}|${EVENTS}`);
    assert.equal(a.sql('SELECT count(*) FROM hookd_deliveries WHERE lease_owner IS NOT NULL'), '0');
    for (const d of set.nodes) assert.equal(await d.stop(), 0);
  } finally {
    await set?.cleanup();
    await sink?.stop();
  }
});

test('a node killed mid-attempt: another takes the delivery over after the lease, within about the lease',
  { skip: BACKEND === 'postgres' ? false : 'takeover needs a second node on a shared store', timeout: 60000 },
  async () => {
    let sink, cluster;
    try {
      // The first arrival never gets an answer (its node dies meanwhile); the next ones get 200.
      sink = await startCountingSink({ delayMs: (n) => (n === 1 ? Infinity : 0), keepArrivals: true });
      cluster = await startNodes(2, { HOOKD_DELIVERY_LEASE: `${LEASE_MS}ms`, HOOKD_DELIVERY_TIMEOUT: '30s' });
      const [a] = cluster.nodes;
      await a.createEndpoint({ url: sink.url('/k'), event_types: ['kill.*'] });
      a.sql(`INSERT INTO hookd_outbox(event_type, payload) VALUES ('kill.x', '{"i":1}')`);
      await waitFor(() => sink.total >= 1, { timeoutMs: 10000, intervalMs: 20, what: 'the first arrival' });
      // Renewed while it hangs: past two leases, the sending node still holds it and nobody sent it again.
      await sleep(2 * LEASE_MS);
      assert.equal(sink.total, 1, 'not sent again while its node renews the lease');
      // Its first attempt is unrecorded (DESIGN §3): the lease is a hookd_inflight row, no delivery row yet.
      assert.equal(cluster.sql('SELECT count(*) FROM hookd_deliveries'), '0', 'no row before its first result');
      const owner = cluster.sql('SELECT owner FROM hookd_inflight WHERE event_id IS NOT NULL');
      const victim = cluster.nodes.find((d) => d.node === owner);
      assert.ok(victim, `a node holds it (${owner})`);
      await victim.kill9();
      const killedAt = Date.now();
      const until = Number(cluster.sql('SELECT lease_until FROM hookd_inflight'));
      assert.ok(until - killedAt <= LEASE_MS + 100, `the lease ends within the lease (${until - killedAt} ms)`);
      await waitFor(() => sink.total >= 2, { timeoutMs: 10000, intervalMs: 20, what: 'the takeover' });
      const [[, , firstId], [at, , secondId]] = sink.arrivals;
      assert.equal(secondId, firstId, 'the same webhook-id, sent again');
      assert.ok(at >= until - 20, `taken over ${until - at} ms before the lease ran out`);
      // Found at the survivor's next claim (its safety poll is 1 s).
      assert.ok(at - killedAt <= LEASE_MS + 1000 + 1000, `taken over ${at - killedAt} ms after the kill`);
      await waitFor(() => cluster.sql("SELECT status FROM hookd_deliveries") === 'delivered',
        { timeoutMs: 10000, what: 'recorded delivered' });
      const survivor = cluster.nodes.find((d) => d !== victim);
      assert.equal(cluster.sql('SELECT node FROM hookd_attempts_all'), survivor.node, 'one attempt, the survivor\'s');
      assert.equal(await survivor.stop(), 0);
    } finally {
      await cluster?.cleanup();
      await sink?.stop();
    }
  });
