// Inbound in the dashboard: the inbox by source and status, the source's
// rejections by reason, an entity's trace by received time and by version
// with from → to and results, and a quarantined item replayed.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { waitFor } from '../lib/harness.mjs';
import { screenshot } from './lib/browser.mjs';
import { startDashboard, withPage } from './lib/seed.mjs';

let fx, d, ids;
before(async () => { fx = await startDashboard({ outbound: false, inbound: true }); ({ d, inb: ids } = fx); });
after(() => fx?.stop());

test('the inbox by source and status, and the source\'s rejections by reason', { timeout: 45000 }, async () => {
  await withPage(fx, async (page) => {
    await page.getByRole('link', { name: 'Inbound' }).click();
    await page.getByRole('heading', { level: 1, name: 'Inbound' }).waitFor();
    await page.getByLabel('Source').selectOption('shop');
    await page.getByLabel('Status').selectOption('processed');
    await page.getByRole('button', { name: 'Apply filters' }).click();
    await page.waitForFunction(() => document.querySelectorAll('main table').length >= 1 &&
      document.querySelector('main tbody').children.length === 3);
    assert.match(page.url(), /source=shop&status=processed/);
    const rej = page.locator('section[aria-labelledby="s-rejections-of-shop"]');
    await rej.waitFor();
    assert.match(await rej.innerText(), /malformed_json 1/);
    assert.match(await rej.innerText(), /missing_field 1/);
    assert.equal(await rej.locator('tbody tr').count(), 2);
    await page.getByLabel('Status').selectOption('quarantined');
    await page.getByRole('button', { name: 'Apply filters' }).click();
    await page.waitForFunction(() => document.querySelector('main tbody')?.children.length === 1);
    assert.match(await page.locator('main tbody tr').first().innerText(), /quarantined/);
    await screenshot(page, 'inbound-quarantined');
  });
});

test('an entity\'s trace by received time and by version, with from → to and results', { timeout: 45000 }, async () => {
  await withPage(fx, async (page) => {
    await page.getByRole('link', { name: 'Entity trace' }).click();
    await page.getByLabel('Entity kind').fill('order');
    await page.getByLabel('Entity id').fill('A-100');
    await page.getByRole('button', { name: 'Show trace' }).click();
    await page.locator('[data-figure="state"]').getByText('fulfilled').waitFor();
    const body = page.locator('section[aria-labelledby="s-events"] tbody tr');
    assert.equal(await body.count(), 3);
    const cells = await body.evaluateAll((trs) => trs.map((tr) => [tr.children[2].textContent, tr.children[3].textContent,
      tr.children[5].textContent]));
    const api = (await d.api('GET', '/v1/entities/order/A-100/trace')).body;
    assert.deepEqual(cells, api.events.map((e) => [e.type, `${e.from ?? '∅'} → ${e.to ?? '∅'}`, e.result ?? '—']));
    assert.deepEqual(cells.map((c) => c[1]), ['∅ → created', 'created → paid', 'paid → fulfilled']);
    await page.getByLabel('Order', { exact: true }).selectOption('version');
    await page.getByRole('button', { name: 'Show trace' }).click();
    await page.locator('main dd').getByText('by version', { exact: true }).waitFor();
    assert.match(page.url(), /order=version/);
    await screenshot(page, 'trace');
    // An entity nobody sent: said in words, not an error.
    await page.goto(`${page.base}/ui/#/trace?kind=order&id=nobody`);
    await page.getByText(/no event has named it yet/).waitFor();
    assert.equal(await page.locator('main .error-box').count(), 0);
  }, { allow: /status of 404/ });
});

test('a quarantined item replayed from its page goes back to work', { timeout: 45000 }, async () => {
  await withPage(fx, async (page) => {
    await page.goto(`${page.base}/ui/#/inbox/${ids.quarantined}`);
    await page.getByRole('heading', { level: 1, name: /Inbox item/ }).waitFor();
    assert.match(await page.locator('main').innerText(), /deferred for longer than max_defer/);
    assert.match(await page.locator('pre.payload').innerText(), /"order": "B-200"/);
    await page.getByRole('button', { name: 'Replay' }).click();
    await page.locator('#status').getByText(/is pending again/).waitFor();
    const it = (await d.api('GET', `/v1/inbox/${ids.quarantined}`)).body;
    assert.notEqual(it.status, 'quarantined', 'replayed');
    await waitFor(async () => (await d.api('GET', `/v1/inbox/${ids.quarantined}`)).body.attempts >= 1,
      { what: 'a new attempt' });
  });
});
