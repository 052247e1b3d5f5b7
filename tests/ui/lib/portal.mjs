// The portal tests' scripted world: a hookd with a short sync_warn_after, a
// receiver whose answers each path scripts, account A's endpoints (one slow
// and delayed, one dead until fixed, one with three dead deliveries), account
// B's (which A must never see), account H's full of hostile text, and tokens
// for each; plus the checks the portal tests share. setupPortal() registers
// the before/after hooks; the bindings below are live once it ran.
import { before, after } from 'node:test';
import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import { BACKEND, startDaemon, waitFor, sleep } from '../../lib/harness.mjs';
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { launch, openPage } from './browser.mjs';

// axe-core's serious and critical violations. Its source goes in through the debugging protocol
// (page.evaluate), which the page's CSP does not govern: a <script> tag with it inline would be refused.
const AXE = readFileSync(createRequire(import.meta.url).resolve('axe-core/axe.min.js'), 'utf8');
export async function axeSerious(page) {
  await page.evaluate(AXE);
  const result = await page.evaluate(async () => window.axe.run(document, { resultTypes: ['violations'] }));
  return result.violations.filter((v) => v.impact === 'serious' || v.impact === 'critical')
    .map((v) => `${v.id}: ${v.help} (${v.nodes.map((n) => n.target.join(' ')).join(', ')})`);
}

export let d, browser;
let sink;
export const fixed = { flaky: false, billing: false };
export const ids = {};
export const tokens = {};
export const B_URL_PART = 'b-secret-endpoint-9f3';

// A receiver whose answer each path scripts: /ok 200, /slow 503 (a long retry schedule keeps it
// retrying, so delayed), /flaky 500 until fixed.flaky, /billing 502 until fixed.billing,
// /hostile 500 with markup and controls in its answer, /b-… 200.
async function startScriptedSink() {
  const server = createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      const p = req.url;
      if (p.startsWith('/slow')) { res.writeHead(503, { 'content-type': 'text/plain' }); res.end('busy, try later'); return; }
      if (p.startsWith('/billing') && !fixed.billing) { res.writeHead(502); res.end(); return; }
      if (p.startsWith('/flaky') && !fixed.flaky) { res.writeHead(500, { 'content-type': 'text/plain' }); res.end('internal error'); return; }
      if (p.startsWith('/hostile')) {
        res.writeHead(500, { 'content-type': 'text/html' });
        res.end('<script>window.__pwned = "snippet"</script><img src=x onerror="window.__pwned=\'img\'">\u202Egnp.exe\u0007 oops');
        return;
      }
      res.writeHead(200, { 'content-type': 'text/plain' });
      res.end('ok');
    });
  });
  await new Promise((r) => server.listen(0, '127.0.0.1', r));
  const port = server.address().port;
  return { url: (path) => `http://127.0.0.1:${port}${path}`, stop: () => new Promise((r) => { server.closeAllConnections?.(); server.close(() => r()); }) };
}

const HOSTILE_DESC = '<img src=x onerror="window.__pwned=\'desc\'"> Shop \u202Eevil\u202C <script>window.__pwned="s"</script>';

