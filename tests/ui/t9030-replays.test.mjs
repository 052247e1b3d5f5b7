// Dead letters in the dashboard: filters by endpoint, account and time (one
// API page each), a range replay through its dry-run count and confirmation
// (cancel sends nothing), the replay record's live progress to done, one
// delivery replayed from the list, and the replay history.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { login, screenshot } from './lib/browser.mjs';
import { startDashboard, withPage } from './lib/seed.mjs';

let fx, d, sink, out;
before(async () => { fx = await startDashboard(); ({ d, sink, out } = fx); });
after(() => fx?.stop());

const rows = (page) => page.locator('main tbody tr');

test('filters narrow the list, each a fresh API page', { timeout: 45000 }, async () => {
  await withPage(fx, async (page) => {
    const seen = [];
    page.on('request', (r) => { if (r.url().includes('/v1/deliveries')) seen.push(new URL(r.url()).search); });
    await login(page);
    await page.getByRole('link', { name: 'Dead letters' }).click();
    await page.getByRole('heading', { level: 1, name: 'Dead letters' }).waitFor();
    await page.waitForFunction(() => document.querySelectorAll('main tbody tr').length === 6);
    await page.getByLabel('Account').fill('acme');
    await page.getByRole('button', { name: 'Apply filters' }).click();
    await page.waitForFunction(() => document.querySelectorAll('main tbody tr').length === 3);
    assert.ok(/account=acme/.test(page.url()), 'the filters are in the address, not the token');
    await page.getByLabel('Account').fill('');
    await page.getByLabel('Endpoint id').fill(out.ep.flaky.id);
    await page.getByRole('button', { name: 'Apply filters' }).click();
    await page.waitForFunction(() => document.querySelectorAll('main tbody tr').length === 2);
    // A time range that ends before the seed: nothing.
    await page.getByLabel('Created until').fill('2020-01-01T00:00');
    await page.getByRole('button', { name: 'Apply filters' }).click();
    await page.getByText('No dead deliveries match.').waitFor();
    assert.ok(seen.every((q) => /limit=25/.test(q)), `one page each: ${seen}`);
    assert.ok(seen.some((q) => /until=20(19-12-31|20-01-01)T/.test(q)), seen.join(' '));
  }, { login: false });
});

test('a range replay: the dry-run count, a confirmation, then live progress to done', { timeout: 45000 }, async () => {
  await withPage(fx, async (page) => {
    await page.goto(`${page.base}/ui/#/dead?endpoint_id=${out.ep.flaky.id}`);
    await page.waitForFunction(() => document.querySelectorAll('main tbody tr').length === 2);
    await page.getByRole('button', { name: 'Replay all matching…' }).click();
    const dialog = page.getByRole('dialog');
    await dialog.waitFor();
    assert.match(await dialog.innerText(), /2 dead deliveries match \(endpoint ep_/);
    await screenshot(page, 'range-replay-confirm');
    await dialog.getByRole('button', { name: 'Cancel' }).click();
    await page.locator('#status').getByText('Replay cancelled; nothing was sent.').waitFor();
    assert.equal((await d.api('GET', '/v1/replays')).body.data.length, 0, 'a dry run writes nothing');
    assert.equal((await d.api('GET', `/v1/deliveries?endpoint_id=${out.ep.flaky.id}&status=dead`)).body.data.length, 2);

    sink.fix();
    await page.getByRole('button', { name: 'Replay all matching…' }).click();
    await dialog.getByRole('button', { name: 'Replay 2' }).click();
    await page.getByRole('heading', { level: 1, name: 'Replay' }).waitFor();
    const row = rows(page).first();
    await row.getByText('done', { exact: true }).waitFor({ timeout: 15000 });
    assert.match(await row.innerText(), /2 delivered, 0 pending, 0 failed/);
    const rec = (await d.api('GET', '/v1/replays')).body.data[0];
    assert.equal(rec.kind, 'range');
    assert.equal(rec.replayed, 2);
    assert.ok(page.url().endsWith(`#/replays/${rec.id}`));
    assert.equal(await page.locator('progress').getAttribute('value'), '2');
    await screenshot(page, 'replay-progress');
  });
});

test('one delivery replayed from the list; the history lists both replays', { timeout: 45000 }, async () => {
  await withPage(fx, async (page) => {
    await page.goto(`${page.base}/ui/#/dead?endpoint_id=${out.ep.unauth.id}`);
    await page.waitForFunction(() => document.querySelectorAll('main tbody tr').length === 3);
    await rows(page).first().getByRole('button', { name: /^Replay delivery/ }).click();
    await page.locator('#status').getByText(/replayed; it is pending again/).waitFor();
    // The sink still answers 401: the replayed delivery goes dead again, with a second run of attempts.
    await page.getByRole('link', { name: 'Replays' }).click();
    await page.getByRole('heading', { level: 1, name: 'Replay history' }).waitFor();
    await page.waitForFunction(() => document.querySelectorAll('main tbody tr').length === 2);
    const kinds = await rows(page).evaluateAll((trs) => trs.map((tr) => tr.children[1].textContent));
    assert.deepEqual(kinds, ['delivery', 'range']);
    await rows(page).first().getByText('done', { exact: true }).waitFor({ timeout: 15000 });
    assert.match(await rows(page).first().innerText(), /0 delivered, 0 pending, 1 failed/);
  });
});
