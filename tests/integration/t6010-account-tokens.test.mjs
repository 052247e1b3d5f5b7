// Account-scoped tokens: issued once (hkat_…, stored hashed), listed without
// secrets, revoked; with a token of account A every route shows A's data and
// never B's (404 for B's records, lists filtered), replay only with
// read_replay and only of A's dead letters, everything else 403; an expired
// or revoked token is 401.
import { test, after, before } from 'node:test';
import assert from 'node:assert/strict';
import { BACKEND, startDaemon, startRecordingSink, waitFor, sleep } from '../lib/harness.mjs';

let d, sink, A, B, tokA, tokAr, tokB;
before(async () => {
  d = await startDaemon();
  sink = await startRecordingSink({ status: (n, req) => (req.url.startsWith('/dead') ? 400 : 200) });
  const mk = async (account) => {
    const ep = await d.createEndpoint({ url: sink.url(`/dead-${account}`), account, event_types: ['t.*'] });
    const ev = await d.publish({ type: 't.x', account, data: { account } });
    const [dl] = await d.waitDelivery(ev.id, 'dead');
    return { ep, ev, dl };
  };
  A = await mk('acct-a');
  B = await mk('acct-b');
  const issue = async (body) => {
    const r = await d.api('POST', '/v1/tokens', body);
    assert.equal(r.status, 201, JSON.stringify(r.body));
    return r.body;
  };
  tokA = await issue({ account: 'acct-a', scope: 'read', ttl: '1h', description: 'portal A' });
  tokAr = await issue({ account: 'acct-a', scope: 'read_replay', ttl: '1h' });
  tokB = await issue({ account: 'acct-b', scope: 'read_replay', expires_at: new Date(Date.now() + 3600e3).toISOString() });
});
after(async () => { await sink.stop(); assert.equal(await d.stop(), 0, 'hookd exits cleanly'); await d.cleanup(); });

const as = (tok) => (method, path, body) => d.api(method, path, body, { authorization: `Bearer ${tok.token}` });

test('a token is shown once, random and prefixed, stored only as its SHA-256; lists show no secret', async () => {
  assert.match(tokA.token, /^hkat_[A-Za-z0-9_-]{43}$/);
  assert.notEqual(tokA.token, tokAr.token);
  assert.equal(tokA.account, 'acct-a');
  assert.equal(tokA.scope, 'read');
  assert.equal(tokA.status, 'active');
  const list = await d.api('GET', '/v1/tokens?account=acct-a');
  assert.equal(list.status, 200);
  assert.equal(list.body.data.length, 2);
  assert.ok(!JSON.stringify(list.body).includes(tokA.token), 'no secret in the list');
  assert.ok(list.body.data.every((t) => !('token' in t)));
  const rows = d.sql(`SELECT token_hash FROM hookd_tokens WHERE id = '${tokA.id}'`);
  const { createHash } = await import('node:crypto');
  assert.ok(rows.includes(createHash('sha256').update(tokA.token).digest('hex')), 'the hash is what is stored');
  assert.ok(!d.sql('SELECT * FROM hookd_tokens').includes(tokA.token), 'the secret is not');
  assert.ok(!d.logs.includes(tokA.token));
});

test('bad token bodies are refused naming the field', async () => {
  const cases = [
    [{ scope: 'read', ttl: '1h' }, 'missing_field', /^account/],
    [{ account: 'a', ttl: '1h', scope: 'admin' }, 'invalid_field', /^scope/],
    [{ account: 'a' }, 'missing_field', /^expires_at/],
    [{ account: 'a', ttl: '1h', expires_at: '2030-01-01T00:00:00Z' }, 'invalid_field', /^expires_at/],
    [{ account: 'a', expires_at: '2000-01-01T00:00:00Z' }, 'invalid_field', /^expires_at/],
    [{ account: 'a', ttl: 'forever' }, 'invalid_field', /^ttl/],
    [{ account: 'a\n', ttl: '1h' }, 'invalid_field', /^account/],
    [{ account: 'a', ttl: '1h', colour: 'red' }, 'unknown_field', /^colour/],
  ];
  for (const [body, code, msg] of cases) {
    const r = await d.api('POST', '/v1/tokens', body);
    assert.equal(r.status, 400, JSON.stringify(body));
    assert.equal(r.body.error.code, code, JSON.stringify(body));
    assert.match(r.body.error.message, msg);
  }
});

