// The customer portal (/portal/) in a real browser: account A's link shows A's
// endpoints in plain words (the delayed one flagged), its deliveries and their
// attempts, and none of account B's data, in the DOM or in any answer the page
// fetched; a read-only link cannot resend, a replay link resends a dead
// delivery that then becomes delivered; an expired or revoked link says so;
// the token leaves the URL and never reaches hookd's log; keyboard only;
// axe-core; a phone's width without sideways scrolling.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import { BACKEND, startDaemon, waitFor, sleep } from '../lib/harness.mjs';
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { launch, openPage, screenshot } from './lib/browser.mjs';

// axe-core's serious and critical violations. Its source goes in through the debugging protocol
// (page.evaluate), which the page's CSP does not govern: a <script> tag with it inline would be refused.
const AXE = readFileSync(createRequire(import.meta.url).resolve('axe-core/axe.min.js'), 'utf8');
async function axeSerious(page) {
  await page.evaluate(AXE);
  const result = await page.evaluate(async () => window.axe.run(document, { resultTypes: ['violations'] }));
  return result.violations.filter((v) => v.impact === 'serious' || v.impact === 'critical')
    .map((v) => `${v.id}: ${v.help} (${v.nodes.map((n) => n.target.join(' ')).join(', ')})`);
}

let d, browser, sink;
const fixed = { flaky: false, billing: false };
const ids = {};
const tokens = {};
const B_URL_PART = 'b-secret-endpoint-9f3';

