// Endpoints in the dashboard: the table's health, an endpoint failing with
// 401 shows its status-code cluster; a dead delivery replayed after the sink
// is fixed becomes delivered on the event page (which follows it); disable,
// enable, rotate secret (the new secret shown once) and send a test event.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { waitFor } from '../lib/harness.mjs';
import { screenshot } from './lib/browser.mjs';
import { startDashboard, withPage } from './lib/seed.mjs';

let fx, d, sink, out;
before(async () => { fx = await startDashboard(); ({ d, sink, out } = fx); });
after(() => fx?.stop());

test('the table shows each endpoint\'s health; the 401 endpoint\'s page shows its cluster', { timeout: 45000 }, async () => {
  await withPage(fx, async (page) => {
    await page.getByRole('link', { name: 'Endpoints', exact: true }).click();
    await page.getByRole('heading', { level: 1, name: 'Endpoints' }).waitFor();
    const row = page.getByRole('row').filter({ hasText: out.ep.unauth.url });
    await row.waitFor();
    assert.match(await row.innerText(), /HTTP 401/);
    assert.match(await row.innerText(), /0 %/);
    assert.match(await page.getByRole('row').filter({ hasText: out.ep.ok.url }).innerText(), /100 %/);
    await row.getByRole('link', { name: out.ep.unauth.url }).click();
    await page.getByRole('heading', { level: 1, name: out.ep.unauth.url }).waitFor();
    const clusters = page.locator('#clusters');
    await clusters.getByText('3 × 401').waitFor();
    assert.match(await clusters.innerText(), /HTTP 401\s+3/);
    assert.match(await page.locator('[data-figure="last_error"]').innerText(), /HTTP 401/);
    assert.equal(await page.locator('[data-figure="dead"]').innerText(), '3 / 0');
    assert.match(await page.getByRole('img', { name: /^Attempts per minute/ }).getAttribute('aria-label'), /peak 3\/min/);
    assert.equal(await page.locator('section[aria-labelledby="s-recent-deliveries"] tbody tr').count(), 3);
    await screenshot(page, 'endpoint-401');
  });
});

test('a dead delivery replayed after the sink is fixed becomes delivered on the page', { timeout: 45000 }, async () => {
  await withPage(fx, async (page) => {
    const eventId = out.ev.flaky[0];
    await page.goto(`${page.base}/ui/#/events/${eventId}`);
    const dest = page.locator('article.destination');
    await dest.locator('.badge').getByText('dead', { exact: true }).waitFor();
    assert.match(await dest.locator('.summary-line').innerText(), /HTTP 503.*not retried after 2 attempts/);
    assert.match(await dest.innerText(), /down for maintenance/);
    sink.fix();
    await dest.getByRole('button', { name: 'Replay to this endpoint' }).click();
    const dialog = page.getByRole('dialog');
    await dialog.waitFor();
    await dialog.getByRole('button', { name: 'Replay' }).click();
    await page.locator('#status').getByText(/replayed/).waitFor();
    await dest.locator('.badge').getByText('delivered', { exact: true }).waitFor({ timeout: 15000 });
    assert.match(await dest.locator('.summary-line').innerText(), /delivered \(HTTP 200/);
    const api = (await d.api('GET', `/v1/events/${eventId}`)).body.deliveries[0];
    assert.equal(api.status, 'delivered');
    await screenshot(page, 'event-replayed');
  });
});

test('disable, enable, rotate secret (shown once) and send a test event', { timeout: 45000 }, async () => {
  await withPage(fx, async (page) => {
    const ep = out.ep.ok;
    await page.goto(`${page.base}/ui/#/endpoints/${ep.id}`);
    await page.getByRole('heading', { level: 1, name: ep.url }).waitFor();

    await page.getByRole('button', { name: 'Disable' }).click();
    await page.getByRole('dialog').getByRole('button', { name: 'Cancel' }).click();
    assert.equal((await d.api('GET', `/v1/endpoints/${ep.id}`)).body.enabled, true, 'cancel changes nothing');
    await page.getByRole('button', { name: 'Disable' }).click();
    await page.getByRole('dialog').getByRole('button', { name: 'Disable' }).click();
    await page.getByRole('button', { name: 'Enable' }).waitFor();
    const off = (await d.api('GET', `/v1/endpoints/${ep.id}`)).body;
    assert.equal(off.enabled, false);
    assert.equal(off.disabled_reason, 'disabled from the dashboard');
    assert.equal(await page.getByRole('button', { name: 'Send test event' }).count(), 0, 'no test event while disabled');
    await page.getByRole('button', { name: 'Enable' }).click();
    await page.getByRole('button', { name: 'Disable' }).waitFor();
    assert.equal((await d.api('GET', `/v1/endpoints/${ep.id}`)).body.enabled, true);

    const before = (await d.api('GET', `/v1/endpoints/${ep.id}`)).body.secret;
    await page.getByRole('button', { name: 'Rotate secret' }).click();
    await page.getByRole('dialog').getByRole('button', { name: 'Rotate' }).click();
    const shown = page.locator('#new-secret');
    await shown.waitFor();
    const secret = await shown.innerText();
    assert.match(secret, /^whsec_/);
    assert.notEqual(secret, before);
    assert.equal((await d.api('GET', `/v1/endpoints/${ep.id}`)).body.secret, secret, 'the newest key is shown');
    assert.equal(await page.evaluate(() => document.activeElement?.id), 'new-secret');
    await page.reload();
    await page.getByRole('heading', { level: 1, name: ep.url }).waitFor();
    assert.equal(await page.locator('#new-secret').count(), 0, 'shown once');
    assert.ok(!(await page.content()).includes(secret), 'the secret is not on the page again');

    await page.getByRole('button', { name: 'Send test event' }).click();
    const note = page.locator('#status').getByText(/Test event evt_\S+ sent/);
    await note.waitFor();
    const id = /Test event (evt_\S+) sent/.exec(await note.innerText())[1];
    await waitFor(async () => (await d.api('GET', `/v1/events/${id}`)).body.deliveries?.[0]?.status === 'delivered',
      { what: 'the test event delivered' });
    assert.equal((await d.api('GET', `/v1/events/${id}`)).body.type, 'hookd.ping');
  });
});