test('account A sees its endpoints, events, deliveries and replays, never B\'s', async () => {
  for (const tok of [tokA, tokAr]) {
    const get = as(tok);
    const eps = await get('GET', '/v1/endpoints');
    assert.equal(eps.status, 200);
    assert.deepEqual(eps.body.data.map((e) => e.id), [A.ep.id]);
    const ep = await get('GET', `/v1/endpoints/${A.ep.id}`);
    assert.equal(ep.status, 200);
    assert.equal(ep.body.secret, undefined, 'no signing secret for a portal token');
    assert.equal((await get('GET', `/v1/endpoints/${B.ep.id}`)).status, 404);
    assert.deepEqual((await get('GET', '/v1/events')).body.data.map((e) => e.id), [A.ev.id]);
    assert.equal((await get('GET', `/v1/events/${A.ev.id}`)).body.deliveries.length, 1);
    assert.equal((await get('GET', `/v1/events/${B.ev.id}`)).status, 404);
    assert.deepEqual((await get('GET', '/v1/deliveries')).body.data.map((x) => x.id), [A.dl.id]);
    assert.deepEqual((await get('GET', '/v1/deliveries?status=dead')).body.data.map((x) => x.id), [A.dl.id]);
    assert.equal((await get('GET', `/v1/deliveries/${A.dl.id}`)).status, 200);
    const other = await get('GET', `/v1/deliveries/${B.dl.id}`);
    assert.equal(other.status, 404);
    assert.ok(!JSON.stringify(other.body).includes('acct-b'));
    assert.equal((await get('GET', `/v1/deliveries?account=acct-b`)).status, 403, 'naming another account');
    assert.equal((await get('GET', `/v1/endpoints?account=acct-b`)).status, 403);
    assert.equal((await get('GET', `/v1/replays/rpl_nothing`)).status, 404);
  }
});

test('everything else is 403 forbidden for an account token', async () => {
  const get = as(tokAr);
  const forbidden = [
    ['POST', '/v1/endpoints', { url: sink.url('/x') }], ['PATCH', `/v1/endpoints/${A.ep.id}`, { description: 'x' }],
    ['DELETE', `/v1/endpoints/${A.ep.id}`], ['POST', `/v1/endpoints/${A.ep.id}/disable`, {}],
    ['POST', `/v1/endpoints/${A.ep.id}/enable`, {}], ['POST', `/v1/endpoints/${A.ep.id}/secret/rotate`, {}],
    ['POST', `/v1/endpoints/${A.ep.id}/test`, {}], ['POST', '/v1/events', { type: 't.x', data: {} }],
    ['GET', '/v1/sources'], ['POST', '/v1/sources', {}], ['GET', '/v1/sources/x'], ['GET', '/v1/sources/x/rejections'],
    ['GET', '/v1/inbox'], ['GET', '/v1/inbox/x'], ['POST', '/v1/inbox/replay', {}], ['POST', '/v1/inbox/x/replay', {}],
    ['GET', '/v1/tokens'], ['POST', '/v1/tokens', { account: 'acct-a', ttl: '1h' }], ['DELETE', `/v1/tokens/${tokA.id}`],
    ['GET', `/v1/endpoints/${A.ep.id}/health`], ['GET', '/v1/summary'], ['GET', '/v1/alerts'], ['GET', '/v1/alerts/x'],
    ['GET', '/v1/machines'], ['POST', '/v1/machines', {}], ['GET', '/v1/entities/order/1'],
    ['GET', '/v1/entities/order/1/trace'], ['GET', '/v1/audit'],
  ];
  for (const [m, p, body] of forbidden) {
    const r = await get(m, p, body);
    assert.equal(r.status, 403, `${m} ${p}`);
    assert.equal(r.body.error.code, 'forbidden');
  }
  const ro = as(tokA);
  for (const [m, p] of [['POST', `/v1/deliveries/${A.dl.id}/replay`], ['POST', `/v1/events/${A.ev.id}/replay`],
    ['POST', '/v1/replays']]) {
    const r = await ro(m, p, {});
    assert.equal(r.status, 403, `read scope: ${m} ${p}`);
    assert.match(r.body.error.message, /may not replay/);
  }
  assert.equal((await d.api('GET', `/v1/deliveries/${A.dl.id}`)).status, 200, 'the admin token still works');
});