// A receiver whose answer each path scripts: /ok 200, /slow 503 (a long retry schedule keeps it
// retrying, so delayed), /flaky 500 until fixed.flaky, /b-… 200.
async function startScriptedSink() {
  const server = createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      const p = req.url;
      if (p.startsWith('/slow')) { res.writeHead(503, { 'content-type': 'text/plain' }); res.end('busy, try later'); return; }
      if (p.startsWith('/billing') && !fixed.billing) { res.writeHead(502); res.end(); return; }
      if (p.startsWith('/flaky') && !fixed.flaky) {
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

before(async () => {
  sink = await startScriptedSink();
  d = await startDaemon({ HOOKD_DELIVERY_SYNC_WARN_AFTER: '1s' });
  browser = await launch();
  const A = 'acct-a';
  const slow = await d.createEndpoint({ url: sink.url('/slow'), account: A, description: 'CRM (slow)', retry_schedule: '1h',
    event_types: ['order.*'] });
  const flaky = await d.createEndpoint({ url: sink.url('/flaky?x="><svg/onload=alert(1)><img/src=x/onerror=alert(2)>'), account: A,
    description: HOSTILE_DESC, retry_schedule: '100ms', event_types: ['order.*'] });
  const b = await d.createEndpoint({ url: sink.url(`/${B_URL_PART}`), account: 'acct-b', description: 'B private',
    event_types: ['order.*'] });
  const billing = await d.createEndpoint({ url: sink.url('/billing'), account: A, description: 'Billing',
    retry_schedule: '100ms', event_types: ['invoice.*'] });
  Object.assign(ids, { slow: slow.id, flaky: flaky.id, b: b.id, billing: billing.id });
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
  for (const ev of invoices) await d.waitDelivery(ev.id, 'dead', 15000);
  ids.invoices = invoices.map((ev) => ev.id);
  // Hostile bytes the API would refuse, written by SQL: control characters in a description.
  const chr = BACKEND === 'postgres' ? 'chr' : 'char';
  d.sql(`UPDATE hookd_endpoints SET description = '${HOSTILE_DESC.replace(/'/g, "''")}' || ${chr}(7) || ${chr}(27) || '[31m'`
    + ` WHERE id = '${flaky.id}'`);
  const issue = async (body) => {
    const r = await d.api('POST', '/v1/tokens', body);
    assert.equal(r.status, 201, JSON.stringify(r.body));
    return r.body;
  };
  tokens.read = await issue({ account: A, scope: 'read', ttl: '1h' });
  tokens.replay = await issue({ account: A, scope: 'read_replay', ttl: '1h' });
  await sleep(1100); // past sync_warn_after: the retrying delivery is delayed
});

after(async () => { await browser?.close(); await d?.cleanup(); await sink?.stop(); });

// Opens the portal from a token's link the way a customer does; records every API answer the page read.
async function openPortal(token, opts = {}) {
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

function noTraceOfB(text, where) {
  for (const s of [B_URL_PART, ids.b, ids.evB, 'acct-b', 'B private'])
    assert.ok(!text.includes(s), `${where} shows B's ${s}`);
}

async function noHorizontalScroll(page, where) {
  const { scroll, client } = await page.evaluate(() => ({ scroll: document.documentElement.scrollWidth, client: document.documentElement.clientWidth }));
  assert.ok(scroll <= client, `${where}: the page scrolls sideways (${scroll} > ${client})`);
}

async function notExecuted(page) {
  assert.equal(await page.evaluate(() => window.__pwned), undefined, 'hostile data ran');
  assert.deepEqual(page.dialogs, []);
  assert.equal(await page.locator('main img, main script').count(), 0, 'markup from the data became elements');
}

test('account A sees its endpoints in plain words, the delayed one flagged, and nothing of account B', async () => {
  const page = await openPortal(tokens.replay);
  try {
    await page.getByRole('heading', { name: 'Your endpoints' }).waitFor();
    assert.ok(!page.url().includes(tokens.replay.token), 'the token left the URL');
    assert.ok(!page.url().includes('token='));
    assert.equal(await page.evaluate(() => sessionStorage.getItem('hookd.token')), tokens.replay.token);
    const slowCard = page.locator('.card').filter({ hasText: 'CRM (slow)' });
    await slowCard.waitFor();
    assert.match(await slowCard.textContent(), /Retrying/);
    assert.match(await slowCard.textContent(), /Delayed/);
    assert.match(await slowCard.locator('dd').first().textContent(), /^\d+$/);
    assert.match(await slowCard.textContent(), /Last error\s*HTTP 503, \d/);
    assert.match(await slowCard.textContent(), /Next attempt\s*in \d+ min/);
    assert.match(await page.locator('.summary').textContent(), /Failed\..*delayed/s);
    const flakyCard = page.locator('.card').filter({ hasText: 'Shop' });
    assert.match(await flakyCard.textContent(), /Failed/);
    assert.match(await page.locator('#who').textContent(), /acct-a.*view and resend/s);
    await screenshot(page, 'portal-overview');
    const text = await page.evaluate(() => document.documentElement.outerHTML);
    noTraceOfB(text, 'the page');
    assert.ok(!text.includes('[object Object]') && !text.includes('undefined') && !text.includes('NaN'));
    assert.ok(page.answers.length >= 2);
    for (const a of page.answers) noTraceOfB(a.body, a.url);
    assert.deepEqual(await axeSerious(page), []);
    await notExecuted(page);
    assert.deepEqual(page.problems, []);
  } finally {
    await page.closeAll();
  }
});

test('hostile endpoint data shows as text: markup stays text, controls and bidi marks are visible escapes', async () => {
  const page = await openPortal(tokens.read);
  try {
    const card = page.locator('.card').filter({ hasText: 'Shop' });
    await card.waitFor();
    const shown = await card.locator('h2').textContent();
    assert.ok(shown.includes('<img src=x onerror="window.__pwned=\'desc\'">'), shown);
    assert.ok(shown.includes('<script>'), shown);
    assert.ok(shown.includes('\\u{202E}') && !shown.includes('\u202E'), 'the bidi override is shown, not applied');
    assert.ok(shown.includes('\\u{7}') && shown.includes('\\u{1B}'), 'control characters are shown');
    await card.locator('h2 a').click();
    await page.getByRole('heading', { name: /Shop/ }).waitFor();
    await page.locator('.delivery').first().waitFor();
    await page.locator('.delivery a').first().click();
    await page.getByRole('heading', { name: 'Delivery' }).waitFor();
    const pre = await page.locator('.attempt pre').first().textContent();
    assert.ok(pre.includes('<script>window.__pwned = "snippet"</script>'), pre);
    assert.ok(pre.includes('\\u{202E}') && pre.includes('\\u{7}'), pre);
    await notExecuted(page);
    assert.deepEqual(page.problems, []);
  } finally {
    await page.closeAll();
  }
});

test('a read-only link cannot resend (the button is disabled and says why; the server refuses too)', async () => {
  const page = await openPortal(tokens.read);
  try {
    await page.goto(`${page.base}/portal/#/deliveries/${ids.dead}`);
    await page.getByRole('heading', { name: 'Delivery' }).waitFor();
    assert.match(await page.locator('.summary').textContent(), /not retried after \d+ attempt/);
    const button = page.getByRole('button', { name: 'Resend' });
    assert.ok(await button.isDisabled());
    assert.match(await page.locator('#read-only-note').textContent(), /view only/);
    assert.match(await page.locator('#who').textContent(), /view only/);
    const r = await page.evaluate(async (id) => (await fetch(`/v1/deliveries/${id}/replay`, { method: 'POST',
      headers: { authorization: `Bearer ${sessionStorage.getItem('hookd.token')}` } })).status, ids.dead);
    assert.equal(r, 403);
    assert.deepEqual(await axeSerious(page), []);
    assert.deepEqual(page.problems.filter((p) => !/403/.test(p)), []);
  } finally {
    await page.closeAll();
  }
});

test('keyboard only: to an endpoint, to its dead delivery, resend it; it becomes delivered', async () => {
  fixed.flaky = true;
  const page = await openPortal(tokens.replay);
  try {
    await page.getByRole('heading', { name: 'Your endpoints' }).waitFor();
    const tabTo = async (pred, max = 40) => {
      for (let i = 0; i < max; i++) {
        await page.keyboard.press('Tab');
        if (await page.evaluate(pred)) return;
      }
      throw new Error(`no focusable element matched ${pred}`);
    };
    await tabTo(() => document.activeElement.classList.contains('skip'));
    await tabTo(() => document.activeElement.closest('.card h2') && document.activeElement.textContent.includes('Shop'));
    await page.keyboard.press('Enter');
    await page.getByRole('heading', { name: /Shop/ }).waitFor();
    assert.equal(await page.evaluate(() => document.activeElement.tagName), 'H1', 'the new view takes the focus');
    await tabTo(() => document.activeElement.id === 'status-filter');
    await page.keyboard.press('ArrowDown'); // "Failed": the list asks the server for dead ones only
    await waitFor(() => page.url().includes('status=dead'), { what: 'the filter in the URL' });
    await page.locator('.delivery').first().waitFor();
    assert.equal(await page.locator('.delivery').count(), 1);
    await tabTo(() => document.activeElement.closest('.delivery') && document.activeElement.tagName === 'A');
    await page.keyboard.press('Enter');
    await page.getByRole('heading', { name: 'Delivery' }).waitFor();
    await tabTo(() => document.activeElement.tagName === 'BUTTON' && /Resend/.test(document.activeElement.textContent));
    await page.keyboard.press('Enter');
    await page.locator('.badges').filter({ hasText: 'Delivered' }).waitFor({ timeout: 15000 });
    assert.match(await page.locator('.summary').textContent(), /delivered \(HTTP 200/);
    await screenshot(page, 'portal-delivery');
    const r = await d.api('GET', `/v1/deliveries/${ids.dead}`);
    assert.equal(r.body.status, 'delivered');
    for (const a of page.answers) noTraceOfB(a.body, a.url);
    assert.deepEqual(await axeSerious(page), []);
    assert.deepEqual(page.problems, []);
  } finally {
    await page.closeAll();
  }
});

test('resend all failed deliveries of an endpoint: the count first, a confirmation, then all delivered', async () => {
  fixed.billing = true;
  const page = await openPortal(tokens.replay);
  try {
    await page.goto(`${page.base}/portal/#/endpoints/${ids.billing}`);
    await page.getByRole('button', { name: 'Resend all failed deliveries…' }).click();
    await page.locator('#resend-question').waitFor();
    assert.match(await page.locator('#resend-question').textContent(), /^3 failed deliveries of this endpoint will be sent again/);
    assert.deepEqual(await axeSerious(page), []);
    // Cancel changes nothing; the server was only asked for a count.
    await page.getByRole('button', { name: 'Cancel' }).click();
    assert.equal((await d.api('GET', `/v1/deliveries?endpoint_id=${ids.billing}&status=dead`)).body.data.length, 3);
    await page.getByRole('button', { name: 'Resend all failed deliveries…' }).click();
    await page.getByRole('button', { name: 'Resend 3' }).click();
    await page.locator('#resend-done').waitFor();
    assert.match(await page.locator('#resend-done').textContent(), /^3 deliveries are queued to be sent again/);
    for (const id of ids.invoices) await d.waitDelivery(id, 'delivered', 15000);
    await waitFor(async () => (await page.locator('.delivery').filter({ hasText: 'Delivered' }).count()) === 3,
      { timeoutMs: 15000, what: 'the page to show the three delivered' });
    const replays = (await d.api('GET', '/v1/replays?account=acct-a')).body.data;
    assert.ok(replays.some((r) => r.kind === 'range' && r.actor === tokens.replay.id && r.replayed === 3));
    // A read-only link does not offer it.
    const ro = await openPortal(tokens.read);
    try {
      await ro.goto(`${ro.base}/portal/#/endpoints/${ids.flaky}`);
      await ro.locator('.delivery').first().waitFor();
      assert.equal(await ro.locator('#resend-all').count(), 0);
    } finally {
      await ro.closeAll();
    }
    assert.deepEqual(page.problems, []);
  } finally {
    await page.closeAll();
  }
});

test('on a phone (375 px) every view fits without sideways scrolling and passes axe', async () => {
  const page = await openPortal(tokens.replay, { viewport: { width: 375, height: 740 } });
  try {
    await page.getByRole('heading', { name: 'Your endpoints' }).waitFor();
    await noHorizontalScroll(page, 'endpoints');
    assert.deepEqual(await axeSerious(page), []);
    await screenshot(page, 'portal-phone');
    await page.goto(`${page.base}/portal/#/endpoints/${ids.flaky}`);
    await page.locator('.delivery').first().waitFor();
    await noHorizontalScroll(page, 'an endpoint');
    assert.deepEqual(await axeSerious(page), []);
    await page.goto(`${page.base}/portal/#/deliveries/${ids.dead}`);
    await page.locator('.attempt').first().waitFor();
    await noHorizontalScroll(page, 'a delivery');
    assert.deepEqual(await axeSerious(page), []);
    assert.deepEqual(page.problems, []);
  } finally {
    await page.closeAll();
  }
});

test('B\'s records through A\'s link are "not part of your account"', async () => {
  const page = await openPortal(tokens.read);
  try {
    await page.getByRole('heading', { name: 'Your endpoints' }).waitFor();
    await page.goto(`${page.base}/portal/#/endpoints/${ids.b}`);
    await page.getByRole('heading', { name: 'Cannot show this page' }).waitFor();
    await page.goto(`${page.base}/portal/#/deliveries/${(await d.deliveriesOf(ids.evB))[0].id}`);
    await page.getByRole('heading', { name: 'Cannot show this page' }).waitFor();
    assert.match(await page.getByRole('alert').textContent(), /not part of your account/);
    for (const a of page.answers) noTraceOfB(a.body, a.url);
  } finally {
    await page.closeAll();
  }
});

test('an expired or revoked link shows "This link has expired" and forgets the token', async () => {
  const short = (await d.api('POST', '/v1/tokens', { account: 'acct-a', ttl: '1s' })).body;
  const revoked = (await d.api('POST', '/v1/tokens', { account: 'acct-a', ttl: '1h' })).body;
  assert.equal((await d.api('DELETE', `/v1/tokens/${revoked.id}`)).status, 200);
  await sleep(1100);
  for (const tok of [short, revoked]) {
    const page = await openPortal(tok);
    try {
      await page.getByRole('heading', { name: 'This link has expired' }).waitFor();
      assert.equal(await page.evaluate(() => sessionStorage.getItem('hookd.token')), null);
      assert.ok(!page.url().includes(tok.token));
      assert.deepEqual(await axeSerious(page), []);
    } finally {
      await page.closeAll();
    }
  }
  // A page without a link asks for one.
  const page = await openPage(browser, d);
  try {
    await page.goto(`${page.base}/portal/`);
    await page.getByText('Open this page from the link you were given').waitFor();
  } finally {
    await page.closeAll();
  }
});

test('no token reaches hookd\'s log', async () => {
  await d.stop();
  for (const t of Object.values(tokens)) assert.ok(!d.logs.includes(t.token), 'a token reached the log');
  assert.ok(!d.logs.includes('hkat_'), 'a token reached the log');
  await d.start();
});
