// Outside text never reaches the terminal raw (design §12 "CLI output"): the
// body an endpoint answers `hookd send` with, what `hookd listen` prints of a
// request (path, webhook-id, body; human and --json), the admin API's error
// messages and non-JSON error bodies, and the parser's words about a bad
// --data or apply file. Hostile bytes: ESC sequences, CR, DEL, C1 controls,
// bidi overrides, invalid UTF-8. No daemon (and so no store) is involved:
// each command talks to a scripted peer.
import { test, after, before } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createServer } from 'node:http';
import { BACKEND, HOOKD, newSecret, waitFor } from '../lib/harness.mjs';

// No store is involved: the SQLite pass runs these; the PostgreSQL pass reports them skipped.
const skip = BACKEND === 'postgres' ? 'no store involved: run on the SQLite pass' : false;

const ESC = 0x1b;
// ESC sequences, a lone CR, DEL, C1 CSI (U+009B), RLO (U+202E), invalid UTF-8, a CRLF line end.
const HOSTILE = Buffer.concat([
  Buffer.from('ok \x1b[31mred\x1b[0m \x1b]0;title\x07 a\rb \x7f '),
  Buffer.from('\u009b2J \u202egnp.exe\u202c '),
  Buffer.from([0xff, 0xfe, 0xc3]),
  Buffer.from(' end\r\nline two\n'),
]);

/** Raw bytes a terminal would act on: ESC, a CR not ending a line, C1 (U+0080–U+009F), bidi controls, invalid UTF-8. */
function rawHostile(buf) {
  const found = [];
  const text = buf.toString('latin1');
  if (buf.includes(ESC)) found.push('ESC');
  if (/\r(?!\n)/.test(text)) found.push('CR');
  if (buf.includes(0x7f)) found.push('DEL');
  const s = buf.toString('utf8');
  try { new TextDecoder('utf-8', { fatal: true }).decode(buf); } catch { found.push('invalid UTF-8'); }
  if (/[\u0080-\u009f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069]/u.test(s)) found.push('C1/bidi');
  return found;
}

function assertSafe(buf, what) {
  assert.deepEqual(rawHostile(buf), [], `${what} holds raw hostile bytes: ${JSON.stringify(buf.toString('latin1'))}`);
}

/** The escapes the shared output layer writes for HOSTILE. */
function assertEscaped(text, what) {
  for (const want of ['\\e[31mred\\e[0m', '\\e]0;title\\x07', 'a\\rb', '\\x7f', '\\u009B2J', '\\u202Egnp.exe\\u202C',
    '\\xff\\xfe\\xc3'])
    assert.ok(text.includes(want), `${what}: ${want} in ${JSON.stringify(text)}`);
}

/** Runs a command without blocking this process (the scripted peer answers from it): {status, stdout, stderr}. */
function run(cmd, args, env = process.env) {
  return new Promise((resolve) => {
    const child = spawn(cmd, args, { env, stdio: ['ignore', 'pipe', 'pipe'] });
    const out = [], err = [];
    child.stdout.on('data', (c) => out.push(c));
    child.stderr.on('data', (c) => err.push(c));
    const timer = setTimeout(() => child.kill('SIGKILL'), 15000);
    child.on('close', (status) => {
      clearTimeout(timer);
      resolve({ status, stdout: Buffer.concat(out), stderr: Buffer.concat(err) });
    });
  });
}

let peer, dir;
const hasScript = spawnSync('script', ['-qec', 'true', '/dev/null']).status === 0;

before(async () => {
  dir = mkdtempSync(join(tmpdir(), 't9900-'));
  // /v1/json-error: a JSON error with hostile code and message; /v1/raw-error: a non-JSON 500; else 200 HOSTILE.
  const server = createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      if (req.url.startsWith('/v1/json-error')) {
        res.writeHead(400, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ error: { code: 'bad\x1b[2J', message: `boom ${HOSTILE.toString('utf8')}` } }));
      } else if (req.url.startsWith('/v1/')) {
        res.writeHead(500, { 'content-type': 'text/plain' });
        res.end(HOSTILE);
      } else {
        res.writeHead(200, { 'content-type': 'text/plain' });
        res.end(HOSTILE);
      }
    });
  });
  await new Promise((r) => server.listen(0, '127.0.0.1', r));
  peer = { url: (p) => `http://127.0.0.1:${server.address().port}${p}`, stop: () => new Promise((r) => server.close(r)) };
});
after(async () => { await peer.stop(); rmSync(dir, { recursive: true, force: true }); });

