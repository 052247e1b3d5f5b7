// Ingest: the outbox is untrusted input. Rows written by plain SQL with ids,
// types or accounts that could reach a header or a log line (CR LF, NUL,
// over-long, non-ASCII, invalid UTF-8) are refused by the table's check; rows
// that got in before the check existed are rejected by the relay with a clear
// error, nothing of them reaches the receiver, and the rows after them flow.
import { test, after, before } from 'node:test';
import assert from 'node:assert/strict';
import swh from 'standardwebhooks';
import { startDaemon, startRecordingSink, waitFor, sleep, BACKEND } from '../lib/harness.mjs';

const PG = BACKEND === 'postgres';
const ch = (n) => (PG ? `chr(${n})` : `char(${n})`);
const CRLF = `${ch(13)} || ${ch(10)}`;
const LONG_ID = PG ? `'evt_' || repeat('a', 300)` : `'evt_' || replace(hex(zeroblob(150)), '0', 'a')`;
const INSERT = (cols, vals) => `INSERT INTO hookd_outbox(${cols}) VALUES (${vals})`;

let d, sink, ep;
before(async () => {
  d = await startDaemon();
  sink = await startRecordingSink();
  ep = await d.createEndpoint({ url: sink.url() });
});
after(async () => { await sink.stop(); assert.equal(await d.stop(), 0, 'hookd exits cleanly'); await d.cleanup(); });

// Runs queries as against a database written before the check existed (PostgreSQL: its trigger
// dropped; SQLite: its CHECK constraints ignored on this connection, the pragma the migration that
// made them uses to copy such rows over).
function withoutCheck(queries) {
  if (PG) d.sql('DROP TRIGGER IF EXISTS hookd_outbox_check ON hookd_outbox');
  return d.sql([...(PG ? [] : ['PRAGMA ignore_check_constraints = ON']), ...queries].join(';\n') + ';');
}

function refused(query) {
  try { d.sql(query); } catch (e) { return String(e.stderr || e.message); }
  return null;
}

test('the check on hookd_outbox refuses bad ids, types and accounts written by plain SQL', () => {
  const cases = [
    ['id with CR LF', INSERT('id, event_type', `'evt_a' || ${CRLF} || 'X-Injected: yes', 'order.paid'`), /hookd_outbox\.id/],
    ['over-long id', INSERT('id, event_type', `${LONG_ID}, 'order.paid'`), /hookd_outbox\.id/],
    ['non-ASCII id', INSERT('id, event_type', `'evt_é', 'order.paid'`), /hookd_outbox\.id/],
    ['empty id', INSERT('id, event_type', `'', 'order.paid'`), /hookd_outbox\.id/],
    // PostgreSQL text cannot hold a NUL at all: refused by the server itself.
    ['id with NUL', INSERT('id, event_type', `'evt_n' || ${ch(0)} || 'x', 'order.paid'`), PG ? /null character|0x00/ : /hookd_outbox\.id/],
    ['type with CR LF', INSERT('event_type', `'order' || ${CRLF} || 'x'`), /hookd_outbox\.event_type/],
    ['over-long type', INSERT('event_type', PG ? `repeat('t', 129)` : `replace(hex(zeroblob(65)), '0', 't') || 't'`), /hookd_outbox\.event_type/],
    ['account with LF', INSERT('event_type, account', `'order.paid', 'acme' || ${ch(10)}`), /hookd_outbox\.account/],
    ['resource id with ESC', INSERT('event_type, resource_id', `'order.paid', 'r' || ${ch(27)}`), /hookd_outbox\.resource_id/],
  ];
  for (const [what, query, why] of cases) {
    const err = refused(query);
    assert.ok(err !== null, `${what}: refused`);
    assert.match(err, why, `${what}: the error names the rule`);
  }
  // An update cannot sneak a bad value in either.
  d.sql(INSERT('id, event_type', `'evt_update_me', 'order.paid'`));
  assert.match(refused(`UPDATE hookd_outbox SET id = 'evt_x' || ${CRLF} WHERE id = 'evt_update_me'`), /hookd_outbox\.id/);
  // Valid rows still go in bare, with every field (non-ASCII accounts are fine).
  d.sql(INSERT('event_type, account, resource_type, resource_id', `'order.paid', 'Müller GmbH', 'order', 'o-1'`));
  assert.equal(d.sql("SELECT count(*) FROM hookd_outbox WHERE account = 'Müller GmbH'"), '1');
});

test('POST /v1/events refuses what the check refuses', async () => {
  for (const body of [
    { type: 'order.paid', account: 'acme\r\nx', data: {} },
    { type: 'order.paid', resource: { type: 'order', id: 'a\u0007' }, data: {} },
    { type: 'order.paid', id: 'x'.repeat(64), data: {} },
    { type: 'order\r\n.paid', data: {} },
  ]) {
    const r = await d.api('POST', '/v1/events', body);
    assert.equal(r.status, 400, JSON.stringify(body));
    assert.equal(r.body.error.code, 'invalid_field');
  }
});

