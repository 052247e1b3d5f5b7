// PostgreSQL goes away for 30 s under a running hookd: the daemon stays up,
// says so (/healthz 503, admin writes 503 store_unavailable), logs without
// flooding, and once the server is back it reconnects by itself and delivers
// everything, what was published before the outage and right after it.
// PostgreSQL only; it stops a cluster of its own, so it can run in any order.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { BACKEND, startCluster, startDaemon, startCountingSink, waitFor, sleep } from '../lib/harness.mjs';

const skip = BACKEND === 'postgres' ? false
  : 'the outage test stops a PostgreSQL server: run with HOOKD_TEST_BACKEND=postgres';
const OUTAGE_MS = 30000;
const BEFORE = 300;

/** Lines logged at warn or error level. */
const problemLines = (text) => text.split('\n').filter((l) => /^\S+Z (warn|error)\b/.test(l));

test('PostgreSQL stopped for 30 s: hookd stays up, reports it, and resumes without losing events', { skip, timeout: 240000 }, async () => {
  let pg, sink, d;
  try {
    pg = startCluster();
    // 2 in flight × 20 ms: about 100 deliveries a second, so the stop lands mid-run.
    sink = await startCountingSink({ delayMs: () => 20, keepArrivals: true });
    d = await startDaemon({}, { cluster: pg.dsn });
    await d.createEndpoint({ url: sink.url('/o'), event_types: ['out.*'], max_in_flight: 2 });
    // A second endpoint without a backlog shows how soon new events flow again.
    await d.createEndpoint({ url: sink.url('/n'), event_types: ['out.after'] });
    d.sql(`INSERT INTO hookd_outbox(event_type, payload)
      SELECT 'out.before', json_build_object('i', g)::text FROM generate_series(1, ${BEFORE}) g`);
    const before = d.sql("SELECT id FROM hookd_outbox WHERE event_type = 'out.before'").split('\n');
    await waitFor(() => sink.total >= 50, { timeoutMs: 20000, what: '50 deliveries before the outage' });

    const logFrom = d.child.stderrText.length;
    pg.stop();
    const stoppedAt = Date.now();
    assert.ok(sink.distinct('/o') < BEFORE, 'events were still pending when the server stopped');

    // While it is down: alive, unhealthy, writes refused with 503 store_unavailable.
    await waitFor(async () => (await fetch(`http://127.0.0.1:${d.publicPort}/healthz`)).status === 503,
      { timeoutMs: 5000, what: '/healthz to report the store down' });
    const health = await fetch(`http://127.0.0.1:${d.publicPort}/healthz`);
    assert.equal(health.status, 503);
    assert.equal((await health.json()).store, 'down');
    const pub = await d.api('POST', '/v1/events', { type: 'out.during', data: {} });
    assert.equal(pub.status, 503, JSON.stringify(pub.body));
    assert.equal(pub.body.error.code, 'store_unavailable');
    const epw = await d.api('POST', '/v1/endpoints', { url: sink.url('/x') });
    assert.equal(epw.status, 503, JSON.stringify(epw.body));
    assert.equal(epw.body.error.code, 'store_unavailable');
    // The rest of the 30 s, checking now and then that the process is still there.
    while (Date.now() - stoppedAt < OUTAGE_MS) {
      assert.equal(d.child.exitCode, null, 'hookd is running');
      assert.equal((await fetch(`http://127.0.0.1:${d.publicPort}/healthz`)).status, 503);
      await sleep(1000);
    }
    const problems = problemLines(d.child.stderrText.slice(logFrom));
    assert.ok(problems.length < 50, `${problems.length} warn/error lines in 30 s:\n${problems.slice(0, 60).join('\n')}`);

    pg.start();
    const startedAt = Date.now();
    // An application commits events by plain SQL as soon as the server is back.
    d.sql(`INSERT INTO hookd_outbox(event_type, payload)
      SELECT 'out.after', json_build_object('i', g)::text FROM generate_series(1, 5) g`);
    const afterIds = d.sql("SELECT id FROM hookd_outbox WHERE event_type = 'out.after'").split('\n');
    await waitFor(() => sink.arrivals.some(([t, p]) => t >= startedAt && p === '/o'),
      { timeoutMs: 5000, intervalMs: 20, what: 'the backlog to move again within 5 s' });
    await waitFor(() => afterIds.every((id) => sink.byPath.get('/n')?.has(id)),
      { timeoutMs: 5000, intervalMs: 20, what: 'the events committed after recovery to arrive within 5 s' });
    const resumed = sink.arrivals.find(([t]) => t >= startedAt);
    console.log(`# first delivery ${resumed[0] - startedAt} ms after the server was back; ${problems.length} warn/error lines during the outage`);

    // Nothing lost: everything published before the outage and after it arrives at the backlogged endpoint too.
    const ids = sink.byPath.get('/o');
    await waitFor(() => [...before, ...afterIds].every((id) => ids.has(id)),
      { timeoutMs: 30000, what: `all ${BEFORE + 5} events at /o (have ${ids.size})` });
    await waitFor(async () => (await fetch(`http://127.0.0.1:${d.publicPort}/healthz`)).status === 200,
      { timeoutMs: 5000, what: '/healthz to recover' });
    await waitFor(() => d.sql("SELECT count(*) FROM hookd_deliveries WHERE status = 'delivered'") === String(BEFORE + 10),
      { timeoutMs: 10000, what: 'every delivery recorded delivered' });
    // Attempts made while the store was down are recorded afterwards, not sent again.
    assert.deepEqual(sink.repeats(), [], 'no delivery arrived twice');
    assert.equal((await d.api('POST', '/v1/events', { type: 'out.later', data: {} })).status, 201, 'writes work again');
    assert.equal(d.child.exitCode, null);
    assert.equal(await d.stop(), 0, 'hookd exits cleanly');
  } finally {
    await d?.cleanup();
    await sink?.stop();
    pg?.destroy();
  }
});