export function setupPortal() {
  before(async () => {
    sink = await startScriptedSink();
    // No breaker: Billing's six failed attempts would open it, and a resend would then wait for its probe.
    d = await startDaemon({ HOOKD_DELIVERY_SYNC_WARN_AFTER: '1s', HOOKD_DELIVERY_BREAKER_FAILURES: '0' });
    browser = await launch();
    const A = 'acct-a';
    const slow = await d.createEndpoint({ url: sink.url('/slow'), account: A, description: 'CRM (slow)', retry_schedule: '1h',
      event_types: ['order.*'] });
    const flaky = await d.createEndpoint({ url: sink.url('/flaky'), account: A, description: 'Shop', retry_schedule: '100ms',
      event_types: ['order.*'] });
    // Account H's endpoint holds hostile text everywhere the portal shows it.
    const hostile = await d.createEndpoint({ url: sink.url('/hostile?x="><svg/onload=alert(1)><img/src=x/onerror=alert(2)>'),
      account: 'acct-h', description: HOSTILE_DESC, retry_schedule: '100ms', event_types: ['order.*'] });
    const evH = await d.publish({ type: 'order.paid', account: 'acct-h', data: {} });
    const b = await d.createEndpoint({ url: sink.url(`/${B_URL_PART}`), account: 'acct-b', description: 'B private',
      event_types: ['order.*'] });
    const billing = await d.createEndpoint({ url: sink.url('/billing'), account: A, description: 'Billing',
      retry_schedule: '100ms', event_types: ['invoice.*'] });
    // 21 delivered: one more than a page of the portal's list.
    const warehouse = await d.createEndpoint({ url: sink.url('/ok'), account: A, description: 'Warehouse',
      event_types: ['ship.*'] });
    Object.assign(ids, { slow: slow.id, flaky: flaky.id, b: b.id, billing: billing.id, hostile: hostile.id,
      warehouse: warehouse.id });
    const shipments = [];
    for (let i = 1; i <= 21; i++) shipments.push(await d.publish({ type: 'ship.sent', account: A, data: { i } }));
    const invoices = [];
    for (let i = 1; i <= 3; i++) invoices.push(await d.publish({ type: 'invoice.sent', account: A, data: { i } }));
    const evA = await d.publish({ id: 'evt_a_order_1', type: 'order.paid', account: A, data: { n: 1 } });
    const evB = await d.publish({ id: 'evt_b_secret_77', type: 'order.paid', account: 'acct-b', data: { n: 2 } });
    ids.evA = evA.id;
    ids.evB = evB.id;
    await waitFor(async () => {
      const ds = await d.deliveriesOf(evA.id);
      const dead = ds.find((x) => x.endpoint_id === flaky.id && x.status === 'dead');
      const slowOne = ds.find((x) => x.endpoint_id === slow.id && x.status === 'retrying');
      if (dead) ids.dead = dead.id;
      return dead && slowOne;
    }, { timeoutMs: 15000, what: 'a dead and a retrying delivery of A' });
    await d.waitDelivery(evB.id, 'delivered');
    ids.hostileDead = (await d.waitDelivery(evH.id, 'dead', 15000))[0].id;
    for (const ev of invoices) await d.waitDelivery(ev.id, 'dead', 15000);
    for (const ev of shipments) await d.waitDelivery(ev.id, 'delivered', 15000);
    ids.shipments = shipments.map((ev) => ev.id);
    ids.invoices = invoices.map((ev) => ev.id);
    // Hostile bytes the API would refuse, written by SQL: control characters in a description.
    const chr = BACKEND === 'postgres' ? 'chr' : 'char';
    d.sql(`UPDATE hookd_endpoints SET description = '${HOSTILE_DESC.replace(/'/g, "''")}' || ${chr}(7) || ${chr}(27) || '[31m'`
      + ` WHERE id = '${hostile.id}'`);
    const issue = async (body) => {
      const r = await d.api('POST', '/v1/tokens', body);
      assert.equal(r.status, 201, JSON.stringify(r.body));
      return r.body;
    };
    tokens.read = await issue({ account: A, scope: 'read', ttl: '1h' });
    tokens.hostile = await issue({ account: 'acct-h', scope: 'read_replay', ttl: '1h' });
    tokens.replay = await issue({ account: A, scope: 'read_replay', ttl: '1h' });
    await sleep(1100); // past sync_warn_after: the retrying delivery is delayed
  });

  after(async () => { await browser?.close(); await d?.cleanup(); await sink?.stop(); });
}

// Opens the portal from a token's link the way a customer does; records every API answer the page read.
export async function openPortal(token, opts = {}) {
  const page = await openPage(browser, d, opts);
  page.answers = [];
  page.dialogs = [];
  page.on('dialog', (dlg) => { page.dialogs.push(dlg.message()); dlg.dismiss().catch(() => {}); });
  page.on('response', async (r) => {
    if (!new URL(r.url()).pathname.startsWith('/v1/')) return;
    try { page.answers.push({ url: r.url(), status: r.status(), body: await r.text() }); } catch { /* page closed */ }
  });
  await page.goto(`${page.base}/portal/#token=${token.token}`);
  return page;
}

export function noTraceOfB(text, where) {
  for (const s of [B_URL_PART, ids.b, ids.evB, 'acct-b', 'B private', ids.hostile, 'acct-h', '/hostile'])
    assert.ok(!text.includes(s), `${where} shows B's ${s}`);
}

export async function noHorizontalScroll(page, where) {
  const { scroll, client } = await page.evaluate(() => ({ scroll: document.documentElement.scrollWidth, client: document.documentElement.clientWidth }));
  assert.ok(scroll <= client, `${where}: the page scrolls sideways (${scroll} > ${client})`);
}

export async function notExecuted(page) {
  assert.equal(await page.evaluate(() => window.__pwned), undefined, 'hostile data ran');
  assert.deepEqual(page.dialogs, []);
  assert.equal(await page.locator('main img, main script').count(), 0, 'markup from the data became elements');
}


// hookd's log, read after a stop, holds no account token (the daemon starts again).
export async function noTokenInLog() {
  await d.stop();
  for (const t of Object.values(tokens)) assert.ok(!d.logs.includes(t.token), 'a token reached the log');
  assert.ok(!d.logs.includes('hkat_'), 'a token reached the log');
  await d.start();
}
