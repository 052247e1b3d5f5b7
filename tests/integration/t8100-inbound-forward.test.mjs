// The inbox workers' forward handler: each item is POSTed to the application
// signed with hookd's own Standard Webhooks signature (webhook-id = the inbox
// item id), and the application's answer decides: 2xx processed, 409/425
// deferred then quarantined past max_defer, other 4xx quarantined, 5xx or a
// timeout retried on the source's schedule, then quarantined. Duplicates are
// processed once; one entity is never with two workers at once.
import { test, after, before } from 'node:test';
import assert from 'node:assert/strict';
import { createHmac } from 'node:crypto';
import { Webhook } from 'standardwebhooks';
import { startDaemon, startCountingSink, newSecret, waitFor, sleep } from '../lib/harness.mjs';

let d, app;
const IN = newSecret();
const FWD = newSecret();
const script = new Map(); // path → (n) => status
const bodies = [];

before(async () => {
  app = await startCountingSink({
    keepArrivals: true,
    status: (n, req) => {
      bodies.push({ url: req.url, headers: req.headers });
      const s = script.get(req.url);
      return s ? s(n, req) : 200;
    },
    delayMs: (n, req) => (req.url.startsWith('/slow-ent') ? SLOW_ENT_MS : req.url.startsWith('/slow') ? 300
      : req.url.startsWith('/timeout') ? 3000 : 0),
  });
  // The timeout sits between /slow-ent's answer (1 s) and /timeout's (3 s).
  d = await startDaemon({ HOOKD_INBOX_WORKERS: '4', HOOKD_INBOX_TIMEOUT: '2500ms' });
});
after(async () => { assert.equal(await d.stop(), 0, 'hookd exits cleanly'); await d.cleanup(); await app.stop(); });

function sign(secret, id, ts, body) {
  const key = Buffer.from(secret.slice('whsec_'.length), 'base64');
  return 'v1,' + createHmac('sha256', key).update(`${id}.${ts}.${body}`).digest('base64');
}

async function source(name, path, extra = {}) {
  const r = await d.api('POST', '/v1/sources', {
    name,
    verify: { scheme: 'standard-webhooks', secrets: [IN] },
    handler: { forward: { url: app.url(path), secret: FWD } },
    retry_schedule: '100ms,100ms,100ms',
    ...extra,
  });
  assert.equal(r.status, 201, JSON.stringify(r.body));
}

