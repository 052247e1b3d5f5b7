// The window's fair share beside hung endpoints. Endpoints held to their caps
// (they never answer) keep only what they hold; the rest of the window is the
// answering endpoints' to share. Before, every endpoint holding jobs counted
// alike: five hung endpoints holding 4 each cut a slow but answering
// endpoint's share of a 60-job window to 60 / (6 + 2) = 7 jobs, where
// (60 - 20) / (1 + 2) = 13 are its own to hold (queued behind its cap, ready
// the moment a slot frees), up to (60 - 20) / 2 = 20 while it counts as capped
// itself between answers. On SQLite (one node) those are leases; on a shared
// store what an endpoint has open never goes past its cap, cluster-wide,
// whatever the share (a lease whose answer came back and awaits its record
// may outlast it by a moment, so leases are not the bound there), and the
// test checks that bound.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { BACKEND, startDaemon, startCountingSink, waitFor, sleep } from '../lib/harness.mjs';

const WINDOW = 60;
const CAP = 4;
const HUNG = 5;
const OLD_SHARE = Math.floor(WINDOW / (HUNG + 1 + 2));
const NEW_SHARE = Math.floor((WINDOW - HUNG * CAP) / (1 + 2));
// The most the share can be: while the slow endpoint itself has not answered for 100 ms it counts as
// capped too (what it holds is subtracted, and it is not among the others), and the share judged then
// may last its 10 ms after its next answer.
const MOST_SHARE = Math.floor((WINDOW - HUNG * CAP) / 2);
const EVENTS = 200;
const env = {
  HOOKD_DELIVERY_WINDOW: String(WINDOW),
  HOOKD_DELIVERY_ENDPOINT_MAX_IN_FLIGHT: String(CAP),
  HOOKD_DELIVERY_TIMEOUT: '60s', // the hung requests hold their slots throughout
  HOOKD_SERVER_DRAIN_TIMEOUT: '1s',
  HOOKD_DELIVERY_BREAKER_FAILURES: '1000000',
  HOOKD_SERVER_LOG_LEVEL: process.env.T_LOG || 'warn',
};

test(`hung endpoints at their caps leave the window to an answering one (${BACKEND})`, { timeout: 120000 }, async () => {
  let d, sink;
  try {
    sink = await startCountingSink({ delayMs: (n, req) => (req.url.startsWith('/hung') ? Infinity : 100) });
    d = await startDaemon(env);
    for (let k = 0; k < HUNG; k++) await d.createEndpoint({ url: sink.url(`/hung${k}`), event_types: ['share.hung'] });
    d.sql(`WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM c WHERE i < ${HUNG * CAP})
      INSERT INTO hookd_outbox(event_type, payload) SELECT 'share.hung', '{"i":' || i || '}' FROM c`);
    await waitFor(() => {
      for (let k = 0; k < HUNG; k++) if ((sink.openByPath.get(`/hung${k}`) || 0) < CAP) return false;
      return true;
    }, { what: 'every hung endpoint to hold its cap' });

    await d.createEndpoint({ url: sink.url('/slow'), event_types: ['share.slow'] });
    d.sql(`WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM c WHERE i < ${EVENTS})
      INSERT INTO hookd_outbox(event_type, payload) SELECT 'share.slow', '{"i":' || i || '}' FROM c`);
    // Leases of the slow endpoint, sampled while its backlog drains at 4 × 10/s.
    let most = 0;
    const until = Date.now() + 3000;
    while (Date.now() < until && sink.distinct('/slow') < EVENTS) {
      const leased = Number(d.sql(`SELECT count(*) FROM hookd_deliveries_all d JOIN hookd_endpoints e ON e.id = d.endpoint_id
        WHERE e.url LIKE '%/slow' AND d.lease_owner IS NOT NULL`));
      most = Math.max(most, leased);
      await sleep(20);
    }
    console.log(`# the slow endpoint held ${most} leases at most (old share ${OLD_SHARE}, new ${NEW_SHARE}-${MOST_SHARE}, cap ${CAP})`);
    assert.equal(sink.maxOpenByPath.get('/slow'), CAP, 'the slow endpoint had its cap open, never more');
    for (let k = 0; k < HUNG; k++) assert.equal(sink.maxOpenByPath.get(`/hung${k}`), CAP, `/hung${k} held its cap only`);
    if (BACKEND === 'sqlite') {
      assert.ok(most > OLD_SHARE, `${most} leases: the hung endpoints still shrink its share to ${OLD_SHARE}`);
      assert.ok(most <= MOST_SHARE, `${most} leases, beyond the largest share ${MOST_SHARE}`);
    } else {
      assert.ok(most >= 1, 'the slow endpoint held leases while it drained');
    }
  } finally {
    await d?.cleanup();
    await sink?.stop();
  }
});
