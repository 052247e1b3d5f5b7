// State machines on inbound events (DESIGN §7): the order machine decides each
// event against the entity's state and applied version; applied changes emit
// order.status_changed into the outbox (signed deliveries to the app), exactly
// once. Versions out of order, gaps, stale versions, duplicates, re-runs,
// parallel workers, deferral past max_defer and a replay after a fix.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { startDaemon, startSink, sleep, waitFor, BACKEND } from '../lib/harness.mjs';

const cleanups = [];
after(async () => { for (const c of cleanups) await c(); });

const ORDER = {
  name: 'order', versioning: 'contiguous',
  transitions: [
    { on: 'order.created', from: [null], to: 'created' },
    { on: 'order.paid', from: ['created'], to: 'paid' },
    { on: 'order.fulfilled', from: ['paid'], to: 'fulfilled' },
    { on: 'order.refunded', from: ['paid', 'fulfilled'], to: 'refunded' },
    { on: 'order.cancelled', from: ['created'], to: 'cancelled' },
  ],
  emit: 'order.status_changed',
};

async function setup(env = {}, machine = ORDER, source = {}) {
  const sink = await startSink();
  cleanups.push(() => sink.stop());
  const d = await startDaemon({ HOOKD_INBOX_WORKERS: '4', ...env });
  cleanups.push(() => d.cleanup());
  if (process.env.DUMP) cleanups.push(() => console.error(d.child.stderrText));
  let r = await d.api('POST', '/v1/machines', machine);
  assert.equal(r.status, 201, JSON.stringify(r.body));
  r = await d.api('POST', '/v1/sources', {
    name: 'shop', verify: { scheme: 'none' }, event_id: '/id', event_type: '/type',
    entity: { kind: 'order', id: '/data/order', version: '/data/version' },
    handler: { machine: machine.name }, retry_schedule: '200ms', ...source,
  });
  assert.equal(r.status, 201, JSON.stringify(r.body));
  await d.createEndpoint({ url: sink.url('/app'), event_types: ['order.status_changed'] });
  const send = async (id, type, order, version) => {
    const data = { order };
    if (version !== undefined) data.version = version;
    const res = await fetch(`http://127.0.0.1:${d.publicPort}/in/shop`, {
      method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ id, type, data }),
    });
    assert.equal(res.status, 200);
    return (await res.json()).id;
  };
  const entity = async (id) => (await d.api('GET', `/v1/entities/order/${encodeURIComponent(id)}`)).body;
  const item = async (id) => (await d.api('GET', `/v1/inbox/${id}`)).body;
  const emitted = (order) => Number(d.sql(`SELECT count(*) FROM hookd_outbox WHERE event_type = 'order.status_changed' AND resource_id = '${order}'`));
  return { d, sink, send, entity, item, emitted };
}

