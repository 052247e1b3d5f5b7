// The customer portal's resend in a real browser: a read-only link cannot
// (disabled, said why, refused by the server); a replay link resends a dead
// delivery by keyboard alone and it becomes delivered. The world: lib/portal.mjs.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { waitFor } from '../lib/harness.mjs';
import { screenshot } from './lib/browser.mjs';
import { setupPortal, noTokenInLog, d, ids, tokens, fixed, axeSerious, openPortal, noTraceOfB } from './lib/portal.mjs';

setupPortal();

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
      headers: { authorization: `Bearer ${sessionStorage.getItem('hookd.portal_token')}` } })).status, ids.dead);
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
    await page.getByRole('heading', { level: 1, name: /Shop/ }).waitFor();
    assert.equal(await page.evaluate(() => document.activeElement.tagName), 'H1', 'the new view takes the focus');
    await tabTo(() => document.activeElement.id === 'status-filter');
    await page.keyboard.press('ArrowDown'); // "Failed": the list asks the server for dead ones only
    await waitFor(() => page.url().includes('status=dead'), { what: 'the filter in the URL' });
    // The filtered view is drawn when it takes the focus back to its heading: until then the old
    // list is on the page, and a link focused in it would be gone before Enter reached it.
    await waitFor(() => page.evaluate(() => document.activeElement.tagName === 'H1'),
      { what: 'the filtered list drawn (its heading focused)' });
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

test('no token reaches hookd\'s log', noTokenInLog);