test('read_replay replays only the account\'s own dead letters, recorded with the token as actor', async () => {
  const get = as(tokAr);
  assert.equal((await get('POST', `/v1/deliveries/${B.dl.id}/replay`, {})).status, 404);
  assert.equal((await get('POST', `/v1/events/${B.ev.id}/replay`, {})).status, 404);
  assert.equal((await get('POST', '/v1/replays', { account: 'acct-b' })).status, 403);
  const dry = await get('POST', '/v1/replays', { dry_run: true });
  assert.equal(dry.body.count, 1, 'the range is its own account only');
  const before = sink.at('/dead-acct-a').length;
  const r = await get('POST', `/v1/deliveries/${A.dl.id}/replay`, {});
  assert.equal(r.status, 202);
  await waitFor(() => sink.at('/dead-acct-a').length === before + 1);
  await d.waitDelivery(A.ev.id, 'dead');
  const range = await get('POST', '/v1/replays', {});
  assert.equal(range.status, 202);
  assert.equal(range.body.account, 'acct-a');
  assert.equal(range.body.actor, tokAr.id);
  await d.waitDelivery(A.ev.id, 'dead');
  const mine = await get('GET', '/v1/replays');
  assert.ok(mine.body.data.length >= 2);
  assert.ok(mine.body.data.every((x) => x.account === 'acct-a'));
  // B's replays stay B's.
  const rb = await as(tokB)('POST', `/v1/events/${B.ev.id}/replay`, {});
  assert.equal(rb.status, 202);
  assert.equal((await get('GET', `/v1/replays/${rb.body.id}`)).status, 404);
  assert.ok(!(await get('GET', '/v1/replays')).body.data.some((x) => x.id === rb.body.id));
  // A delivered one is support's to resend, not the portal's.
  const okEp = await d.createEndpoint({ url: sink.url('/ok-a'), account: 'acct-a', event_types: ['ok.*'] });
  const ev = await d.publish({ type: 'ok.x', account: 'acct-a', data: {} });
  const [dl] = await d.waitDelivery(ev.id, 'delivered');
  const again = await get('POST', `/v1/deliveries/${dl.id}/replay`, {});
  assert.equal(again.status, 409);
  assert.equal(again.body.error.code, 'not_replayable');
  assert.equal(okEp.account, 'acct-a');
});

test('an unknown, expired or revoked token is 401 at once on this node', async () => {
  const bogus = await d.api('GET', '/v1/deliveries', undefined, { authorization: 'Bearer hkat_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA' });
  assert.equal(bogus.status, 401);
  const short = await d.api('POST', '/v1/tokens', { account: 'acct-a', ttl: '1s' });
  assert.equal(short.status, 201);
  assert.equal((await as(short.body)('GET', '/v1/deliveries')).status, 200);
  await sleep(1200);
  const expired = await as(short.body)('GET', '/v1/deliveries');
  assert.equal(expired.status, 401);
  assert.match(expired.body.error.message, /expired/);
  const t = (await d.api('POST', '/v1/tokens', { account: 'acct-a', ttl: '1h' })).body;
  assert.equal((await as(t)('GET', '/v1/endpoints')).status, 200);
  const rv = await d.api('DELETE', `/v1/tokens/${t.id}`);
  assert.equal(rv.status, 200);
  assert.equal(rv.body.status, 'revoked');
  assert.equal((await as(t)('GET', '/v1/endpoints')).status, 401, 'revoked: refused at once');
  assert.equal((await d.api('DELETE', `/v1/tokens/${t.id}`)).status, 200, 'a repeated revoke');
  assert.equal((await d.api('DELETE', '/v1/tokens/tok_nope')).status, 404);
});

