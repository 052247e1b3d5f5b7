// A node killed between its sends and their record: the store's fault hook
// (HOOKD_TEST_STORE_FAULT) kills it with SIGKILL at its second record of
// attempt results, so one endpoint's result is recorded and the other's was
// sent but never recorded. What was recorded is never sent again; what was
// sent without its record is sent once more with the same webhook-id; the
// delivery log ends with one delivery per endpoint. On PostgreSQL another
// node takes the unrecorded delivery over after the lease (DESIGN §3,
// "Unrecorded deliveries"); on SQLite the node is started again.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { BACKEND, newStore, startDaemon, startCountingSink, waitFor, sleep } from '../lib/harness.mjs';

const LEASE_MS = 2000;
let sink, store, a, b;
after(async () => {
  await b?.stop();
  await a?.stop();
  store?.drop();
  await sink?.stop();
});

const rowsOf = (text) => (text ? text.split('\n').map((l) => l.split('|')) : []);

test('SIGKILL between the sends and their record: recorded ones stay sent once, the rest are sent again', { timeout: 60000 }, async () => {
  sink = await startCountingSink({ delayMs: (n, req) => (req.url === '/slow' ? 800 : 0), checkBody: true });
  store = newStore();
  const env = { HOOKD_DELIVERY_LEASE: `${LEASE_MS}ms` };
  a = await startDaemon({ ...env, HOOKD_SERVER_NODE_ID: 'node-a', HOOKD_TEST_STORE_FAULT: 'delivery_complete*:2:kill' },
    { store });
  const fast = await a.createEndpoint({ url: sink.url('/fast'), event_types: ['rec.*'] });
  const slow = await a.createEndpoint({ url: sink.url('/slow'), event_types: ['rec.*'] });
  const ev = await a.publish({ type: 'rec.x', data: { n: 1 } });

  await waitFor(() => a.child.exitCode !== null || a.child.signalCode !== null,
    { timeoutMs: 15000, what: 'the fault hook to kill node A at its second record' });
  assert.equal(a.child.signalCode, 'SIGKILL', `killed by the hook (exit ${a.child.exitCode})`);
  assert.equal(sink.byPath.get('/fast')?.get(ev.id), 1, 'the fast endpoint got it once');
  assert.equal(sink.byPath.get('/slow')?.get(ev.id), 1, 'the slow endpoint got it once, its result unrecorded');
  const atKill = rowsOf(a.sql(`SELECT endpoint_id, status, attempt_count FROM hookd_deliveries
    WHERE event_id = '${ev.id}' ORDER BY endpoint_id = '${fast.id}' DESC`));
  if (BACKEND === 'postgres') {
    // The slow one was sent without its row (unrecorded): only its lease is in the store.
    assert.deepEqual(atKill, [[fast.id, 'delivered', '1']]);
    assert.deepEqual(rowsOf(a.sql(`SELECT endpoint_id, owner FROM hookd_inflight WHERE event_id = '${ev.id}'`)),
      [[slow.id, 'node-a']]);
  } else {
    // The single-node hand-off recorded its row, leased to node A, before the results.
    assert.deepEqual(atKill, [[fast.id, 'delivered', '1'], [slow.id, 'pending', '0']]);
  }

  const started = Date.now();
  if (BACKEND === 'postgres') {
    b = await startDaemon({ ...env, HOOKD_SERVER_NODE_ID: 'node-b' }, { store });
  } else {
    delete a.env.HOOKD_TEST_STORE_FAULT;
    await a.start();
    b = a;
  }
  await waitFor(() => sink.byPath.get('/slow').get(ev.id) >= 2, { timeoutMs: 15000, what: 'the slow endpoint\'s repeat' });
  if (BACKEND === 'postgres')
    assert.ok(Date.now() - started >= LEASE_MS - 1500, 'taken over only once the lease ran out');
  await b.waitDelivery(ev.id, 'delivered', 10000);
  await sleep(LEASE_MS + 500); // a wrong repeat of the recorded one would have gone by now

  assert.deepEqual([...sink.byPath.get('/fast').entries()], [[ev.id, 1]], 'the recorded delivery was not sent again');
  assert.deepEqual([...sink.byPath.get('/slow').entries()], [[ev.id, 2]], 'sent once more, with the same webhook-id');
  assert.equal(sink.bodyMismatches, 0, 'every body carries its webhook-id');
  const ds = await b.deliveriesOf(ev.id);
  assert.equal(ds.length, 2, 'one delivery per endpoint in the log');
  assert.deepEqual(ds.map((d) => d.status), ['delivered', 'delivered']);
  const attempts = rowsOf(b.sql(`SELECT d.endpoint_id, a.n, a.node FROM hookd_attempts_all a
    JOIN hookd_deliveries d ON d.id = a.delivery_id WHERE d.event_id = '${ev.id}' ORDER BY d.endpoint_id = '${fast.id}' DESC`));
  assert.deepEqual(attempts, [[fast.id, '1', 'node-a'], [slow.id, '1', b.node]],
    'the fast one\'s attempt from node A; the slow one\'s recorded once, by the node that sent it again');
  if (BACKEND === 'postgres') assert.equal(b.sql('SELECT count(*) FROM hookd_inflight'), '0', 'no lease left');
  assert.equal(await b.stop(), 0);
});
