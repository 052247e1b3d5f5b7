// A breaker's probe that outlives the lease. Leases are renewed while held
// (t7500), and the probe's own lease is the breaker's probe_until: a renewal
// of the probe must carry probe_until along, or once the first lease has run
// out the breaker takes the probe for lost and the next claim sends a second
// probe beside the first, still in flight, and another each lease after. An
// endpoint whose breaker is open holds one probe, whatever its timeout.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { BACKEND, startDaemon, startCountingSink, waitFor, sleep } from '../lib/harness.mjs';

const LEASE_MS = 2000;
const PROBE_MS = 200;
const HANG_MS = 6000; // three leases

test(`a probe longer than the lease: still the only one in flight (${BACKEND})`, { timeout: 60000 }, async () => {
  let d, sink;
  let hang = false, probeN = 0;
  try {
    sink = await startCountingSink({
      keepArrivals: true,
      status: () => (hang ? 200 : 503),
      delayMs: (n) => {
        if (hang && probeN === 0) probeN = n;
        return n === probeN ? HANG_MS : 0; // the first probe hangs; any other is answered at once
      },
    });
    d = await startDaemon({
      HOOKD_DELIVERY_LEASE: `${LEASE_MS}ms`,
      HOOKD_DELIVERY_TIMEOUT: '10s',
      HOOKD_DELIVERY_BREAKER_FAILURES: '1',
      HOOKD_DELIVERY_BREAKER_PROBE: `${PROBE_MS}ms`,
      HOOKD_DELIVERY_BREAKER_PROBE_MAX: `${PROBE_MS}ms`,
      HOOKD_DELIVERY_BREAKER_RAMP: '100ms',
      HOOKD_DELIVERY_RETRY_SCHEDULE: '30s',
      HOOKD_SERVER_LOG_LEVEL: 'warn',
    });
    const ep = await d.createEndpoint({ url: sink.url('/p'), max_in_flight: 4, event_types: ['pr.*'] });
    d.sql(`INSERT INTO hookd_outbox(event_type, payload) VALUES ('pr.x', '{"i":0}')`);
    await waitFor(async () => (await d.api('GET', `/v1/endpoints/${ep.id}`)).body.breaker.state !== 'closed',
      { what: 'the breaker to open' });
    hang = true;
    const values = Array.from({ length: 4 }, (_, i) => `('pr.x', '{"i":${i + 1}}')`).join(',');
    d.sql(`INSERT INTO hookd_outbox(event_type, payload) VALUES ${values}`);
    const before = sink.total;
    await waitFor(() => sink.total > before, { timeoutMs: 10000, intervalMs: 20, what: 'the probe' });
    // The probe hangs four leases; the claims meanwhile (a second apart at most) must send nothing more.
    await sleep(HANG_MS - 1500);
    assert.equal(sink.total - before, 1,
      `${sink.total - before} requests while the first probe hung (${JSON.stringify(sink.arrivals.slice(1))})`);
    assert.equal(sink.maxOpenByPath.get('/p'), 1, 'one request open at a time');
    const st = d.sql(`SELECT breaker, probe_until FROM hookd_endpoint_state WHERE endpoint_id = '${ep.id}'`);
    const lease = d.sql("SELECT max(lease_until) FROM hookd_deliveries WHERE lease_owner IS NOT NULL");
    assert.equal(st, `half_open|${lease}`, 'the probe\'s renewed lease is the breaker\'s probe_until');
    // Its answer (200) closes the breaker and the rest goes.
    await waitFor(() => sink.distinct('/p') === 5, { timeoutMs: 20000, what: 'every event sent once the probe got through' });
    assert.equal(await d.stop(), 0);
  } finally {
    await d?.cleanup();
    await sink?.stop();
  }
});
