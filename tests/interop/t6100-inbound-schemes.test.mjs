// Interop of the inbound signature schemes: requests signed by the providers'
// own libraries (Stripe's npm `stripe` test-header helper, `@octokit/webhooks-methods`,
// `standardwebhooks`, Node's crypto for ed25519 v1a) are accepted by hookd's
// verify (through tests/tools/verify_tool and hookd_verify_scheme), the same
// with one byte changed is refused; and what `hookd send` posts is accepted by
// those libraries.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import { spawnSync, execFile } from 'node:child_process';
import { promisify } from 'node:util';
import crypto from 'node:crypto';
import { join } from 'node:path';
import Stripe from 'stripe';
import { sign as ghSign, verify as ghVerify } from '@octokit/webhooks-methods';
import swh from 'standardwebhooks';
import { HOOKD, TOOLS } from '../lib/harness.mjs';

const run = promisify(execFile);
const VERIFY = join(TOOLS, 'verify_tool');
const stripe = new Stripe('sk_test_interop');
const body = JSON.stringify({ id: 'evt_1', type: 'order.paid', data: { n: 42, text: 'ünïcødé "q"' } });

// Runs our verify; returns its verdict word ("ok", "ESIG", "ETIME", "EINVAL").
function verify(scheme, secrets, headers, payload, extra = []) {
  const args = ['--scheme', scheme];
  for (const s of secrets) args.push('--secret', s);
  for (const [k, v] of Object.entries(headers)) args.push('--header', `${k}: ${v}`);
  const r = spawnSync(VERIFY, [...args, ...extra], { input: Buffer.from(payload) });
  assert.ok(r.status === 0 || r.status === 1, `verify_tool failed: ${r.stderr}`);
  return r.stdout.toString().trim();
}

// A few byte positions spread over the body: every position through a process would be slow
// (the unit tests change every byte).
function verifyBytes(scheme, secrets, headers, buf, extra = []) {
  const args = ['--scheme', scheme];
  for (const s of secrets) args.push('--secret', s);
  for (const [k, v] of Object.entries(headers)) args.push('--header', `${k}: ${v}`);
  return spawnSync(VERIFY, [...args, ...extra], { input: buf }).stdout.toString().trim();
}
function assertTamperRefused(scheme, secrets, headers, payload, extra = []) {
  const b = Buffer.from(payload);
  for (const i of [0, Math.floor(b.length / 2), b.length - 1]) {
    const c = Buffer.from(b);
    c[i] ^= 0x01;
    assert.equal(verifyBytes(scheme, secrets, headers, c, extra), 'ESIG', `byte ${i} changed must be refused`);
  }
}

// A receiver that records what `hookd send` posts.
let server, port;
const received = [];
before(async () => {
  server = createServer((req, res) => {
    const chunks = [];
    req.on('data', (c) => chunks.push(c));
    req.on('end', () => {
      received.push({ url: req.url, headers: req.headers, body: Buffer.concat(chunks) });
      res.writeHead(202, { 'content-type': 'application/json' }).end('{"accepted":true}');
    });
  });
  await new Promise((r) => server.listen(0, '127.0.0.1', r));
  port = server.address().port;
});
after(() => server.close());

async function send(args) {
  received.length = 0;
  const r = await run(HOOKD, ['send', 'src1', ...args, '--url', `http://127.0.0.1:${port}/in/src1`]);
  assert.equal(received.length, 1);
  assert.match(r.stdout, /^202\n\{"accepted":true\}/);
  return { ...received[0], stdout: r.stdout };
}

test('stripe: the official library signs, hookd verifies; tampering refused; hookd send verified by stripe', async () => {
  const secret = 'whsec_' + crypto.randomBytes(24).toString('base64');
  const header = stripe.webhooks.generateTestHeaderString({ payload: body, secret });
  assert.equal(verify('stripe', [secret], { 'Stripe-Signature': header }, body), 'ok');
  assert.equal(verify('stripe', ['whsec_other', secret], { 'Stripe-Signature': header }, body), 'ok', 'rotation');
  assert.equal(verify('stripe', ['whsec_other'], { 'Stripe-Signature': header }, body), 'ESIG');
  assertTamperRefused('stripe', [secret], { 'Stripe-Signature': header }, body);
  // 301 s old, as the library would sign it then.
  const old = stripe.webhooks.generateTestHeaderString({ payload: body, secret, timestamp: Math.floor(Date.now() / 1000) - 301 });
  assert.equal(verify('stripe', [secret], { 'Stripe-Signature': old }, body), 'ETIME');
  assert.equal(verify('stripe', [secret], {}, body), 'EINVAL');

  const got = await send(['--scheme', 'stripe', '--secret', secret, '--data', body]);
  assert.equal(got.url, '/in/src1');
  assert.equal(got.body.toString(), body);
  const ev = stripe.webhooks.constructEvent(got.body, got.headers['stripe-signature'], secret);
  assert.equal(ev.id, 'evt_1');
  assert.throws(() => stripe.webhooks.constructEvent(got.body, got.headers['stripe-signature'], 'whsec_wrong'));
  assert.ok(!got.stdout.includes(secret), 'the secret is never printed');
});

