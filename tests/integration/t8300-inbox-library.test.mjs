// The application's own handler (handler {"library": true}): an application
// process (tests/tools/inbox_tool, linking libhookd) processes the source's
// items with hookd_inbox_work() inside its own transactions, writing one
// business row per item. The daemon's workers never touch them. SIGKILLed
// over and over while it works through 2,000 items, it never leaves a
// business row without its processed mark or a mark without its row, and
// never applies an item twice. On PostgreSQL, two application processes at
// once never hold one item at the same time.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { startDaemon, sleep, waitFor, TOOLS, BACKEND } from '../lib/harness.mjs';

const cleanups = [];
const children = new Set();
after(async () => {
  for (const c of children) c.kill('SIGKILL');
  for (const c of cleanups) await c();
});

/** Starts the application; resolves {code, signal, stdout, stderr} when it exits. */
function runApp(d, source, args = []) {
  const child = spawn(join(TOOLS, 'inbox_tool'), [d.storeUrl, source, ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
  children.add(child);
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (b) => { stdout += b; });
  child.stderr.on('data', (b) => { stderr += b; });
  const done = new Promise((resolve) => child.on('exit', (code, signal) => {
    children.delete(child);
    resolve({ code, signal, stdout, stderr });
  }));
  return { child, done };
}

/** Posts every body to /in/SOURCE, retrying anything without a 2xx; concurrency senders at once. */
async function postAll(d, source, bodies, concurrency = 32) {
  let next = 0;
  const url = `http://127.0.0.1:${d.publicPort}/in/${source}`;
  async function sender() {
    while (next < bodies.length) {
      const body = bodies[next++];
      for (let tries = 0; ; tries++) {
        assert.ok(tries < 100, 'the receiver keeps refusing');
        try {
          const res = await fetch(url, { method: 'POST', body, headers: { 'content-type': 'application/json' },
            signal: AbortSignal.timeout(5000) });
          await res.arrayBuffer();
          if (res.status >= 200 && res.status < 300) break;
        } catch { /* retry */ }
        await sleep(20);
      }
    }
  }
  await Promise.all(Array.from({ length: concurrency }, sender));
}

async function librarySource(d, name, extra = {}) {
  const r = await d.api('POST', '/v1/sources', {
    name, verify: { scheme: 'none' }, event_id: '/id', event_type: '/type', handler: { library: true },
    retry_schedule: '100ms', ...extra,
  });
  assert.equal(r.status, 201, JSON.stringify(r.body));
  return r.body;
}

const rows = (d, q) => d.sql(q).split('\n').filter(Boolean).map((l) => l.split('|'));

test('a library source: the definition, and the application processes its items, the daemon does not', { timeout: 60000 }, async () => {
  const d = await startDaemon({ HOOKD_INBOX_WORKERS: '2' });
  cleanups.push(() => d.cleanup());
  const src = await librarySource(d, 'libapp');
  assert.deepEqual(src.handler, { library: true });
  assert.deepEqual((await d.api('GET', '/v1/sources/libapp')).body.handler, { library: true });
  const bad = await d.api('POST', '/v1/sources', { name: 'libbad', verify: { scheme: 'none' }, handler: { library: false } });
  assert.equal(bad.status, 400);
  assert.match(bad.body.error.message, /handler\.library/);
  const both = await d.api('POST', '/v1/sources', {
    name: 'libboth', verify: { scheme: 'none' }, handler: { library: true, forward: { url: 'http://127.0.0.1:9/' } },
  });
  assert.equal(both.status, 400);

  await postAll(d, 'libapp', [1, 2, 3].map((n) => JSON.stringify({ id: `la-${n}`, type: 'order.paid', data: { n } })));
  // The daemon's workers (two of them, polling) leave the items alone.
  await sleep(1500);
  assert.equal(d.sql("SELECT count(*) FROM hookd_inbox WHERE source = 'libapp' AND status = 'pending' AND lease_owner IS NULL"), '3');

  const app = runApp(d, 'libapp', ['--idle-exit', '300']);
  const out = await app.done;
  assert.equal(out.code, 0, out.stderr);
  assert.match(out.stdout, /processed 3 failed 0 lost 0/);
  const items = rows(d, "SELECT id, status, attempts, result FROM hookd_inbox WHERE source = 'libapp' ORDER BY id");
  assert.equal(items.length, 3);
  for (const [id, status, attempts, result] of items) {
    assert.equal(status, 'processed');
    assert.equal(attempts, '1');
    assert.equal(result, 'handled');
    assert.equal(d.sql(`SELECT count(*) FROM app_effects WHERE item_id = '${id}'`), '1');
  }
});

const EVENTS = 2000;

test(`SIGKILL of the application while it processes ${EVENTS} items: a business row and its mark are never one without the other`, { timeout: 240000 }, async () => {
  const d = await startDaemon({ HOOKD_INBOX_WORKERS: '2' });
  cleanups.push(() => d.cleanup());
  await librarySource(d, 'libkill');
  await postAll(d, 'libkill',
    Array.from({ length: EVENTS }, (_, n) => JSON.stringify({ id: `lk-${n}`, type: 'order.paid', data: { n } })));
  let kills = 0;
  const killedMidway = () => Number(d.sql("SELECT count(*) FROM hookd_inbox WHERE source = 'libkill' AND status = 'processed'"));
  // Kill the application at random moments (it pauses 100 µs inside each transaction) until the items are done.
  for (let round = 0; round < 200; round++) {
    const app = runApp(d, 'libkill', ['--lease', '300', '--batch', '8', '--sleep-us', '100', '--idle-exit', '100000']);
    await sleep(80 + Math.floor(Math.random() * 250));
    app.child.kill('SIGKILL');
    const out = await app.done;
    assert.equal(out.signal, 'SIGKILL', `the application ended on its own: ${out.stderr}`);
    kills++;
    if (kills >= 10 && killedMidway() >= EVENTS / 3) break;
  }
  // The last run, not killed, finishes what is left (after the dead runs' leases expire).
  const last = runApp(d, 'libkill', ['--lease', '300', '--idle-exit', '800']);
  const out = await last.done;
  assert.equal(out.code, 0, out.stderr);
  assert.ok(kills >= 10, `killed ${kills} times`);

  const items = rows(d, "SELECT id, status, attempts FROM hookd_inbox WHERE source = 'libkill'");
  assert.equal(items.length, EVENTS, 'one item per event');
  const effects = new Map();
  for (const [id, n] of rows(d, 'SELECT item_id, count(*) FROM app_effects GROUP BY item_id')) effects.set(id, Number(n));
  let processed = 0;
  for (const [id, status, attempts] of items) {
    const applied = effects.get(id) || 0;
    assert.ok(applied <= 1, `${id} applied ${applied} times`);
    assert.equal(status === 'processed', applied === 1, `${id}: status ${status} with ${applied} business rows`);
    // A kill rolls back the whole step: no attempt is ever recorded without its outcome.
    assert.equal(attempts, '1', `${id}: ${attempts} attempts recorded`);
    if (status === 'processed') processed++;
  }
  assert.equal(processed, EVENTS, 'every item processed in the end');
  assert.equal([...effects.values()].reduce((a, b) => a + b, 0), EVENTS, 'one business row per item, none stray');
  const pids = Number(d.sql('SELECT count(DISTINCT pid) FROM app_effects'));
  assert.ok(pids >= 3, `the work was spread over the killed runs (${pids} processes)`);
});

test('two application processes on one PostgreSQL database never hold one item at once', { skip: BACKEND !== 'postgres', timeout: 120000 }, async () => {
  const d = await startDaemon({ HOOKD_INBOX_WORKERS: '2' });
  cleanups.push(() => d.cleanup());
  await librarySource(d, 'libtwo', { entity: { kind: 'order', id: '/data/order' } });
  const N = 600;
  d.sql('CREATE TABLE app_effects (item_id TEXT NOT NULL, event_id TEXT NOT NULL, pid TEXT NOT NULL)');
  await postAll(d, 'libtwo',
    Array.from({ length: N }, (_, n) => JSON.stringify({ id: `lt-${n}`, type: 'order.paid', data: { order: `o-${n % 50}` } })));
  // A lease far shorter than each transaction: only the row lock keeps the other process off.
  const args = ['--lease', '20', '--batch', '4', '--sleep-us', '1000', '--idle-exit', '1000', '--exclusive'];
  const [a, b] = [runApp(d, 'libtwo', args), runApp(d, 'libtwo', args)];
  const [ra, rb] = await Promise.all([a.done, b.done]);
  assert.equal(ra.code, 0, ra.stderr);
  assert.equal(rb.code, 0, rb.stderr);
  assert.doesNotMatch(ra.stderr + rb.stderr, /overlap/);
  const count = (s) => Number(/processed (\d+)/.exec(s.stdout)[1]);
  assert.equal(count(ra) + count(rb), N);
  assert.ok(count(ra) > 0 && count(rb) > 0, `both worked: ${count(ra)} and ${count(rb)}`);
  assert.equal(d.sql("SELECT count(*) FROM hookd_inbox WHERE source = 'libtwo' AND status = 'processed' AND attempts = 1"), String(N));
  assert.equal(d.sql('SELECT count(*) FROM app_effects'), String(N));
  assert.equal(d.sql('SELECT count(DISTINCT item_id) FROM app_effects'), String(N));
});