let seq = 0;
async function send(name, payload = {}, id = `msg_${process.pid}_${++seq}`) {
  const body = JSON.stringify({ type: 'order.paid', data: { n: seq }, ...payload });
  const ts = Math.floor(Date.now() / 1000);
  const res = await fetch(`http://127.0.0.1:${d.publicPort}/in/${name}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'webhook-id': id, 'webhook-timestamp': String(ts),
      'webhook-signature': sign(IN, id, ts, body) },
    body,
  });
  const json = await res.json();
  assert.equal(res.status, 200, JSON.stringify(json));
  return { ...json, event_id: id, body };
}

const item = async (id) => (await d.api('GET', `/v1/inbox/${id}`)).body;
const settle = (id, status, timeoutMs = 10000) =>
  waitFor(async () => { const it = await item(id); return it.status === status && !it.next_attempt_at_pending && it; },
    { timeoutMs, what: `${id} to be ${status}` });

test('2xx: processed (forwarded) after one attempt; the request verifies with standardwebhooks', async () => {
  await source('f200', '/ok');
  const e = await send('f200');
  const it = await settle(e.id, 'processed');
  assert.equal(it.result, 'forwarded');
  assert.equal(it.attempts, 1);
  assert.ok(it.processed_at);
  assert.equal(app.byPath.get('/ok').get(e.id), 1, 'webhook-id is the inbox item id');
  const seen = bodies.find((b) => b.url === '/ok');
  assert.equal(seen.headers['hookd-inbox-id'], e.id);
  assert.equal(seen.headers['hookd-source'], 'f200');
  assert.equal(seen.headers['hookd-event-id'], e.event_id);
  const wh = new Webhook(FWD);
  const h = { 'webhook-id': seen.headers['webhook-id'], 'webhook-timestamp': seen.headers['webhook-timestamp'],
    'webhook-signature': seen.headers['webhook-signature'] };
  assert.deepEqual(wh.verify(e.body, h), JSON.parse(e.body));
  assert.throws(() => wh.verify(e.body.replace('paid', 'pais'), h));
});

test('409: deferred and retried, then quarantined past max_defer', async () => {
  script.set('/defer', () => 409);
  await source('f409', '/defer', { max_defer: '1s' });
  const e = await send('f409');
  await waitFor(async () => (await item(e.id)).status === 'deferred', { what: 'deferred' });
  const it = await settle(e.id, 'quarantined');
  assert.ok(it.attempts >= 2, `deferred items are tried again (${it.attempts})`);
  assert.match(it.error, /409.*max_defer/);
  assert.equal(app.byPath.get('/defer').get(e.id), it.attempts);
});

test('422: quarantined after exactly one attempt', async () => {
  script.set('/reject', () => 422);
  await source('f422', '/reject');
  const e = await send('f422');
  const it = await settle(e.id, 'quarantined');
  assert.equal(it.attempts, 1);
  assert.match(it.error, /422/);
  await sleep(400);
  assert.equal(app.byPath.get('/reject').get(e.id), 1);
});

test('500 then 200: processed after two attempts', async () => {
  let k = 0;
  script.set('/flaky', () => (++k === 1 ? 500 : 200));
  await source('f500ok', '/flaky');
  const e = await send('f500ok');
  const it = await settle(e.id, 'processed');
  assert.equal(it.attempts, 2);
  assert.equal(app.byPath.get('/flaky').get(e.id), 2);
});

test('always 500: quarantined after the schedule (1 + 3 attempts)', async () => {
  script.set('/down', () => 500);
  await source('f500', '/down');
  const e = await send('f500');
  const it = await settle(e.id, 'quarantined');
  assert.equal(it.attempts, 4);
  assert.match(it.error, /500.*exhausted/);
  await sleep(400);
  assert.equal(app.byPath.get('/down').get(e.id), 4);
});

test('timeout: retried like a 5xx, then quarantined', async () => {
  await source('ftimeout', '/timeout', { retry_schedule: '100ms' });
  const e = await send('ftimeout');
  const it = await settle(e.id, 'quarantined', 20000);
  assert.equal(it.attempts, 2);
  assert.match(it.error, /timeout/i);
});

test('the same event twice, and fifty parallel copies: one row, one processing run', async () => {
  await source('fdup', '/dup');
  const a = await send('fdup', {}, 'evt-twice');
  const b = await send('fdup', {}, 'evt-twice');
  assert.equal(a.id, b.id);
  assert.equal(b.status, 'duplicate');
  const body = JSON.stringify({ type: 'x', data: {} });
  const ts = Math.floor(Date.now() / 1000);
  const copies = await Promise.all(Array.from({ length: 50 }, () => fetch(`http://127.0.0.1:${d.publicPort}/in/fdup`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'webhook-id': 'evt-fifty', 'webhook-timestamp': String(ts),
      'webhook-signature': sign(IN, 'evt-fifty', ts, body) },
    body,
  }).then(async (r) => ({ status: r.status, body: await r.json() }))));
  assert.ok(copies.every((c) => c.status === 200));
  const ids = new Set(copies.map((c) => c.body.id));
  assert.equal(ids.size, 1);
  const [fifty] = ids;
  await settle(a.id, 'processed');
  const it = await settle(fifty, 'processed');
  assert.equal(it.dup_count, 49);
  await sleep(300);
  assert.equal(app.byPath.get('/dup').get(a.id), 1);
  assert.equal(app.byPath.get('/dup').get(fifty), 1);
  assert.equal(it.attempts, 1);
});

// Each answer of /slow-ent takes this long: one entity's arrivals are at least this far apart, and two
// entities side by side arrive well within it, with room for a loaded machine.
const SLOW_ENT_MS = 1000;

test('one entity at a time: items of one entity never overlap at the app, other entities do', async () => {
  await source('fent', '/slow-ent', { entity: { kind: 'order', id: '/data/order' } });
  const sent = [];
  for (let i = 0; i < 6; i++) sent.push(await send('fent', { data: { order: i % 2 ? 'A' : 'B' } }));
  for (const e of sent) await settle(e.id, 'processed', 20000);
  const byId = new Map(sent.map((e, i) => [e.id, i % 2 ? 'A' : 'B']));
  const arr = app.arrivals.filter(([, path]) => path === '/slow-ent').map(([at, , id]) => ({ at, id, ent: byId.get(id) }));
  assert.equal(arr.length, 6);
  for (const ent of ['A', 'B']) {
    const mine = arr.filter((x) => x.ent === ent).sort((x, y) => x.at - y.at);
    for (let i = 1; i < mine.length; i++)
      assert.ok(mine[i].at - mine[i - 1].at >= SLOW_ENT_MS - 10, `entity ${ent}: arrivals ${mine[i - 1].at} and ${mine[i].at} overlap`);
    // and in order of arrival at hookd
    const order = sent.filter((e) => byId.get(e.id) === ent).map((e) => e.id);
    assert.deepEqual(mine.map((x) => x.id), order);
  }
  const a = arr.filter((x) => x.ent === 'A')[0], b = arr.filter((x) => x.ent === 'B')[0];
  assert.ok(Math.abs(a.at - b.at) < SLOW_ENT_MS - 10, `two entities are processed side by side (${Math.abs(a.at - b.at)} ms apart)`);
});

