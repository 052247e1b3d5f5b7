// The accept path's answers, as the writer now writes them: a new event's 200
// names its id; a duplicate of a row that SQL wrote with an id of any shape
// (quotes, backslashes, control bytes, non-ASCII) names that id exactly, in
// valid JSON; a steady stream of requests from several connections gets every
// event acknowledged, each stored once.
import { test, after, before } from 'node:test';
import assert from 'node:assert/strict';
import { createHmac } from 'node:crypto';
import { Agent, request } from 'node:http';
import { startDaemon, newSecret } from '../lib/harness.mjs';

let d;
const SECRET = newSecret();
const agent = new Agent({ keepAlive: true, maxSockets: 16 });

before(async () => {
  d = await startDaemon();
  const r = await d.api('POST', '/v1/sources', {
    name: 'steady', verify: { scheme: 'standard-webhooks', secrets: [SECRET] }, event_type: '/type',
  });
  assert.equal(r.status, 201, JSON.stringify(r.body));
});
after(async () => { agent.destroy(); assert.equal(await d.stop(), 0, 'hookd exits cleanly'); await d.cleanup(); });

function sign(id, ts, body) {
  const key = Buffer.from(SECRET.slice('whsec_'.length), 'base64');
  return 'v1,' + createHmac('sha256', key).update(`${id}.${ts}.${body}`).digest('base64');
}

/** One signed POST /in/steady; resolves { status, text, body, ms }. */
function post(id, body) {
  const ts = String(Math.floor(Date.now() / 1000));
  const t0 = process.hrtime.bigint();
  return new Promise((resolve, reject) => {
    const req = request({
      host: '127.0.0.1', port: d.publicPort, path: '/in/steady', method: 'POST', agent, timeout: 20000,
      headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body),
                 'webhook-id': id, 'webhook-timestamp': ts, 'webhook-signature': sign(id, ts, body) },
    }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (c) => { text += c; });
      res.on('end', () => {
        const ms = Number(process.hrtime.bigint() - t0) / 1e6;
        let parsed = null;
        try { parsed = JSON.parse(text); } catch { /* asserted by the caller */ }
        resolve({ status: res.statusCode, type: res.headers['content-type'], text, body: parsed, ms });
      });
    });
    req.on('timeout', () => req.destroy(new Error('no answer within 20 s')));
    req.on('error', reject);
    req.end(body);
  });
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const q = (s) => `'${s.replace(/'/g, "''")}'`;

test('a new event: 200 {"id", "status": "accepted"} as JSON, the id the stored row\'s', async () => {
  const r = await post(`new_${process.pid}`, JSON.stringify({ type: 'steady.test' }));
  assert.equal(r.status, 200, r.text);
  assert.match(r.type, /^application\/json/);
  assert.equal(r.body.status, 'accepted');
  assert.match(r.body.id, /^inb_[0-9a-f]{32}$/);
  assert.deepEqual(Object.keys(r.body).sort(), ['id', 'status']);
  assert.equal(d.sql(`SELECT id FROM hookd_inbox WHERE source = 'steady' AND event_id = 'new_${process.pid}'`), r.body.id);
});

test('a duplicate of a row SQL wrote with a hostile id: its id, exactly, in valid JSON', async () => {
  const ids = [
    'odd"quote', 'back\\slash', 'tab\there', 'ünïcödé', '</script>', "it's", 'x'.repeat(60), 'a b {c}',
  ];
  for (const [i, stored] of ids.entries()) {
    const ev = `sql_${process.pid}_${i}`;
    d.sql(`INSERT INTO hookd_inbox(id, source, event_id, payload, payload_sha256, received_at, next_attempt_at)
           VALUES (${q(stored)}, 'steady', ${q(ev)}, '{}', '${'0'.repeat(64)}', 1, 1)`);
    const r = await post(ev, JSON.stringify({ type: 'steady.test' }));
    assert.equal(r.status, 200, r.text);
    assert.ok(r.body, `valid JSON: ${r.text}`);
    assert.equal(r.body.status, 'duplicate');
    assert.equal(r.body.id, stored);
    assert.equal(d.sql(`SELECT dup_count FROM hookd_inbox WHERE source = 'steady' AND event_id = ${q(ev)}`), '1');
  }
});

test('a steady stream: every event acknowledged and stored once', async () => {
  // 8 senders, each a request every 4 ms for ~1.2 s (about 2,000 requests a second in all).
  const senders = 8, each = 300;
  const answers = [];
  await Promise.all(Array.from({ length: senders }, async (_, s) => {
    for (let i = 0; i < each; i++) {
      const id = `st_${process.pid}_${s}_${i}`;
      const started = Date.now();
      answers.push(post(id, JSON.stringify({ type: 'steady.test', data: { s, i } })).then((r) => ({ id, ...r })));
      await sleep(Math.max(0, 4 - (Date.now() - started)));
    }
  }));
  const got = await Promise.all(answers);
  for (const a of got) {
    assert.equal(a.status, 200, `${a.id}: ${a.text}`);
    assert.equal(a.body.status, 'accepted', `${a.id}: ${a.text}`);
  }
  assert.equal(new Set(got.map((a) => a.body.id)).size, senders * each, 'one row each');
  const n = Number(d.sql(`SELECT count(*) FROM hookd_inbox WHERE source = 'steady' AND event_id LIKE 'st\\_${process.pid}\\_%' ESCAPE '\\'`));
  assert.equal(n, senders * each, 'every acknowledged event stored');
  const ok = Number(d.sql(`SELECT count(*) FROM hookd_inbox WHERE source = 'steady' AND dup_count = 0 AND event_id LIKE 'st\\_${process.pid}\\_%' ESCAPE '\\'`));
  assert.equal(ok, senders * each, 'no event counted twice');
});
