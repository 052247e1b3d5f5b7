// The customer portal's link: POST /v1/tokens answers "portal_url"
// (<base>/portal/#token=<token>), the base from [server] portal_url or the
// admin listener, never from the request's Host header; `hookd tokens create
// --portal` prints the link alone; GET /v1/tokens/self answers an account
// token's own record; a bad portal_url is refused at start, naming the key.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { request } from 'node:http';
import { HOOKD, startDaemon } from '../lib/harness.mjs';

let d;
before(async () => { d = await startDaemon(); });
after(async () => { await d?.cleanup(); });

// A POST with a Host header of the caller's choosing (fetch does not let one set it).
function postWithHost(port, path, body, host) {
  return new Promise((resolve, reject) => {
    const data = JSON.stringify(body);
    const req = request({ host: '127.0.0.1', port, path, method: 'POST', headers: { host, 'content-type': 'application/json',
      'content-length': Buffer.byteLength(data), authorization: `Bearer ${d.env.HOOKD_SERVER_ADMIN_TOKEN}` } }, (res) => {
      let text = '';
      res.on('data', (c) => { text += c; });
      res.on('end', () => resolve({ status: res.statusCode, body: JSON.parse(text) }));
    });
    req.on('error', reject);
    req.end(data);
  });
}

const self = (token) => d.api('GET', '/v1/tokens/self', undefined, { authorization: `Bearer ${token}` });

test('the create answer carries the portal link on the admin listener; the Host header does not change it', async () => {
  const r = await postWithHost(d.adminPort, '/v1/tokens', { account: 'acct-a', ttl: '1h' }, 'evil.example:666');
  assert.equal(r.status, 201, JSON.stringify(r.body));
  assert.match(r.body.token, /^hkat_[A-Za-z0-9_-]{43}$/);
  assert.equal(r.body.portal_url, `http://127.0.0.1:${d.adminPort}/portal/#token=${r.body.token}`);
  // The link works: the page is served, and its token reads its own record.
  const link = new URL(r.body.portal_url);
  assert.equal(link.hash, `#token=${r.body.token}`);
  const page = await fetch(`${link.origin}${link.pathname}`);
  assert.equal(page.status, 200);
  const me = await self(r.body.token);
  assert.equal(me.status, 200);
  assert.equal(me.body.account, 'acct-a');
  assert.equal(me.body.id, r.body.id);
  assert.equal(me.body.scope, 'read');
  assert.equal(me.body.status, 'active');
  assert.ok(!('token' in me.body) && !('portal_url' in me.body), 'the record has no secret');
  // Lists never carry the link (it holds the secret).
  const list = await d.api('GET', '/v1/tokens?account=acct-a');
  assert.ok(!JSON.stringify(list.body).includes(r.body.token));
  assert.ok(list.body.data.every((t) => !('portal_url' in t)));
});

test('GET /v1/tokens/self: the admin token has no record (404); a revoked token is 401', async () => {
  const admin = await d.api('GET', '/v1/tokens/self');
  assert.equal(admin.status, 404);
  assert.equal(admin.body.error.code, 'not_found');
  const t = (await d.api('POST', '/v1/tokens', { account: 'acct-r', scope: 'read_replay', ttl: '1h' })).body;
  assert.equal((await self(t.token)).body.scope, 'read_replay');
  assert.equal((await d.api('DELETE', `/v1/tokens/${t.id}`)).status, 200);
  assert.equal((await self(t.token)).status, 401);
});

test('hookd tokens create --portal prints the link alone; --json carries portal_url', async () => {
  const out = spawnSync(HOOKD, ['tokens', 'create', '--account', 'acct-cli', '--ttl', '2h', '--portal'], {
    env: { ...process.env, HOOKD_ADMIN_URL: `http://127.0.0.1:${d.adminPort}`, HOOKD_ADMIN_TOKEN: d.env.HOOKD_SERVER_ADMIN_TOKEN },
    encoding: 'utf8', timeout: 10000,
  });
  assert.equal(out.status, 0, out.stderr);
  const lines = out.stdout.split('\n').filter(Boolean);
  assert.equal(lines.length, 1, out.stdout);
  const m = new RegExp(`^http://127\\.0\\.0\\.1:${d.adminPort}/portal/#token=(hkat_[A-Za-z0-9_-]{43})$`).exec(lines[0]);
  assert.ok(m, lines[0]);
  assert.match(out.stderr, /acct-cli/);
  assert.match(out.stderr, /hookd tokens revoke tok_/);
  assert.ok(!out.stderr.includes(m[1]), 'the token is printed once, in the link');
  assert.equal((await self(m[1])).body.account, 'acct-cli');
  const json = JSON.parse(d.cli(['tokens', 'create', '--account', 'acct-cli', '--ttl', '1h', '--json']));
  assert.equal(json.portal_url, `http://127.0.0.1:${d.adminPort}/portal/#token=${json.token}`);
  const record = d.cli(['tokens', 'create', '--account', 'acct-cli', '--ttl', '1h']);
  assert.match(record, /^portal_url +http:\/\/127\.0\.0\.1:\d+\/portal\/#token=hkat_/m);
  // A refused create prints no link and exits 1.
  const bad = spawnSync(HOOKD, ['tokens', 'create', '--account', 'acct-cli', '--portal'], {
    env: { ...process.env, HOOKD_ADMIN_URL: `http://127.0.0.1:${d.adminPort}`, HOOKD_ADMIN_TOKEN: d.env.HOOKD_SERVER_ADMIN_TOKEN },
    encoding: 'utf8', timeout: 10000,
  });
  assert.equal(bad.status, 1);
  assert.equal(bad.stdout, '');
  assert.match(bad.stderr, /expires_at/);
});

test('[server] portal_url sets the base (a trailing slash dropped); no token reaches the log', async () => {
  await d.stop();
  d.env.HOOKD_SERVER_PORTAL_URL = 'https://status.example.com/hooks/';
  await d.start();
  try {
    const r = await d.api('POST', '/v1/tokens', { account: 'acct-a', ttl: '1h' });
    assert.equal(r.body.portal_url, `https://status.example.com/hooks/portal/#token=${r.body.token}`);
    const out = d.cli(['tokens', 'create', '--account', 'acct-a', '--ttl', '1h', '--portal']);
    assert.match(out, /^https:\/\/status\.example\.com\/hooks\/portal\/#token=hkat_[A-Za-z0-9_-]{43}\n$/);
    await d.stop();
    assert.ok(!d.logs.includes('hkat_'), 'a token reached the log');
  } finally {
    delete d.env.HOOKD_SERVER_PORTAL_URL;
    await d.start();
  }
});

test('a portal_url that is not a plain http(s) base is refused at start, naming the key', () => {
  for (const bad of ['ftp://x.example', 'https://', 'http:///path', 'https://x.example/?a=1', 'https://x.example/#f',
    'https://x.example/a b', 'https://x.example/"><script>', 'https://x.example/\u00e9', 'status.example.com']) {
    const r = spawnSync(HOOKD, ['check-config'], { env: { ...process.env, HOOKD_SERVER_PORTAL_URL: bad }, encoding: 'utf8', timeout: 10000 });
    assert.notEqual(r.status, 0, bad);
    assert.match(r.stderr, /portal_url/, bad);
  }
  const ok = spawnSync(HOOKD, ['check-config'], { env: { ...process.env, HOOKD_SERVER_PORTAL_URL: 'http://10.0.0.5:8081' },
    encoding: 'utf8', timeout: 10000 });
  assert.equal(ok.status, 0, ok.stderr);
});
