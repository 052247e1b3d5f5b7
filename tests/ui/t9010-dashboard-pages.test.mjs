// Every main page of the dashboard on scripted data: it renders without a
// script error, axe-core finds nothing serious or critical, a screenshot is
// saved (laptop and phone width), and nothing overflows the phone's width.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { openPage, login, screenshot, axeSerious } from './lib/browser.mjs';
import { startDashboard } from './lib/seed.mjs';

let fx, d, browser, out, inb;
before(async () => { fx = await startDashboard({ inbound: true }); ({ d, browser, out, inb } = fx); });
after(() => fx?.stop());

const pages = () => [
  ['overview', '#/overview', 'Overview'],
  ['endpoints', '#/endpoints', 'Endpoints'],
  ['endpoint', `#/endpoints/${out.ep.unauth.id}`, out.ep.unauth.url],
  ['events', '#/events', 'Events'],
  ['event', `#/events/${out.ev.flaky[0]}`, 'Event'],
  ['dead', '#/dead', 'Dead letters'],
  ['replays', '#/replays', 'Replay history'],
  ['inbound', '#/inbound?source=shop', 'Inbound'],
  ['trace', '#/trace?kind=order&id=A-100', 'Entity trace'],
  ['inbox-item', `#/inbox/${inb.quarantined}`, 'Inbox item'],
];

for (const [width, height, suffix] of [[1280, 800, ''], [375, 740, '-phone']]) {
  test(`every main page at ${width} px: renders, no serious axe violation, screenshot`, { timeout: 60000 }, async () => {
    const page = await openPage(browser, d, { viewport: { width, height } });
    try {
      await page.goto(`${page.base}/ui/`);
      await page.getByLabel('Admin token').waitFor();
      assert.deepEqual(await axeSerious(page), [], `the login at ${width} px`);
      await screenshot(page, `login${suffix}`);
      await login(page);
      for (const [name, hash, heading] of pages()) {
        await page.goto(`${page.base}/ui/${hash}`);
        await page.locator('main h1').filter({ hasText: heading }).first().waitFor({ timeout: 10000 });
        await page.waitForFunction(() => !document.querySelector('main[aria-busy]'));
        assert.equal(await page.locator('main .error-box').count(), 0, `${name}: ${await page.locator('main').innerText()}`);
        assert.deepEqual(await axeSerious(page), [], `${name} at ${width} px`);
        if (suffix) {
          const over = await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
          assert.ok(over <= 1, `${name}: the page is ${over} px wider than the phone`);
        }
        await screenshot(page, `${name}${suffix}`);
      }
      assert.deepEqual(page.problems, []);
    } finally {
      await page.closeAll();
    }
  });
}
