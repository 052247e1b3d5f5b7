// Keyboard only, through the main pages: log in, the skip link, the
// navigation, a table's links, a filter form, the confirmation dialog
// (Escape closes it and focus returns), each focused control visibly
// outlined, and focus moved to the new page's heading after navigating.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { TOKEN } from '../lib/harness.mjs';
import { startDashboard, withPage } from './lib/seed.mjs';

let fx, d, out;
before(async () => { fx = await startDashboard(); ({ d, out } = fx); });
after(() => fx?.stop());

// What has focus: its tag, text or label, and whether its outline is visible.
const focused = (page) => page.evaluate(() => {
  const el = document.activeElement;
  const cs = getComputedStyle(el);
  return { tag: el.tagName.toLowerCase(), text: (el.innerText || el.value || el.getAttribute('aria-label') || '').trim(),
    id: el.id, outlined: cs.outlineStyle !== 'none' && parseFloat(cs.outlineWidth) >= 2 };
});

// Presses Tab until want(focused) holds (at most max times); every stop on the way is visibly outlined.
async function tabTo(page, want, what, max = 60) {
  for (let i = 0; i < max; i++) {
    await page.keyboard.press('Tab');
    const f = await focused(page);
    if (f.tag !== 'body' && f.tag !== 'main' && f.tag !== 'h1') assert.ok(f.outlined, `no visible focus on ${JSON.stringify(f)}`);
    if (want(f)) return f;
  }
  throw new Error(`Tab never reached ${what}`);
}

const heading = async (page, text) => {
  await page.waitForFunction((t) => document.activeElement?.tagName === 'H1' && document.activeElement.innerText.includes(t), text);
};

test('keyboard only: log in, skip link, navigation, tables, filters and the dialog', { timeout: 50000 }, async () => {
  await withPage(fx, async (page) => {
    await page.goto(`${page.base}/ui/`);
    await page.waitForFunction(() => document.activeElement?.id === 'token'); // the login focuses its field
    await page.keyboard.type(TOKEN);
    await page.keyboard.press('Enter');
    await page.locator('#nav a').first().waitFor();

    // From the top of a fresh load: the skip link first, visible when focused, moving focus to the content.
    const fresh = async () => { await page.reload(); await page.locator('#nav a').first().waitFor(); };
    await fresh();
    const skip = await tabTo(page, (f) => f.text === 'Skip to content', 'the skip link', 1);
    assert.ok(skip.outlined);
    const box = await page.locator('.skip').boundingBox();
    assert.ok(box.x >= 0 && box.y >= 0, 'the skip link is on screen when focused');
    await page.keyboard.press('Enter');
    assert.equal((await focused(page)).id, 'main');
    assert.ok(page.url().endsWith('/ui/'), 'the skip link leaves the route alone');

    // The navigation in order, then Endpoints.
    await fresh();
    const order = [];
    for (let i = 0; i < 9; i++) {
      await page.keyboard.press('Tab');
      order.push((await focused(page)).text);
    }
    assert.deepEqual(order.slice(0, 9), ['Skip to content', 'Overview', 'Endpoints', 'Events', 'Dead letters', 'Replays',
      'Inbound', 'Entity trace', 'Log out']);
    await page.keyboard.press('Shift+Tab');
    for (let i = 0; i < 5; i++) await page.keyboard.press('Shift+Tab');
    assert.equal((await focused(page)).text, 'Endpoints');
    await page.keyboard.press('Enter');
    await heading(page, 'Endpoints');

    // The table's link to the 401 endpoint, then its page.
    await tabTo(page, (f) => f.text === out.ep.unauth.url, 'the endpoint link');
    await page.keyboard.press('Enter');
    await heading(page, out.ep.unauth.url);
    await tabTo(page, (f) => f.text === 'Disable', 'the Disable button');

    // Dead letters: a filter typed and submitted with Enter, then the range replay's dialog.
    await tabTo(page, (f) => f.text === 'Dead letters', 'the Dead letters link');
    await page.keyboard.press('Enter');
    await heading(page, 'Dead letters');
    await tabTo(page, (f) => f.id === 'f-account', 'the account field');
    await page.keyboard.type('globex');
    await page.keyboard.press('Enter');
    await heading(page, 'Dead letters');
    assert.match(page.url(), /account=globex/);
    await page.waitForFunction(() => document.querySelectorAll('main tbody tr').length === 2);
    await tabTo(page, (f) => f.text === 'Replay all matching…', 'the range replay button');
    await page.keyboard.press('Enter');
    await page.getByRole('dialog').waitFor();
    assert.equal((await focused(page)).text, 'Cancel', 'the dialog starts on Cancel');
    await page.keyboard.press('Tab');
    assert.match((await focused(page)).text, /^Replay 2/);
    await page.keyboard.press('Tab'); // focus stays in the modal dialog
    assert.ok(await page.evaluate(() => document.querySelector('dialog').contains(document.activeElement) ||
      document.activeElement === document.body), 'focus stays inside the dialog');
    await page.keyboard.press('Escape');
    await page.getByRole('dialog').waitFor({ state: 'detached' });
    assert.equal((await focused(page)).text, 'Replay all matching…', 'focus returns to the opener');
    assert.equal((await d.api('GET', '/v1/replays')).body.data.length, 0, 'Escape replays nothing');

    // An event's page from the list, through the keyboard.
    await tabTo(page, (f) => f.text.startsWith('evt_'), 'an event link');
    await page.keyboard.press('Enter');
    await heading(page, 'Event');
    // Inbound and the trace form.
    await tabTo(page, (f) => f.text === 'Entity trace', 'the trace link');
    await page.keyboard.press('Enter');
    await heading(page, 'Entity trace');
    await tabTo(page, (f) => f.id === 'f-kind', 'the kind field');
    await page.keyboard.type('order');
    await page.keyboard.press('Tab');
    await page.keyboard.type('A-1');
    await page.keyboard.press('Enter');
    await page.waitForFunction(() => location.hash.includes('kind=order&id=A-1'));
  }, { viewport: { width: 1280, height: 800 }, allow: /status of 404/, login: false });
});
