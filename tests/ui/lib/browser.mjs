// Browser tests: Debian's chromium, headless, driven by playwright-core (no
// browser download). Each test gets a page on a running hookd; screenshots go
// to build-asan/test-artifacts/ui/ (HOOKD_UI_ARTIFACTS overrides).
import { mkdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { createRequire } from 'node:module';
import { chromium } from 'playwright-core';
import { ROOT, TOKEN } from '../../lib/harness.mjs';

const require = createRequire(import.meta.url);
export const CHROMIUM = process.env.HOOKD_CHROMIUM || '/usr/bin/chromium';
export const ARTIFACTS = process.env.HOOKD_UI_ARTIFACTS || join(ROOT, 'build-asan/test-artifacts/ui');

export async function launch() {
  return chromium.launch({ executablePath: CHROMIUM, headless: true, args: ['--headless', '--no-sandbox'] });
}

/**
 * A fresh page (its own context, so its own session storage) on daemon d.
 * Console errors and failed requests are collected in page.problems: a test
 * ends with expectClean(page) so a script error never passes unseen.
 */
export async function openPage(browser, d, { viewport = { width: 1280, height: 800 } } = {}) {
  const context = await browser.newContext({ viewport });
  const page = await context.newPage();
  page.problems = [];
  page.on('pageerror', (e) => page.problems.push(`pageerror: ${e.message}`));
  page.on('console', (m) => { if (m.type() === 'error') page.problems.push(`console: ${m.text()}`); });
  page.base = `http://127.0.0.1:${d.adminPort}`;
  page.closeAll = () => context.close();
  return page;
}

// Logs in on the dashboard with the admin token through its form.
export async function login(page, token = TOKEN) {
  await page.goto(`${page.base}/ui/`);
  await page.getByLabel('Admin token').fill(token);
  await page.getByRole('button', { name: 'Log in' }).click();
  await page.locator('#nav a').first().waitFor();
}

export async function screenshot(page, name) {
  mkdirSync(ARTIFACTS, { recursive: true });
  await page.screenshot({ path: join(ARTIFACTS, `${name}.png`), fullPage: true });
}

// Runs axe-core in the page; answers the violations of impact serious or critical.
export async function axeSerious(page) {
  const source = readFileSync(require.resolve('axe-core/axe.min.js'), 'utf8');
  // Evaluated through the DevTools protocol: the page's CSP (no inline scripts) stays on and does not apply to it.
  if (!(await page.evaluate(() => Boolean(window.axe)))) await page.evaluate(source);
  const result = await page.evaluate(async () => window.axe.run(document, { resultTypes: ['violations'] }));
  return result.violations.filter((v) => v.impact === 'serious' || v.impact === 'critical')
    .map((v) => `${v.id}: ${v.help} (${v.nodes.map((n) => n.target.join(' ')).join(', ')})`);
}
