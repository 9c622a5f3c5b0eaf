// How long each console page takes to load its data, in Debian's Chromium:
// from navigation to the page's last request done (then one frame).
// On demand, against a server preloaded by preload.py (docs/console.md):
//   TALLY_URL=http://127.0.0.1:18080 TALLY_KEY=... node tests/console/bench/pageload.mjs
import { chromium } from 'playwright-core';

const key = process.env.TALLY_KEY;
const base = process.env.TALLY_URL || 'http://127.0.0.1:18080';
const browser = await chromium.launch({ executablePath: process.env.CHROMIUM_BIN || '/usr/bin/chromium', args: ['--headless','--no-sandbox','--disable-gpu','--disable-quic','--no-first-run','--disable-background-networking','--disable-component-update','--disable-sync'] });
const page = await (await browser.newContext()).newPage();
await page.goto(base + '/console');
await page.evaluate((k) => sessionStorage.setItem('tally.console.key', k), key);
const views = [
  ['accounts', '/console/accounts', 'table'],
  ['accounts search', '/console/accounts?q=0999', 'table'],
  ['account + November statement', '/console/account?account=cust_00042&from=2026-11-01T00:00:00Z&to=2026-12-01T00:00:00Z', 'table'],
  ['entries', '/console/entries', 'table'],
  ['entries rejected', '/console/entries?status=rejected', 'main h1'],
  ['entries by upstream id', '/console/entries?upstream_id=u123457', 'table'],
  ['entry', '/console/entry?id=', 'main h1'],
  ['audit', '/console/audit', 'main h1'],
];
for (const [name, path, sel] of views) {
  let url = path;
  if (name === 'entry') {
    const r = await fetch(base + '/v1/entries?after_seq=500000&limit=1', { headers: { authorization: 'Bearer ' + key } });
    url += (await r.json()).entries[0].id;
  }
  const times = [];
  for (let i = 0; i < 3; i++) {
    let last = 0;
    const onResponse = () => { last = Date.now(); };
    page.on('requestfinished', onResponse);
    const t0 = Date.now();
    await page.goto(base + url);
    await page.waitForLoadState('networkidle');
    // The moment the last request of the page finished, then one frame:
    // the data is on the page.
    await page.evaluate(() => new Promise((r) => requestAnimationFrame(() => r())));
    page.off('requestfinished', onResponse);
    times.push(last - t0);
  }
  console.log(`${name.padEnd(32)} ${times.join(' / ')} ms (navigation to its last request done)`);
}
await browser.close();
