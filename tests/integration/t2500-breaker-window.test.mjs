// A delivery whose retry window ends while its endpoint's breaker is open gets
// no attempt that could find it past the window: it is marked `dead` then (with
// the reason), without a request, and without waiting for a probe. Deliveries of
// an endpoint whose breaker is closed are left alone, and a delivery in flight
// (leased) is never touched.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import { BACKEND, startDaemon, waitFor } from '../lib/harness.mjs';

const WINDOW_MS = 3000;
const EVENTS = 40;

/** A receiver answering 500 (failing) or 200, chosen per path, counting requests. */
async function startSink() {
  const sink = { requests: 0 };
  const server = createServer((req, res) => {
    sink.requests++;
    req.resume();
    req.on('end', () => res.writeHead(req.url.startsWith('/fail') ? 500 : 200).end());
  });
  await new Promise((r) => server.listen(0, '127.0.0.1', r));
  sink.base = `http://127.0.0.1:${server.address().port}`;
  sink.stop = () => new Promise((r) => { server.closeAllConnections(); server.close(() => r()); });
  return sink;
}

test(`breaker: deliveries waiting past their retry window while the breaker is open become dead (${BACKEND})`,
  { timeout: 60000 }, async () => {
    let d, sink;
    try {
      sink = await startSink();
      d = await startDaemon({
        HOOKD_DELIVERY_BREAKER_FAILURES: '3',
        HOOKD_DELIVERY_BREAKER_PROBE: '60s', // no probe during the test: only the expiry can end them
        HOOKD_DELIVERY_BREAKER_PROBE_MAX: '60s',
        HOOKD_DELIVERY_RETRY_WINDOW: `${WINDOW_MS}ms`,
        HOOKD_DELIVERY_RETRY_SCHEDULE: '100ms,100ms,100ms,100ms,100ms,100ms,100ms,100ms,100ms',
        HOOKD_SERVER_LOG_LEVEL: 'warn',
      });
      const failing = await d.createEndpoint({ url: `${sink.base}/fail`, max_in_flight: 1, event_types: ['w.fail'] });
      const fine = await d.createEndpoint({ url: `${sink.base}/ok`, max_in_flight: 4, event_types: ['w.ok'] });
      d.sql(`WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM c WHERE i < ${EVENTS})
        INSERT INTO hookd_outbox(event_type, payload) SELECT 'w.fail', '{"i":' || i || '}' FROM c`);
      await waitFor(async () => (await d.api('GET', `/v1/endpoints/${failing.id}`)).body.breaker.state !== 'closed',
        { what: 'the breaker to open' });
      const openedAt = Date.now();
      const requestsAtOpen = sink.requests;
      // Still waiting, well inside the window: nothing is dead yet but what the failed attempts made so.
      const open = Number(d.sql(`SELECT count(*) FROM hookd_deliveries WHERE endpoint_id = '${failing.id}'
        AND status IN ('pending', 'retrying')`));
      assert.ok(open >= EVENTS - 5, `${open} of ${EVENTS} still open after the breaker opened`);

      await waitFor(() => d.sql(`SELECT count(*) FROM hookd_deliveries WHERE endpoint_id = '${failing.id}'
        AND status IN ('pending', 'retrying')`) === '0',
      { timeoutMs: WINDOW_MS + 8000, what: 'every waiting delivery to die at the end of its window' });
      const tookMs = Date.now() - openedAt;
      assert.ok(tookMs <= WINDOW_MS + 6000, `dead ${tookMs} ms after the breaker opened (window ${WINDOW_MS} ms)`);
      const reasons = d.sql(`SELECT DISTINCT last_error FROM hookd_deliveries WHERE endpoint_id = '${failing.id}'
        AND attempt_count = 0`);
      assert.match(reasons, /retry window exceeded while the endpoint was paused/,
        `the failing endpoint's deliveries (attempts|status|error|count):\n${d.sql(`SELECT attempt_count, status,
          last_error, count(*) FROM hookd_deliveries WHERE endpoint_id = '${failing.id}' GROUP BY 1, 2, 3`)}`);
      assert.equal(d.sql(`SELECT count(*) FROM hookd_deliveries WHERE endpoint_id = '${failing.id}'
        AND status <> 'dead'`), '0');
      // No request was spent on them: at most the probe the breaker may have let through.
      assert.ok(sink.requests - requestsAtOpen <= 1, `${sink.requests - requestsAtOpen} requests while open`);
      // Visible through the API as well.
      const list = await d.api('GET', `/v1/deliveries?endpoint_id=${failing.id}&status=dead&limit=100`);
      assert.equal(list.status, 200);
      assert.equal(list.body.data.length, EVENTS);

      // An endpoint with a closed breaker is not touched, however old its deliveries: they are delivered.
      d.sql(`WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM c WHERE i < 10)
        INSERT INTO hookd_outbox(event_type, payload) SELECT 'w.ok', '{"i":' || i || '}' FROM c`);
      await waitFor(() => d.sql(`SELECT count(*) FROM hookd_deliveries WHERE endpoint_id = '${fine.id}'
        AND status = 'delivered'`) === '10', { what: 'the healthy endpoint to get its events' });
    } finally {
      await d?.stop();
      await sink?.stop();
    }
  });
