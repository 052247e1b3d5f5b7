// On PostgreSQL the relay hands a fan-out's deliveries to the dispatcher before
// its transaction commits (the rows stay locked), so the commit's fsync is off
// the commit→arrival path. Their attempt results must still wait for that
// commit: written before it, they would miss the delivery row and leave it
// leased until the lease ran out (60 s here), to be sent again. And when the
// commit fails, what was already sent is sent again with the same webhook-id
// once the events are fanned out anew, and only the committed attempt is kept.
// A deferred constraint trigger on hookd_inflight (where the fan-out writes the
// leases of the deliveries it sends at once, before their rows exist: DESIGN §3,
// "Unrecorded deliveries") makes the fan-out's commit slow, or fail, for one
// endpoint's deliveries.
// PostgreSQL only (HOOKD_TEST_BACKEND=postgres): on SQLite these are reported skipped.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { BACKEND, startDaemon, startCountingSink, waitFor } from '../lib/harness.mjs';

const skip = BACKEND === 'postgres' ? false
  : 'the relay hands over before the commit on a shared store only: run with HOOKD_TEST_BACKEND=postgres';

/** Installs a trigger that runs `body` (plpgsql) at the commit of every fan-out lease of endpoint epId's deliveries. */
function atFanOutCommit(d, epId, body) {
  d.sql(`CREATE SEQUENCE test_commits;
    CREATE FUNCTION test_at_commit() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN ${body} RETURN NULL; END $$;
    CREATE CONSTRAINT TRIGGER test_at_commit AFTER INSERT ON hookd_inflight
      DEFERRABLE INITIALLY DEFERRED FOR EACH ROW WHEN (NEW.endpoint_id = '${epId}' AND NEW.event_id IS NOT NULL)
      EXECUTE FUNCTION test_at_commit();`);
}

/**
 * Holds PostgreSQL advisory lock `key` in a session of its own until release(): a trigger that takes the
 * same lock waits for the test, however slow the machine, instead of sleeping a guessed while.
 */
async function holdLock(dsn, key) {
  const child = spawn('psql', ['-X', '-A', '-t', '-q', '-v', 'ON_ERROR_STOP=1', '-d', dsn],
    { stdio: ['pipe', 'pipe', 'pipe'] });
  let out = '';
  child.stdout.on('data', (c) => { out += c; });
  child.stdin.write(`SELECT pg_advisory_lock(${key}); SELECT 'locked';\n`);
  await waitFor(() => out.includes('locked') || child.exitCode !== null, { timeoutMs: 30000, what: 'the advisory lock' });
  assert.ok(out.includes('locked'), 'the test holds the advisory lock');
  const exited = new Promise((r) => (child.exitCode !== null ? r() : child.once('exit', r)));
  return { release: async () => { child.stdin.end(); await exited; } };
}

test('results of a fan-out sent before its commit wait for the commit', { skip, timeout: 60000 }, async () => {
  let sink, d;
  try {
    sink = await startCountingSink({ keepArrivals: true });
    d = await startDaemon({ HOOKD_DELIVERY_LEASE: '60s' });
    const ep = await d.createEndpoint({ url: sink.url('/slow-commit'), event_types: ['ho.*'] });
    // The fan-out's commit waits for the test: the deliveries are inserted, their commit blocks on a lock
    // the test holds until it has looked at what arrived.
    const lock = await holdLock(d.storeUrl, 7200);
    atFanOutCommit(d, ep.id, 'PERFORM pg_advisory_xact_lock(7200);');
    const published = [];
    try {
      for (let i = 0; i < 5; i++) published.push((await d.publish({ type: 'ho.slow', data: { i } })).id);
      // Sent before the commit: the first arrival comes while the delivery row is not visible yet (if the
      // send waited for the commit, nothing would arrive while the lock is held).
      await waitFor(() => sink.total >= 1, { timeoutMs: 30000, what: 'the first arrival, before the commit' });
      const visibleAtArrival = d.sql(`SELECT count(*) FROM hookd_deliveries WHERE event_id = '${published[0]}'`);
      assert.equal(visibleAtArrival, '0', 'the send did not wait for the fan-out to commit');
    } finally {
      await lock.release();
    }

    // Each delivered once, its attempt recorded, well within the lease.
    for (const id of published) {
      const [dl] = await d.waitDelivery(id, 'delivered', 30000);
      assert.equal(dl.attempt_count, 1);
      const { body } = await d.api('GET', `/v1/deliveries/${dl.id}`);
      assert.equal(body.attempts.length, 1);
      assert.equal(body.attempts[0].status_code, 200);
    }
    assert.equal(sink.distinct('/slow-commit'), published.length);
    assert.deepEqual(sink.repeats(), []);
    assert.equal(d.sql('SELECT count(*) FROM hookd_inflight'), '0', 'no lease is left behind');
  } finally {
    await d?.cleanup();
    await sink?.stop();
  }
});

test('a fan-out whose commit fails is sent again with the same webhook-id and recorded once', { skip, timeout: 60000 }, async () => {
  let sink, d;
  try {
    sink = await startCountingSink();
    d = await startDaemon({ HOOKD_DELIVERY_LEASE: '60s', HOOKD_SERVER_LOG_LEVEL: 'error' });
    const ep = await d.createEndpoint({ url: sink.url('/fails'), event_types: ['hf.*'] });
    // The first two fan-outs of this endpoint's deliveries fail at commit (a sequence is not rolled back).
    atFanOutCommit(d, ep.id, `IF nextval('test_commits') <= 2 THEN
        PERFORM pg_sleep(0.2); RAISE EXCEPTION 'injected commit failure'; END IF;`);
    const id = (await d.publish({ type: 'hf.once', data: {} })).id;

    const [dl] = await d.waitDelivery(id, 'delivered', 10000);
    // Sent by each of the three fan-outs, always as the same message.
    await waitFor(() => sink.total >= 3, { timeoutMs: 5000, what: 'three arrivals' });
    assert.equal(sink.distinct('/fails'), 1);
    assert.deepEqual(sink.repeats(), [['/fails', id, 3]]);
    // Only the committed fan-out's delivery exists, with its one attempt.
    assert.equal(d.sql(`SELECT count(*) FROM hookd_deliveries WHERE event_id = '${id}'`), '1');
    assert.equal(dl.attempt_count, 1);
    const { body } = await d.api('GET', `/v1/deliveries/${dl.id}`);
    assert.equal(body.attempts.length, 1);
    assert.equal(d.sql('SELECT count(*) FROM hookd_inflight'), '0', 'no lease is left behind');
    assert.notEqual(d.sql(`SELECT dispatched_at FROM hookd_outbox WHERE id = '${id}'`), '');
  } finally {
    await d?.cleanup();
    await sink?.stop();
  }
});
