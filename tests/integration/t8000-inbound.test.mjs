// The inbound receiver against a running daemon: POST /in/{source} verifies
// Standard Webhooks signatures on the raw body, stores each event once
// (duplicates are 200 and counted, conflicting ones flagged), refuses bad
// signatures, stale timestamps, missing fields, malformed JSON and bodies
// over the source's cap (before the body), and logs every refusal without
// its body. Also the sources API (write-only secrets, field rules) and
// `hookd apply`.
import { test, after, before } from 'node:test';
import assert from 'node:assert/strict';
import { createHmac, createHash } from 'node:crypto';
import { request } from 'node:http';
import { connect } from 'node:net';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { tmpdir } from 'node:os';
import { startDaemon, newSecret, waitFor } from '../lib/harness.mjs';

let d;
const SECRET_A = newSecret();
const SECRET_B = newSecret();

before(async () => {
  d = await startDaemon();
  const r = await d.api('POST', '/v1/sources', {
    name: 'shop',
    verify: { scheme: 'standard-webhooks', secrets: [SECRET_A, SECRET_B] },
    event_type: '/type',
    entity: { kind: 'order', id: '/data/order_id', version: '/data/version' },
    required: ['/data/order_id'],
    max_body: 2048,
  });
  assert.equal(r.status, 201, JSON.stringify(r.body));
  const plain = await d.api('POST', '/v1/sources', { name: 'plain', verify: { scheme: 'none' }, event_id: '/id' });
  assert.equal(plain.status, 201, JSON.stringify(plain.body));
});
after(async () => { assert.equal(await d.stop(), 0, 'hookd exits cleanly'); await d.cleanup(); });

function sign(secret, id, ts, body) {
  const key = Buffer.from(secret.slice('whsec_'.length), 'base64');
  return 'v1,' + createHmac('sha256', key).update(`${id}.${ts}.${body}`).digest('base64');
}

let seq = 0;
function event(fields = {}) {
  const id = fields.id || `msg_${process.pid}_${++seq}_${Date.now()}`;
  const body = JSON.stringify({ type: 'order.paid', data: { order_id: `o-${seq}`, version: 1 }, ...fields.payload });
  return { id, body };
}

/** Posts to /in/{source}; signs with secret unless headers are given. */
async function post(source, { id, body }, { secret = SECRET_A, skew = 0, headers } = {}) {
  const ts = Math.floor(Date.now() / 1000) + skew;
  const h = headers || {
    'content-type': 'application/json',
    'webhook-id': id,
    'webhook-timestamp': String(ts),
    'webhook-signature': sign(secret, id, ts, body),
  };
  const res = await fetch(`http://127.0.0.1:${d.publicPort}/in/${source}`, { method: 'POST', headers: h, body });
  const text = await res.text();
  let json = null;
  try { json = JSON.parse(text); } catch { json = text; }
  return { status: res.status, body: json, headers: res.headers };
}

const inboxOf = async (eventId, source = 'shop') => {
  const r = await d.api('GET', `/v1/inbox?source=${source}&limit=1000`);
  assert.equal(r.status, 200);
  return r.body.data.filter((x) => x.event_id === eventId);
};

test('the same event twice: both 200, one row, dup_count 1', async () => {
  const ev = event();
  const a = await post('shop', ev);
  const b = await post('shop', ev);
  assert.equal(a.status, 200, JSON.stringify(a.body));
  assert.deepEqual(Object.keys(a.body).sort(), ['id', 'status']);
  assert.equal(a.body.status, 'accepted');
  assert.equal(b.status, 200);
  assert.equal(b.body.status, 'duplicate');
  assert.equal(b.body.id, a.body.id);
  const rows = await inboxOf(ev.id);
  assert.equal(rows.length, 1);
  assert.equal(rows[0].dup_count, 1);
  assert.equal(rows[0].conflicting_duplicates, 0);
  assert.equal(rows[0].status, 'pending');
  assert.equal(rows[0].event_type, 'order.paid');
  assert.deepEqual(rows[0].entity, { kind: 'order', id: `o-${seq}` });
  assert.equal(rows[0].version, 1);
  assert.equal(rows[0].signature_verified, true);
  const one = await d.api('GET', `/v1/inbox/${a.body.id}`);
  assert.equal(one.status, 200);
  assert.deepEqual(one.body.payload, JSON.parse(ev.body));
  assert.equal(one.body.payload_sha256, createHash('sha256').update(ev.body).digest('hex'));
});