test('replay: a quarantined item after the app is fixed is processed; pending ones are 409', async () => {
  let fixed = false;
  script.set('/fixme', () => (fixed ? 200 : 422));
  await source('frep', '/fixme');
  const e = await send('frep');
  await settle(e.id, 'quarantined');
  fixed = true;
  const r = await d.api('POST', `/v1/inbox/${e.id}/replay`);
  assert.equal(r.status, 202, JSON.stringify(r.body));
  assert.equal(r.body.id, e.id);
  const it = await settle(e.id, 'processed');
  assert.equal(it.result, 'forwarded');
  assert.equal(app.byPath.get('/fixme').get(e.id), 2);
  const again = await d.api('POST', `/v1/inbox/${e.id}/replay`);
  assert.equal(again.status, 409);
  assert.equal((await d.api('POST', '/v1/inbox/inb_nope/replay')).status, 404);
});

test('range replay: dry run counts, limit is bounded, the replay runs them', async () => {
  let fixed = false;
  script.set('/range', () => (fixed ? 200 : 400));
  await source('frange', '/range');
  const sent = [];
  for (let i = 0; i < 5; i++) sent.push(await send('frange'));
  for (const e of sent) await settle(e.id, 'quarantined');
  const dry = await d.api('POST', '/v1/inbox/replay', { source: 'frange', status: 'quarantined', dry_run: true });
  assert.equal(dry.status, 200, JSON.stringify(dry.body));
  assert.deepEqual(dry.body, { count: 5, dry_run: true });
  const lim = await d.api('POST', '/v1/inbox/replay', { source: 'frange', limit: 2, dry_run: true });
  assert.equal(lim.body.count, 2);
  const over = await d.api('POST', '/v1/inbox/replay', { source: 'frange', limit: 10001 });
  assert.equal(over.status, 400);
  assert.match(over.body.error.message, /limit/);
  assert.equal((await d.api('POST', '/v1/inbox/replay', { source: 'frange', status: 'pending' })).status, 400);
  assert.equal((await d.api('POST', '/v1/inbox/replay', { colour: 1 })).body.error.code, 'unknown_field');
  const future = await d.api('POST', '/v1/inbox/replay',
    { source: 'frange', since: new Date(Date.now() + 60000).toISOString(), dry_run: true });
  assert.equal(future.body.count, 0);
  fixed = true;
  const run = await d.api('POST', '/v1/inbox/replay', { source: 'frange', status: 'quarantined' });
  assert.equal(run.status, 202);
  assert.equal(run.body.count, 5);
  for (const e of sent) await settle(e.id, 'processed');
});

test('hookd inbox list|get|replay|replay-range: tables by default, the API JSON with --json', async () => {
  let fixed = false;
  script.set('/cli', () => (fixed ? 200 : 422));
  await source('fcli', '/cli');
  const e = await send('fcli');
  await settle(e.id, 'quarantined');
  const table = d.cli(['inbox', 'list', '--source', 'fcli']);
  const lines = table.trim().split('\n');
  assert.match(lines[0], /^ID\s+SOURCE\s+EVENT_ID\s+STATUS\s+RESULT\s+ATTEMPTS\s+RECEIVED\s+ERROR$/);
  assert.equal(lines.length, 2);
  assert.match(lines[1], new RegExp(`^${e.id}\\s+fcli\\s+${e.event_id}\\s+quarantined\\s+-\\s+1\\s`));
  assert.equal(lines[0].indexOf('STATUS'), lines[1].indexOf('quarantined'), 'columns are aligned');
  const json = JSON.parse(d.cli(['inbox', 'list', '--source', 'fcli', '--status', 'quarantined', '--json']));
  assert.equal(json.data[0].id, e.id);
  assert.match(d.cli(['inbox', 'get', e.id]), new RegExp(`status\\s+quarantined`));
  assert.equal(JSON.parse(d.cli(['inbox', 'get', e.id, '--json'])).payload.type, 'order.paid');
  assert.match(d.cli(['inbox', 'replay-range', '--source', 'fcli', '--dry-run']), /^1 items would be replayed \(dry run\)/);
  fixed = true;
  assert.match(d.cli(['inbox', 'replay', e.id]), new RegExp(`^replayed ${e.id}: pending`));
  await settle(e.id, 'processed');
  assert.throws(() => d.cli(['inbox', 'replay', e.id]), (err) => err.status === 1 && /409/.test(err.stderr));
});