test('rows that predate the check are rejected with an error; later rows are delivered, nothing injected', async () => {
  // A database written before the check existed: rows the check would refuse.
  const bad = [
    [INSERT('id, event_type', `'evt_crlf' || ${CRLF} || 'X-Injected: yes' || ${CRLF} || 'Authorization: Bearer forged', 'leg.crlf'`),
      'event id contains control characters'],
    [INSERT('id, event_type', `${LONG_ID}, 'leg.long'`), 'event id is longer than 63 characters'],
    [INSERT('id, event_type', `'evt_ünïcode', 'leg.utf8'`), 'event id contains non-ASCII characters'],
    [INSERT('id, event_type', `'evt_typebad', 'leg' || ${CRLF} || 'X-Injected: yes'`), 'event type contains control characters'],
    [INSERT('id, event_type, account', `'evt_acctbad', 'leg.acct', 'acme' || ${CRLF} || 'x'`), 'account contains control characters'],
    [INSERT('id, event_type, resource_type', `'evt_restype', 'leg.res', 'order' || ${ch(27)} || '[31m'`),
      'resource type contains control characters'],
  ];
  if (!PG) {
    bad.push([INSERT('id, event_type', `'evt_nul' || char(0) || 'hidden', 'leg.nul'`), 'event id contains a NUL byte']);
    bad.push([INSERT('id, event_type, account', `'evt_latin1', 'leg.latin1', CAST(X'61ff6d65' AS TEXT)`),
      'account is not valid UTF-8']);
    bad.push([INSERT('id, event_type, payload', `'evt_paynul', 'leg.paynul', '{}' || char(0) || 'junk'`),
      'payload contains a NUL byte']);
  }
  const first = 'evt_good_before';
  const last = 'evt_good_after';
  withoutCheck([INSERT('id, event_type, payload', `'${first}', 'order.paid', '{"n":1}'`),
    ...bad.map(([q]) => q),
    INSERT('id, event_type, payload', `'${last}', 'order.paid', '{"n":2}'`)]);

  await d.waitDelivery(first, 'delivered');
  await d.waitDelivery(last, 'delivered');
  // Every bad row was looked at and marked, none left undispatched for another round.
  await waitFor(() => d.sql('SELECT count(*) FROM hookd_outbox WHERE dispatched_at IS NULL') === '0',
    { what: 'every row dispatched or rejected' });

  // Visible through the API with the reason, and without a delivery.
  const events = (await d.api('GET', '/v1/events?limit=100')).body.data;
  const rejected = events.filter((e) => e.error !== null);
  assert.deepEqual(rejected.map((e) => e.error).sort(), bad.map(([, why]) => why).sort());
  for (const e of rejected) assert.ok(e.dispatched_at, 'a rejected row is done with');
  const deliveries = (await d.api('GET', `/v1/deliveries?endpoint_id=${ep.id}&limit=1000`)).body.data;
  const typeOf = new Map(events.map((e) => [e.id, e.type]));
  assert.equal(deliveries.filter((x) => String(typeOf.get(x.event_id) || '').startsWith('leg')).length, 0,
    'no delivery for a rejected row');
  assert.equal(d.sql("SELECT count(*) FROM hookd_deliveries WHERE event_id LIKE 'evt_crlf%' OR event_id LIKE 'evt_typebad%'"), '0');

  // The receiver saw the good rows only, with nothing injected, and each one's webhook-id is the signed id.
  await sleep(300);
  const wh = new swh.Webhook(ep.secret);
  for (const r of sink.requests) {
    const names = [];
    for (let i = 0; i < r.rawHeaders.length; i += 2) names.push(r.rawHeaders[i].toLowerCase());
    assert.ok(!names.includes('x-injected') && !names.includes('authorization'), `no injected header: ${names}`);
    const payload = wh.verify(r.body, r.headers);
    assert.equal(payload.id, r.headers['webhook-id']);
  }
  const got = sink.requests.map((r) => r.headers['webhook-id']);
  assert.ok(got.includes(first) && got.includes(last));
  assert.ok(got.every((id) => /^[A-Za-z0-9_.:-]{1,63}$/.test(id)), `only valid ids sent: ${got}`);
  // The log names rejected rows by seq and reason, never with their bytes.
  await waitFor(() => /rejected: event id contains control characters/.test(d.child.stderrText), { what: 'the log line' });
  assert.doesNotMatch(d.child.stderrText, /X-Injected|forged/);
});

test('a delivery recorded for a bad row before the relay checked it is never sent', async () => {
  // Such a row and a pending delivery of it, as an older hookd could have left them.
  withoutCheck([INSERT('id, event_type, dispatched_at', `'evt_old' || ${CRLF} || 'X-Injected: yes', 'old.bad', 1`)]);
  const before = sink.requests.length;
  d.sql(`INSERT INTO hookd_deliveries(id, event_id, endpoint_id, status, next_attempt_at, created_at)
         VALUES ('dlv_legacy_bad', 'evt_old' || ${CRLF} || 'X-Injected: yes', '${ep.id}', 'pending', 1, 1)`);
  // Wake a claim: a good event after it.
  const ev = await d.publish({ type: 'order.paid', data: { after: true } });
  await d.waitDelivery(ev.id, 'delivered');
  await waitFor(async () => {
    const r = await d.api('GET', '/v1/deliveries/dlv_legacy_bad');
    return r.body.attempt_count > 0 && r.body;
  }, { what: 'the legacy delivery to be tried' });
  const r = (await d.api('GET', '/v1/deliveries/dlv_legacy_bad')).body;
  assert.match(r.last_error, /cannot build the request/);
  await sleep(200);
  assert.ok(sink.requests.slice(before).every((x) => x.headers['webhook-id'] === ev.id), 'only the good event arrived');
});
