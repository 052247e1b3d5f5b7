// Claims wait for the endpoints they held back, not for everyone's results.
// A hung endpoint at its cap with a backlog in the store is held: its rows wait
// for its own slots. A healthy endpoint beside it, sent one event at a time,
// leases each at fan-out and needs no claim. Before, every result of the
// healthy endpoint asked for a claim (the last claim had left due rows
// behind), and each claim walked the hung endpoint's leased rows on the
// writer, in front of the healthy endpoint's next fan-out: a 500/s stream beside
// 8 hung endpoints ran about 1,000 claims in 6 s where it runs about 25 now
// (bench/RESULTS.md, session 9). hookd_delivery_claims_total counts them; what
// is left is the idle re-claim of held rows (about ten a second).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { BACKEND, startDaemon, startCountingSink, waitFor, metricValue } from '../lib/harness.mjs';

const WINDOW = 64;
const CAP = 4;
const HEALTHY = 100;
const env = {
  HOOKD_DELIVERY_WINDOW: String(WINDOW),
  HOOKD_DELIVERY_ENDPOINT_MAX_IN_FLIGHT: String(CAP),
  HOOKD_DELIVERY_TIMEOUT: '60s', // the hung requests hold their slots throughout
  HOOKD_SERVER_DRAIN_TIMEOUT: '1s',
  HOOKD_DELIVERY_BREAKER_FAILURES: '1000000',
  HOOKD_SERVER_METRICS_REFRESH: '0s',
  HOOKD_ALERTS_ENABLED: 'false',
  HOOKD_SERVER_LOG_LEVEL: process.env.T_LOG || 'warn',
};

const claims = (d) => metricValue(d, 'hookd_delivery_claims_total');

test(`results of an endpoint no claim waits for ask for no claim (${BACKEND})`, { timeout: 120000 }, async () => {
  let d, sink;
  try {
    sink = await startCountingSink({ delayMs: (n, req) => (req.url === '/hung' ? Infinity : 0) });
    d = await startDaemon(env);
    await d.createEndpoint({ url: sink.url('/hung'), event_types: ['held.hung'] });
    await d.createEndpoint({ url: sink.url('/healthy'), event_types: ['held.healthy'] });
    d.sql(`WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM c WHERE i < ${3 * WINDOW})
      INSERT INTO hookd_outbox(event_type, payload) SELECT 'held.hung', '{"i":' || i || '}' FROM c`);
    await waitFor(() => (sink.openByPath.get('/hung') || 0) >= CAP, { what: 'the hung endpoint to hold its cap' });
    // Its whole backlog fanned out (the rows behind its cap wait in the store): what follows is the steady state.
    await waitFor(() => Number(d.sql(`SELECT count(*) FROM hookd_deliveries_all`)) >= 3 * WINDOW,
      { what: 'the hung backlog to be fanned out' });

    const before = await claims(d);
    const t0 = Date.now();
    for (let i = 0; i < HEALTHY; i++) {
      await d.publish({ type: 'held.healthy', data: { i } });
      await waitFor(() => sink.distinct('/healthy') >= i + 1, { timeoutMs: 30000, intervalMs: 2, what: `healthy event ${i}` });
    }
    const seconds = (Date.now() - t0) / 1000;
    const ran = (await claims(d)) - before;
    // The idle re-claims of the held rows (100 ms apart) and a few more; one per healthy result would be HEALTHY more.
    const bound = 20 + Math.ceil(15 * seconds);
    console.log(`# ${HEALTHY} healthy events one at a time in ${seconds.toFixed(1)} s: ${ran} claims (bound ${bound})`);
    assert.ok(ran <= bound, `${ran} claims ran while ${HEALTHY} healthy events went one at a time (bound ${bound})`);
    assert.ok(bound < HEALTHY + 10 * seconds, 'the bound tells one claim per healthy result apart');
    assert.equal(sink.maxOpenByPath.get('/hung'), CAP, 'the hung endpoint held exactly its cap');
    assert.equal(sink.distinct('/healthy'), HEALTHY);
  } finally {
    await d?.cleanup();
    await sink?.stop();
  }
});
