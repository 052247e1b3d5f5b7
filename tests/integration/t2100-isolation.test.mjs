// Isolation: an endpoint that accepts and never answers takes nothing from a
// healthy one. (a) Its backlog is three times the dispatcher's window; (b) more
// such endpoints than the global in-flight cap divided by the per-endpoint cap.
// In both, no hung endpoint ever has more requests open than its cap, and the
// healthy endpoint's events arrive in about the time they take alone
// (measured first, in the same test). Were the healthy one starved, its
// events would wait for the hung requests to time out (HUNG_TIMEOUT_MS); the
// bound sits well below that and well above a loaded machine's noise, so it
// catches starvation without timing the machine.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { BACKEND, startDaemon, startCountingSink, waitFor } from '../lib/harness.mjs';

const WINDOW = 64;
const GLOBAL_CAP = 16;
const CAP = 4;
const HEALTHY_EVENTS = 300;
const HUNG_TIMEOUT_MS = 30000;
/** Beside the hung endpoints: three times the time alone plus 3 s of slack, always under the hung timeout. */
const boundFor = (alone) => Math.min(3 * alone + 3000, HUNG_TIMEOUT_MS / 2);
const env = {
  HOOKD_DELIVERY_WINDOW: String(WINDOW),
  HOOKD_DELIVERY_MAX_IN_FLIGHT: String(GLOBAL_CAP),
  HOOKD_DELIVERY_ENDPOINT_MAX_IN_FLIGHT: String(CAP),
  // Far longer than the healthy runs: the hung requests hold their slots throughout, and starving the
  // healthy endpoint would cost it this long.
  HOOKD_DELIVERY_TIMEOUT: `${HUNG_TIMEOUT_MS}ms`,
  HOOKD_SERVER_DRAIN_TIMEOUT: '1s', // at the end the hung requests are abandoned, not waited for
  HOOKD_DELIVERY_BREAKER_FAILURES: '1000000', // this test is about caps and shares, not the breaker
  HOOKD_SERVER_LOG_LEVEL: process.env.T_LOG || 'warn',
};

/** Inserts n events of one type in one application transaction (plain SQL, both stores). */
function bulk(d, type, n) {
  d.sql(`WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM c WHERE i < ${n})
    INSERT INTO hookd_outbox(event_type, payload) SELECT '${type}', '{"i":' || i || '}' FROM c`);
}

/** Milliseconds until every one of n events of a fresh batch reached path (counting from before the insert). */
async function timeHealthy(d, sink, path, type, n) {
  const before = sink.distinct(path);
  const t0 = Date.now();
  bulk(d, type, n);
  await waitFor(() => sink.distinct(path) >= before + n,
    { timeoutMs: 90000, intervalMs: 5, what: `${n} events at ${path} (have ${sink.distinct(path) - before})` });
  return Date.now() - t0;
}

test(`a hung endpoint with a backlog of 3 x the window (${3 * WINDOW}) does not slow a healthy one (${BACKEND})`,
  { timeout: 120000 }, async () => {
    let d, sink;
    try {
      sink = await startCountingSink({ delayMs: (n, req) => (req.url === '/hung' ? Infinity : 0) });
      d = await startDaemon(env);
      await d.createEndpoint({ url: sink.url('/healthy'), event_types: ['iso.healthy'] });
      const alone = await timeHealthy(d, sink, '/healthy', 'iso.healthy', HEALTHY_EVENTS);

      await d.createEndpoint({ url: sink.url('/hung'), event_types: ['iso.hung'] });
      bulk(d, 'iso.hung', 3 * WINDOW);
      await waitFor(() => (sink.openByPath.get('/hung') || 0) >= CAP, { what: 'the hung endpoint to hold its cap' });
      const beside = await timeHealthy(d, sink, '/healthy', 'iso.healthy', HEALTHY_EVENTS);
      const bound = boundFor(alone);
      console.log(`# healthy alone ${alone} ms, beside a hung backlog ${beside} ms (bound ${bound} ms)`);
      assert.ok(beside <= bound, `healthy took ${beside} ms beside the hung endpoint, alone ${alone} ms`);
      assert.equal(sink.maxOpenByPath.get('/hung'), CAP, 'the hung endpoint held exactly its cap, never more');
      // Its backlog waits in the store, not in memory: most of it was never leased.
      // hookd_deliveries_all: on PostgreSQL those in flight before their first result have no row yet (DESIGN §3).
      const leased = Number(d.sql(`SELECT count(*) FROM hookd_deliveries_all d JOIN hookd_endpoints e ON e.id = d.endpoint_id
        WHERE e.url LIKE '%/hung' AND d.lease_owner IS NOT NULL`));
      assert.ok(leased <= WINDOW, `the hung endpoint holds ${leased} leases, at most the window`);
      assert.equal(d.sql(`SELECT count(*) FROM hookd_deliveries_all d JOIN hookd_endpoints e ON e.id = d.endpoint_id
        WHERE e.url LIKE '%/hung'`), String(3 * WINDOW), 'every hung delivery is recorded');
    } finally {
      await d?.cleanup();
      await sink?.stop();
    }
  });

const HUNG = GLOBAL_CAP / CAP + 1; // more hung endpoints than the global cap divided by the per-endpoint cap

test(`${HUNG} hung endpoints (global cap ${GLOBAL_CAP}, ${CAP} each) do not slow a healthy one (${BACKEND})`,
  { timeout: 120000 }, async () => {
    let d, sink;
    try {
      sink = await startCountingSink({ delayMs: (n, req) => (req.url.startsWith('/hung') ? Infinity : 0) });
      d = await startDaemon(env);
      await d.createEndpoint({ url: sink.url('/healthy'), event_types: ['iso.healthy'] });
      const alone = await timeHealthy(d, sink, '/healthy', 'iso.healthy', HEALTHY_EVENTS);

      for (let k = 0; k < HUNG; k++) await d.createEndpoint({ url: sink.url(`/hung${k}`), event_types: ['iso.hung'] });
      const before = sink.distinct('/healthy');
      const t0 = Date.now();
      // One application transaction with both: hung endpoints' events first, the healthy one's after them.
      d.sql(`WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM c WHERE i < ${HEALTHY_EVENTS + 2 * WINDOW})
        INSERT INTO hookd_outbox(event_type, payload)
        SELECT CASE WHEN i <= ${2 * WINDOW} THEN 'iso.hung' ELSE 'iso.healthy' END, '{"i":' || i || '}' FROM c`);
      await waitFor(() => sink.distinct('/healthy') >= before + HEALTHY_EVENTS,
        { timeoutMs: 60000, intervalMs: 5, what: 'the healthy events' });
      const beside = Date.now() - t0;
      const bound = boundFor(alone);
      let hungOpen = 0;
      for (let k = 0; k < HUNG; k++) hungOpen += sink.openByPath.get(`/hung${k}`) || 0;
      console.log(`# healthy alone ${alone} ms, beside ${HUNG} hung endpoints ${beside} ms (bound ${bound} ms); ` +
        `hung requests open: ${hungOpen}`);
      assert.ok(beside <= bound, `healthy took ${beside} ms beside ${HUNG} hung endpoints, alone ${alone} ms`);
      for (let k = 0; k < HUNG; k++) {
        const most = sink.maxOpenByPath.get(`/hung${k}`) || 0;
        assert.ok(most >= 1 && most <= CAP, `/hung${k} had ${most} requests open at most (cap ${CAP})`);
      }
      assert.ok(hungOpen >= HUNG, 'the hung endpoints were holding requests open throughout');
    } finally {
      await d?.cleanup();
      await sink?.stop();
    }
  });