test('contiguous: versions 3, 2, 1 are applied in order 1, 2, 3 once 1 arrives; emitted once each, delivered', { timeout: 60000 }, async () => {
  const { d, sink, send, entity, item, emitted } = await setup();
  const i3 = await send('e3', 'order.fulfilled', 'o1', 3);
  const i2 = await send('e2', 'order.paid', 'o1', 2);
  await waitFor(async () => (await item(i3)).status === 'deferred' && (await item(i2)).status === 'deferred', { what: '3 and 2 deferred' });
  const i1 = await send('e1', 'order.created', 'o1', 1);
  await waitFor(async () => (await entity('o1'))?.version === 3, { what: 'entity at version 3' });
  const e = await entity('o1');
  assert.equal(e.state, 'fulfilled');
  assert.equal(e.last_event_id, 'e3');
  for (const id of [i1, i2, i3]) {
    const it = await item(id);
    assert.equal(it.status, 'processed');
    assert.equal(it.result, 'applied');
  }
  assert.equal(emitted('o1'), 3);
  const applied = d.sql("SELECT version FROM hookd_transitions WHERE entity_id = 'o1' AND result = 'applied' ORDER BY seq");
  assert.equal(applied, '1\n2\n3');
  await sink.waitCount(3);
  const bodies = sink.requests.map((r) => (typeof r.body === "string" ? JSON.parse(r.body) : r.body)).sort((a, b) => a.data.version - b.data.version);
  assert.deepEqual(bodies.map((b) => [b.data.previous_state, b.data.state, b.data.version]),
    [[null, 'created', 1], ['created', 'paid', 2], ['paid', 'fulfilled', 3]]);
  assert.equal(bodies[0].type, 'order.status_changed');
  assert.deepEqual(bodies[0].data.entity, { kind: 'order', id: 'o1' });
  assert.equal(bodies[2].data.source_event_id, 'e3');
  // The trace, both orders.
  const tr = (await d.api('GET', '/v1/entities/order/o1/trace?order=version')).body;
  assert.deepEqual(tr.events.map((x) => [x.version, x.from, x.to, x.result]),
    [[1, null, 'created', 'applied'], [2, 'created', 'paid', 'applied'], [3, 'paid', 'fulfilled', 'applied']]);
  assert.ok(tr.events.every((x) => x.worker && x.received_at && x.processed_at && x.dup_count === 0));
  const rec = (await d.api('GET', '/v1/entities/order/o1/trace?order=received')).body;
  assert.deepEqual(rec.events.map((x) => x.version), [3, 2, 1]);
  assert.equal((await d.api('GET', '/v1/entities/order/o1/trace?order=sideways')).status, 400);
  assert.equal((await d.api('GET', '/v1/entities/order/nope')).status, 404);
  // The audit: one lower version after a higher one (2 after 3, 1 after 2 and 3 count per item), nothing applied twice.
  const a = (await d.api('GET', '/v1/audit?source=shop')).body;
  assert.equal(a.checks.lower_after_higher.count, 2);
  assert.equal(a.checks.applied_twice.count, 0);
  assert.equal(a.checks.unprocessed_changes.count, 0);
  assert.equal(a.ok, true);
});

test('paid before created: deferred, then applied when created arrives', { timeout: 60000 }, async () => {
  const { send, entity, item, emitted } = await setup({}, { ...ORDER, versioning: 'none' });
  const p = await send('p1', 'order.paid', 'o2');
  await waitFor(async () => (await item(p)).status === 'deferred', { what: 'paid deferred' });
  assert.match((await item(p)).error, /no transition on order\.paid from a new entity/);
  await send('c1', 'order.created', 'o2');
  await waitFor(async () => (await entity('o2'))?.state === 'paid', { what: 'entity paid' });
  assert.equal((await item(p)).result, 'applied');
  assert.equal((await entity('o2')).version, null, 'versioning none keeps no version');
  assert.equal(emitted('o2'), 2);
});

test('monotonic: 9 then 8 -> 8 is stale, the entity stays at 9', { timeout: 60000 }, async () => {
  const m = { ...ORDER, name: 'mono', versioning: 'monotonic',
    transitions: [...ORDER.transitions, { on: 'order.paid', from: ['paid'], to: 'paid' }] };
  const { send, entity, item, emitted } = await setup({}, m);
  await send('m0', 'order.created', 'o3', 5);
  await waitFor(async () => (await entity('o3'))?.version === 5, { what: 'created at 5' });
  await send('m9', 'order.paid', 'o3', 9);
  await waitFor(async () => (await entity('o3'))?.version === 9, { what: 'paid at 9' });
  const i8 = await send('m8', 'order.paid', 'o3', 8);
  await waitFor(async () => (await item(i8)).status === 'processed', { what: '8 processed' });
  assert.equal((await item(i8)).result, 'stale');
  const e = await entity('o3');
  assert.equal(e.version, 9);
  assert.equal(e.state, 'paid');
  assert.equal(emitted('o3'), 2);
});