test('github: @octokit/webhooks-methods signs, hookd verifies; hookd send verified by octokit', async () => {
  const secret = crypto.randomBytes(16).toString('hex');
  const sig = await ghSign(secret, body);
  assert.equal(verify('github', [secret], { 'X-Hub-Signature-256': sig }, body), 'ok');
  assert.equal(verify('github', [secret + 'x'], { 'X-Hub-Signature-256': sig }, body), 'ESIG');
  assertTamperRefused('github', [secret], { 'X-Hub-Signature-256': sig }, body);

  const got = await send(['--scheme', 'github', '--secret', secret, '--data', body, '--id', 'deliv-1',
    '--add-header', 'X-GitHub-Event: push']);
  assert.equal(got.headers['x-github-delivery'], 'deliv-1');
  assert.equal(got.headers['x-github-event'], 'push');
  assert.equal(await ghVerify(secret, got.body.toString(), got.headers['x-hub-signature-256']), true);
  assert.equal(await ghVerify('wrong', got.body.toString(), got.headers['x-hub-signature-256']), false);
});

test('standard-webhooks: the reference library signs, hookd verifies; hookd send verified by it', async () => {
  const secret = 'whsec_' + crypto.randomBytes(32).toString('base64');
  const wh = new swh.Webhook(secret);
  const now = new Date();
  const headers = { 'webhook-id': 'msg_1', 'webhook-timestamp': String(Math.floor(now / 1000)),
    'webhook-signature': wh.sign('msg_1', now, body) };
  assert.equal(verify('standard-webhooks', [secret], headers, body), 'ok');
  assertTamperRefused('standard-webhooks', [secret], headers, body);
  assert.equal(verify('standard-webhooks', [secret], { ...headers, 'webhook-id': 'msg_2' }, body), 'ESIG');

  const got = await send(['--scheme', 'standard-webhooks', '--secret', secret, '--data', body, '--id', 'msg_7']);
  assert.equal(got.headers['webhook-id'], 'msg_7');
  const h = { 'webhook-id': got.headers['webhook-id'], 'webhook-timestamp': got.headers['webhook-timestamp'],
    'webhook-signature': got.headers['webhook-signature'] };
  assert.deepEqual(wh.verify(got.body.toString(), h), JSON.parse(body));
  assert.throws(() => new swh.Webhook('whsec_' + crypto.randomBytes(32).toString('base64')).verify(got.body.toString(), h));
});

// Raw ed25519 keys as Standard Webhooks writes them.
function ed25519Pair() {
  const { privateKey, publicKey } = crypto.generateKeyPairSync('ed25519');
  const seed = privateKey.export({ format: 'der', type: 'pkcs8' }).subarray(16);
  const pub = publicKey.export({ format: 'der', type: 'spki' }).subarray(12);
  return { privateKey, publicKey, whsk: 'whsk_' + seed.toString('base64'), whpk: 'whpk_' + pub.toString('base64') };
}

