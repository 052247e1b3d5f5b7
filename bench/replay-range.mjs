// Range replay under load: how long a 10,000-delivery replay takes, how long
// its writer ops hold the writer (seen as the latency of publishes made at the
// same time, each of which needs the writer), and that every replayed delivery
// is sent once. Run: cd tests && HOOKD_BIN=../build/hookd node ../bench/replay-range.mjs
// (HOOKD_TEST_BACKEND=postgres HOOKD_TEST_PG=<cluster DSN> for PostgreSQL).
import { startDaemon, startCountingSink, waitFor, BACKEND } from '../tests/lib/harness.mjs';

const N = Number(process.env.REPLAY_N || 10000);
// REPLAY_PAUSED=1: the endpoint is disabled, so the replayed deliveries wait (pending) and the writer's
// only extra work is the replay itself, not the 10,000 attempt results that follow it.
const PAUSED = process.env.REPLAY_PAUSED === '1';
const pct = (xs, p) => { const s = [...xs].sort((a, b) => a - b); return s[Math.min(s.length - 1, Math.floor(p * s.length))]; };

const sink = await startCountingSink();
const d = await startDaemon({ HOOKD_SERVER_LOG_LEVEL: 'warn' });
try {
  const ep = await d.createEndpoint({ url: sink.url('/replay'), event_types: ['bench.*'] });
  const other = await d.createEndpoint({ url: sink.url('/live'), event_types: ['live.*'] });
  const now = Date.now();
  const series = BACKEND === 'postgres' ? `generate_series(1, ${N}) g` : `(WITH RECURSIVE c(g) AS (SELECT 1 UNION ALL SELECT g + 1 FROM c WHERE g < ${N}) SELECT g FROM c)`;
  const cat = (a, b) => `${a} || ${b}`;
  d.sql(`INSERT INTO hookd_outbox(id, event_type, account, payload, created_at, dispatched_at)
    SELECT ${cat("'evt_b'", 'g')}, 'bench.x', 'acme', '{}', ${now}, ${now} FROM ${series}`);
  d.sql(`INSERT INTO hookd_deliveries(id, event_id, endpoint_id, account, status, attempt_count, created_at)
    SELECT ${cat("'dlv_b'", 'g')}, ${cat("'evt_b'", 'g')}, '${ep.id}', 'acme', 'dead', 1, ${now} FROM ${series}`);

  if (PAUSED) await d.api('POST', `/v1/endpoints/${ep.id}/disable`, {});
  // Publish latency alone, then while the replay runs.
  const publishLatencies = async (stop) => {
    const out = [];
    for (let i = 0; !stop() && i < 100000; i++) {
      const t = performance.now();
      await d.publish({ type: 'live.x', data: { i } });
      out.push(performance.now() - t);
    }
    return out;
  };
  let n = 0;
  const base = await publishLatencies(() => ++n > 200);
  let done = false;
  const during = publishLatencies(() => done);
  const t0 = performance.now();
  const r = await d.api('POST', '/v1/replays', { endpoint_id: ep.id, limit: N });
  const answered = performance.now() - t0;
  done = true;
  const lat = await during;
  if (r.status !== 202 || r.body.replayed !== N) throw new Error(`replay: ${r.status} ${JSON.stringify(r.body).slice(0, 300)}`);
  const want = (PAUSED ? 0 : N) + base.length + lat.length;
  await waitFor(() => sink.distinct() >= want, { timeoutMs: 300000, intervalMs: 200, what: 'every delivery' });
  const sent = performance.now() - t0;
  console.log(`RESULT scenario=replay-range store=${BACKEND} deliveries=${N} paused=${PAUSED} answered_s=${(answered / 1000).toFixed(2)} ` +
    `all_delivered_s=${(sent / 1000).toFixed(2)} publish_alone_p50_ms=${pct(base, 0.5).toFixed(1)} ` +
    `publish_alone_p99_ms=${pct(base, 0.99).toFixed(1)} publish_during_p50_ms=${pct(lat, 0.5).toFixed(1)} ` +
    `publish_during_p99_ms=${pct(lat, 0.99).toFixed(1)} publish_during_max_ms=${Math.max(...lat).toFixed(1)} ` +
    `publishes_during=${lat.length} duplicates=${sink.total - sink.distinct()} other_endpoint=${other.id !== ''}`);
} finally {
  await sink.stop();
  await d.cleanup();
}
