// Hostile data is shown as text and never runs: markup, event handlers, a
// javascript: URL, bidi overrides and control characters in endpoint
// descriptions (through the API and written by SQL), accounts, payloads,
// inbound event types and ids, response snippets, and a snippet that
// is not UTF-8 (shown as hex). No dialog, no page error, no element from
// the data, and the literal text on the page.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { waitFor, BACKEND } from '../lib/harness.mjs';
import { screenshot } from './lib/browser.mjs';
import { startDashboard, withPage, HOSTILE_TEXT, HOSTILE } from './lib/seed.mjs';

let fx, d, sink, out, binaryEvent, accountEvent;
const ACCOUNT = '<script>window.__pwned=3</script>';
before(async () => {
  fx = await startDashboard();
  ({ d, sink, out } = fx);
  await d.api('POST', '/v1/endpoints', { url: sink.url('/binary'), event_types: ['bin.*'],
    retry_schedule: '100ms' });
  binaryEvent = (await d.api('POST', '/v1/events', { type: 'bin.x', data: {} })).body.id;
  accountEvent = (await d.api('POST', '/v1/events', { type: 'order.paid', account: ACCOUNT, data: { a: 1 } })).body.id;
  // A row changed by hand: controls in a description (the API refuses them).
  const ctl = BACKEND === 'postgres' ? "chr(7) || chr(27) || '[2J' || chr(155)" : "char(7) || char(27) || '[2J' || char(155)";
  d.sql(`UPDATE hookd_endpoints SET description = '<svg onload=alert(4)>' || ${ctl} WHERE id = '${out.ep.ok.id}'`);
  // Inbound: a provider's event type and id are whatever it sent.
  const src = await d.api('POST', '/v1/sources', { name: 'raw', verify: { scheme: 'none' }, event_id: '/id',
    event_type: '/type', handler: { library: true } });
  assert.equal(src.status, 201, JSON.stringify(src.body));
  const r = await fetch(`http://127.0.0.1:${d.publicPort}/in/raw`, { method: 'POST',
    headers: { 'content-type': 'application/json' }, body: JSON.stringify({ id: 'id-<i>1</i>', type: HOSTILE_TEXT, note: HOSTILE, x: '<img src=x onerror=alert(5)>' }) });
  assert.equal(r.status, 200, await r.text());
  await waitFor(async () => {
    const r = await d.api('GET', `/v1/events/${binaryEvent}`);
    return r.body.deliveries?.[0]?.status === 'dead';
  }, { what: 'the binary delivery dead' });
});
after(() => fx?.stop());

async function open(page, hash, heading) {
  await page.goto(`${page.base}/ui/${hash}`);
  await page.locator('main h1').filter({ hasText: heading }).first().waitFor();
  await page.waitForFunction(() => !document.querySelector('main[aria-busy]'));
}

async function clean(page) {
  assert.equal(await page.evaluate(() => window.__pwned), undefined, 'a script from the data ran');
  const injected = await page.evaluate(() => document.querySelectorAll('main script, main img, main iframe, main b, ' +
    'main i, main svg:not(.chart), main [onerror], main [onload], main [onmouseover]').length);
  assert.equal(injected, 0, 'an element from the data reached the page');
}

test('hostile text everywhere is shown as text and never runs', { timeout: 50000 }, async () => {
  await withPage(fx, async (page) => {
    const dialogs = [];
    page.on('dialog', (dl) => { dialogs.push(dl.message()); dl.dismiss().catch(() => {}); });
    const main = page.locator('main');

    await open(page, '#/endpoints', 'Endpoints');
    const text = await main.innerText();
    assert.ok(text.includes('Hostile <script>window.__pwned=1</script><img src=x onerror="window.__pwned=2">\\u202Egnp.exe\\u202C'),
      'the description, literally, with its bidi marks shown');
    assert.ok(text.includes('<svg onload=alert(4)>\\u0007\\u001B[2J\\u009B'), 'controls written by SQL are shown as escapes');
    await clean(page);
    await screenshot(page, 'hostile-endpoints');

    await open(page, `#/endpoints/${out.ep.hostile.id}`, 'hostile');
    assert.ok((await main.innerText()).includes(`Hostile ${HOSTILE_TEXT.replace('\u202E', '\\u202E').replace('\u202C', '\\u202C')}`));
    await clean(page);

    // The event with a hostile payload and a hostile response snippet.
    await open(page, `#/events/${out.ev.hostile}`, 'Event');
    const ev = await main.innerText();
    assert.ok(ev.includes('"note": "<script>window.__pwned=1</script><img src=x onerror=\\"window.__pwned=2\\">\\u202Egnp.exe\\u202C\\u0007\\u001b[31m"'),
      'the payload as JSON text');
    assert.ok(ev.includes('"html": "<b onmouseover=alert(1)>x</b>"'));
    assert.ok(ev.includes('<iframe src="javascript:alert(1)"></iframe>'), 'the response snippet as text');
    await clean(page);
    await screenshot(page, 'hostile-event');

    // A snippet that is not UTF-8: its bytes in hex.
    await open(page, `#/events/${binaryEvent}`, 'Event');
    assert.match(await main.innerText(), /8 bytes, not UTF-8 text; shown as hex:\s+3c 62 ff fe c3 28 00 3e/);
    await clean(page);

    // An inbound item whose type and id carry markup, bidi marks and controls.
    await open(page, '#/inbound?source=raw', 'Inbound');
    const shown = HOSTILE_TEXT.replace('\u202E', '\\u202E').replace('\u202C', '\\u202C');
    assert.ok((await main.innerText()).includes(shown), 'the inbound event type, literally');
    assert.ok((await main.innerText()).includes('id-<i>1</i>'));
    await clean(page);
    await page.locator('main tbody a').first().click();
    await page.locator('main h1').filter({ hasText: 'Inbox item' }).waitFor();
    assert.ok((await main.innerText()).includes('"x": "<img src=x onerror=alert(5)>"'));
    assert.ok((await main.innerText()).includes('\\u202Egnp.exe\\u202C\\u0007\\u001b[31m'), 'the payload, controls escaped');
    await clean(page);
    await open(page, '#/events', 'Events');
    assert.ok((await main.innerText()).includes(ACCOUNT));
    await clean(page);

    // A hostile account through the filters and the dead letters list.
    await open(page, `#/events/${accountEvent}`, 'Event');
    assert.ok((await main.innerText()).includes(ACCOUNT));
    await clean(page);
    await open(page, `#/dead?account=${encodeURIComponent('<b>x</b>')}`, 'Dead letters');
    assert.equal(await page.getByLabel('Account').inputValue(), '<b>x</b>');
    await clean(page);
    await open(page, '#/overview', 'Overview');
    await clean(page);

    assert.deepEqual(dialogs, [], 'no dialog opened');
  });
});
