// Circuit breaker and auto-disable. 1,000 deliveries to an endpoint that fails
// for a while, then recovers: once the breaker is open only probes go out, one
// at a time and spaced by the probe interval; queued deliveries spend no
// attempts; concurrency never exceeds the cap; after recovery every delivery
// arrives, the concurrency ramping up rather than jumping to the cap. An
// endpoint failing continuously for longer than disable_after is disabled with
// a reason, and what is published to it afterwards is recorded `skipped`.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import { BACKEND, startDaemon, waitFor, sleep } from '../lib/harness.mjs';

const CAP = 8;
const PROBE_MS = 400;
const RAMP_MS = 2000;
const EVENTS = 1000;

/** A receiver answering 503 while down(), else 200 after a short delay; logs every request. */
async function startFlakySink(down, delayMs = 15) {
  const sink = { log: [], open: 0, maxOpen: 0, openAt: [] };
  const server = createServer((req, res) => {
    const at = Date.now();
    sink.open++;
    sink.maxOpen = Math.max(sink.maxOpen, sink.open);
    sink.openAt.push([at, sink.open]);
    const fail = down();
    req.resume();
    req.on('end', () => setTimeout(() => {
      sink.open--;
      sink.log.push({ at, status: fail ? 503 : 200, id: req.headers['webhook-id'] });
      res.writeHead(fail ? 503 : 200).end();
    }, fail ? 0 : delayMs));
  });
  server.keepAliveTimeout = 60000;
  await new Promise((r) => server.listen(0, '127.0.0.1', r));
  sink.url = `http://127.0.0.1:${server.address().port}/hook`;
  sink.stop = () => new Promise((r) => { server.closeAllConnections(); server.close(() => r()); });
  return sink;
}

function bulk(d, type, n) {
  d.sql(`WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM c WHERE i < ${n})
    INSERT INTO hookd_outbox(event_type, payload) SELECT '${type}', '{"i":' || i || '}' FROM c`);
}

test(`breaker: ${EVENTS} deliveries to a failing endpoint: probes only while open, then a ramped drain (${BACKEND})`,
  { timeout: 120000 }, async () => {
    let d, sink;
    let down = true;
    try {
      sink = await startFlakySink(() => down);
      d = await startDaemon({
        HOOKD_DELIVERY_BREAKER_FAILURES: '5',
        HOOKD_DELIVERY_BREAKER_PROBE: `${PROBE_MS}ms`,
        HOOKD_DELIVERY_BREAKER_PROBE_MAX: `${PROBE_MS}ms`,
        HOOKD_DELIVERY_BREAKER_RAMP: `${RAMP_MS}ms`,
        HOOKD_DELIVERY_RETRY_SCHEDULE: '100ms,200ms,300ms,500ms,500ms,500ms,500ms,500ms,500ms,500ms',
        HOOKD_SERVER_LOG_LEVEL: 'warn',
      });
      const ep = await d.createEndpoint({ url: sink.url, max_in_flight: CAP, event_types: ['br.*'] });
      assert.equal(ep.breaker.state, 'closed');
      bulk(d, 'br.x', EVENTS);
      const opened = await waitFor(async () => {
        const b = (await d.api('GET', `/v1/endpoints/${ep.id}`)).body.breaker;
        return b.state !== 'closed' && b;
      }, { what: 'the breaker to open' });
      assert.ok(opened.consecutive_failures >= 5, `opened after ${opened.consecutive_failures} failures`);
      assert.ok(opened.opened_at, 'opened_at is set');
      // Once 5 failures are seen nothing new starts until the breaker's record commits: what went
      // out before it opened is the 5 and the others already in flight, not an attempt per failure.
      // (The first probe cannot come before opened_at + the probe interval.)
      const openedStored = Date.parse(opened.opened_at);
      const beforeOpen = sink.log.filter((x) => x.at < openedStored + PROBE_MS / 2).length;
      assert.ok(beforeOpen <= 5 + CAP - 1, `${beforeOpen} requests before the breaker opened (5 failures, cap ${CAP}); ` +
        `their arrivals, ms from opened_at: ${sink.log.map((x) => x.at - openedStored).join(' ')}`);
      const openedAt = Date.now();
      const failedBefore = sink.log.length;
      await sleep(6 * PROBE_MS);
      // While open: single probes, spaced by the probe interval (jitter is 0 in the test config).
      const whileOpen = sink.log.filter((x) => x.at > openedAt + 50);
      assert.ok(whileOpen.length >= 3 && whileOpen.length <= 7,
        `${whileOpen.length} requests in ${6 * PROBE_MS} ms while open (probes every ${PROBE_MS} ms)`);
      for (let i = 1; i < whileOpen.length; i++) {
        assert.ok(whileOpen[i].at - whileOpen[i - 1].at >= PROBE_MS * 0.8,
          `probes ${whileOpen[i].at - whileOpen[i - 1].at} ms apart`);
      }
      const b = (await d.api('GET', `/v1/endpoints/${ep.id}`)).body.breaker;
      assert.ok(['open', 'half_open'].includes(b.state), `still paused: ${b.state}`);
      // The queue spent no attempts: at most the failed requests made retries.
      const failed = sink.log.length;
      assert.ok(Number(d.sql('SELECT count(*) FROM hookd_attempts_all')) <= failed + CAP);
      console.log(`# ${failedBefore} requests before the breaker opened, ${whileOpen.length} probes while open`);

      down = false;
      const recoveredAt = Date.now();
      await waitFor(() => new Set(sink.log.filter((x) => x.status === 200).map((x) => x.id)).size >= EVENTS,
        { timeoutMs: 60000, intervalMs: 50, what: 'every event delivered after recovery' });
      const drained = Date.now() - recoveredAt;
      assert.ok(sink.maxOpen <= CAP, `at most ${sink.maxOpen} requests open, cap ${CAP}`);
      // The ramp: soon after the first success the concurrency is well below the cap.
      const firstOk = sink.log.find((x) => x.status === 200).at;
      const early = sink.openAt.filter(([at]) => at >= firstOk && at < firstOk + RAMP_MS / 4).map(([, n]) => n);
      assert.ok(Math.max(...early) <= CAP / 2, `concurrency ${Math.max(...early)} in the first quarter of the ramp`);
      const late = sink.openAt.filter(([at]) => at >= firstOk + RAMP_MS).map(([, n]) => n);
      if (late.length > 0) assert.ok(Math.max(...late) > CAP / 2, 'after the ramp the cap is used');
      console.log(`# drained ${EVENTS} in ${drained} ms after recovery; concurrency early ${Math.max(...early)}, ` +
        `at most ${sink.maxOpen}`);
      await waitFor(() => d.sql("SELECT count(*) FROM hookd_deliveries WHERE status = 'delivered'") === String(EVENTS),
        { what: 'all recorded delivered' });
      // Most deliveries were never attempted while the endpoint failed: only those a failed request was for
      // were attempted twice (counted at the end: a probe out when the endpoint recovered is logged late).
      const failedRequests = sink.log.filter((x) => x.status === 503).length;
      assert.ok(Number(d.sql('SELECT count(*) FROM hookd_deliveries WHERE attempt_count > 1')) <= failedRequests);
      const after = (await d.api('GET', `/v1/endpoints/${ep.id}`)).body.breaker;
      assert.equal(after.state, 'closed');
      assert.equal(after.consecutive_failures, 0);
    } finally {
      await d?.cleanup();
      await sink?.stop();
    }
  });

