// A body over the source's cap is refused 413 and recorded in the source's
// rejection log as too_large, whether the cap is seen in Content-Length
// (before the body) or only while a chunked body streams in (the server cuts
// it off at the cap), and also for a chunked body that never ends. None of
// them reaches the inbox.
import { test, after, before } from 'node:test';
import assert from 'node:assert/strict';
import { request } from 'node:http';
import { startDaemon, waitFor } from '../lib/harness.mjs';

const CAP = 1000;
let d;
before(async () => {
  d = await startDaemon();
  const r = await d.api('POST', '/v1/sources', { name: 'capped', verify: { scheme: 'none' }, event_id: '/id', max_body: CAP });
  assert.equal(r.status, 201, JSON.stringify(r.body));
});
after(async () => { assert.equal(await d.stop(), 0, 'hookd exits cleanly'); await d.cleanup(); });

/** Sends chunks of a chunked body (no Content-Length); resolves the status (or 'closed' when the socket is cut). */
function postChunked(chunks) {
  return new Promise((resolve) => {
    const req = request({ host: '127.0.0.1', port: d.publicPort, path: '/in/capped', method: 'POST',
      headers: { 'content-type': 'application/json', 'transfer-encoding': 'chunked' } },
    (res) => { res.resume(); res.on('end', () => resolve(res.statusCode)); });
    req.on('error', () => resolve('closed'));
    for (const c of chunks) req.write(c);
    req.end();
  });
}

const tooLarge = async () => {
  const r = await d.api('GET', '/v1/sources/capped/rejections?limit=1000');
  assert.equal(r.status, 200);
  return { count: r.body.counts.too_large || 0, entries: r.body.data.filter((x) => x.reason === 'too_large') };
};
const stored = () => Number(d.sql("SELECT count(*) FROM hookd_inbox WHERE source = 'capped'"));

test('a chunked body past the cap: 413, logged too_large with the bytes received, not stored', async () => {
  const before = (await tooLarge()).count;
  const body = JSON.stringify({ id: 'big-1', pad: 'x'.repeat(3 * CAP) });
  const status = await postChunked([body.slice(0, 500), body.slice(500, 1500), body.slice(1500)]);
  assert.equal(status, 413);
  const after = await waitFor(async () => { const t = await tooLarge(); return t.count > before && t; },
    { what: 'the chunked refusal in the rejection log' });
  assert.equal(after.count, before + 1);
  const entry = after.entries[0];
  assert.ok(entry.size > CAP, `size ${entry.size} is what came, past the cap`);
  assert.equal(entry.sha256, null, 'no hash of a body never kept');
  assert.match(entry.peer, /^127\.0\.0\.1:\d+$/);
  // A body within the cap on the same route goes through.
  const ok = await postChunked([JSON.stringify({ id: 'small-1' })]);
  assert.equal(ok, 200);
  assert.equal(stored(), 1);
});

test('Content-Length over the cap and a chunked body that never ends: both logged too_large', async () => {
  const before = (await tooLarge()).count;
  const big = JSON.stringify({ id: 'big-2', pad: 'y'.repeat(2 * CAP) });
  const res = await fetch(`http://127.0.0.1:${d.publicPort}/in/capped`, { method: 'POST', body: big,
    headers: { 'content-type': 'application/json' } });
  await res.arrayBuffer();
  assert.equal(res.status, 413);
  // Far past the cap (the server stops reading at 4 × cap + 64 KiB and closes).
  const endless = Array.from({ length: 100 }, () => 'z'.repeat(4096));
  const status = await postChunked(endless);
  assert.ok(status === 413 || status === 'closed', `status ${status}`);
  const after = await waitFor(async () => { const t = await tooLarge(); return t.count >= before + 2 && t; },
    { what: 'both refusals in the rejection log' });
  assert.equal(after.count, before + 2);
  assert.equal(stored(), 1, 'nothing of them stored');
});