test('the same event twice, and a re-run of processing: nothing changes the second time', { timeout: 60000 }, async () => {
  const { d, send, entity, item, emitted } = await setup();
  const a = await send('d1', 'order.created', 'o4', 1);
  const b = await send('d1', 'order.created', 'o4', 1);
  assert.equal(a, b, 'a duplicate answers the stored item');
  await waitFor(async () => (await entity('o4'))?.version === 1, { what: 'applied' });
  await sleep(300);
  assert.equal((await item(a)).dup_count, 1);
  assert.equal(emitted('o4'), 1);
  // A re-run: the processed item back to pending by SQL (as a crash between decision and mark could never leave it).
  d.sql(`UPDATE hookd_inbox SET status = 'pending', next_attempt_at = 0, result = NULL WHERE id = '${a}'`);
  await waitFor(async () => (await item(a)).status === 'processed', { what: 'processed again' });
  assert.equal((await item(a)).result, 'stale', 'version 1 is not above the applied 1');
  assert.equal(emitted('o4'), 1, 'no second emitted event');
  assert.equal(d.sql("SELECT count(*) FROM hookd_transitions WHERE entity_id = 'o4' AND result = 'applied'"), '1');
  const audit = (await d.api('GET', '/v1/audit?source=shop')).body;
  assert.equal(audit.checks.received_twice.count, 1);
  assert.equal(audit.checks.received_twice.copies, 1);
  assert.equal(audit.checks.applied_twice.count, 0);
});

test('many entities with parallel workers: each entity serialized, final states correct', { timeout: 90000 }, async () => {
  const { d, send, entity } = await setup({ HOOKD_INBOX_WORKERS: '8' });
  const types = ['order.created', 'order.paid', 'order.fulfilled', 'order.refunded'];
  const sends = [];
  for (let e = 0; e < 20; e++) {
    const order = [1, 2, 3, 4].sort(() => Math.random() - 0.5);
    for (const v of order) sends.push(send(`p${e}-${v}`, types[v - 1], `par${e}`, v));
  }
  await Promise.all(sends);
  for (let e = 0; e < 20; e++)
    await waitFor(async () => (await entity(`par${e}`))?.version === 4, { timeoutMs: 30000, what: `par${e} at 4` });
  for (let e = 0; e < 20; e++) assert.equal((await entity(`par${e}`)).state, 'refunded');
  assert.equal(d.sql("SELECT count(*) FROM hookd_transitions WHERE entity_id LIKE 'par%' AND result = 'applied'"), '80');
  assert.equal(d.sql("SELECT count(*) FROM hookd_outbox WHERE resource_id LIKE 'par%'"), '80');
  const audit = (await d.api('GET', '/v1/audit?source=shop')).body;
  assert.equal(audit.checks.applied_twice.count, 0);
  assert.equal(audit.checks.unprocessed_changes.count, 0);
});

test('a transition that never becomes valid: quarantined after max_defer; replayed after the machine is fixed: applied', { timeout: 60000 }, async () => {
  const { d, send, entity, item, emitted } = await setup({}, { ...ORDER, versioning: 'none' },
    { max_defer: '1s', retry_schedule: '200ms' });
  await send('q0', 'order.created', 'o5');
  await waitFor(async () => (await entity('o5'))?.state === 'created', { what: 'created' });
  const q = await send('q1', 'order.fulfilled', 'o5'); // fulfilled from created: not in the machine
  await waitFor(async () => (await item(q)).status === 'quarantined', { timeoutMs: 15000, what: 'quarantined' });
  assert.match((await item(q)).error, /deferred for longer than max_defer/);
  assert.ok(Number(d.sql(`SELECT count(*) FROM hookd_transitions WHERE inbox_id = '${q}' AND result = 'deferred'`)) >= 1);
  assert.equal(d.sql(`SELECT count(*) FROM hookd_transitions WHERE inbox_id = '${q}' AND result = 'quarantined'`), '1');
  // Fix the machine, replay the item.
  const fixed = [...ORDER.transitions.filter((t) => t.on !== 'order.fulfilled'),
    { on: 'order.fulfilled', from: ['created', 'paid'], to: 'fulfilled' }];
  let r = await d.api('PATCH', '/v1/machines/order', { transitions: fixed });
  assert.equal(r.status, 200, JSON.stringify(r.body));
  r = await d.api('POST', `/v1/inbox/${q}/replay`);
  assert.equal(r.status, 202);
  await waitFor(async () => (await item(q)).status === 'processed', { what: 'applied after the fix' });
  assert.equal((await item(q)).result, 'applied');
  assert.equal((await entity('o5')).state, 'fulfilled');
  assert.equal(emitted('o5'), 2);
});