test('standard-webhooks v1a: Node signs, hookd verifies; hookd send verified by crypto.verify', async () => {
  const k = ed25519Pair(), other = ed25519Pair();
  const ts = String(Math.floor(Date.now() / 1000));
  const sig = crypto.sign(null, Buffer.from(`msg_1.${ts}.${body}`), k.privateKey).toString('base64');
  const hmacSecret = 'whsec_' + crypto.randomBytes(32).toString('base64');
  const v1 = new swh.Webhook(hmacSecret).sign('msg_1', new Date(Number(ts) * 1000), body);
  const headers = { 'webhook-id': 'msg_1', 'webhook-timestamp': ts, 'webhook-signature': `${v1} v1a,${sig}` };
  assert.equal(verify('standard-webhooks', [k.whpk], headers, body), 'ok');
  assert.equal(verify('standard-webhooks', [hmacSecret], headers, body), 'ok', 'v1 beside v1a');
  assert.equal(verify('standard-webhooks', [other.whpk, k.whpk], headers, body), 'ok', 'rotation');
  assert.equal(verify('standard-webhooks', [other.whpk], headers, body), 'ESIG');
  assertTamperRefused('standard-webhooks', [k.whpk, hmacSecret], headers, body);

  const got = await send(['--scheme', 'standard-webhooks', '--secret', k.whsk, '--data', body, '--id', 'msg_9']);
  const m = /^v1a,(\S+)$/.exec(got.headers['webhook-signature']);
  assert.ok(m, `one v1a entry: ${got.headers['webhook-signature']}`);
  const signed = Buffer.from(`msg_9.${got.headers['webhook-timestamp']}.${got.body.toString()}`);
  assert.equal(crypto.verify(null, signed, k.publicKey, Buffer.from(m[1], 'base64')), true);
  assert.equal(crypto.verify(null, signed, other.publicKey, Buffer.from(m[1], 'base64')), false);
});

test('hmac: templates, sha512 and base64 agree with Node crypto both ways', async () => {
  const secret = 'hmac-' + crypto.randomBytes(8).toString('hex');
  const flags = ['--algorithm', 'sha512', '--encoding', 'base64', '--prefix', 'v0=', '--timestamp-header', 'X-Ts',
    '--template', 'v0:{timestamp}:{header:X-Id}:{body}'];
  const got = await send(['--scheme', 'hmac', '--secret', secret, '--data', body, '--header', 'X-Sig', ...flags,
    '--add-header', 'X-Id: abc']);
  const ts = got.headers['x-ts'];
  assert.match(ts, /^\d+$/);
  const want = 'v0=' + crypto.createHmac('sha512', secret).update(`v0:${ts}:abc:${body}`).digest('base64');
  assert.equal(got.headers['x-sig'], want);
  // And Node's signature is accepted by our verify, with the same settings.
  const vflags = ['--hmac-header', 'X-Sig', ...flags];
  const hdrs = { 'X-Sig': want, 'X-Ts': ts, 'X-Id': 'abc' };
  assert.equal(verify('hmac', [secret], hdrs, body, vflags), 'ok');
  assert.equal(verify('hmac', [secret], { ...hdrs, 'X-Id': 'abd' }, body, vflags), 'ESIG');
  assertTamperRefused('hmac', [secret], hdrs, body, vflags);
  // sha256 hex without a timestamp: the GitHub-like default.
  const hex = crypto.createHmac('sha256', secret).update(body).digest('hex');
  assert.equal(verify('hmac', [secret], { 'X-Sig': hex }, body, ['--hmac-header', 'X-Sig']), 'ok');
});

test('hookd send refuses bad input without printing the secret', async () => {
  const secret = 'whsec_' + crypto.randomBytes(32).toString('base64');
  for (const args of [
    ['send', 'src1', '--scheme', 'nope', '--secret', secret, '--data', '{}'],
    ['send', 'src1', '--scheme', 'stripe', '--data', '{}'],
    ['send', 'src1', '--scheme', 'stripe', '--secret', secret],
    ['send', 'bad/source', '--scheme', 'stripe', '--secret', secret, '--data', '{}'],
    ['send', 'src1', '--scheme', 'hmac', '--secret', secret, '--data', '{}'],
    ['send', 'src1', '--scheme', 'github', '--secret', secret, '--data', '{}', '--prefix', 'x'],
    ['send', 'src1', '--scheme', 'github', '--secret', secret, '--data', '{}', '--add-header', 'Bad Name: x'],
  ]) {
    const r = spawnSync(HOOKD, args);
    assert.equal(r.status, 2, args.join(' '));
    assert.ok(!r.stdout.toString().includes(secret) && !r.stderr.toString().includes(secret));
  }
  // Nothing listening: exit 1 and the error, not a crash.
  const r = spawnSync(HOOKD, ['send', 'src1', '--scheme', 'github', '--secret', 's', '--data', '{}', '--url',
    'http://127.0.0.1:1/in/src1']);
  assert.equal(r.status, 1);
  assert.match(r.stderr.toString(), /POST/);
  // HOOKD_PUBLIC_URL names the listener when --url is absent.
  received.length = 0;
  await run(HOOKD, ['send', 'src2', '--scheme', 'github', '--secret', 's', '--data', '{}'],
    { env: { ...process.env, HOOKD_PUBLIC_URL: `http://127.0.0.1:${port}/` } });
  assert.equal(received[0].url, '/in/src2');
});
