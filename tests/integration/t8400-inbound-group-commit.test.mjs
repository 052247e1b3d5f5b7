// The receiver's accepts under concurrency: requests that arrive together are
// stored in one group commit (PostgreSQL: one multi-row statement), yet each
// is answered after the commit with its own outcome. Every copy of an event
// sent at once, on many connections, some with another body, gets 200; exactly
// one is "accepted", the others "duplicate" with the same id; the row counts
// every copy and every differing body, whatever group each copy fell into.
import { test, after, before } from 'node:test';
import assert from 'node:assert/strict';
import { createHmac } from 'node:crypto';
import { Agent } from 'node:http';
import { request } from 'node:http';
import { startDaemon, newSecret } from '../lib/harness.mjs';

let d;
const SECRET = newSecret();
const agent = new Agent({ keepAlive: true, maxSockets: 48 });

before(async () => {
  d = await startDaemon();
  const r = await d.api('POST', '/v1/sources', {
    name: 'burst', verify: { scheme: 'standard-webhooks', secrets: [SECRET] }, event_type: '/type',
  });
  assert.equal(r.status, 201, JSON.stringify(r.body));
});
after(async () => { agent.destroy(); assert.equal(await d.stop(), 0, 'hookd exits cleanly'); await d.cleanup(); });

function sign(id, ts, body) {
  const key = Buffer.from(SECRET.slice('whsec_'.length), 'base64');
  return 'v1,' + createHmac('sha256', key).update(`${id}.${ts}.${body}`).digest('base64');
}

/** One signed POST /in/burst on the keep-alive agent; resolves { status, body }. */
function post(id, body) {
  const ts = String(Math.floor(Date.now() / 1000));
  return new Promise((resolve, reject) => {
    const req = request({
      host: '127.0.0.1', port: d.publicPort, path: '/in/burst', method: 'POST', agent, timeout: 20000,
      headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body),
                 'webhook-id': id, 'webhook-timestamp': ts, 'webhook-signature': sign(id, ts, body) },
    }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (c) => { text += c; });
      res.on('end', () => resolve({ status: res.statusCode, body: JSON.parse(text) }));
    });
    req.on('timeout', () => req.destroy(new Error('no answer within 20 s')));
    req.on('error', reject);
    req.end(body);
  });
}

async function rows() {
  const all = [];
  let cursor = null;
  for (let page = 0; page < 20; page++) {
    const r = await d.api('GET', `/v1/inbox?source=burst&limit=500${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`);
    assert.equal(r.status, 200, JSON.stringify(r.body));
    all.push(...r.body.data);
    cursor = r.body.next_cursor;
    if (!cursor) break;
  }
  return all;
}

test('copies sent at once: one accepted each, every copy and differing body counted', async () => {
  const events = 60, copies = 4;
  const sends = [];
  for (let c = 0; c < copies; c++) {
    for (let e = 0; e < events; e++) {
      const id = `msg_${process.pid}_${e}`;
      // The last copy of every third event has another body: a conflicting duplicate.
      const other = c === copies - 1 && e % 3 === 0;
      const body = JSON.stringify({ type: 'burst.test', data: { e, other }, q: 'a "quoted" \\ {brace}, comma' });
      sends.push(post(id, body).then((r) => ({ id, other, ...r })));
    }
  }
  const answers = await Promise.all(sends);
  const byEvent = new Map();
  for (const a of answers) {
    assert.equal(a.status, 200, JSON.stringify(a.body));
    assert.ok(a.body.status === 'accepted' || a.body.status === 'duplicate', JSON.stringify(a.body));
    if (!byEvent.has(a.id)) byEvent.set(a.id, []);
    byEvent.get(a.id).push(a.body);
  }
  assert.equal(byEvent.size, events);
  for (const [id, got] of byEvent) {
    assert.equal(got.length, copies);
    assert.equal(got.filter((b) => b.status === 'accepted').length, 1, `${id}: one accepted`);
    assert.equal(new Set(got.map((b) => b.id)).size, 1, `${id}: every copy names the one row`);
  }
  const stored = await rows();
  assert.equal(stored.length, events, 'one row per event');
  for (const r of stored) {
    const e = Number(r.event_id.split('_').pop());
    assert.equal(r.dup_count, copies - 1, `${r.event_id}: every copy counted`);
    // The accepted copy may be the one with the other body: then the three others differ from it.
    const conflicts = e % 3 === 0 ? [1, copies - 1] : [0];
    assert.ok(conflicts.includes(r.conflicting_duplicates), `${r.event_id}: ${r.conflicting_duplicates} conflicting`);
    assert.equal(r.id, byEvent.get(r.event_id)[0].id);
  }
});