test('a token revoked by SQL elsewhere stops working within the cache bound', async () => {
  const t = (await d.api('POST', '/v1/tokens', { account: 'acct-a', ttl: '1h' })).body;
  assert.equal((await as(t)('GET', '/v1/endpoints')).status, 200);
  d.sql(`UPDATE hookd_tokens SET revoked_at = 1 WHERE id = '${t.id}'`);
  await waitFor(async () => (await as(t)('GET', '/v1/endpoints')).status === 401, { timeoutMs: 3000, what: 'revocation' });
});

test('token rows written by SQL with a bad hash or odd account break nothing', async () => {
  const ctl = BACKEND === 'postgres' ? 'chr(1)' : 'char(1)';
  d.sql(`INSERT INTO hookd_tokens(id, account, scope, token_hash, created_by, created_at, expires_at)
    VALUES ('tok_sql1', 'evil' || ${ctl}, 'read', 'not-a-hash', 'sql', 1, 99999999999999)`);
  const list = await d.api('GET', '/v1/tokens');
  assert.equal(list.status, 200);
  assert.ok(list.body.data.some((t) => t.id === 'tok_sql1' && t.account === 'evil\u0001'));
  const t = (await d.api('POST', '/v1/tokens', { account: 'acct-a', ttl: '1h' })).body;
  await sleep(1100); // past the cache's check: the set reloads with the bad row in it
  assert.equal((await as(t)('GET', '/v1/endpoints')).status, 200, 'the other tokens still load');
  assert.equal((await d.api('GET', '/v1/deliveries', undefined, { authorization: 'Bearer not-a-hash' })).status, 401);
});

test('CLI: tokens create, list, revoke; replay', async () => {
  const made = JSON.parse(d.cli(['tokens', 'create', '--account', 'acct-c', '--scope', 'read', '--ttl', '1h', '--json']));
  assert.match(made.token, /^hkat_/);
  const table = d.cli(['tokens', 'list', '--account', 'acct-c']);
  assert.match(table, /ID\s+ACCOUNT\s+SCOPE/);
  assert.ok(table.includes(made.id));
  assert.ok(!table.includes(made.token));
  const listed = JSON.parse(d.cli(['tokens', 'list', '--account', 'acct-c', '--json']));
  assert.deepEqual(listed.data.map((x) => x.id), [made.id]);
  assert.equal(d.cli(['tokens', 'revoke', made.id]), `revoked ${made.id}: revoked\n`);
  const dry = JSON.parse(d.cli(['replay', 'range', '--endpoint', A.ep.id, '--dry-run', '--json']));
  assert.equal(dry.count, 1);
  const one = d.cli(['replay', 'delivery', A.dl.id]);
  assert.match(one, new RegExp(`^replayed ${A.dl.id}: pending \\(replay rpl_\\S+\\)$`, 'm'));
  const rs = d.cli(['replay', 'list']);
  assert.match(rs, /ID\s+KIND\s+ACTOR/);
});