const sendArgs = (url) => ['send', 'src', '--scheme', 'standard-webhooks', '--secret', newSecret(), '--data', '{}',
  '--url', url];
/** Runs the command on a terminal (script(1)); its output with the terminal's CRLF turned back into LF. */
async function onTty(args, env = {}) {
  const quoted = [HOOKD, ...args].map((a) => `'${a.replaceAll("'", "'\\''")}'`).join(' ');
  const r = await run('script', ['-qec', quoted, '/dev/null'], { ...process.env, ...env });
  return { status: r.status, out: Buffer.from(r.stdout.toString('latin1').replaceAll('\r\n', '\n'), 'latin1') };
}

test('hookd send: the response body is escaped on a terminal, byte for byte into a pipe', { skip }, async (t) => {
  const piped = await run(HOOKD, sendArgs(peer.url('/in/src')));
  assert.equal(piped.status, 0, piped.stderr.toString());
  assert.deepEqual(piped.stdout, Buffer.concat([Buffer.from('200\n'), HOSTILE]), 'a pipe gets the body as sent');
  if (!hasScript) return t.skip('script(1) is not available');
  const tty = await onTty(sendArgs(peer.url('/in/src')));
  assert.equal(tty.status, 0, tty.out.toString());
  assertSafe(tty.out, 'send on a terminal');
  const text = tty.out.toString('utf8');
  assertEscaped(text, 'send on a terminal');
  assert.ok(text.startsWith('200\nok '), text);
  assert.ok(text.includes(' end\nline two\n'), 'CRLF and LF line ends stay line ends');
});