test('fifty parallel copies of one event: one row, one accepted, 49 duplicates', async () => {
  const ev = event();
  const answers = await Promise.all(Array.from({ length: 50 }, () => post('shop', ev)));
  assert.ok(answers.every((r) => r.status === 200), JSON.stringify(answers.map((r) => r.status)));
  assert.equal(answers.filter((r) => r.body.status === 'accepted').length, 1);
  assert.equal(new Set(answers.map((r) => r.body.id)).size, 1);
  const rows = await inboxOf(ev.id);
  assert.equal(rows.length, 1);
  assert.equal(rows[0].dup_count, 49);
});

test('a duplicate with a different body is flagged; the first body stays', async () => {
  const ev = event();
  assert.equal((await post('shop', ev)).status, 200);
  const changed = { id: ev.id, body: ev.body.replace('"version":1', '"version":2') };
  const r = await post('shop', changed);
  assert.equal(r.status, 200);
  assert.equal(r.body.status, 'duplicate');
  const [row] = await inboxOf(ev.id);
  assert.equal(row.conflicting_duplicates, 1);
  assert.equal(row.dup_count, 1);
  assert.equal(row.version, 1);
});

test('timestamps: 301 s old or ahead → 401 stale_timestamp, 299 s either way → accepted', async () => {
  for (const skew of [-301, 301]) {
    const ev = event();
    const r = await post('shop', ev, { skew });
    assert.equal(r.status, 401, `skew ${skew}`);
    assert.equal(r.body.error.code, 'stale_timestamp');
    assert.equal((await inboxOf(ev.id)).length, 0);
  }
  for (const skew of [-299, 299]) {
    const ev = event();
    const r = await post('shop', ev, { skew });
    assert.equal(r.status, 200, `skew ${skew}: ${JSON.stringify(r.body)}`);
    assert.equal((await inboxOf(ev.id)).length, 1);
  }
});

test('wrong secret, one body byte changed, missing header → 401, not stored', async () => {
  const wrong = event();
  const r1 = await post('shop', wrong, { secret: newSecret() });
  assert.equal(r1.status, 401);
  assert.equal(r1.body.error.code, 'bad_signature');

  const ev = event();
  const ts = Math.floor(Date.now() / 1000);
  const signature = sign(SECRET_A, ev.id, ts, ev.body);
  const tampered = ev.body.replace('order.paid', 'order.paiD');
  const r2 = await post('shop', { id: ev.id, body: tampered }, {
    headers: { 'webhook-id': ev.id, 'webhook-timestamp': String(ts), 'webhook-signature': signature },
  });
  assert.equal(r2.status, 401);
  assert.equal(r2.body.error.code, 'bad_signature');

  const missing = event();
  const r3 = await post('shop', missing, { headers: { 'webhook-id': missing.id, 'webhook-timestamp': String(ts) } });
  assert.equal(r3.status, 401);
  assert.equal(r3.body.error.code, 'missing_signature');
  for (const id of [wrong.id, ev.id, missing.id]) assert.equal((await inboxOf(id)).length, 0);
});

test('rotation: two secrets configured, a request signed with either is accepted', async () => {
  for (const secret of [SECRET_A, SECRET_B]) {
    const ev = event();
    const r = await post('shop', ev, { secret });
    assert.equal(r.status, 200);
    assert.equal(r.body.status, 'accepted');
  }
});

test('a missing required field → 400 naming it, not stored; malformed JSON → 400; unknown source → 404', async () => {
  const ev = event({ payload: { data: { version: 1 } } });
  const r = await post('shop', ev);
  assert.equal(r.status, 400);
  assert.equal(r.body.error.code, 'missing_field');
  assert.match(r.body.error.message, /\/data\/order_id/);
  assert.equal((await inboxOf(ev.id)).length, 0);

  const bad = { id: `bad_${Date.now()}`, body: '{"type": "order.paid", "data": ' };
  const m = await post('shop', bad);
  assert.equal(m.status, 400);
  assert.equal(m.body.error.code, 'malformed_json');

  const u = await post('nosuch', event());
  assert.equal(u.status, 404);
  assert.equal(u.body.error.code, 'unknown_source');
});

