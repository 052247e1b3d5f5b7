// The customer portal in a real browser: a replay link resends all of an
// endpoint's failed deliveries after a counted confirmation; an expired or
// revoked link (at open or while open) says so and forgets the token; the
// dashboard's admin token shows nothing there. The world: lib/portal.mjs.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { waitFor, sleep } from '../lib/harness.mjs';
import { openPage, screenshot } from './lib/browser.mjs';
import { setupPortal, noTokenInLog, d, browser, ids, tokens, fixed, axeSerious, openPortal } from './lib/portal.mjs';

setupPortal();

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
    await screenshot(page, 'portal-endpoint');
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

test('an expired or revoked link shows "This link has expired" and forgets the token', async () => {
  const short = (await d.api('POST', '/v1/tokens', { account: 'acct-a', ttl: '1s' })).body;
  const revoked = (await d.api('POST', '/v1/tokens', { account: 'acct-a', ttl: '1h' })).body;
  assert.equal((await d.api('DELETE', `/v1/tokens/${revoked.id}`)).status, 200);
  await sleep(1100);
  for (const tok of [short, revoked]) {
    const page = await openPortal(tok);
    try {
      await page.getByRole('heading', { name: 'This link has expired' }).waitFor();
      assert.equal(await page.evaluate(() => sessionStorage.getItem('hookd.portal_token')), null);
      assert.ok(!page.url().includes(tok.token));
      assert.deepEqual(await axeSerious(page), []);
    } finally {
      await page.closeAll();
    }
  }
  // A link revoked while its page is open: the next view says so.
  const live = (await d.api('POST', '/v1/tokens', { account: 'acct-a', ttl: '1h' })).body;
  const open = await openPortal(live);
  try {
    await open.getByRole('heading', { name: 'Your endpoints' }).waitFor();
    assert.equal((await d.api('DELETE', `/v1/tokens/${live.id}`)).status, 200);
    await open.getByRole('link', { name: 'Shop' }).click();
    await open.getByRole('heading', { name: 'This link has expired' }).waitFor();
    assert.equal(await open.evaluate(() => sessionStorage.getItem('hookd.portal_token')), null);
  } finally {
    await open.closeAll();
  }
  // A page without a link asks for one.
  const page = await openPage(browser, d);
  try {
    await page.goto(`${page.base}/portal/`);
    await page.getByText('Open this page from the link you were given').waitFor();
    // The dashboard's admin token in this tab is not a customer's link: the page asks for one and shows nothing.
    // (Under the dashboard's key, and under the portal's as a careless user might put it there.)
    await page.evaluate((t) => { sessionStorage.setItem('hookd.token', t); sessionStorage.setItem('hookd.portal_token', t); },
      d.env.HOOKD_SERVER_ADMIN_TOKEN);
    await page.reload();
    await page.getByText('Open this page from the link you were given').waitFor();
    assert.equal(await page.locator('.card').count(), 0);
    // A customer's link opened in that tab keeps its token apart: the admin token stays as it was.
    await page.goto(`${page.base}/portal/#token=hkat_not-a-real-token`);
    await page.getByText(/expired|link/i).first().waitFor();
    assert.equal(await page.evaluate(() => sessionStorage.getItem('hookd.token')), d.env.HOOKD_SERVER_ADMIN_TOKEN);
  } finally {
    await page.closeAll();
  }
});

test('no token reaches hookd\'s log', noTokenInLog);
