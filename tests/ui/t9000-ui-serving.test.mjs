// The dashboard and portal files: served by hookd from the binary, with a
// strict CSP and revalidation, no token needed for the files themselves; the
// login keeps the token in session storage, never in a URL or a log line.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startDaemon, TOKEN } from '../lib/harness.mjs';
import { launch, openPage, login } from './lib/browser.mjs';

let d, browser;
before(async () => { d = await startDaemon(); browser = await launch(); });
after(async () => { await browser?.close(); await d?.cleanup(); });

const get = (path, headers = {}) => fetch(`http://127.0.0.1:${d.adminPort}${path}`, { headers, redirect: 'manual' });

test('pages and files are served with their types, a strict CSP and an ETag', async () => {
  for (const [path, type] of [['/ui/', 'text/html'], ['/ui/app.js', 'text/javascript'], ['/ui/app.css', 'text/css'],
    ['/portal/', 'text/html'], ['/portal/portal.js', 'text/javascript'], ['/lib/hookd.js', 'text/javascript'],
    ['/lib/base.css', 'text/css']]) {
    const r = await get(path);
    assert.equal(r.status, 200, path);
    assert.ok(r.headers.get('content-type').startsWith(type), `${path}: ${r.headers.get('content-type')}`);
    assert.equal(r.headers.get('x-content-type-options'), 'nosniff');
    assert.equal(r.headers.get('referrer-policy'), 'no-referrer');
    const body = await r.text();
    assert.ok(body.length > 100, path);
    if (type === 'text/html') {
      const csp = r.headers.get('content-security-policy');
      assert.match(csp, /script-src 'self'/);
      assert.match(csp, /frame-ancestors 'none'/);
      assert.doesNotMatch(csp, /unsafe-inline|unsafe-eval/);
    }
    const tag = r.headers.get('etag');
    assert.match(tag, /^"[0-9a-f]{16}"$/);
    const again = await get(path, { 'if-none-match': `"x", ${tag}` });
    assert.equal(again.status, 304);
  }
});

test('/ui and /portal redirect to their pages; unknown files are 404; no path escapes', async () => {
  assert.equal((await get('/ui')).status, 308);
  assert.equal((await get('/ui')).headers.get('location'), '/ui/');
  assert.equal((await get('/portal')).headers.get('location'), '/portal/');
  for (const p of ['/ui/nope.js', '/ui/%2e%2e/%2e%2e/etc/passwd', '/lib/', '/ui/index.html/',
    '/ui/' + 'a'.repeat(500)]) {
    const r = await get(p);
    assert.ok(r.status === 404 || r.status === 400, `${p}: ${r.status}`);
  }
  // The API behind the pages still needs the token.
  assert.equal((await get('/v1/endpoints')).status, 401);
});

test('log in through the form: the token stays in session storage, never in the URL or the log', async () => {
  const page = await openPage(browser, d);
  try {
    await page.goto(`${page.base}/ui/`);
    await page.getByLabel('Admin token').fill('wrong-token-0123456789abcdef0123456789');
    await page.getByRole('button', { name: 'Log in' }).click();
    await page.getByRole('alert').waitFor();
    assert.match(await page.getByRole('alert').textContent(), /not valid/);
    await login(page);
    assert.equal(await page.evaluate(() => sessionStorage.getItem('hookd.token')), TOKEN);
    assert.ok(!page.url().includes(TOKEN));
    await page.reload();
    await page.locator('#nav a').first().waitFor(); // still logged in within the session
    await page.getByRole('button', { name: 'Log out' }).click();
    await page.getByLabel('Admin token').waitFor();
    assert.equal(await page.evaluate(() => sessionStorage.getItem('hookd.token')), null);
    assert.deepEqual(page.problems.filter((p) => !/401/.test(p)), []);
  } finally {
    await page.closeAll();
  }
  await d.stop();
  assert.ok(!d.logs.includes(TOKEN), 'the admin token reached the log');
  await d.start();
});
