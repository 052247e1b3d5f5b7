// Secrets at rest: endpoint secrets, source secrets (verify and forward) and
// the admin token are sealed (AES-256-GCM) in the store; store, key and token
// files are 0600; `hookd rotate-key` re-seals under a new key and every
// endpoint keeps signing with the same secret; a wrong key, a missing key and
// a short admin token are refused at start; a plain database is sealed at start.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, readFileSync, statSync, unlinkSync, writeFileSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import swh from 'standardwebhooks';
import { BACKEND, HOOKD, TOKEN, newSecret, newStore, startDaemon, startRecordingSink } from '../lib/harness.mjs';

const verify = (secret, r) => new swh.Webhook(secret).verify(r.body, r.headers);

/** Every byte the store holds: the SQLite files (main, -wal, -shm) or every row of every PostgreSQL table as JSON. */
function storeBytes(store) {
  if (store.kind === 'sqlite') {
    return Buffer.concat(['', '-wal', '-shm', '-journal'].map((s) => store.db + s).filter(existsSync)
      .map((f) => readFileSync(f)));
  }
  const tables = store.sql("SELECT table_name FROM information_schema.tables WHERE table_schema = 'public'")
    .split('\n').filter(Boolean);
  assert.ok(tables.includes('hookd_endpoints') && tables.includes('hookd_meta'), tables.join(','));
  return Buffer.from(tables.map((t) => store.sql(`SELECT row_to_json(t)::text FROM ${t} t`)).join('\n'));
}

/** The key material of a secret ("whsec_<base64>" → the base64, "whsk_…" likewise); the token as is. */
const material = (s) => s.replace(/^wh(sec|sk)_/, '');

function assertAbsent(store, secrets, when) {
  const bytes = storeBytes(store);
  assert.ok(bytes.length > 0);
  for (const s of secrets) assert.equal(bytes.indexOf(material(s)), -1, `${when}: ${s.slice(0, 10)}… is stored in the clear`);
}

const mode = (f) => statSync(f).mode & 0o777;

async function setup(d, sink) {
  const given = newSecret();
  const e1 = await d.createEndpoint({ url: sink.url('/a'), event_types: ['sec.*'] });
  const e2 = await d.createEndpoint({ url: sink.url('/b'), event_types: ['sec.*'], secret: given });
  const rot = await d.api('POST', `/v1/endpoints/${e1.id}/secret/rotate`, {});
  assert.equal(rot.status, 200, JSON.stringify(rot.body));
  const verifySecrets = [newSecret(), newSecret()], forward = newSecret();
  const src = await d.api('POST', '/v1/sources', {
    name: 'shop', verify: { scheme: 'standard-webhooks', secrets: verifySecrets },
    handler: { forward: { url: sink.url('/app'), secret: forward } },
  });
  assert.equal(src.status, 201, JSON.stringify(src.body));
  return { e1, e2, e1Secrets: [e1.secret, rot.body.secret], e2Secret: given, sourceSecrets: [...verifySecrets, forward] };
}

async function deliverAndVerify(d, sink, eps, tag) {
  const ev = await d.publish({ type: `sec.${tag}`, data: { tag } });
  await d.waitDelivery(ev.id, 'delivered');
  for (const [path, secret] of eps) {
    const r = sink.at(path).find((x) => x.headers['webhook-id'] === ev.id);
    assert.ok(r, `${path} got ${ev.id}`);
    assert.equal(verify(secret, r).id, r.headers['webhook-id'], `${path} verifies with its secret`);
  }
}

