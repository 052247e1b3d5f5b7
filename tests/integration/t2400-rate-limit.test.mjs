// Rate limits: an endpoint with rate_limit 5 (deliveries per second, burst 5)
// gets 50 events as a burst of 5, then 5 a second: the run spans (50 - 5) / 5
// = 9 s, not less than 20 % under (the limit holds) nor more than 50 % over
// (the limit is not stricter than asked; the slack is for a loaded machine,
// where late sends only ever lengthen the run), and no second holds more than
// the burst and the rate. On PostgreSQL the same with three nodes: the bucket
// is the cluster's.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { BACKEND, startDaemon, startNodes, startCountingSink, waitFor } from '../lib/harness.mjs';

const RATE = 5;
const EVENTS = 50;

function bulk(d, type, n) {
  d.sql(`WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM c WHERE i < ${n})
    INSERT INTO hookd_outbox(event_type, payload) SELECT '${type}', '{"i":' || i || '}' FROM c`);
}

/** Checks the spacing of the arrivals at the sink. */
function checkSpacing(sink) {
  const t = sink.arrivals.map((a) => a[0]).sort((a, b) => a - b);
  assert.equal(t.length, EVENTS, 'every event arrived once');
  const span = (t[t.length - 1] - t[0]) / 1000;
  const want = (EVENTS - RATE) / RATE;
  console.log(`# ${EVENTS} arrivals over ${span.toFixed(2)} s (expected ${want} s at ${RATE}/s, burst ${RATE})`);
  assert.ok(span >= want * 0.8 && span <= want * 1.5, `span ${span.toFixed(2)} s, expected ${want} s (-20 %, +50 %)`);
  // No second holds more than the burst plus a second's worth (20 % slack for timing).
  for (let i = 0; i < t.length; i++) {
    let n = 0;
    while (i + n < t.length && t[i + n] < t[i] + 1000) n++;
    assert.ok(n <= Math.ceil((RATE + RATE) * 1.2), `${n} arrivals within one second from arrival ${i}`);
  }
  // After the first burst the pace is the rate: the last 40 took about 8 s.
  const tail = (t[t.length - 1] - t[9]) / 1000;
  assert.ok(tail >= 8 * 0.8 && tail <= 8 * 1.5, `the last 40 arrivals took ${tail.toFixed(2)} s, expected 8 s (-20 %, +50 %)`);
}

test(`rate_limit ${RATE}: ${EVENTS} events arrive spaced at ${RATE}/s (${BACKEND})`, { timeout: 60000 }, async () => {
  let d, sink;
  try {
    sink = await startCountingSink({ keepArrivals: true });
    d = await startDaemon({ HOOKD_SERVER_LOG_LEVEL: 'warn' });
    const ep = await d.createEndpoint({ url: sink.url('/rl'), rate_limit: RATE, event_types: ['rl.*'] });
    assert.equal(ep.rate_limit, RATE);
    bulk(d, 'rl.x', EVENTS);
    await waitFor(() => sink.total >= EVENTS, { timeoutMs: 30000, intervalMs: 50, what: `${EVENTS} arrivals` });
    checkSpacing(sink);
  } finally {
    await d?.cleanup();
    await sink?.stop();
  }
});

const skip = BACKEND === 'postgres' ? false : 'three nodes need a shared store (HOOKD_TEST_BACKEND=postgres)';

test(`rate_limit ${RATE} holds across three nodes (${BACKEND})`, { skip, timeout: 90000 }, async () => {
  let cluster, sink;
  try {
    sink = await startCountingSink({ keepArrivals: true });
    cluster = await startNodes(3, { HOOKD_SERVER_LOG_LEVEL: 'warn' });
    await cluster.nodes[0].createEndpoint({ url: sink.url('/rl'), rate_limit: RATE, event_types: ['rl.*'] });
    bulk(cluster.nodes[0], 'rl.x', EVENTS);
    await waitFor(() => sink.total >= EVENTS, { timeoutMs: 30000, intervalMs: 50, what: `${EVENTS} arrivals` });
    checkSpacing(sink);
    const byNode = cluster.sql('SELECT count(DISTINCT node) FROM hookd_attempts_all');
    console.log(`# attempts made by ${byNode} nodes`);
  } finally {
    await cluster?.cleanup();
    await sink?.stop();
  }
});