test('machines API: validation names the field; delete refused while a source uses it; CLI trace and audit', { timeout: 60000 }, async () => {
  const { d, send, entity } = await setup();
  const bad = async (body, code, field) => {
    const r = await d.api('POST', '/v1/machines', body);
    assert.equal(r.status, 400, JSON.stringify(r.body));
    assert.equal(r.body.error.code, code);
    assert.match(r.body.error.message, field);
  };
  const base = { name: 'm2', versioning: 'contiguous', transitions: [{ on: 'a.b', from: [null], to: 'x' }] };
  await bad({ ...base, versioning: 'sometimes' }, 'invalid_field', /^versioning/);
  await bad({ name: 'm2', transitions: base.transitions }, 'missing_field', /versioning/);
  await bad({ ...base, colour: 1 }, 'unknown_field', /colour/);
  await bad({ ...base, transitions: [{ on: 'a.b', from: ['ghost'], to: 'x' }] }, 'invalid_field', /transitions\[0\]\.from: unknown state "ghost"/);
  await bad({ ...base, transitions: [...base.transitions, { on: 'a.b', from: [null], to: 'y' }] }, 'invalid_field', /transitions\[1\]\.from/);
  await bad({ ...base, transitions: [...base.transitions, { on: 'c', from: ['z'], to: 'z' }] }, 'invalid_field', /unreachable/);
  await bad({ ...base, states: ['x'], transitions: [{ on: 'a.b', from: [null], to: 'y' }] }, 'invalid_field', /transitions\[0\]\.to/);
  await bad({ ...base, states: ['x', 'lonely'] }, 'invalid_field', /states: state "lonely" is unreachable/);
  await bad({ ...base, transitions: [{ on: 'a b', from: [null], to: 'x' }] }, 'invalid_field', /transitions\[0\]\.on/);
  await bad({ ...base, transitions: [{ on: 'a.b', from: [null], to: 'x', extra: 1 }] }, 'unknown_field', /transitions\[0\]\.extra/);
  await bad({ ...base, transitions: [{ on: 'a.b', from: [], to: 'x' }] }, 'invalid_field', /transitions\[0\]\.from/);
  await bad({ ...base, emit: 'no spaces' }, 'invalid_field', /^emit/);
  await bad({ ...base, name: 'bad name' }, 'invalid_field', /^name/);
  // States derived from the transitions are derived again when they change: a PATCH may add a state.
  let r = await d.api('POST', '/v1/machines', base);
  assert.equal(r.status, 201, JSON.stringify(r.body));
  assert.deepEqual(r.body.states, ['x']);
  r = await d.api('PATCH', '/v1/machines/m2', { transitions: [...base.transitions, { on: 'c.d', from: ['x'], to: 'w' }] });
  assert.equal(r.status, 200, JSON.stringify(r.body));
  assert.deepEqual(r.body.states, ['x', 'w']);
  // Declared states stay declared: a PATCH that leads to an undeclared one is refused.
  r = await d.api('PATCH', '/v1/machines/m2', { states: ['x', 'w'] });
  assert.equal(r.status, 200, JSON.stringify(r.body));
  r = await d.api('PATCH', '/v1/machines/m2', { transitions: [...base.transitions, { on: 'c.d', from: ['x'], to: 'v' }] });
  assert.equal(r.status, 400);
  assert.match(r.body.error.message, /not one of the declared states/);
  assert.equal((await d.api('DELETE', '/v1/machines/m2')).status, 204);
  r = await d.api('POST', '/v1/machines', ORDER);
  assert.equal(r.status, 409);
  r = await d.api('PATCH', '/v1/machines/order', { name: 'other' });
  assert.equal(r.status, 400);
  r = await d.api('PATCH', '/v1/machines/order', { emit: null });
  assert.equal(r.status, 200);
  assert.equal(r.body.emit, null);
  assert.equal(r.body.versioning, 'contiguous');
  r = await d.api('GET', '/v1/machines');
  assert.deepEqual(r.body.data.map((m) => m.name), ['order']);
  r = await d.api('DELETE', '/v1/machines/order');
  assert.equal(r.status, 409);
  assert.match(r.body.error.message, /source shop/);
  r = await d.api('POST', '/v1/sources', { name: 's2', verify: { scheme: 'none' }, entity: { kind: 'k', id: '/id' }, handler: { machine: 'ghost' } });
  assert.equal(r.status, 400);
  assert.match(r.body.error.message, /handler\.machine/);
  r = await d.api('POST', '/v1/sources', { name: 's3', verify: { scheme: 'none' }, handler: { machine: 'order' } });
  assert.equal(r.status, 400);
  assert.match(r.body.error.message, /entity/);
  // The CLI.
  await send('c1', 'order.created', 'cli1', 1);
  await waitFor(async () => (await entity('cli1'))?.version === 1, { what: 'applied' });
  const out = d.cli(['trace', 'order', 'cli1']);
  assert.match(out, /^state +created$/m);
  assert.match(out, /^  EVENT_ID +TYPE +VERSION/m);
  assert.match(out, /^  c1 .*created/m);
  const j = JSON.parse(d.cli(['trace', 'order', 'cli1', '--json']));
  assert.equal(j.events[0].to, 'created');
  const audit = d.cli(['audit', '--source', 'shop']);
  assert.match(audit, /^checks\.applied_twice\.count\s+0$/m);
  assert.match(audit, /^ok\s+true$/m);
  assert.equal(JSON.parse(d.cli(['audit', '--json'])).ok, true);
  // Machines in hookd apply, before sources.
  const { writeFileSync, mkdtempSync } = await import('node:fs');
  const { join } = await import('node:path');
  const { tmpdir } = await import('node:os');
  const file = join(mkdtempSync(join(tmpdir(), 'hookd-apply-')), 'a.json');
  writeFileSync(file, JSON.stringify({
    sources: [{ name: 'applied', verify: { scheme: 'none' }, entity: { kind: 'sub', id: '/id' }, handler: { machine: 'sub' } }],
    machines: [{ name: 'sub', versioning: 'none', transitions: [{ on: 'sub.start', from: [null], to: 'on' }] }],
  }));
  const first = JSON.parse(d.cli(['apply', '--json', file]));
  assert.deepEqual(first.items.map((i) => [i.kind, i.name, i.result]),
    [['machine', 'sub', 'created'], ['source', 'applied', 'created']], 'machines are applied before sources');
  assert.deepEqual(first.summary.find((k) => k.kind === 'machines'),
    { kind: 'machines', created: 1, updated: 0, unchanged: 0, failed: 0 });
  const again = d.cli(['apply', file]);
  assert.match(again, /^machine\s+sub\s+unchanged/m);
  assert.match(again, /^machines\s+0\s+0\s+1\s+0/m);
});

