// The walkthroughs a newcomer follows must work as written: the README's
// quickstart (outbound, inbound, the portal link) and docs/order-lifecycle.md
// are read from the files, and their shell blocks run in order in one shell
// per terminal, from a fresh directory holding hookd.dev.conf, exactly as
// typed but for the listener ports (free ones instead of 8080, 8081, 9000–
// 9002, so that a developer's own `make run` does not collide) and the
// placeholders (`<event id>`, `<inbox id>`, …) a reader fills in from what
// the commands printed. Any command failing fails the test; what each
// walkthrough says happens (events marked verified, states, audit figures) is
// checked. The release build is what `make run` starts: `build/hookd`.
import { test, after, before } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { copyFileSync, existsSync, mkdtempSync, readFileSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { BACKEND, ROOT, freePort, waitFor } from '../lib/harness.mjs';

// The walkthroughs run hookd on SQLite (make run); the PostgreSQL pass reports them skipped.
const skip = BACKEND === 'postgres' ? 'the walkthroughs run on SQLite (make run): the SQLite pass' : false;
const RELEASE = join(ROOT, 'build/hookd');

/** The fenced blocks of a markdown file, in order: {lang, text, before} (before: the prose since the last block). */
function blocks(path) {
  const out = [];
  const re = /^```(\w*)\n([\s\S]*?)^```$/gm;
  const src = readFileSync(path, 'utf8');
  let m, last = 0;
  while ((m = re.exec(src))) {
    out.push({ lang: m[1], text: m[2], before: src.slice(last, m.index) });
    last = re.lastIndex;
  }
  return out;
}

let dir, ports; // the current walkthrough's directory and listener ports
const daemons = [], dirs = [];
const listeners = []; // every process a test started: `hookd listen`s and the shells

function portsText(text) {
  return text.replaceAll('127.0.0.1:8081', `127.0.0.1:${ports.admin}`)
    .replaceAll('127.0.0.1:8080', `127.0.0.1:${ports.public}`)
    .replaceAll('127.0.0.1:9000', `127.0.0.1:${ports.l0}`)
    .replaceAll('127.0.0.1:9001', `127.0.0.1:${ports.l1}`)
    .replaceAll('127.0.0.1:9002', `127.0.0.1:${ports.l2}`);
}

/** A long-running command of a block (`hookd listen`), its output collected. */
function background(cmd) {
  const child = spawn('bash', ['-c', `exec ${portsText(cmd)}`], { cwd: dir, stdio: ['ignore', 'pipe', 'pipe'] });
  const l = { child, out: '' };
  child.stdout.on('data', (c) => { l.out += c; });
  child.stderr.on('data', (c) => { l.out += c; });
  listeners.push(l);
  return l;
}

/** "Terminal 3": one bash for a walkthrough, so that exports and functions carry from block to block. */
function terminal() {
  const env = { ...process.env, HOOKD_ADMIN_URL: `http://127.0.0.1:${ports.admin}`,
    HOOKD_PUBLIC_URL: `http://127.0.0.1:${ports.public}`, NO_COLOR: '1' };
  delete env.HOOKD_ADMIN_TOKEN;
  const child = spawn('bash', ['--noprofile', '--norc'], { cwd: dir, env, stdio: ['pipe', 'pipe', 'pipe'] });
  const t = { child, out: '', exited: null };
  listeners.push(t); // killed after the tests, whatever happened
  child.stdout.on('data', (c) => { t.out += c; });
  child.stderr.on('data', (c) => { t.out += c; });
  child.on('exit', (code) => { t.exited = code ?? -1; });
  child.stdin.write('set -e\n');
  let n = 0;
  /** Runs a block's text; resolves with what it printed; rejects when a command failed (set -e ends the shell). */
  t.run = async (text) => {
    const mark = `__block_${++n}_done__`;
    const from = t.out.length;
    // The reader is in the repository root; this shell is in a fresh directory beside it.
    const typed = portsText(text).replace(/^make /gm, `make -s -C ${ROOT} `);
    child.stdin.write(`${typed}\necho ${mark}\n`);
    await waitFor(() => t.out.includes(mark) || t.exited !== null, { timeoutMs: 120000, what: `block ${n}` });
    const printed = t.out.slice(from).replace(`${mark}\n`, '');
    if (!t.out.includes(mark))
      throw new Error(`a command failed (exit ${t.exited}) in:\n${text}\nit printed:\n${printed}`);
    return printed;
  };
  return t;
}

const api = async (path, opts = {}) => {
  const token = readFileSync(join(dir, 'hookd.db.admin-token'), 'utf8').trim();
  const r = await fetch(`http://127.0.0.1:${ports.admin}${path}`, { ...opts,
    headers: { authorization: `Bearer ${token}`, ...(opts.headers || {}) } });
  return r.json();
};

/** `make run` in a fresh directory: scripts/run.sh runs build/hookd serve -c hookd.dev.conf (listeners moved). */
async function makeRun() {
  assert.ok(existsSync(RELEASE), `${RELEASE} is built by make build (make test builds it)`);
  dir = mkdtempSync(join(tmpdir(), 'hookd-docs-'));
  dirs.push(dir);
  copyFileSync(join(ROOT, 'hookd.dev.conf'), join(dir, 'hookd.dev.conf'));
  symlinkSync(join(ROOT, 'build'), join(dir, 'build'));
  ports = { public: await freePort(), admin: await freePort(), l0: await freePort(), l1: await freePort(),
    l2: await freePort() };
  const d = { out: '' };
  d.child = spawn(RELEASE, ['serve', '-c', 'hookd.dev.conf'], { cwd: dir, stdio: ['ignore', 'pipe', 'pipe'],
    env: { ...process.env, HOOKD_SERVER_PUBLIC_LISTEN: `127.0.0.1:${ports.public}`,
      HOOKD_SERVER_ADMIN_LISTEN: `127.0.0.1:${ports.admin}` } });
  d.child.stdout.on('data', (c) => { d.out += c; });
  d.child.stderr.on('data', (c) => { d.out += c; });
  daemons.push(d);
  await waitFor(async () => {
    try { return (await fetch(`http://127.0.0.1:${ports.public}/healthz`)).ok && existsSync(join(dir, 'hookd.db.admin-token')); }
    catch { return false; }
  }, { what: 'hookd serve -c hookd.dev.conf' });
}

after(async () => {
  for (const l of listeners) if (l.child.exitCode === null) l.child.kill('SIGKILL');
  for (const d of daemons) {
    if (d.child.exitCode === null) {
      d.child.kill('SIGTERM');
      await new Promise((r) => d.child.on('exit', r));
    }
    assert.equal(d.child.exitCode, 0, `hookd exits cleanly:\n${d.out.slice(-2000)}`);
  }
  for (const x of dirs) rmSync(x, { recursive: true, force: true });
});

const countOf = (text, word) => text.split(word).length - 1;

test('README: the quickstart, the inbound walkthrough and the portal link work as written', { skip }, async () => {
  const bs = blocks(join(ROOT, 'README.md')).filter((b) => b.lang === 'sh');
  await makeRun();
  const sh = terminal();
  let listen = null, published = false, inbound = false, portal = false;
  for (const b of bs) {
    const text = b.text;
    if (/^make (run|test)/m.test(text)) continue; // the daemon is running (before); make test is this
    if (/^build\/hookd listen /m.test(text)) {
      if (listen) listen.child.kill('SIGTERM'); // "stop the receiver above first"
      listen = background(text.trim());
      await waitFor(() => listen.out.includes('listening') || listen.child.exitCode !== null, { what: 'hookd listen' });
      assert.equal(listen.child.exitCode, null, listen.out);
      continue;
    }
    // A reader fills a placeholder from what the commands before it printed: run up to it, then fill it.
    let printed = '';
    const lines = text.split('\n');
    let from = 0;
    for (let i = 0; i <= lines.length; i++) {
      const line = lines[i] ?? '';
      if (i < lines.length && !/<(event|inbox) id>/.test(line)) continue;
      if (i > from) printed += await sh.run(lines.slice(from, i).join('\n'));
      if (i === lines.length) break;
      const kind = line.includes('<event id>') ? 'events' : 'inbox';
      await waitFor(async () => (await api(`/v1/${kind}?limit=1`)).data.length > 0, { what: `an item of /v1/${kind}` });
      const id = (await api(`/v1/${kind}?limit=1`)).data[0].id;
      printed += await sh.run(line.replace(/<(event|inbox) id>/g, id));
      from = i + 1;
    }
    if (text.includes('events publish')) {
      published = true;
      // 2a (CLI and curl), 2b (SQL), 2c (hookd_publish): four events, each "verified" in terminal 2.
      await waitFor(() => countOf(listen.out, 'verified') >= 4, { what: `four verified deliveries:\n${listen.out}` });
      assert.equal(countOf(listen.out, 'UNVERIFIED'), 0, listen.out);
      assert.match(printed, /ID\s+EVENT\s+ENDPOINT/, 'deliveries list prints its table');
      const dls = (await api('/v1/deliveries')).data;
      assert.equal(dls.length, 4);
      assert.ok(dls.every((x) => x.status === 'delivered'), JSON.stringify(dls));
    }
    if (text.includes('sources create')) {
      inbound = true;
      await waitFor(() => countOf(listen.out, 'verified') >= 1, { what: `the forward:\n${listen.out}` });
      assert.match(printed, /processed|pending/, 'inbox list prints the item');
      await waitFor(async () => (await api('/v1/inbox')).data.every((x) => x.status === 'processed'),
        { what: 'the inbox item processed' });
      const items = (await api('/v1/inbox')).data;
      assert.equal(items.length, 1, 'the duplicate is stored once');
      assert.equal(items[0].dup_count, 1);
      assert.equal(countOf(listen.out, 'verified'), 1, `forwarded once:\n${listen.out}`);
    }
    if (text.includes('--portal')) {
      portal = true;
      // A line about the link on stderr, then the link alone on stdout.
      assert.match(printed.trim().split('\n').pop(), new RegExp(`^http://127\\.0\\.0\\.1:${ports.admin}/portal/#token=hkat_[A-Za-z0-9_-]{43}$`));
    }
  }
  assert.ok(published && inbound && portal, 'the README has the three walkthroughs this test knows');
  sh.child.stdin.end();
});

test('docs/order-lifecycle.md works as written', { skip }, async () => {
  const bs = blocks(join(ROOT, 'docs/order-lifecycle.md'));
  await makeRun(); // its own daemon and directory: the README's "shop" source is another one
  const sh = terminal();
  let app = null, steps = 0;
  const trace = async (id) => api(`/v1/entities/order/${id}`);
  for (const b of bs) {
    if (b.lang !== 'sh') continue; // the others show output
    const text = b.text;
    if (/^make run/m.test(text)) continue;
    if (/^build\/hookd listen /m.test(text)) {
      app = background(text.trim());
      await waitFor(() => app.out.includes('listening'), { what: 'hookd listen' });
      continue;
    }
    let run = text;
    const m = run.match(/<inbox id of (\w+)>/);
    if (m) {
      const item = (await api('/v1/inbox?limit=100')).data.find((x) => x.event_id === m[1]);
      assert.ok(item, `${m[1]} is in the inbox`);
      run = run.replace(m[0], item.id);
    }
    const printed = await sh.run(run);
    if (text.includes('build/hookd apply')) {
      steps++;
      assert.match(printed, /created/);
      assert.match(await sh.run('build/hookd apply shop.json'), /unchanged/, 'apply again: unchanged');
    }
    if (text.includes('msg_42_v3')) {
      steps++;
      await waitFor(async () => (await api('/v1/inbox?limit=100')).data.filter((x) => x.status === 'deferred').length === 2,
        { what: 'v3 and v2 deferred' });
      assert.equal(countOf(app.out, 'verified'), 0, 'terminal 2 shows nothing yet');
    }
    if (text.includes('msg_42_v1')) {
      steps++;
      await waitFor(async () => (await trace(42)).state === 'fulfilled', { what: 'order 42 fulfilled' });
      assert.equal((await trace(42)).version, 3);
      await waitFor(() => countOf(app.out, 'verified') === 3, { what: `three order.status_changed:\n${app.out}` });
      const out = await sh.run('build/hookd trace order 42 --order version');
      assert.match(out, /state\s+fulfilled/);
      assert.match(out, /msg_42_v1\s+order\.created\s+1\s+-\s+created\s+applied/);
      assert.match(out, /msg_42_v3\s+order\.fulfilled\s+3\s+paid\s+fulfilled\s+applied/);
    }
    if (text.includes('msg_42_v2b')) {
      steps++;
      await waitFor(async () => (await api('/v1/inbox?limit=100')).data.find((x) => x.event_id === 'msg_42_v2b')?.status === 'processed',
        { what: 'the late version processed' });
      const out = await sh.run('build/hookd audit --source shop');
      assert.match(out, /^ok\s+true$/m);
      assert.match(out, /checks\.received_twice\.count\s+1/);
      assert.match(out, /checks\.applied_twice\.count\s+0/);
      assert.equal(countOf(app.out, 'verified'), 3, 'neither reaches the application');
    }
    if (text.includes('msg_43_v2') && !text.includes('PATCH')) {
      steps++;
      let item;
      await waitFor(async () => (item = (await api('/v1/inbox?limit=100')).data.find((x) => x.event_id === 'msg_43_v2'))?.status === 'deferred',
        { what: `the disallowed change deferred: ${JSON.stringify(item)}\n${printed}` });
      assert.equal((await trace(43)).state, 'created');
    }
    if (text.includes('PATCH')) {
      steps++;
      await waitFor(async () => (await trace(43)).state === 'fulfilled', { what: 'order 43 fulfilled after the fix' });
    }
  }
  assert.equal(steps, 6, 'the walkthrough has the steps this test knows');
  sh.child.stdin.end();
});