// Sends raw bytes and collects the answer until the server closes (or 5 s pass).
function raw(port, bytes) {
  return new Promise((resolve) => {
    const s = connect(port, '127.0.0.1');
    let got = Buffer.alloc(0);
    const timer = setTimeout(() => { s.destroy(); resolve({ text: got.toString('latin1'), timedOut: true }); }, 5000);
    s.on('data', (b) => { got = Buffer.concat([got, b]); });
    s.on('error', () => {});
    s.on('close', () => { clearTimeout(timer); resolve({ text: got.toString('latin1'), timedOut: false }); });
    s.on('connect', () => s.write(bytes));
  });
}

test('a body over the source limit → 413, with Content-Length before the body, and chunked; not stored', async () => {
  const ev = event({ payload: { pad: 'x'.repeat(3000) } });
  // Content-Length over the cap: the header alone is answered (the body is never sent).
  const head = `POST /in/shop HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n` +
    `webhook-id: ${ev.id}\r\nContent-Length: ${Buffer.byteLength(ev.body)}\r\nConnection: close\r\n\r\n`;
  const r = await raw(d.publicPort, head);
  assert.equal(r.timedOut, false, 'answered without the body');
  assert.equal(Number(r.text.slice(9, 12)), 413);
  assert.match(r.text, /"too_large"|"payload_too_large"/);

  // Chunked: no Content-Length; the server stops at the cap.
  const status = await new Promise((resolve, reject) => {
    const req = request({ host: '127.0.0.1', port: d.publicPort, path: '/in/shop', method: 'POST',
      headers: { 'content-type': 'application/json', 'transfer-encoding': 'chunked', 'webhook-id': ev.id } },
    (res) => { res.resume(); res.on('end', () => resolve(res.statusCode)); });
    req.on('error', reject);
    for (let i = 0; i < 4; i++) req.write(ev.body.slice(i * 1000, (i + 1) * 1000));
    req.end();
  });
  assert.equal(status, 413);
  assert.equal((await inboxOf(ev.id)).length, 0);
});

test('rejections are listed with reason, peer, size and hash, counted, and never stored in the inbox', async () => {
  const ev = event();
  const r = await post('shop', ev, { secret: newSecret() });
  assert.equal(r.status, 401);
  const sha = createHash('sha256').update(ev.body).digest('hex');
  const listed = await waitFor(async () => {
    const l = await d.api('GET', '/v1/sources/shop/rejections?limit=1000');
    return l.status === 200 && l.body.data.find((x) => x.sha256 === sha) && l.body;
  }, { what: 'the rejection in the log' });
  const entry = listed.data.find((x) => x.sha256 === sha);
  assert.deepEqual(Object.keys(entry).sort(), ['at', 'peer', 'reason', 'sha256', 'size']);
  assert.equal(entry.reason, 'bad_signature');
  assert.equal(entry.size, Buffer.byteLength(ev.body));
  assert.match(entry.peer, /^127\.0\.0\.1:\d+$/);
  assert.ok(!Number.isNaN(Date.parse(entry.at)));
  assert.ok(listed.counts.bad_signature >= 2, JSON.stringify(listed.counts));
  assert.ok(listed.counts.stale_timestamp >= 2, JSON.stringify(listed.counts));
  assert.ok(listed.counts.missing_field >= 1, JSON.stringify(listed.counts));
  assert.ok(listed.counts.too_large >= 1, JSON.stringify(listed.counts));
  assert.equal((await inboxOf(ev.id)).length, 0);
  // Pagination: one at a time, the cursor goes on.
  const p1 = await d.api('GET', '/v1/sources/shop/rejections?limit=1');
  assert.equal(p1.body.data.length, 1);
  assert.ok(p1.body.next_cursor);
  const p2 = await d.api('GET', `/v1/sources/shop/rejections?limit=1&cursor=${encodeURIComponent(p1.body.next_cursor)}`);
  assert.equal(p2.body.data.length, 1);
  assert.notDeepEqual(p2.body.data[0], p1.body.data[0]);
  assert.equal((await d.api('GET', '/v1/sources/nosuch/rejections')).status, 404);
});