test('rows written by SQL: an unreadable machine quarantines its events, a strange entity state is only a state', { timeout: 60000 }, async () => {
  const { d, send, entity, item } = await setup({}, { ...ORDER, versioning: 'none' });
  await send('h0', 'order.created', 'h1');
  await waitFor(async () => (await entity('h1'))?.state === 'created', { what: 'created' });
  // A state no transition leaves from, with bytes a terminal would act on: nothing is allowed from it.
  d.sql(`UPDATE hookd_entities SET state = 'we''ird' || ${BACKEND === 'postgres' ? 'chr' : 'char'}(27) || '[31m' WHERE id = 'h1'`);
  const w = await send('h2', 'order.paid', 'h1');
  await waitFor(async () => (await item(w)).status === 'deferred', { what: 'deferred' });
  assert.match((await item(w)).error, /no transition on order\.paid from we'ird/);
  assert.equal((await entity('h1')).state, "we'ird\u001b[31m");
  // The stored definition broken by SQL: the next event is quarantined with the reason, the API says so.
  d.sql("UPDATE hookd_machines SET definition = '{\"name\": 1' WHERE name = 'order'");
  const q = await send('h3', 'order.created', 'h9');
  await waitFor(async () => (await item(q)).status === 'quarantined', { what: 'quarantined' });
  assert.match((await item(q)).error, /definition of machine order does not parse/);
  const r = await d.api('GET', '/v1/machines/order');
  assert.ok(r.status >= 500, `an unreadable definition is not a 200 (${r.status})`);
  assert.equal((await d.api('GET', '/v1/machines')).status, 200);
});

test('SQLite decides a machine item in its accept: the 200 comes after the entity moved; PostgreSQL through the claims', { timeout: 60000 }, async () => {
  const { d, sink, send, entity, item, emitted } = await setup();
  const leaseTokens = (order) => d.sql(`SELECT lease_token FROM hookd_inbox WHERE entity_id = '${order}' ORDER BY version`);
  const i2 = await send('a2', 'order.paid', 'a1', 2);
  const i1 = await send('a1', 'order.created', 'a1', 1);
  if (BACKEND === 'sqlite') {
    // Decided by the accepts' commits, never claimed (a claim moves lease_token): no wait needed.
    assert.equal((await item(i1)).status, 'processed');
    assert.equal((await item(i2)).status, 'processed');
    assert.equal((await item(i2)).result, 'applied');
    assert.equal((await entity('a1')).version, 2);
    assert.equal(leaseTokens('a1'), '0\n0');
    // An early item is inserted deferred, with its transitions row.
    const i4 = await send('a4', 'order.refunded', 'a1', 4);
    const it4 = await item(i4);
    assert.equal(it4.status, 'deferred');
    assert.equal(it4.attempts, 1);
    assert.equal(d.sql(`SELECT count(*) FROM hookd_transitions WHERE inbox_id = '${i4}' AND result = 'deferred'`), '1');
    const i3 = await send('a3', 'order.fulfilled', 'a1', 3);
    assert.equal((await item(i3)).status, 'processed');
    assert.equal((await item(i4)).result, 'applied');
    assert.equal((await entity('a1')).state, 'refunded');
  } else {
    await waitFor(async () => (await entity('a1'))?.version === 2, { what: 'entity at version 2' });
    assert.equal((await item(i1)).status, 'processed');
    assert.notEqual(leaseTokens('a1'), '0\n0'); // claimed by the workers
    const i4 = await send('a4', 'order.refunded', 'a1', 4);
    await waitFor(async () => (await item(i4)).status === 'deferred', { what: '4 deferred' });
    await send('a3', 'order.fulfilled', 'a1', 3);
    await waitFor(async () => (await entity('a1'))?.version === 4, { what: 'entity at version 4' });
    assert.equal((await entity('a1')).state, 'refunded');
  }
  assert.equal(emitted('a1'), 4);
  await sink.waitCount(4);
});
