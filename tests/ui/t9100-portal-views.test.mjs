// The customer portal (/portal/) in a real browser: account A's link shows A's
// endpoints in plain words (the delayed one flagged) and none of account B's
// data, in the DOM or in any answer the page fetched; the token leaves the
// URL and never reaches hookd's log; hostile text stays text; axe-core; a
// phone's width without sideways scrolling. The world: lib/portal.mjs.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { waitFor } from '../lib/harness.mjs';
import { screenshot } from './lib/browser.mjs';
import { setupPortal, noTokenInLog, d, ids, tokens, axeSerious, openPortal, noTraceOfB, noHorizontalScroll, notExecuted }
  from './lib/portal.mjs';

setupPortal();

test('account A sees its endpoints in plain words, the delayed one flagged, and nothing of account B', async () => {
  const page = await openPortal(tokens.replay);
  try {
    await page.getByRole('heading', { name: 'Your endpoints' }).waitFor();
    assert.ok(!page.url().includes(tokens.replay.token), 'the token left the URL');
    assert.ok(!page.url().includes('token='));
    assert.equal(await page.evaluate(() => sessionStorage.getItem('hookd.portal_token')), tokens.replay.token);
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
    await noHorizontalScroll(page, 'endpoints at 1280 px');
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
  const page = await openPortal(tokens.hostile);
  try {
    const card = page.locator('.card').filter({ hasText: 'evil' });
    await card.waitFor();
    const shown = await card.locator('h2').textContent();
    assert.ok(shown.includes('<img src=x onerror="window.__pwned=\'desc\'">'), shown);
    assert.ok(shown.includes('<script>'), shown);
    assert.ok(shown.includes('\\u{202E}') && !shown.includes('\u202E'), 'the bidi override is shown, not applied');
    assert.ok(shown.includes('\\u{7}') && shown.includes('\\u{1B}'), 'control characters are shown');
    await card.locator('h2 a').click();
    await page.getByRole('heading', { level: 1, name: /evil/ }).waitFor();
    await page.locator('.delivery').first().waitFor();
    await page.locator('.delivery a').first().click();
    await page.getByRole('heading', { name: 'Delivery' }).waitFor();
    const pre = await page.locator('.attempt pre').first().textContent();
    assert.ok(pre.includes('<script>window.__pwned = "snippet"</script>'), pre);
    assert.ok(pre.includes('\\u{202E}') && pre.includes('\\u{7}'), pre);
    await notExecuted(page);
    assert.deepEqual(await axeSerious(page), []);
    // The long hostile text wraps on a phone too.
    await page.setViewportSize({ width: 375, height: 740 });
    for (const view of ['#/', `#/endpoints/${ids.hostile}`, `#/deliveries/${ids.hostileDead}`]) {
      await page.goto(`${page.base}/portal/${view}`);
      await page.locator('main h1').waitFor();
      await page.locator('.card, .delivery, .attempt').first().waitFor();
      await noHorizontalScroll(page, `hostile ${view}`);
    }
    await notExecuted(page);
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

test('an endpoint\'s deliveries come one API page at a time, newest first, with older and newest links', async () => {
  const page = await openPortal(tokens.read);
  try {
    await page.getByRole('heading', { name: 'Your endpoints' }).waitFor();
    page.answers.length = 0;
    await page.getByRole('link', { name: 'Warehouse' }).click();
    await page.getByRole('heading', { level: 1, name: 'Warehouse' }).waitFor();
    await page.locator('.delivery').first().waitFor();
    assert.equal(await page.locator('.delivery').count(), 20);
    const lists = () => page.answers.filter((a) => new URL(a.url).pathname === '/v1/deliveries');
    assert.equal(lists().length, 1, 'one API page for the view');
    const q = new URL(lists()[0].url).searchParams;
    assert.equal(q.get('endpoint_id'), ids.warehouse);
    assert.equal(q.get('limit'), '20');
    const newest = ids.shipments[20];
    assert.ok((await page.locator('.delivery').first().textContent()).includes(newest), 'newest first');
    await page.getByRole('link', { name: 'Older deliveries' }).click();
    await waitFor(async () => (await page.locator('.delivery').count()) === 1, { what: 'the second page' });
    assert.ok((await page.locator('.delivery').first().textContent()).includes(ids.shipments[0]));
    assert.equal(await page.getByRole('link', { name: 'Older deliveries' }).count(), 0);
    assert.ok(new URL(lists().at(-1).url).searchParams.get('cursor'), 'the second page is the server\'s');
    await page.getByRole('link', { name: 'Newest deliveries' }).click();
    await waitFor(async () => (await page.locator('.delivery').count()) === 20, { what: 'the first page again' });
    assert.deepEqual(page.problems, []);
  } finally {
    await page.closeAll();
  }
});

test('the page refreshes itself and the keyboard focus stays where it was', async () => {
  const page = await openPortal(tokens.read);
  try {
    await page.goto(`${page.base}/portal/#/endpoints/${ids.slow}`);
    const link = page.locator('.delivery a').first();
    await link.waitFor();
    await link.focus();
    const focused = await page.evaluate(() => { window.__before = document.activeElement; return document.activeElement.id; });
    assert.match(focused, /^dl-/);
    // A retrying delivery on the page: it is drawn again within seconds, from a fresh answer.
    await waitFor(() => page.evaluate(() => !document.body.contains(window.__before)), { timeoutMs: 15000, what: 'a refresh' });
    assert.equal(await page.evaluate(() => document.activeElement.id), focused);
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

test('no token reaches hookd\'s log', noTokenInLog);