test('secrets are write-only: never in GET, list or the create answer', async () => {
  const created = await d.api('POST', '/v1/sources', {
    name: 'wo', verify: { scheme: 'standard-webhooks', secrets: [SECRET_A] },
    handler: { forward: { url: 'http://127.0.0.1:9/app', secret: SECRET_B } },
  });
  assert.equal(created.status, 201, JSON.stringify(created.body));
  const got = await d.api('GET', '/v1/sources/wo');
  const list = await d.api('GET', '/v1/sources');
  for (const text of [JSON.stringify(created.body), JSON.stringify(got.body), JSON.stringify(list.body)]) {
    assert.ok(!text.includes(SECRET_A.slice(6)) && !text.includes(SECRET_B.slice(6)), 'no key material');
  }
  assert.equal(got.body.verify.secrets.length, 1);
  assert.ok(got.body.verify.secrets[0].created_at);
  assert.ok(got.body.handler.forward.secret.created_at);
  assert.equal(got.body.handler.forward.url, 'http://127.0.0.1:9/app');
  // A PATCH of verify without secrets keeps them; with two, both count.
  const p = await d.api('PATCH', '/v1/sources/wo', { verify: { scheme: 'standard-webhooks', tolerance: '60s' } });
  assert.equal(p.status, 200, JSON.stringify(p.body));
  assert.equal(p.body.verify.secrets.length, 1);
  assert.equal(p.body.verify.tolerance, '1m');
  const p2 = await d.api('PATCH', '/v1/sources/wo', { verify: { scheme: 'standard-webhooks', secrets: [SECRET_B, SECRET_A] } });
  assert.equal(p2.body.verify.secrets.length, 2);
  assert.equal(p2.body.verify.secrets[1].created_at, got.body.verify.secrets[0].created_at, 'a kept key keeps its time');
  assert.equal((await d.api('DELETE', '/v1/sources/wo')).status, 204);
  assert.equal((await d.api('GET', '/v1/sources/wo')).status, 404);
});

test('source bodies: unknown fields name themselves, unbuilt features are not_supported, none only when explicit', async () => {
  const cases = [
    [{ name: 'x1', verify: { scheme: 'none' }, colour: 'red' }, 'unknown_field', /colour/],
    [{ name: 'x1', verify: { scheme: 'none', colour: 1 } }, 'unknown_field', /verify\.colour/],
    [{ name: 'x1', verify: { scheme: 'none' }, handler: { machine: 'order' } }, 'missing_field', /handler\.machine/],
    [{ name: 'x1', verify: { scheme: 'none' }, handler: { library: false } }, 'invalid_field', /handler\.library/],
    [{ name: 'x1', verify: { scheme: 'none' }, handler: { library: 'yes' } }, 'invalid_field', /handler\.library/],
    [{ name: 'x1', verify: { scheme: 'none' }, reconcile: { url: 'http://x' } }, 'invalid_field', /reconcile\.url/],
    [{ name: 'x1' }, 'missing_field', /verify/],
    [{ name: 'x1', verify: {} }, 'missing_field', /verify\.scheme/],
    [{ name: 'x1', verify: { scheme: 'standard-webhooks' } }, 'missing_field', /verify\.secrets/],
    [{ name: 'x1', verify: { scheme: 'standard-webhooks', secrets: ['nope'] } }, 'invalid_field', /verify\.secrets/],
    [{ name: 'x1', verify: { scheme: 'none' }, event_id: 'data.id' }, 'invalid_field', /event_id/],
    [{ name: 'x1', verify: { scheme: 'none' }, handler: { forward: { url: 'http://127.0.0.1:9/' } } }, 'missing_field', /handler\.forward\.secret/],
    [{ name: 'bad name', verify: { scheme: 'none' } }, 'invalid_field', /name/],
  ];
  for (const [body, code, message] of cases) {
    const r = await d.api('POST', '/v1/sources', body);
    assert.equal(r.status, 400, JSON.stringify(body));
    assert.equal(r.body.error.code, code, JSON.stringify(r.body));
    assert.match(r.body.error.message, message);
  }
  assert.equal((await d.api('GET', '/v1/sources/x1')).status, 404);
  const dup = await d.api('POST', '/v1/sources', { name: 'plain', verify: { scheme: 'none' } });
  assert.equal(dup.status, 409);
  const rename = await d.api('PATCH', '/v1/sources/plain', { name: 'other' });
  assert.equal(rename.status, 400);
});

