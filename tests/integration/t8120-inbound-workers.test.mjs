// The inbox workers under failure and on several nodes. Crash: a sender posts
// 2,000 events (retrying anything without a 2xx) while the daemon is SIGKILLed
// and restarted; every acknowledged event is stored once and processed once
// in hookd's records, and the app sees a repeat only for an item that was in
// flight at the kill (same webhook-id). Two nodes on one PostgreSQL database
// never forward two items of one entity at once.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { startDaemon, startNodes, startCountingSink, newSecret, sleep, waitFor, BACKEND } from '../lib/harness.mjs';

const EVENTS = 2000;
const SENDERS = 32;
const WORKERS = 4;
const cleanups = [];
after(async () => { for (const c of cleanups) await c(); });

test('SIGKILL while 2,000 events arrive: each acknowledged event is stored and processed once', { timeout: 300000 }, async () => {
  const app = await startCountingSink();
  cleanups.push(() => app.stop());
  const d = await startDaemon({ HOOKD_INBOX_WORKERS: String(WORKERS) });
  cleanups.push(() => d.cleanup());
  const r = await d.api('POST', '/v1/sources', {
    name: 'wcrash', verify: { scheme: 'none' }, event_id: '/id',
    handler: { forward: { url: app.url('/app'), secret: newSecret() } }, retry_schedule: '100ms',
  });
  assert.equal(r.status, 201, JSON.stringify(r.body));

  const acked = new Set();
  let next = 0;
  const url = () => `http://127.0.0.1:${d.publicPort}/in/wcrash`;
  async function sender() {
    while (next < EVENTS) {
      const id = `wc-${next++}`;
      const body = JSON.stringify({ id, type: 'order.paid', data: { n: id } });
      for (;;) {
        try {
          const res = await fetch(url(), { method: 'POST', body, headers: { 'content-type': 'application/json' },
            signal: AbortSignal.timeout(5000) });
          await res.arrayBuffer();
          if (res.status >= 200 && res.status < 300) { acked.add(id); break; }
        } catch { /* down: retry */ }
        await sleep(50);
      }
    }
  }
  const senders = Array.from({ length: SENDERS }, sender);
  await waitFor(() => acked.size >= 600 && app.total >= 100, { timeoutMs: 60000, what: '600 acked, 100 forwarded' });
  await d.kill9();
  await sleep(300);
  await d.start();
  await Promise.all(senders);
  assert.equal(acked.size, EVENTS);
  await waitFor(() => Number(d.sql("SELECT count(*) FROM hookd_inbox WHERE source = 'wcrash' AND status = 'processed'")) === EVENTS,
    { timeoutMs: 120000, what: 'every item processed' });
  const rows = d.sql("SELECT event_id, id, attempts, result FROM hookd_inbox WHERE source = 'wcrash'").split('\n').filter(Boolean)
    .map((l) => l.split('|'));
  assert.equal(rows.length, EVENTS, 'one row per event');
  const ids = new Map(rows.map(([ev, id]) => [id, ev]));
  for (const ev of acked) assert.ok(rows.some((x) => x[0] === ev), `${ev} stored`);
  for (const [, , attempts, result] of rows) {
    assert.equal(Number(attempts), 1, 'one processing run in the records');
    assert.equal(result, 'forwarded');
  }
  assert.equal(app.distinct('/app'), EVENTS, 'the app got every item');
  for (const id of app.byPath.get('/app').keys()) assert.ok(ids.has(id), 'webhook-id is an inbox item id');
  const repeats = app.repeats();
  assert.ok(repeats.length <= WORKERS, `repeats only for items in flight at the kill: ${JSON.stringify(repeats)}`);
  for (const [, , c] of repeats) assert.equal(c, 2);
});

test('two nodes on one PostgreSQL database: one entity is never forwarded twice at once', { skip: BACKEND !== 'postgres', timeout: 120000 }, async () => {
  const app = await startCountingSink({ keepArrivals: true, delayMs: () => 150 });
  cleanups.push(() => app.stop());
  let overlaps = 0;
  const cluster = await startNodes(2, { HOOKD_INBOX_WORKERS: '4' });
  cleanups.push(() => cluster.cleanup());
  const [a, b] = cluster.nodes;
  const r = await a.api('POST', '/v1/sources', {
    name: 'ent2', verify: { scheme: 'none' }, event_id: '/id', entity: { kind: 'order', id: '/data/order' },
    handler: { forward: { url: app.url('/e'), secret: newSecret() } },
  });
  assert.equal(r.status, 201, JSON.stringify(r.body));
  await sleep(1200); // node b's source cache
  const sent = [];
  for (let i = 0; i < 24; i++) {
    const node = i % 2 ? a : b;
    const id = `e2-${i}`;
    const order = `o${i % 3}`;
    const res = await fetch(`http://127.0.0.1:${node.publicPort}/in/ent2`, {
      method: 'POST', headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ id, data: { order } }),
    });
    assert.equal(res.status, 200);
    sent.push([(await res.json()).id, order]);
  }
  await waitFor(() => Number(cluster.sql("SELECT count(*) FROM hookd_inbox WHERE source = 'ent2' AND status = 'processed'")) === 24,
    { timeoutMs: 60000, what: 'all processed' });
  const owner = new Map(sent);
  const byEntity = new Map();
  for (const [at, , id] of app.arrivals) {
    const e = owner.get(id);
    if (!byEntity.has(e)) byEntity.set(e, []);
    byEntity.get(e).push(at);
  }
  for (const [e, ats] of byEntity) {
    ats.sort((x, y) => x - y);
    for (let i = 1; i < ats.length; i++) if (ats[i] - ats[i - 1] < 140) overlaps++;
    assert.equal(ats.length, 8, `entity ${e}: each item once`);
  }
  assert.equal(overlaps, 0, 'no two items of one entity at the app at once');
});