test('no endpoint secret, source secret or admin token is stored in the clear; files are 0600', async () => {
  const sink = await startRecordingSink();
  // A generated admin token: it is the one kept in the store.
  const d = await startDaemon({ HOOKD_SERVER_ADMIN_TOKEN: '' });
  let token = TOKEN;
  if (d.store.kind === 'sqlite') {
    token = readFileSync(`${d.db}.admin-token`, 'utf8').trim();
    assert.ok(token.length >= 32, `generated token of ${token.length} characters`);
  }
  if (d.store.kind === 'sqlite') {
    const api = d.api; // the harness's requests with the generated token
    d.api = (m, p, b, h = {}) => api(m, p, b, { authorization: `Bearer ${token}`, ...h });
  } else { // no token file on PostgreSQL: the generated token stays in the store, the harness's is configured
    await d.stop();
    d.env.HOOKD_SERVER_ADMIN_TOKEN = TOKEN;
    await d.start();
  }
  try {
    const s = await setup(d, sink);
    await deliverAndVerify(d, sink, [['/a', s.e1Secrets[1]], ['/b', s.e2Secret]], 'one');
    const all = [...s.e1Secrets, s.e2Secret, ...s.sourceSecrets, ...(d.store.kind === 'sqlite' ? [token] : [])];
    assertAbsent(d.store, all, 'running');
    const stored = d.sql("SELECT value FROM hookd_meta WHERE key = 'admin_token'").trim();
    assert.match(stored, /^hkenc:v1:[0-9a-f]{16}:/, 'the admin token is sealed');
    assert.match(d.sql(`SELECT secrets FROM hookd_endpoints WHERE id = '${s.e2.id}'`), /^hkenc:v1:[0-9a-f]{16}:/);
    assert.match(d.sql("SELECT secrets FROM hookd_sources WHERE name = 'shop'"), /^hkenc:v1:[0-9a-f]{16}:/);
    if (d.store.kind === 'sqlite') {
      for (const f of [d.db, `${d.db}-wal`, `${d.db}-shm`, `${d.db}.secret-key`, `${d.db}.admin-token`])
        assert.equal(mode(f), 0o600, `${f} is 0600`);
    }
    assert.equal(await d.stop(), 0);
    assertAbsent(d.store, all, 'stopped');
  } finally {
    await sink.stop();
    await d.cleanup();
  }
});

