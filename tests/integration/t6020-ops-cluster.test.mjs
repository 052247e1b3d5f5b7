// Replays and account tokens on several nodes of one PostgreSQL database: a
// token made on one node works on the others, and its revocation there takes
// effect everywhere within the cache bound (about a second); a range replay
// sent through one node is delivered once, whichever node claims it, and its
// record and progress read the same from every node.
// PostgreSQL only (HOOKD_TEST_BACKEND=postgres): on SQLite these are reported skipped.
import { test, after, before } from 'node:test';
import assert from 'node:assert/strict';
import { BACKEND, startNodes, startRecordingSink, waitFor } from '../lib/harness.mjs';

const skip = BACKEND === 'postgres' ? false
  : 'several nodes need a shared store: run with HOOKD_TEST_BACKEND=postgres (SQLite is single-node)';

let cluster, sink, failing = true;
before(async () => {
  if (skip) return;
  sink = await startRecordingSink({ status: () => (failing ? 400 : 200) });
  cluster = await startNodes(3, { HOOKD_DELIVERY_BREAKER_FAILURES: '0' });
});
after(async () => {
  if (skip) return;
  await sink.stop();
  assert.deepEqual(await cluster.stopAll(), [0, 0, 0], 'every node exits cleanly');
  await cluster.cleanup();
});

const bearer = (tok) => ({ authorization: `Bearer ${tok.token}` });

test('a token from node 1 works on nodes 2 and 3; revoked on node 1, refused everywhere within ~1 s', { skip }, async () => {
  const [a, b, c] = cluster.nodes;
  const tok = (await a.api('POST', '/v1/tokens', { account: 'acme', scope: 'read', ttl: '1h' })).body;
  for (const n of [b, c])
    await waitFor(async () => (await n.api('GET', '/v1/deliveries', undefined, bearer(tok))).status === 200,
      { timeoutMs: 3000, what: 'the new token on another node' });
  assert.equal((await a.api('DELETE', `/v1/tokens/${tok.id}`)).status, 200);
  assert.equal((await a.api('GET', '/v1/deliveries', undefined, bearer(tok))).status, 401, 'at once where revoked');
  const t0 = Date.now();
  for (const n of [b, c])
    await waitFor(async () => (await n.api('GET', '/v1/deliveries', undefined, bearer(tok))).status === 401,
      { timeoutMs: 10000, what: 'the revocation on another node' });
  // Each node checks the token version at most every second (TOKEN_CACHE_CHECK_MS); a node that never
  // checked would accept the token until it expires (1 h). The bound leaves room for a loaded machine.
  assert.ok(Date.now() - t0 < 5000, `revocation took ${Date.now() - t0} ms to reach every node`);
});

test('a range replay through one node: each dead delivery sent once, the record the same on every node', { skip }, async () => {
  const [a, b, c] = cluster.nodes;
  const ep = await a.createEndpoint({ url: sink.url('/mn'), event_types: ['mn.*'], account: 'acme' });
  const evs = [];
  for (let i = 0; i < 20; i++) evs.push(await a.publish({ type: 'mn.x', account: 'acme', data: { i } }));
  for (const ev of evs) await a.waitDelivery(ev.id, 'dead');
  const before = sink.at('/mn').length;
  failing = false;
  const r = await b.api('POST', '/v1/replays', { endpoint_id: ep.id });
  assert.equal(r.status, 202);
  assert.equal(r.body.replayed, 20);
  for (const ev of evs) await c.waitDelivery(ev.id, 'delivered');
  assert.equal(sink.at('/mn').length, before + 20, 'each replayed delivery sent once');
  assert.equal(new Set(sink.at('/mn').slice(before).map((x) => x.headers['webhook-id'])).size, 20);
  for (const n of [a, b, c]) {
    const rec = (await n.api('GET', `/v1/replays/${r.body.id}`)).body;
    assert.deepEqual(rec.progress, { pending: 0, delivered: 20, failed: 0, superseded: 0 });
    assert.equal(rec.done, true);
  }
});
