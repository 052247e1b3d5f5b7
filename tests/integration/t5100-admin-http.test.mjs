// The admin listener as a hostile client meets it: the routes' auth and body
// cap are decided on the header (the body is never read), framing refusals and
// protocol errors answer the JSON shape, and writes answer only
// after their commit while the connection waits suspended.
import { test, after, before } from 'node:test';
import assert from 'node:assert/strict';
import { connect } from 'node:net';
import { startDaemon, TOKEN } from '../lib/harness.mjs';

let d;
before(async () => { d = await startDaemon(); });
after(async () => { assert.equal(await d.stop(), 0, 'hookd exits cleanly'); await d.cleanup(); });

// Sends raw bytes and collects the answer until the server closes (or 5 s pass).
function raw(port, bytes, { thenSend } = {}) {
  return new Promise((resolve, reject) => {
    const s = connect(port, '127.0.0.1');
    let got = Buffer.alloc(0);
    const timer = setTimeout(() => { s.destroy(); resolve({ text: got.toString('latin1'), timedOut: true }); }, 5000);
    s.on('data', (b) => {
      got = Buffer.concat([got, b]);
      if (thenSend && got.includes('\r\n\r\n')) { s.write(thenSend, () => {}); thenSend = null; }
    });
    s.on('error', () => {});
    s.on('close', () => { clearTimeout(timer); resolve({ text: got.toString('latin1'), timedOut: false }); });
    s.on('connect', () => s.write(bytes));
    s.on('timeout', reject);
  });
}

function parse(text) {
  const i = text.indexOf('\r\n\r\n');
  const status = Number(text.slice(9, 12));
  return { status, head: text.slice(0, i), body: JSON.parse(text.slice(i + 4)) };
}

test('an unauthenticated 1 MiB POST is answered 401 before the body is sent', async () => {
  const head = 'POST /v1/events HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n' +
    'Content-Length: 1048576\r\nConnection: close\r\n\r\n';
  const r = await raw(d.adminPort, head, { thenSend: Buffer.alloc(1 << 20, 0x20) });
  assert.equal(r.timedOut, false, 'answered without waiting for the body');
  const p = parse(r.text);
  assert.equal(p.status, 401);
  assert.equal(p.body.error.code, 'unauthorized');
});

test('a 2 MiB Content-Length is answered 413 before the body is sent', async () => {
  const head = `POST /v1/endpoints HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${TOKEN}\r\n` +
    'Content-Length: 2097152\r\nConnection: close\r\n\r\n';
  const p = parse((await raw(d.adminPort, head)).text);
  assert.equal(p.status, 413);
  assert.equal(p.body.error.code, 'payload_too_large');
});

test('the token is the whole header value: a NUL or a suffix fails', async () => {
  const nul = await raw(d.adminPort, Buffer.from(
    `GET /v1/endpoints HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${TOKEN}\0junk\r\nConnection: close\r\n\r\n`, 'latin1'));
  assert.equal(parse(nul.text).status, 400);
  assert.equal(parse(nul.text).body.error.code, 'invalid_header');
  const suffix = await raw(d.adminPort,
    `GET /v1/endpoints HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${TOKEN}x\r\nConnection: close\r\n\r\n`);
  assert.equal(parse(suffix.text).status, 401);
  const ok = await raw(d.adminPort,
    `GET /v1/endpoints HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${TOKEN}\r\nConnection: close\r\n\r\n`);
  assert.equal(parse(ok.text).status, 200);
});

test('two different Content-Length headers → 400; a 100 KB path → JSON, not an HTML page', async () => {
  const two = await raw(d.adminPort, `POST /v1/events HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${TOKEN}\r\n` +
    'Content-Length: 2\r\nContent-Length: 30\r\n\r\n{}');
  assert.equal(parse(two.text).status, 400);
  assert.equal(parse(two.text).body.error.code, 'invalid_header');
  const long = await raw(d.adminPort, `GET /${'a'.repeat(100 * 1024)} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n`);
  const p = parse(long.text);
  assert.equal(p.status, 431);
  assert.match(p.head, /Content-Type: application\/json/i);
  assert.equal(p.body.error.code, 'header_too_large');
});

test('writes answer after their commit, many at once', async () => {
  const rs = await Promise.all(Array.from({ length: 50 }, (_, i) =>
    d.api('POST', '/v1/events', { type: 'order.created', data: { n: i } })));
  for (const r of rs) assert.equal(r.status, 201);
  const list = await d.api('GET', '/v1/events?limit=100');
  assert.ok(list.body.data.length >= 50);
});