// Last: its dead deliveries would change the counts the tests above check.
test('sync status: an account token reads its own account\'s, never another\'s', async () => {
  const resource = { type: 'sub', id: `r-${Date.now()}` };
  const evA = await d.publish({ type: 't.sync', account: 'acct-a', resource, data: {} });
  const evB = await d.publish({ type: 't.sync', account: 'acct-b', resource, data: {} });
  await d.waitDelivery(evA.id, 'dead');
  await d.waitDelivery(evB.id, 'dead');
  for (const tok of [tokA, tokAr]) {
    const get = as(tok);
    const own = await get('GET', '/v1/accounts/acct-a/sync');
    assert.equal(own.status, 200, JSON.stringify(own.body));
    const ids = own.body.endpoints.map((e) => e.endpoint_id);
    assert.ok(ids.includes(A.ep.id) && !ids.includes(B.ep.id), JSON.stringify(ids));
    for (const id of ids) assert.equal((await d.api('GET', `/v1/endpoints/${id}`)).body.account, 'acct-a');
    const other = await get('GET', '/v1/accounts/acct-b/sync');
    assert.equal(other.status, 403);
    assert.equal(other.body.error.code, 'forbidden');
    assert.ok(!JSON.stringify(other.body).includes(B.ep.id), 'nothing of B in the refusal');
    const res = await get('GET', `/v1/resources/${resource.type}/${resource.id}/sync`);
    assert.equal(res.status, 200, JSON.stringify(res.body));
    assert.deepEqual(res.body.endpoints.map((e) => e.event.id), [evA.id], 'only the account\'s own event');
    assert.ok(!JSON.stringify(res.body).includes(evB.id) && !JSON.stringify(res.body).includes(B.ep.id));
    assert.equal((await get('GET', `/v1/resources/${resource.type}/${resource.id}/sync?account=acct-b`)).status, 403);
  }
  const admin = await d.api('GET', `/v1/resources/${resource.type}/${resource.id}/sync`);
  assert.equal(admin.status, 200);
  assert.deepEqual(admin.body.endpoints.map((e) => e.event.id).sort(), [evA.id, evB.id].sort(), 'the admin sees both');
});

