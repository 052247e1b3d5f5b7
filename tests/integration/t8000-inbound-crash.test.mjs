// Durability of the receiver: a sender posts 2,000 events and retries every
// request that got no 2xx; the daemon is SIGKILLed in the middle and
// restarted. Every event that ever got a 2xx must be stored, and each one
// exactly once (the 200 goes out only after the commit that records it).
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { startDaemon, sleep, waitFor } from '../lib/harness.mjs';

const EVENTS = 2000;
const SENDERS = 32;
let d;
after(async () => { if (d) await d.cleanup(); });

test('SIGKILL while 2,000 events arrive: every acknowledged event is stored exactly once', { timeout: 240000 }, async () => {
  d = await startDaemon();
  const r = await d.api('POST', '/v1/sources', { name: 'crash', verify: { scheme: 'none' }, event_id: '/id' });
  assert.equal(r.status, 201, JSON.stringify(r.body));

  const acked = new Set();
  let next = 0, attempts = 0;
  const refused = []; // statuses other than 2xx
  const url = () => `http://127.0.0.1:${d.publicPort}/in/crash`;
  async function sender() {
    while (next < EVENTS) {
      const id = `crash-${next++}`;
      const body = JSON.stringify({ id, type: 'order.paid', data: { n: id } });
      for (;;) {
        attempts++;
        try {
          const res = await fetch(url(), { method: 'POST', body, headers: { 'content-type': 'application/json' },
            signal: AbortSignal.timeout(5000) });
          await res.arrayBuffer();
          if (res.status >= 200 && res.status < 300) { acked.add(id); break; }
          refused.push(res.status);
        } catch { /* the daemon is down, or the connection broke: retry */ }
        await sleep(50);
      }
    }
  }
  const senders = Array.from({ length: SENDERS }, sender);
  await waitFor(() => acked.size >= 600, { timeoutMs: 60000, what: '600 acknowledged events' });
  await d.kill9();
  const ackedBeforeKill = new Set(acked);
  await sleep(300);
  await d.start();
  await Promise.all(senders);
  assert.equal(acked.size, EVENTS);
  assert.ok(attempts > EVENTS, 'some requests were retried');

  const rows = d.sql("SELECT event_id FROM hookd_inbox WHERE source = 'crash'").split('\n').filter(Boolean);
  const counts = new Map();
  for (const id of rows) counts.set(id, (counts.get(id) || 0) + 1);
  for (const id of ackedBeforeKill) assert.equal(counts.get(id), 1, `${id}, acknowledged before the kill, is stored once`);
  for (const id of acked) assert.equal(counts.get(id), 1, `${id} is stored once`);
  assert.equal(rows.length, EVENTS, 'one row per event, no more');
  assert.deepEqual(refused.filter((s) => s !== 503), [], 'only 503 (store unavailable) is a refusal to retry');
});
