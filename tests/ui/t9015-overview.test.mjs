// The overview against the API: each figure is what /v1/stats, /v1/summary
// and /v1/alerts answer; the page refreshes itself (a new dead delivery
// shows up without a reload) and keeps the reader's focus and scroll.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { waitFor } from '../lib/harness.mjs';
import { screenshot } from './lib/browser.mjs';
import { startDashboard, withPage } from './lib/seed.mjs';

let fx, d, out;
before(async () => { fx = await startDashboard({ inbound: true }); ({ d, out } = fx); });
after(() => fx?.stop());

const figure = (page, name) => page.locator(`[data-figure="${name}"]`).innerText();
const n = (x) => x.toLocaleString('en-US');

test('the figures match the API, and the page refreshes itself keeping focus and scroll', { timeout: 60000 }, async () => {
  await withPage(fx, async (page) => {
    await page.locator('[data-figure="dead"]').waitFor();
    const stats = (await d.api('GET', '/v1/stats')).body;
    const q = stats.deliveries;
    assert.equal(await figure(page, 'pending'), n(q.pending));
    assert.equal(await figure(page, 'retrying'), n(q.retrying));
    assert.equal(await figure(page, 'in_flight'), n(q.in_flight));
    assert.equal(await figure(page, 'undispatched'), n(q.undispatched));
    assert.equal(await figure(page, 'dead'), n(q.dead));
    assert.equal(q.dead, 6, 'the seed: 3 × 401, 2 × 503 until fixed, 1 hostile');
    assert.equal(await figure(page, 'skipped'), n(q.skipped));
    assert.equal(await figure(page, 'inbound_accepted'), n(stats.totals.inbound));
    assert.equal(stats.totals.inbound, 4);
    assert.equal(await figure(page, 'inbound_rejected'), n(stats.rejected.total));
    assert.equal(stats.rejected.total, 2);
    assert.equal(await figure(page, 'inbox_quarantined'), n(stats.inbox.quarantined));
    assert.equal(await figure(page, 'oldest_open'), 'none');
    const alerts = (await d.api('GET', '/v1/alerts?status=open')).body.data;
    assert.equal(await figure(page, 'alerts_open'), n(alerts.length));
    // The charts carry the API's per-minute figures: their summaries name the peak.
    const peakEvents = Math.max(...stats.minutes.map((m) => m.events)) / 60;
    const eventsChart = await page.getByRole('img', { name: /^Events per second/ }).getAttribute('aria-label');
    assert.match(eventsChart, new RegExp(`peak ${peakEvents.toFixed(2).replace(/\.?0+$/, '').replace('.', '\\.')}/s`));
    // Endpoints needing attention: the 401 endpoint with its cluster.
    const row = page.getByRole('row').filter({ hasText: out.ep.unauth.url });
    await assert.doesNotReject(row.getByText('3 × 401').waitFor());
    const summary = (await d.api('GET', '/v1/summary')).body;
    assert.equal(await page.locator('section[aria-labelledby="s-endpoints-needing-attention"] tbody tr').count(),
      new Set([...summary.failures_by_endpoint, ...summary.no_success].map((e) => e.endpoint_id)).size);
    await screenshot(page, 'overview-figures');

    // Focus on the Dead link, scrolled down; a new dead delivery arrives; the page follows without a reload.
    await page.locator('a[data-key="dead"]').focus();
    await page.evaluate(() => window.scrollTo(0, 200));
    const marker = await page.evaluate(() => { window.__sameDocument = true; return window.scrollY; });
    await d.api('POST', '/v1/events', { type: 'invoice.sent', account: 'acme', data: { late: true } });
    await waitFor(async () => (await figure(page, 'dead')) === n(q.dead + 1), { timeoutMs: 15000, what: 'the refresh' });
    assert.equal(await page.evaluate(() => window.__sameDocument), true, 'no reload');
    assert.equal(await page.evaluate(() => document.activeElement?.dataset.key), 'dead', 'focus kept');
    assert.equal(await page.evaluate(() => window.scrollY), marker, 'scroll kept');
  }, { viewport: { width: 1280, height: 600 } });
});
