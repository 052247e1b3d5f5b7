// Bounded waits: while another process holds the store's lock for 10 s (an
// application's long transaction: SQLite `BEGIN IMMEDIATE`, PostgreSQL `LOCK
// TABLE hookd_outbox IN ACCESS EXCLUSIVE MODE`), publishes answer 503
// store_busy with Retry-After within [server] write_timeout (5 s) plus a
// margin, never applied (the same Idempotency-Key creates the event
// afterwards), /healthz says the store is degraded, the episode is logged once,
// and it all recovers by itself; everything accepted before and after is delivered.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import { startDaemon, startCountingSink, waitFor, sleep } from '../lib/harness.mjs';

const WRITE_TIMEOUT_MS = 5000; // the default
const MARGIN_MS = 1500;
const HOLD_MS = 10000;

let d, sink, locker;
after(async () => {
  locker?.kill('SIGKILL');
  await sink?.stop();
  await d?.cleanup();
});

/** Another process takes the store's lock and holds it until release(); resolves once it holds it. */
async function holdLock(store) {
  const [cmd, args, lockSql, endSql] = store.kind === 'sqlite'
    ? ['sqlite3', ['-batch', store.db], '.timeout 10000\nBEGIN IMMEDIATE;\nSELECT \'locked\';\n', 'COMMIT;\n.quit\n']
    : ['psql', ['-X', '-A', '-t', '-q', '-d', store.url],
      'BEGIN;\nLOCK TABLE hookd_outbox IN ACCESS EXCLUSIVE MODE;\nSELECT \'locked\';\n', 'COMMIT;\n\\q\n'];
  locker = spawn(cmd, args, { stdio: ['pipe', 'pipe', 'inherit'] });
  const lines = createInterface({ input: locker.stdout });
  const locked = new Promise((res) => lines.on('line', (l) => { if (l.trim() === 'locked') res(); }));
  locker.stdin.write(lockSql);
  await locked;
  const child = locker;
  return {
    release: () => new Promise((res) => { child.once('exit', res); child.stdin.end(endSql); }),
  };
}

async function publishTimed(key, i) {
  const t = Date.now();
  const r = await d.api('POST', '/v1/events', { type: 'busy.x', data: { i } }, { 'Idempotency-Key': key });
  return { ...r, ms: Date.now() - t, key, i };
}

const health = async () => {
  const r = await fetch(`http://127.0.0.1:${d.publicPort}/healthz`);
  return { status: r.status, body: await r.json() };
};

test('a lock held 10 s by another process: 503 store_busy within the bound, degraded, nothing lost', { timeout: 120000 }, async () => {
  sink = await startCountingSink({ delayMs: () => 20 });
  d = await startDaemon({ HOOKD_SERVER_LOG_LEVEL: 'info' });
  await d.createEndpoint({ url: sink.url('/b'), event_types: ['busy.*'] });
  const accepted = new Set();

  // Before: accepted and delivered as usual; some are still on their way when the lock is taken.
  for (let i = 0; i < 30; i++) {
    const r = await publishTimed(`before-${i}`, i);
    assert.equal(r.status, 201);
    accepted.add(r.body.id);
  }
  assert.equal((await health()).status, 200);

  const lock = await holdLock(d.store);
  const lockedAt = Date.now();
  // During: several publishes at once, and one more later, each answered within the bound.
  const pending = Array.from({ length: 5 }, (_, i) => publishTimed(`during-${i}`, 100 + i));
  await sleep(1500);
  pending.push(publishTimed('during-late', 200)); // queued behind a stuck batch: answered at its own bound
  const during = await Promise.all(pending);
  const deg = await health();
  for (const r of during) {
    assert.equal(r.status, 503, `publish ${r.key}: ${r.status} ${JSON.stringify(r.body)}`);
    assert.equal(r.body.error.code, 'store_busy');
    assert.match(r.headers.get('retry-after') || '', /^\d+$/);
    assert.ok(r.ms >= WRITE_TIMEOUT_MS - 200, `${r.key} answered after ${r.ms} ms: not before the bound`);
    assert.ok(r.ms <= WRITE_TIMEOUT_MS + MARGIN_MS, `${r.key} answered after ${r.ms} ms (bound ${WRITE_TIMEOUT_MS} ms)`);
  }
  assert.equal(deg.status, 503, `/healthz while writes are stuck: ${JSON.stringify(deg.body)}`);
  assert.equal(deg.body.store, 'degraded');
  assert.ok(Date.now() - lockedAt < HOLD_MS, 'all of it happened while the lock was held');

  await sleep(Math.max(0, HOLD_MS - (Date.now() - lockedAt)));
  await lock.release();
  // It recovers by itself, without any request to help it.
  await waitFor(async () => (await health()).status === 200, { timeoutMs: 5000, what: '/healthz to recover' });
  assert.equal((await health()).body.store, 'up');

  // A 503 was not applied: the same Idempotency-Key now creates the event (201, not a replay).
  for (const r of during) {
    const again = await publishTimed(r.key, r.i);
    assert.equal(again.status, 201, `${r.key} again: ${again.status} ${JSON.stringify(again.body)}`);
    assert.equal(again.headers.get('idempotent-replayed'), null);
    accepted.add(again.body.id);
  }
  for (let i = 0; i < 20; i++) {
    const r = await publishTimed(`after-${i}`, 300 + i);
    assert.equal(r.status, 201);
    accepted.add(r.body.id);
  }

  await waitFor(() => sink.distinct('/b') >= accepted.size,
    { timeoutMs: 30000, what: `${accepted.size} events at the sink (have ${sink.distinct('/b')})` });
  const seen = new Set(sink.byPath.get('/b').keys());
  assert.deepEqual([...accepted].filter((id) => !seen.has(id)), [], 'every accepted event delivered');
  assert.equal(seen.size, accepted.size, 'and nothing that was refused');
  await waitFor(() => d.sql("SELECT count(*) FROM hookd_deliveries WHERE status <> 'delivered'") === '0',
    { timeoutMs: 20000, what: 'every delivery recorded delivered' });

  assert.equal(await d.stop(), 0);
  const logs = d.logs;
  assert.equal((logs.match(/store busy: writes cannot commit/g) || []).length, 1, `logged once per episode:\n${logs}`);
  assert.match(logs, /store writes commit again after/);
});
