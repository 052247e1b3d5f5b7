// Machine decisions keep parsed definitions in memory and read each machine's
// row in the decision's own transaction: a PATCH decides the very next event,
// on every node (PostgreSQL: two nodes, events sent to each in turn); a
// definition changed by plain SQL is seen too, and one that does not parse
// quarantines the event (then a PATCH and a replay apply it). The decision
// connections do not NOTIFY (PostgreSQL): the deciding node's relay is woken
// in-process, so an emitted event still reaches the application at once.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { startDaemon, startNodes, startSink, waitFor, BACKEND } from '../lib/harness.mjs';

const cleanups = [];
after(async () => { for (const c of cleanups) await c(); });

const V1 = {
  name: 'order', versioning: 'none',
  transitions: [
    { on: 'order.created', from: [null], to: 'created' },
    { on: 'order.paid', from: ['created'], to: 'paid' },
  ],
  emit: 'order.status_changed',
};

/** n nodes on one store (one on SQLite), the source and machine, an endpoint at a sink. */
async function setup(n) {
  const sink = await startSink();
  cleanups.push(() => sink.stop());
  const env = { HOOKD_INBOX_WORKERS: '8' };
  let nodes, sql;
  if (BACKEND === 'postgres' && n > 1) {
    const c = await startNodes(n, env);
    cleanups.push(() => c.cleanup());
    nodes = c.nodes;
    sql = c.sql;
  } else {
    const d = await startDaemon(env);
    cleanups.push(() => d.cleanup());
    nodes = [d];
    sql = d.sql;
  }
  const d = nodes[0];
  let r = await d.api('POST', '/v1/machines', V1);
  assert.equal(r.status, 201, JSON.stringify(r.body));
  r = await d.api('POST', '/v1/sources', {
    name: 'shop', verify: { scheme: 'none' }, event_id: '/id', event_type: '/type',
    entity: { kind: 'order', id: '/data/order' }, handler: { machine: 'order' }, retry_schedule: '200ms',
  });
  assert.equal(r.status, 201, JSON.stringify(r.body));
  await d.createEndpoint({ url: sink.url('/app'), event_types: ['order.status_changed', 'order.moved'] });
  const send = async (node, id, type, order) => {
    const res = await fetch(`http://127.0.0.1:${node.publicPort}/in/shop`, {
      method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ id, type, data: { order } }),
    });
    assert.equal(res.status, 200);
    return (await res.json()).id;
  };
  const item = async (id) => (await d.api('GET', `/v1/inbox/${id}`)).body;
  const settled = (id) => waitFor(async () => {
    const it = await item(id);
    return it.status !== 'pending' && it;
  }, { timeoutMs: 15000, what: `item ${id} decided` });
  return { nodes, sql, sink, send, item, settled };
}

test('a PATCH decides the next event on every node; the emitted type follows it', { timeout: 90000 }, async () => {
  const { nodes, sql, sink, send, settled } = await setup(2);
  const N = 12;
  // Before: every node decides with v1 (its cache holds it), events sent to each node in turn.
  for (let e = 0; e < N; e++) {
    const node = nodes[e % nodes.length];
    assert.equal((await settled(await send(node, `c${e}`, 'order.created', `o${e}`))).result, 'applied');
    assert.equal((await settled(await send(node, `p${e}`, 'order.paid', `o${e}`))).result, 'applied');
  }
  const before = new Set(sql("SELECT DISTINCT worker FROM hookd_transitions WHERE result = 'applied'").split('\n').filter(Boolean));
  assert.equal(before.size, nodes.length, `every node decided with v1 (${[...before]})`);
  // Shipping is not in v1: deferred.
  const early = await send(nodes[0], 'early', 'order.shipped', 'o0');
  assert.equal((await settled(early)).status, 'deferred');

  const r = await nodes[0].api('PATCH', '/v1/machines/order', {
    states: ['created', 'paid', 'shipped'], emit: 'order.moved',
    transitions: [...V1.transitions, { on: 'order.shipped', from: ['paid'], to: 'shipped' }],
  });
  assert.equal(r.status, 200, JSON.stringify(r.body));
  // After: the next event on every node is decided by the new definition, at once (not at a retry).
  for (let e = 1; e < N; e++) {
    const node = nodes[e % nodes.length];
    const it = await settled(await send(node, `s${e}`, 'order.shipped', `o${e}`));
    assert.equal(it.status, 'processed', JSON.stringify(it));
    assert.equal(it.result, 'applied');
  }
  const shippedBy = new Set(sql("SELECT DISTINCT worker FROM hookd_transitions WHERE result = 'applied' AND to_state = 'shipped' AND entity_id <> 'o0'")
    .split('\n').filter(Boolean));
  assert.equal(shippedBy.size, nodes.length, `every node decided with the PATCHed machine (${[...shippedBy]})`);
  // The deferred one passes at its next look, under the new definition too.
  await waitFor(async () => (await settled(early)).status === 'processed', { timeoutMs: 15000, what: 'the early shipped applied' });
  assert.equal(sql("SELECT count(*) FROM hookd_outbox WHERE event_type = 'order.moved'"), String(N));
  assert.equal(sql("SELECT count(*) FROM hookd_outbox WHERE event_type = 'order.status_changed'"), String(2 * N));
  await sink.waitCount(3 * N, 20000);
  const types = sink.requests.map((q) => (typeof q.body === 'string' ? JSON.parse(q.body) : q.body).type);
  assert.equal(types.filter((t) => t === 'order.moved').length, N);
});