// Last too. An account's events also reach the operator's own account-less
// endpoints (an audit sink, say): those deliveries, their attempts and
// response bodies are the operator's, never shown to or replayed by the
// account's token, and a replay record that covers one is not listed under
// the account.
test('deliveries to the operator\'s account-less endpoints stay the operator\'s', async () => {
  const resource = { type: 'plan', id: `g-${Date.now()}` };
  const ops = await d.createEndpoint({ url: sink.url('/dead-operator'), event_types: ['g.*'] });
  const own = await d.createEndpoint({ url: sink.url('/ok-g-a'), account: 'acct-a', event_types: ['g.*'] });
  const ev = await d.publish({ type: 'g.x', account: 'acct-a', resource, data: { secret: 'operator-only' } });
  let mine, theirs;
  await waitFor(async () => {
    const ds = await d.deliveriesOf(ev.id);
    mine = ds.find((x) => x.endpoint_id === own.id && x.status === 'delivered');
    theirs = ds.find((x) => x.endpoint_id === ops.id && x.status === 'dead');
    return mine && theirs;
  }, { what: 'one delivered to A, one dead to the operator' });
  const sent = () => sink.at('/dead-operator').length;
  const before = sent();
  for (const tok of [tokA, tokAr]) {
    const get = as(tok);
    const leaks = (r) => JSON.stringify(r.body).includes(theirs.id) || JSON.stringify(r.body).includes(ops.id);
    for (const path of ['/v1/deliveries', '/v1/deliveries?status=dead', `/v1/deliveries?event_id=${ev.id}`,
      `/v1/deliveries?endpoint_id=${ops.id}`, '/v1/deliveries?account=acct-a&limit=500']) {
      const r = await get('GET', path);
      assert.equal(r.status, 200, path);
      assert.ok(!leaks(r), `${path} lists the operator's delivery`);
    }
    assert.ok((await get('GET', `/v1/deliveries?event_id=${ev.id}`)).body.data.some((x) => x.id === mine.id));
    const one = await get('GET', `/v1/deliveries/${theirs.id}`);
    assert.equal(one.status, 404);
    assert.ok(!JSON.stringify(one.body).includes(ops.id), "the 404 names only the id asked for");
    assert.equal((await get('GET', `/v1/deliveries/${mine.id}`)).status, 200);
    const evr = await get('GET', `/v1/events/${ev.id}`);
    assert.deepEqual(evr.body.deliveries.map((x) => x.id), [mine.id]);
    const rs = await get('GET', `/v1/resources/${resource.type}/${resource.id}/sync`);
    assert.equal(rs.status, 200);
    assert.deepEqual(rs.body.endpoints.map((e) => e.endpoint_id), [own.id]);
    assert.ok(!leaks(rs));
    assert.equal((await get('GET', '/v1/endpoints')).body.data.some((e) => e.id === ops.id), false);
  }
  const rep = as(tokAr);
  const r1 = await rep('POST', `/v1/deliveries/${theirs.id}/replay`, {});
  assert.equal(r1.status, 404);
  assert.ok(!JSON.stringify(r1.body).includes(ops.id));
  const dry = await rep('POST', '/v1/replays', { endpoint_id: ops.id, dry_run: true });
  assert.equal(dry.body.count, 0, 'the operator\'s endpoint is not in the account\'s range');
  const whole = await rep('POST', '/v1/replays', { dry_run: true });
  const adminOwn = await d.api('POST', '/v1/replays', { account: 'acct-a', dry_run: true });
  assert.equal(adminOwn.body.count, whole.body.count + 1, 'the admin\'s account range has the operator\'s one too');
  const evRep = await rep('POST', `/v1/events/${ev.id}/replay`, {});
  assert.equal(evRep.status, 202);
  assert.equal(evRep.body.matched, 1, 'the event replay covers the account\'s own endpoint only');
  assert.equal(evRep.body.account, 'acct-a');
  // The admin's replays that reach the operator's endpoint are not the account's records.
  const adm1 = await d.api('POST', `/v1/deliveries/${theirs.id}/replay`, {});
  assert.equal(adm1.status, 202);
  const rec1 = (await d.api('GET', `/v1/replays/${adm1.body.replay_id}`)).body; // a delivery replay answers the delivery
  assert.equal(rec1.account, null);
  const deadAgain = async (n) => {
    await waitFor(() => sent() === before + n, { what: `the admin's replay ${n} sent` });
    await waitFor(async () => (await d.deliveriesOf(ev.id)).find((x) => x.id === theirs.id).status === 'dead',
      { what: 'the operator\'s delivery dead again' });
  };
  await deadAgain(1);
  const adm2 = await d.api('POST', `/v1/events/${ev.id}/replay`, {});
  assert.equal(adm2.status, 202);
  assert.equal(adm2.body.account, null);
  await deadAgain(2);
  const adm3 = await d.api('POST', '/v1/replays', { account: 'acct-a' });
  assert.equal(adm3.status, 202);
  assert.equal(adm3.body.account, null, 'it covers the operator\'s endpoint');
  assert.equal(adm3.body.filter.account, 'acct-a', 'its filter still names the account');
  const adm4 = await d.api('POST', `/v1/events/${ev.id}/replay`, { endpoint_id: own.id });
  assert.equal(adm4.body.account, 'acct-a', 'the account\'s own endpoint only: its record');
  const listed = (await rep('GET', '/v1/replays?limit=100')).body.data.map((x) => x.id);
  for (const id of [rec1.id, adm2.body.id, adm3.body.id]) {
    assert.ok(!listed.includes(id), `replay ${id} listed for the account`);
    assert.equal((await rep('GET', `/v1/replays/${id}`)).status, 404);
  }
  assert.ok(listed.includes(evRep.body.id) && listed.includes(adm4.body.id));
  assert.equal((await d.api('GET', `/v1/replays/${adm3.body.id}`)).status, 200, 'the admin reads it');
});
