// Crash safety: SIGKILL while 1,000 events are pending, restart on the same
// store: every event is delivered, none lost; repeats carry the same webhook-id.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { startDaemon, startSink, waitFor, sleep } from '../lib/harness.mjs';

let d, sink;
after(async () => { await sink?.stop(); await d?.cleanup(); });

test('SIGKILL with 1,000 events pending loses nothing', { timeout: 120000 }, async () => {
  d = await startDaemon();
  // Each answer takes 10 ms and the endpoint allows 4 in flight: about 400/s, so
  // the kill lands mid-run with most events still pending.
  sink = await startSink({ delay: Array(3000).fill('10ms').join(',') });
  await d.createEndpoint({ url: sink.url(), max_in_flight: 4, event_types: ['crash.*'] });
  const values = Array.from({ length: 1000 }, (_, i) => `('crash.e', '{"i":${i}}')`).join(',');
  d.sql(`BEGIN; INSERT INTO hookd_outbox(event_type, payload) VALUES ${values}; COMMIT;`);
  const ids = new Set(d.sql("SELECT id FROM hookd_outbox WHERE event_type = 'crash.e'").split('\n'));
  assert.equal(ids.size, 1000);

  await sink.waitCount(100, 30000);
  await d.kill9();
  await sleep(300); // let the sink's last lines reach us: atKill must count every arrival before the kill
  const atKill = sink.requests.length;
  assert.ok(atKill < 1000, `killed mid-run (${atKill} arrived before the kill)`);
  // What the store durably recorded as delivered when the process died: those
  // must never be sent again; anything else sent before the kill may repeat.
  const out = d.sql("SELECT event_id FROM hookd_deliveries WHERE status = 'delivered'");
  const recorded = new Set(out ? out.split('\n') : []);

  await d.start();
  await waitFor(() => new Set(sink.requests.map((r) => r.webhook_id)).size >= 1000,
    { timeoutMs: 60000, what: 'all 1000 events at the sink' });
  const seen = new Set(sink.requests.map((r) => r.webhook_id));
  assert.deepEqual([...seen].filter((id) => !ids.has(id)), [], 'only our events arrived');
  assert.equal(seen.size, 1000, 'every event arrived');
  await waitFor(() => d.sql("SELECT count(*) FROM hookd_deliveries WHERE status = 'delivered'") === '1000',
    { timeoutMs: 20000, what: 'all deliveries recorded delivered' });
  assert.equal(d.sql('SELECT count(*) FROM hookd_outbox WHERE dispatched_at IS NULL'), '0');
  const dups = sink.requests.length - seen.size;
  const resentRecorded = sink.requests.slice(atKill).filter((r) => recorded.has(r.webhook_id));
  assert.deepEqual(resentRecorded.map((r) => r.webhook_id), [], 'a delivery recorded before the kill was sent again');
  // Repeats are only sends whose result was not yet committed at the kill.
  assert.ok(dups <= atKill - recorded.size, `${dups} repeats, ${atKill - recorded.size} sends unrecorded at the kill`);
  // Every arrival verified its body id against its webhook-id: a repeat is the same event.
  for (const r of sink.requests) assert.equal(r.body.id, r.webhook_id);
  assert.equal(await d.stop(), 0);
});