test(`auto-disable: failing continuously past disable_after disables the endpoint; later deliveries are skipped (${BACKEND})`,
  { timeout: 60000 }, async () => {
    let d, sink;
    try {
      sink = await startFlakySink(() => true);
      d = await startDaemon({
        HOOKD_DELIVERY_BREAKER_FAILURES: '3',
        HOOKD_DELIVERY_BREAKER_PROBE: '200ms',
        HOOKD_DELIVERY_BREAKER_PROBE_MAX: '200ms',
        HOOKD_DELIVERY_DISABLE_AFTER: '1500ms',
        HOOKD_DELIVERY_RETRY_SCHEDULE: '100ms,100ms,100ms,100ms,100ms,100ms,100ms,100ms,100ms,100ms',
        HOOKD_SERVER_LOG_LEVEL: 'warn',
      });
      const ep = await d.createEndpoint({ url: sink.url, event_types: ['ad.*'] });
      const t0 = Date.now();
      bulk(d, 'ad.x', 20);
      const got = await waitFor(async () => {
        const e = (await d.api('GET', `/v1/endpoints/${ep.id}`)).body;
        return !e.enabled && e;
      }, { timeoutMs: 15000, what: 'the endpoint to be disabled' });
      const took = Date.now() - t0;
      assert.ok(took >= 1500, `disabled after ${took} ms, not before disable_after`);
      assert.match(got.disabled_reason, /failing continuously since .*disable_after/);
      // Deliveries published now are recorded skipped, not sent and not dropped.
      const ev = await d.publish({ type: 'ad.y', data: {} });
      await d.waitDelivery(ev.id, 'skipped');
      const sent = sink.log.length;
      await sleep(500);
      assert.equal(sink.log.length, sent, 'nothing is sent to a disabled endpoint');
      // Enabled again, it starts with a clean slate.
      const r = await d.api('POST', `/v1/endpoints/${ep.id}/enable`);
      assert.equal(r.status, 200);
      assert.equal(r.body.breaker.state, 'closed');
      assert.equal(r.body.breaker.consecutive_failures, 0);
    } finally {
      await d?.cleanup();
      await sink?.stop();
    }
  });
