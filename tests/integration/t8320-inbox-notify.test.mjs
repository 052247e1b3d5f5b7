// PostgreSQL LISTEN/NOTIFY wake-ups for the inbox: an item committed
// elsewhere (another node, plain SQL: nothing in this process notices it) or
// put back to pending by a replay from elsewhere reaches the application
// within milliseconds, not at the workers' 1 s safety poll. On two nodes, an
// item posted to one is processed quickly whichever node takes it.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { startDaemon, startNodes, startCountingSink, newSecret, sleep, waitFor, BACKEND } from '../lib/harness.mjs';

const cleanups = [];
after(async () => { for (const c of cleanups) await c(); });
const skip = BACKEND !== 'postgres';
const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

async function forwardSource(d, app, name) {
  const r = await d.api('POST', '/v1/sources', {
    name, verify: { scheme: 'none' }, event_id: '/id', handler: { forward: { url: app.url(`/${name}`), secret: newSecret() } },
  });
  assert.equal(r.status, 201, JSON.stringify(r.body));
}

/** Inserts an item by SQL with received_at = now on the server; returns its id. */
function insertBySql(d, source, n) {
  const id = `inb_sql_${process.pid}_${n}`;
  d.sql(`INSERT INTO hookd_inbox(id, source, event_id, payload, payload_sha256, received_at, next_attempt_at)
    SELECT '${id}', '${source}', 'ev-${n}', '{"id":"ev-${n}"}', repeat('a', 64), t, t
    FROM (SELECT floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint AS t) now`);
  return id;
}

const latency = (d, id) => {
  const row = d.sql(`SELECT processed_at - received_at FROM hookd_inbox WHERE id = '${id}' AND status = 'processed'`);
  return row === '' ? null : Number(row);
};

test('an item inserted by plain SQL is processed within milliseconds, not at the 1 s poll', { skip, timeout: 60000 }, async () => {
  const app = await startCountingSink({ keepArrivals: true });
  cleanups.push(() => app.stop());
  const d = await startDaemon({ HOOKD_INBOX_WORKERS: '1' });
  cleanups.push(() => d.cleanup());
  await forwardSource(d, app, 'sqlin');
  await sleep(300);
  /** When item id reached the app at or after t, or null. */
  const arrival = (id, t) => app.arrivals.find(([at, , x]) => x === id && at >= t)?.[0] ?? null;
  /** Median milliseconds from an insert by SQL to the app, over n items, each right after the previous arrived. */
  const medianLatency = async (n, from) => {
    const lat = [];
    for (let i = from; i < from + n; i++) {
      await sleep(10); // right after an arrival: by poll alone the next item waits about a whole period
      const t = Date.now();
      const id = insertBySql(d, 'sqlin', i);
      lat.push(await waitFor(() => arrival(id, t), { timeoutMs: 10000, intervalMs: 2, what: `${id} at the app` }) - t);
    }
    return { median: median(lat), lat };
  };
  /** Milliseconds until a processed item put back to pending by plain SQL reaches the app again. */
  const replayLatency = async (id) => {
    await waitFor(() => d.sql(`SELECT status FROM hookd_inbox WHERE id = '${id}'`) === 'processed', { what: `${id} processed` });
    const t = Date.now();
    d.sql(`UPDATE hookd_inbox SET status = 'pending', next_attempt_at = 0, processed_at = NULL WHERE id = '${id}'`);
    return await waitFor(() => arrival(id, t), { timeoutMs: 10000, intervalMs: 2, what: 'the replayed item at the app' }) - t;
  };
  // The baseline, measured here under this machine's load: the notification triggers switched off, only
  // the worker's 1 s safety poll finds the items (one worker: one poll phase; the first item, at a random
  // phase, is outvoted by the median).
  const id = insertBySql(d, 'sqlin', 99);
  await waitFor(() => latency(d, id) !== null, { what: 'processed once' });
  d.sql('ALTER TABLE hookd_inbox DISABLE TRIGGER hookd_inbox_notify_insert, DISABLE TRIGGER hookd_inbox_notify_replay');
  const poll = await medianLatency(5, 0);
  const replayPoll = await replayLatency(id); // right after the last arrival, like those
  d.sql('ALTER TABLE hookd_inbox ENABLE TRIGGER hookd_inbox_notify_insert, ENABLE TRIGGER hookd_inbox_notify_replay');
  const woken = await medianLatency(8, 5);
  // A replay done elsewhere (plain SQL: back to pending) wakes the workers too.
  const replayWoken = await replayLatency(id);
  console.log(`# median insert→app ${woken.median} ms woken (${woken.lat.join(', ')}), ${poll.median} ms by ` +
    `poll alone (${poll.lat.join(', ')}); a replay ${replayWoken} ms woken, ${replayPoll} ms by poll alone`);
  assert.ok(poll.median >= 500, `by poll alone the median is ${poll.median} ms: the baseline is not the poll`);
  // Woken, only the work is left: far less than the poll's wait on the same machine.
  assert.ok(woken.median + 300 < poll.median, `median insert→app ${woken.median} ms woken, ${poll.median} ms by poll`);
  assert.ok(replayWoken + 300 < Math.max(replayPoll, poll.median),
    `a replay processed after ${replayWoken} ms woken, ${replayPoll} ms by poll alone`);
  assert.equal(app.byPath.get('/sqlin').get(id), 3, 'forwarded three times: once, and once after each replay');
});

test('two nodes: items posted to one node are processed quickly whichever node claims them', { skip, timeout: 60000 }, async () => {
  const app = await startCountingSink();
  cleanups.push(() => app.stop());
  const cluster = await startNodes(2, { HOOKD_INBOX_WORKERS: '2' });
  cleanups.push(() => cluster.cleanup());
  const [a, b] = cluster.nodes;
  await forwardSource(a, app, 'twonode');
  await sleep(1200); // b's source cache sees the source
  const ids = [];
  for (let n = 0; n < 20; n++) {
    const res = await fetch(`http://127.0.0.1:${(n % 2 ? a : b).publicPort}/in/twonode`, {
      method: 'POST', body: JSON.stringify({ id: `tn-${n}` }), headers: { 'content-type': 'application/json' } });
    assert.equal(res.status, 200);
    ids.push((await res.json()).id);
    await sleep(20 + Math.floor(Math.random() * 60));
  }
  await waitFor(() => Number(a.sql("SELECT count(*) FROM hookd_inbox WHERE source = 'twonode' AND status = 'processed'")) === 20,
    { timeoutMs: 10000, what: 'all processed' });
  const lat = ids.map((id) => latency(a, id));
  assert.ok(median(lat) < 400, `median accept→processed ${median(lat)} ms (${lat.join(', ')})`);
});