test('hookd send: an error line escapes the URL it names', { skip }, async () => {
  const r = await run(HOOKD, sendArgs('http://127.0.0.1:1/in/\x1b[2J\u202e'));
  assert.equal(r.status, 1);
  assertSafe(r.stderr, 'send error');
  assert.match(r.stderr.toString(), /\\e\[2J\\u202E/);
});

/** Sends raw request bytes to a port and waits for the answer. */
function rawRequest(port, bytes) {
  return new Promise((resolve, reject) => {
    const s = connect(port, '127.0.0.1', () => s.end(bytes));
    const chunks = [];
    s.on('data', (c) => chunks.push(c));
    s.on('end', () => resolve(Buffer.concat(chunks)));
    s.on('error', reject);
    s.setTimeout(10000, () => { s.destroy(); reject(new Error('no answer')); });
  });
}

async function listenRun(extra) {
  const child = spawn(HOOKD, ['listen', '--listen', '127.0.0.1:0', ...extra], { stdio: ['ignore', 'pipe', 'pipe'] });
  const out = [], err = [];
  child.stdout.on('data', (c) => out.push(c));
  child.stderr.on('data', (c) => err.push(c));
  const port = await waitFor(() => {
    const m = /listening on http:\/\/127\.0\.0\.1:(\d+)/.exec(Buffer.concat(err).toString());
    return m ? Number(m[1]) : child.exitCode !== null ? -1 : 0;
  }, { what: 'hookd listen to start' });
  assert.ok(port > 0, Buffer.concat(err).toString());
  const json = Buffer.from(JSON.stringify({ note: HOSTILE.toString('utf8') }));
  const requests = [
    // A non-JSON body; a percent-encoded ESC sequence and RLO in the path; a webhook-id with C1 and invalid bytes.
    Buffer.concat([Buffer.from('POST /p%1b[2J%e2%80%ae HTTP/1.1\r\nHost: x\r\nConnection: close\r\nwebhook-id: id'),
      Buffer.from('\u009b31m', 'utf8'), Buffer.from([0xff]), Buffer.from(`\r\nContent-Length: ${HOSTILE.length}\r\n\r\n`),
      HOSTILE]),
    // A JSON body whose strings hold C1 and bidi characters (JSON escapes cover only C0).
    Buffer.concat([Buffer.from(`POST /j HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Type: application/json\r\n` +
      `Content-Length: ${json.length}\r\n\r\n`), json]),
  ];
  for (const r of requests) {
    const answer = await rawRequest(port, r);
    assert.match(answer.toString('latin1'), /^HTTP\/1\.1 200 /);
  }
  await waitFor(() => Buffer.concat(out).toString('latin1').split('\n').length >= (extra.includes('--json') ? 3 : 5),
    { what: 'hookd listen to print both requests' });
  child.kill('SIGTERM');
  await new Promise((r) => (child.exitCode !== null ? r() : child.once('exit', r)));
  return Buffer.concat(out);
}

test('hookd listen: what it prints of a request is escaped', { skip }, async () => {
  const out = await listenRun([]);
  assertSafe(out, 'listen output');
  const text = out.toString('utf8');
  assert.match(text, /\[1\] POST \/p\\e\[2J\\u202E webhook-id=id\\u009B31m\\xff unchecked → 200\n/);
  assertEscaped(text, 'listen, a text body');
  assert.ok(text.includes(' end\nline two\n'), 'the body keeps its lines');
  // The JSON body, pretty-printed: C0 as JSON escapes, C1 and bidi as the output layer's escapes.
  assert.match(text, /\[2\] POST \/j webhook-id=- unchecked → 200\n\{\n {2}"note": "ok \\u001b\[31mred/i);
  assert.ok(text.includes('\\u009B2J \\u202Egnp.exe\\u202C'), text);
});

test('hookd listen --json: each line is ASCII JSON with the request as sent', { skip }, async () => {
  const out = await listenRun(['--json']);
  assertSafe(out, 'listen --json');
  assert.ok(![...out].some((b) => b >= 0x80), 'ASCII only');
  const lines = out.toString().trim().split('\n').map((l) => JSON.parse(l));
  assert.equal(lines.length, 2);
  assert.equal(lines[0].path, '/p\x1b[2J\u202e');
  assert.equal(lines[0].webhook_id.slice(0, 6), 'id\u009b31m');
  assert.deepEqual(lines[1].body, { note: HOSTILE.toString('utf8') });
});

test('admin API errors: the message, the code and a non-JSON body are escaped on stderr', { skip }, async () => {
  const env = { ...process.env, HOOKD_ADMIN_URL: peer.url(''), HOOKD_ADMIN_TOKEN: 'x'.repeat(32) };
  // deliveries get ID → GET /v1/deliveries/ID: the peer answers a non-JSON 500.
  let r = await run(HOOKD, ['deliveries', 'get', 'dlv_1'], env);
  assert.equal(r.status, 1, r.stderr.toString());
  assertSafe(r.stderr, 'a non-JSON error body');
  assertEscaped(r.stderr.toString(), 'a non-JSON error body');
  // A JSON error: base URL with a path prefix routes everything to /v1/json-error….
  const jenv = { ...env, HOOKD_ADMIN_URL: peer.url('/v1/json-error') };
  r = await run(HOOKD, ['endpoints', 'list'], jenv);
  assert.equal(r.status, 1, r.stderr.toString());
  assertSafe(r.stderr, 'a JSON error message');
  assert.match(r.stderr.toString(), /^hookd: boom ok \\e\[31mred.*\(HTTP 400 bad\\e\[2J\)\n$/s);
  // Unreachable, with hostile bytes in the configured URL.
  r = await run(HOOKD, ['endpoints', 'list'], { ...env, HOOKD_ADMIN_URL: 'http://127.0.0.1:1/\x1b[2J' });
  assert.equal(r.status, 2, r.stderr.toString());
  assertSafe(r.stderr, 'an unreachable admin API');
  assert.match(r.stderr.toString(), /\\e\[2J/);
});

test('the parser\'s words about bad --data and a bad apply file are escaped', { skip }, async () => {
  const env = { ...process.env, HOOKD_ADMIN_URL: peer.url(''), HOOKD_ADMIN_TOKEN: 'x'.repeat(32) };
  let r = await run(HOOKD, ['events', 'publish', '--type', 'a.b', '--data', '{"a": \x1b[2J\u202e}'], env);
  assert.equal(r.status, 2, r.stderr.toString());
  assert.match(r.stderr.toString(), /not valid JSON/);
  assertSafe(r.stderr, 'events publish --data');
  const file = join(dir, 'bad\x1b[2J.json');
  writeFileSync(file, Buffer.concat([Buffer.from('{"sources": ['), Buffer.from([0x1b, 0xff, 0x9b]), Buffer.from(']}')]));
  r = await run(HOOKD, ['apply', file], env);
  assert.equal(r.status, 2, r.stderr.toString());
  assertSafe(r.stderr, 'apply with a bad file');
  assert.match(r.stderr.toString(), /bad\\e\[2J\.json/);
});