test('rotate-key re-seals every secret: signatures stay valid, the old key is refused afterwards', async () => {
  const sink = await startRecordingSink();
  const d = await startDaemon();
  try {
    const s = await setup(d, sink);
    await deliverAndVerify(d, sink, [['/a', s.e1Secrets[1]], ['/b', s.e2Secret]], 'before');
    const before = d.sql(`SELECT secrets FROM hookd_endpoints WHERE id = '${s.e1.id}'`).trim();
    assert.equal(await d.stop(), 0);
    const keyFile = d.store.kind === 'sqlite' ? `${d.db}.secret-key` : null;
    const oldKey = keyFile ? readFileSync(keyFile, 'utf8').trim() : d.env.HOOKD_SERVER_SECRET_KEY;
    const args = ['rotate-key'];
    let newKeyFile = null;
    if (!keyFile) { // the key is in the environment: the new one goes to a file the operator then uses
      newKeyFile = `/tmp/hookd-newkey-${process.pid}-${Date.now()}`;
      args.push('--new-key-file', newKeyFile);
    }
    const out = execFileSync(HOOKD, args, { env: d.env, encoding: 'utf8', timeout: 30000 });
    assert.match(out, /re-sealed \d+ secret sets under key [0-9a-f]{16}/);
    const newKey = readFileSync(keyFile || newKeyFile, 'utf8').trim();
    assert.notEqual(newKey, oldKey);
    if (keyFile) assert.equal(mode(keyFile), 0o600);
    else { assert.equal(mode(newKeyFile), 0o600); d.env.HOOKD_SERVER_SECRET_KEY = newKey; unlinkSync(newKeyFile); }
    const after = d.sql(`SELECT secrets FROM hookd_endpoints WHERE id = '${s.e1.id}'`).trim();
    assert.notEqual(after, before);
    assert.notEqual(after.split(':')[2], before.split(':')[2], 'another key id');

    // The old key no longer opens the store: a clear refusal at start.
    const old = spawnSync(HOOKD, ['serve'], { env: { ...d.env, HOOKD_SERVER_SECRET_KEY: oldKey }, encoding: 'utf8', timeout: 30000 });
    assert.notEqual(old.status, 0);
    assert.match(old.stderr, /wrong key: the store's secrets are sealed under key [0-9a-f]{16}/);

    await d.start();
    await deliverAndVerify(d, sink, [['/a', s.e1Secrets[1]], ['/b', s.e2Secret]], 'after');
    const ep = await d.api('GET', `/v1/endpoints/${s.e1.id}`);
    assert.equal(ep.body.secret, s.e1Secrets[1], 'the same endpoint secret after rotate-key');
    assert.equal(ep.body.secrets.length, 2, 'the old endpoint secret in its grace period too');
    assertAbsent(d.store, [...s.e1Secrets, s.e2Secret, ...s.sourceSecrets, oldKey, newKey], 'after rotate-key');
  } finally {
    await sink.stop();
    await d.cleanup();
  }
});

test('a wrong or missing key and a short admin token are refused at start with a clear message', async () => {
  const d = await startDaemon();
  try {
    await d.createEndpoint({ url: 'http://127.0.0.1:9/x' });
    assert.equal(await d.stop(), 0);
    const wrong = spawnSync(HOOKD, ['serve'], {
      env: { ...d.env, HOOKD_SERVER_SECRET_KEY: randomBytes(32).toString('base64') }, encoding: 'utf8', timeout: 30000,
    });
    assert.notEqual(wrong.status, 0);
    assert.match(wrong.stderr, /wrong key/);
    const bad = spawnSync(HOOKD, ['serve'], { env: { ...d.env, HOOKD_SERVER_SECRET_KEY: 'abc' }, encoding: 'utf8', timeout: 30000 });
    assert.notEqual(bad.status, 0);
    assert.match(bad.stderr, /HOOKD_SERVER_SECRET_KEY: invalid secret key: it must be 32 bytes/);
    assert.ok(!bad.stderr.includes('abc'), 'the value is not echoed');
    if (d.store.kind === 'sqlite') {
      const keyFile = `${d.db}.secret-key`;
      const key = readFileSync(keyFile);
      unlinkSync(keyFile);
      const missing = spawnSync(HOOKD, ['serve'], { env: d.env, encoding: 'utf8', timeout: 30000 });
      assert.notEqual(missing.status, 0);
      assert.match(missing.stderr, /does not exist, but the store's secrets are sealed under key/);
      assert.ok(!existsSync(keyFile), 'no new key was generated over sealed secrets');
      writeFileSync(keyFile, key, { mode: 0o600 });
    } else {
      const none = { ...d.env };
      delete none.HOOKD_SERVER_SECRET_KEY;
      const missing = spawnSync(HOOKD, ['serve'], { env: none, encoding: 'utf8', timeout: 30000 });
      assert.notEqual(missing.status, 0);
      assert.match(missing.stderr, /PostgreSQL store needs the key .*secret_key_file or HOOKD_SERVER_SECRET_KEY/);
    }
    const short = spawnSync(HOOKD, ['serve'], {
      env: { ...d.env, HOOKD_SERVER_ADMIN_TOKEN: 'only-31-characters-long-token-x' }, encoding: 'utf8', timeout: 30000,
    });
    assert.notEqual(short.status, 0);
    assert.match(short.stderr, /HOOKD_SERVER_ADMIN_TOKEN: invalid admin token: it must be at least 32 characters/);
    assert.ok(!short.stderr.includes('only-31'), 'the token is not echoed');
    await d.start(); // the right key still starts
  } finally {
    await d.cleanup();
  }
});

test('a database from before sealing (plain secrets, no key) is sealed at start and keeps working', async () => {
  const sink = await startRecordingSink();
  const d = await startDaemon();
  try {
    const s = await setup(d, sink);
    assert.equal(await d.stop(), 0);
    // What an older hookd left: plain JSON in the columns, no key id, (SQLite) no key file.
    const plain = JSON.stringify([{ key: s.e2Secret, expires_at: 0, created_at: 1 }]);
    const srcPlain = JSON.stringify({ verify: s.sourceSecrets.slice(0, 2).map((key) => ({ key, created_at: 1 })),
      forward: { key: s.sourceSecrets[2], created_at: 1 } });
    d.sql(`UPDATE hookd_endpoints SET secrets = '${plain}' WHERE id = '${s.e2.id}'`);
    d.sql(`UPDATE hookd_endpoints SET secrets = '${plain}' WHERE id = '${s.e1.id}'`);
    d.sql(`UPDATE hookd_sources SET secrets = '${srcPlain}' WHERE name = 'shop'`);
    d.sql("DELETE FROM hookd_meta WHERE key = 'secret_key_id'");
    if (d.store.kind === 'sqlite') unlinkSync(`${d.db}.secret-key`);
    else d.env.HOOKD_SERVER_SECRET_KEY = randomBytes(32).toString('hex'); // a key configured for the upgrade
    assert.ok(storeBytes(d.store).indexOf(material(s.e2Secret)) >= 0, 'the secret is in the clear before');
    await d.start();
    assert.match(d.logs + d.child.stderrText, /sealed \d+ stored secret sets under key/);
    for (const id of [s.e1.id, s.e2.id])
      assert.match(d.sql(`SELECT secrets FROM hookd_endpoints WHERE id = '${id}'`), /^hkenc:v1:/);
    assert.match(d.sql("SELECT secrets FROM hookd_sources WHERE name = 'shop'"), /^hkenc:v1:/);
    await deliverAndVerify(d, sink, [['/a', s.e2Secret], ['/b', s.e2Secret]], 'migrated');
    if (d.store.kind === 'sqlite') d.sql('PRAGMA wal_checkpoint(TRUNCATE)');
    else d.sql('VACUUM FULL');
    assert.equal(await d.stop(), 0);
    if (d.store.kind === 'sqlite') d.sql('VACUUM');
    assertAbsent(d.store, [s.e2Secret, ...s.sourceSecrets], 'after the migration');
  } finally {
    await sink.stop();
    await d.cleanup();
  }
});