test('scheme none: accepted without a signature, the event id by JSON Pointer, signature_verified false', async () => {
  const id = `plain_${Date.now()}`;
  const r = await post('plain', { id, body: JSON.stringify({ id, type: 't' }) }, { headers: {} });
  assert.equal(r.status, 200, JSON.stringify(r.body));
  const [row] = await inboxOf(id, 'plain');
  assert.equal(row.signature_verified, false);
  const noId = await post('plain', { id: 'x', body: '{"type":"t"}' }, { headers: {} });
  assert.equal(noId.status, 400);
  assert.equal(noId.body.error.code, 'missing_field');
  assert.match(noId.body.error.message, /\/id/);
});

test('inbox list: filters by source, status, entity and time, cursor pagination; bad parameters 400', async () => {
  const since = new Date(Date.now() - 1000).toISOString();
  const order = `ord-${Date.now()}`;
  for (let i = 0; i < 3; i++) {
    const ev = event({ payload: { data: { order_id: order, version: i + 1 } } });
    assert.equal((await post('shop', ev)).status, 200);
  }
  const all = await d.api('GET', `/v1/inbox?entity_kind=order&entity_id=${order}&status=pending&since=${since}`);
  assert.equal(all.status, 200);
  assert.equal(all.body.data.length, 3);
  assert.deepEqual(all.body.data.map((x) => x.version), [3, 2, 1]);
  const page = await d.api('GET', `/v1/inbox?entity_id=${order}&limit=2`);
  assert.equal(page.body.data.length, 2);
  const rest = await d.api('GET', `/v1/inbox?entity_id=${order}&limit=2&cursor=${encodeURIComponent(page.body.next_cursor)}`);
  assert.equal(rest.body.data.length, 1);
  assert.equal(rest.body.next_cursor, null);
  assert.equal((await d.api('GET', `/v1/inbox?entity_id=${order}&status=processed`)).body.data.length, 0);
  assert.equal((await d.api('GET', '/v1/inbox?colour=red')).status, 400);
  assert.equal((await d.api('GET', '/v1/inbox?status=nope')).status, 400);
  assert.equal((await d.api('GET', '/v1/inbox/inb_nope')).status, 404);
});

test('hookd apply twice: the second run changes nothing', () => {
  const file = join(tmpdir(), `hookd-apply-${process.pid}-${Date.now()}.json`);
  writeFileSync(file, JSON.stringify({
    sources: [
      { name: 'applied', verify: { scheme: 'standard-webhooks', secrets: [SECRET_A], tolerance: '2m' },
        entity: { kind: 'order', id: '/data/order_id' }, required: ['/type'] },
      { name: 'applied2', verify: { scheme: 'none' }, event_id: 'header:X-Id' },
    ],
    endpoints: [
      { url: 'http://127.0.0.1:9/applied', account: 'acct-apply', event_types: ['order.*'], timeout: '60s', secret: SECRET_B },
      { url: 'http://127.0.0.1:9/applied-2', retry_schedule: '1s,2s' },
    ],
  }));
  const first = d.cli(['apply', file]);
  assert.match(first, /^KIND\s+CREATED\s+UPDATED\s+UNCHANGED\s+FAILED$/m);
  assert.match(first, /^sources\s+2\s+0\s+0\s+0$/m);
  assert.match(first, /^endpoints\s+2\s+0\s+0\s+0$/m);
  assert.match(first, /^source\s+applied2\s+created\s+-$/m);
  const second = d.cli(['apply', file]);
  assert.match(second, /^sources\s+0\s+0\s+2\s+0$/m);
  assert.match(second, /^endpoints\s+0\s+0\s+2\s+0$/m);
  const report = JSON.parse(d.cli(['apply', '--json', file]));
  assert.deepEqual(report.summary[1], { kind: 'endpoints', created: 0, updated: 0, unchanged: 2, failed: 0 });
  assert.equal(report.items.filter((i) => i.result === 'unchanged').length, 4);
  const listed = d.cli(['sources', 'list']);
  assert.match(listed, /^applied2\s+none\s/m);
  assert.ok(!listed.includes(SECRET_A.slice(6)));
});
