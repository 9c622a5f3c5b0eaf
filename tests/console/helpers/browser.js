// Debian's Chromium driven by playwright-core (no browser download), with
// collectors for what the tests assert on: every URL the browser visited or
// requested, 403 answers, console errors and CSP violations; axe-core checks
// and screenshots.
import { chromium } from 'playwright-core';
import { readFileSync, mkdirSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
const require = createRequire(import.meta.url);
const AXE_SOURCE = readFileSync(require.resolve('axe-core/axe.min.js'), 'utf8');
export const SCREENSHOTS = path.resolve(here, '../screenshots');

export async function launch() {
  return chromium.launch({
    executablePath: process.env.CHROMIUM_BIN || '/usr/bin/chromium',
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
      '--disable-background-networking', '--disable-component-update', '--disable-sync'],
  });
}

/** A page with collectors. Its context keeps downloads; CSP stays enforced. */
export async function openPage(browser) {
  const context = await browser.newContext({ acceptDownloads: true, viewport: { width: 1360, height: 900 }, locale: 'en-GB', timezoneId: 'Europe/Paris' });
  const page = await context.newPage();
  const seen = { urls: [], forbidden: [], errors: [], responses: [] };
  page.on('request', (r) => seen.urls.push(r.url()));
  page.on('framenavigated', (f) => seen.urls.push(f.url()));
  page.on('response', (r) => {
    seen.responses.push({ url: r.url(), status: r.status() });
    if (r.status() === 403) seen.forbidden.push(r.url());
  });
  page.on('console', (m) => { if (m.type() === 'error') seen.errors.push(m.text()); });
  page.on('pageerror', (e) => seen.errors.push(`pageerror: ${e.message}`));
  // pushState changes do not fire framenavigated in every version: sample the URL too.
  const sample = () => { try { seen.urls.push(page.url()); } catch { /* closed */ } };
  const timer = setInterval(sample, 100);
  context.on('close', () => clearInterval(timer));
  return { context, page, seen, sample };
}

/** Runs axe-core on the page; returns the serious and critical violations. */
export async function axeCheck(page) {
  // The console's CSP forbids inline scripts, so axe is evaluated through the
  // DevTools protocol (which CSP does not govern) instead of a <script> tag.
  const loaded = await page.evaluate(() => typeof window.axe === 'object');
  if (!loaded) await page.evaluate(AXE_SOURCE);
  const result = await page.evaluate(async () => {
    // eslint-disable-next-line no-undef
    const r = await axe.run(document, { resultTypes: ['violations'] });
    return r.violations.map((v) => ({ id: v.id, impact: v.impact, help: v.help, nodes: v.nodes.map((n) => n.target.join(' ')).slice(0, 5) }));
  });
  return result.filter((v) => v.impact === 'serious' || v.impact === 'critical');
}

export async function screenshot(page, name) {
  mkdirSync(SCREENSHOTS, { recursive: true });
  await page.screenshot({ path: path.join(SCREENSHOTS, `${name}.png`), fullPage: true });
}
