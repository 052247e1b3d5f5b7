// An endpoint full of this node's own leases is claimed for again when one of
// them ends, not every 100 ms. Its due rows in the store wait for its own
// slots, and only the end of one of those leases (a result, or a lease given
// back) can free one: each such end asks for a claim. Before, the claim that
// left its rows behind was followed by another every 100 ms for as long as the
// endpoint held its cap: about ten claims a second beside a hung endpoint,
// each walking its leased rows on the writer in front of every other
// endpoint's fan-out (bench/RESULTS.md, session 10: 39-48 claims in the
// isolation bench's paced 5 s beside 8 hung endpoints, 6-7 now). What is left
// is the safety poll (one a second). A slow endpoint with a backlog still
// drains at its cap's pace: each result's claim takes the next row.
// hookd_delivery_claims_total counts the claims.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { BACKEND, startDaemon, startCountingSink, waitFor, sleep, metricValue } from '../lib/harness.mjs';

const WINDOW = 64;
const CAP = 4;
const SLOW_ROWS = 60;
const SLOW_MS = 150;
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

function backlog(d, type, n) {
  d.sql(`WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM c WHERE i < ${n})
    INSERT INTO hookd_outbox(event_type, payload) SELECT '${type}', '{"i":' || i || '}' FROM c`);
}

test(`an endpoint full of our own leases is not claimed for every 100 ms (${BACKEND})`, { timeout: 120000 }, async () => {
  let d, sink;
  try {
    sink = await startCountingSink({ delayMs: (n, req) => (req.url === '/hung' ? Infinity : req.url === '/slow' ? SLOW_MS : 0) });
    d = await startDaemon(env);
    await d.createEndpoint({ url: sink.url('/hung'), event_types: ['own.hung'] });
    backlog(d, 'own.hung', 3 * WINDOW);
    await waitFor(() => (sink.openByPath.get('/hung') || 0) >= CAP, { what: 'the hung endpoint to hold its cap' });
    await sleep(500); // the fan-out's claims are over

    const before = await claims(d);
    const t0 = Date.now();
    await sleep(4000);
    const seconds = (Date.now() - t0) / 1000;
    const ran = (await claims(d)) - before;
    // The safety poll (one a second) and a little room; the idle re-claim ran about ten a second.
    const bound = 2 + Math.ceil(1.5 * seconds);
    console.log(`# ${seconds.toFixed(1)} s beside the hung endpoint at its cap: ${ran} claims (bound ${bound})`);
    assert.ok(ran <= bound, `${ran} claims ran in ${seconds.toFixed(1)} s while only the hung endpoint had due rows (bound ${bound})`);
    assert.ok(bound < 5 * seconds, 'the bound tells a claim every 100 ms apart');
    assert.equal(sink.maxOpenByPath.get('/hung'), CAP, 'the hung endpoint held exactly its cap');

    // A slow endpoint full of its leases drains at its cap's pace: each result's claim takes the next row
    // (waiting for the safety poll instead would take about SLOW_ROWS / CAP seconds).
    await d.createEndpoint({ url: sink.url('/slow'), event_types: ['own.slow'] });
    const t1 = Date.now();
    backlog(d, 'own.slow', SLOW_ROWS);
    await waitFor(() => sink.distinct('/slow') >= SLOW_ROWS, { timeoutMs: 60000, what: 'the slow endpoint\'s backlog' });
    const drained = (Date.now() - t1) / 1000;
    const alone = (SLOW_ROWS / CAP) * (SLOW_MS / 1000);
    console.log(`# ${SLOW_ROWS} rows to a ${SLOW_MS} ms endpoint at cap ${CAP}: ${drained.toFixed(1)} s (${alone.toFixed(2)} s at its pace)`);
    assert.ok(drained < alone + 6, `the slow endpoint's ${SLOW_ROWS} rows took ${drained.toFixed(1)} s`);
    assert.ok(alone + 6 < SLOW_ROWS / CAP, 'the bound tells a claim per safety poll apart');
    assert.ok(sink.maxOpenByPath.get('/slow') <= CAP, 'the slow endpoint never exceeded its cap');
  } finally {
    await d?.cleanup();
    await sink?.stop();
  }
});