test('a definition changed by plain SQL is seen; one that does not parse quarantines, fixed and replayed it applies', { timeout: 60000 }, async () => {
  const { nodes, sql, send, settled } = await setup(1);
  const d = nodes[0];
  assert.equal((await settled(await send(d, 'c1', 'order.created', 'q1'))).result, 'applied');
  // v1 cached; the row now also allows created -> cancelled, written by SQL.
  const withCancel = JSON.stringify({ ...V1, transitions: [...V1.transitions, { on: 'order.cancelled', from: ['created'], to: 'cancelled' }] });
  sql(`UPDATE hookd_machines SET definition = '${withCancel.replace(/'/g, "''")}' WHERE name = 'order'`);
  assert.equal((await settled(await send(d, 'x1', 'order.cancelled', 'q1'))).result, 'applied');
  // Bytes that are no definition: the event is quarantined with the reason, nothing applied.
  sql("UPDATE hookd_machines SET definition = '{\"name\": \"order\", \"transitions\": [' WHERE name = 'order'");
  const bad = await settled(await send(d, 'c2', 'order.created', 'q2'));
  assert.equal(bad.status, 'quarantined');
  assert.match(bad.error, /stored definition of machine order does not parse/);
  assert.equal(sql("SELECT count(*) FROM hookd_entities WHERE id = 'q2'"), '0');
  // A definition whose name is another machine's is refused the same way.
  sql(`UPDATE hookd_machines SET definition = '${JSON.stringify({ ...V1, name: 'other' })}' WHERE name = 'order'`);
  const named = await settled(await send(d, 'c3', 'order.created', 'q3'));
  assert.equal(named.status, 'quarantined');
  // Fixed (v1 again), the quarantined one replayed: applied.
  sql(`UPDATE hookd_machines SET definition = '${JSON.stringify(V1)}' WHERE name = 'order'`);
  const r = await d.api('POST', `/v1/inbox/${bad.id}/replay`);
  assert.equal(r.status, 202, JSON.stringify(r.body));
  await waitFor(async () => (await settled(bad.id)).status === 'processed', { timeoutMs: 15000, what: 'replayed and applied' });
  assert.equal((await settled(bad.id)).result, 'applied');
  assert.equal(sql("SELECT state FROM hookd_entities WHERE id = 'q2'"), 'created');
});

test('emitted events reach the application at once: the deciding node wakes its relay itself', { timeout: 60000 }, async () => {
  const { nodes, sink, send } = await setup(1);
  const d = nodes[0];
  const waits = [];
  for (let e = 0; e < 9; e++) {
    const t0 = Date.now();
    await send(d, `w${e}`, 'order.created', `w${e}`);
    await sink.waitCount(e + 1, 10000);
    waits.push(Date.now() - t0);
  }
  waits.sort((a, b) => a - b);
  // Without the in-process wake-up the relay would find them at its 1 s safety poll (a median near 500 ms).
  assert.ok(waits[4] < 250, `median accept -> delivered ${waits[4]} ms (${waits})`);
  const items = (await d.api('GET', '/v1/inbox?source=shop&limit=100')).body.data;
  assert.equal(items.filter((x) => x.result === 'applied').length, 9);
});
