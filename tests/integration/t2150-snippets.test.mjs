// Response snippets are bytes: a Latin-1 error page, a gzip body (never
// decompressed, never asked for), a body with NULs and UTF-8 cut mid-character
// at the 4 KiB cap each leave their attempt visible through the API and
// `hookd deliveries get`, shown as text when it is UTF-8 and as base64 otherwise.
import { test, after, before } from 'node:test';
import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import { gzipSync } from 'node:zlib';
import { startDaemon } from '../lib/harness.mjs';

const latin1 = Buffer.from('<html><body>Erreur: donn\xe9es invalides \xa9 2026</body></html>', 'latin1');
const gzip = gzipSync(Buffer.from('{"error":"compressed answer"}'));
const nul = Buffer.from('before\0middle\0\0after', 'utf8');
// 4,095 ASCII bytes then "€" (3 bytes): the 4,096-byte cap falls inside the euro sign.
const cut = Buffer.concat([Buffer.alloc(4095, 'a'), Buffer.from('€ and more after the cap', 'utf8')]);

const answers = {
  '/latin1': { status: 400, headers: { 'content-type': 'text/html; charset=iso-8859-1' }, body: latin1 },
  '/gzip': { status: 200, headers: { 'content-type': 'application/json', 'content-encoding': 'gzip' }, body: gzip },
  '/nul': { status: 422, headers: { 'content-type': 'text/plain' }, body: nul },
  '/cut': { status: 200, headers: { 'content-type': 'text/plain; charset=utf-8' }, body: cut },
};

let d, server;
const acceptEncodings = [];
before(async () => {
  server = createServer((req, res) => {
    acceptEncodings.push(req.headers['accept-encoding'] ?? null);
    req.resume();
    req.on('end', () => {
      const a = answers[req.url] || { status: 404, headers: {}, body: Buffer.alloc(0) };
      res.writeHead(a.status, { ...a.headers, 'content-length': a.body.length });
      res.end(a.body);
    });
  });
  await new Promise((r) => server.listen(0, '127.0.0.1', r));
  d = await startDaemon();
});
after(async () => {
  assert.equal(await d?.stop(), 0, 'hookd exits cleanly');
  await d?.cleanup();
  await new Promise((r) => server?.close(r));
});

const url = (path) => `http://127.0.0.1:${server.address().port}${path}`;

/** Publishes to an endpoint at path, waits for the delivery to end; returns its API and CLI views. */
async function deliver(path, type, status) {
  await d.createEndpoint({ url: url(path), event_types: [`${type}.*`] });
  const ev = await d.publish({ type: `${type}.x`, data: { path } });
  const [dl] = await d.waitDelivery(ev.id, status);
  const api = await d.api('GET', `/v1/deliveries/${dl.id}`);
  assert.equal(api.status, 200);
  const cli = JSON.parse(d.cli(['deliveries', 'get', dl.id, '--json']));
  return { api: api.body, cli };
}

function oneAttempt(view, code) {
  assert.equal(view.attempts.length, 1, `one attempt shown: ${JSON.stringify(view.attempts)}`);
  const [a] = view.attempts;
  assert.equal(a.status_code, code);
  return a;
}

test('a Latin-1 error page: shown as base64 of its exact bytes', async () => {
  const { api, cli } = await deliver('/latin1', 'snl', 'dead');
  for (const view of [api, cli]) {
    const a = oneAttempt(view, 400);
    assert.equal(a.response, null);
    assert.equal(a.response_encoding, 'base64');
    assert.equal(a.response_truncated, false);
    assert.deepEqual(Buffer.from(a.response_base64, 'base64'), latin1);
  }
});

test('a gzip body: kept compressed as it came, and compression was never asked for', async () => {
  const { api, cli } = await deliver('/gzip', 'sng', 'delivered');
  for (const view of [api, cli]) {
    const a = oneAttempt(view, 200);
    assert.equal(a.response_encoding, 'base64');
    assert.deepEqual(Buffer.from(a.response_base64, 'base64'), gzip, 'the bytes the endpoint sent, not decompressed');
  }
  assert.ok(acceptEncodings.length > 0);
  assert.deepEqual(acceptEncodings.filter((v) => v !== null), [], 'no request carried Accept-Encoding');
});

test('a body with NUL bytes: shown whole as text', async () => {
  const { api, cli } = await deliver('/nul', 'snn', 'dead');
  for (const view of [api, cli]) {
    const a = oneAttempt(view, 422);
    assert.equal(a.response_encoding, 'utf-8');
    assert.equal(a.response, nul.toString('utf8'), 'nothing after the first NUL is lost');
  }
});

test('UTF-8 cut mid-character at the cap: cut back to the character boundary and flagged', async () => {
  const { api, cli } = await deliver('/cut', 'snc', 'delivered');
  for (const view of [api, cli]) {
    const a = oneAttempt(view, 200);
    assert.equal(a.response_encoding, 'utf-8');
    assert.equal(a.response, 'a'.repeat(4095), 'the partial euro sign is dropped');
    assert.equal(a.response_truncated, true);
  }
});
