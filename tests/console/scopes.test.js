// Keys and scopes: an unknown key, a key without `read`, and a read-only key
// on the audit page. The console never calls an endpoint the key's scopes
// forbid without showing a clear message, and a revoked session (401) goes
// back to the sign-in page.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startTally, client } from './helpers/tally.js';
import { launch, openPage, axeCheck, screenshot } from './helpers/browser.js';

let tally; let browser; let page; let seen;

async function signIn(key) {
  await page.goto(`${tally.base}/console`);
  await page.getByLabel('API key').fill(key);
  await page.getByRole('button', { name: 'Sign in' }).click();
}

describe('keys and scopes', () => {
  before(async () => {
    tally = await startTally();
    const api = client(tally.apiBase, tally.keys.admin);
    const r = await api('POST', '/v1/payments', { payment_id: 'pay_s1', account: 'cust_scope', amount: '3.50', unit: 'EUR' });
    assert.equal(r.status, 201);
    browser = await launch();
    ({ page, seen } = await openPage(browser));
  });

  after(async () => {
    await browser?.close();
    await tally?.stop();
  });

  it('refuses an unknown key and a key without the read scope, with a clear message', async () => {
    await signIn('tally_0000');
    await page.getByText('Unknown key').waitFor();
    const before403 = seen.forbidden.length;
    await signIn(tally.keys.post);
    await page.getByText('This key lacks the read scope').waitFor();
    // The one 403 (the sign-in check of /v1/entries) was explained just above.
    assert.deepEqual(seen.forbidden.slice(before403).map((u) => new URL(u).pathname), ['/v1/entries']);
    assert.equal(await page.evaluate(() => sessionStorage.length), 0, 'a refused key is not kept');
  });

  it('a read-only key sees a clear message on the audit page', async () => {
    await signIn(tally.keys.read);
    await page.getByRole('heading', { name: 'Accounts', level: 1 }).waitFor();
    const before403 = seen.forbidden.length;
    await page.getByRole('link', { name: 'Audit' }).click();
    await page.getByRole('heading', { name: 'Audit', level: 1 }).waitFor();
    const alert = page.getByRole('alert');
    await alert.waitFor();
    assert.match(await alert.innerText(), /This key lacks the audit scope/);
    assert.equal(await page.getByRole('button', { name: /Verify/ }).count(), 0, 'no verify button without the scope');
    assert.equal(await page.getByRole('button', { name: /export/i }).count(), 0, 'no export buttons without the scope');
    await screenshot(page, '10-audit-without-scope');
    assert.deepEqual(await axeCheck(page), []);
    // Coming back does not call the forbidden endpoint again, and still explains.
    await page.getByRole('link', { name: 'Accounts' }).click();
    await page.getByRole('link', { name: 'Audit' }).click();
    await page.getByText('This key lacks the audit scope').waitFor();
    assert.ok(seen.forbidden.length - before403 <= 1, `audit called once at most: ${seen.forbidden}`);
    // Every 403 since sign-in was the audit head, explained on the page.
    for (const u of seen.forbidden.slice(before403)) assert.match(new URL(u).pathname, /^\/v1\/audit\//);
  });

  it('the read-only key can still read accounts and entries', async () => {
    await page.goto(`${tally.base}/console/entries?account=cust_scope`);
    await page.getByRole('table', { name: /Entries/ }).waitFor();
    assert.ok((await page.locator('table tbody').innerText()).includes('pay_s1'));
    await page.goto(`${tally.base}/console/account?account=cust_scope`);
    const now = page.locator('section[aria-labelledby="h-now"]');
    await now.getByRole('table').waitFor();
    assert.equal(await now.locator('tr:has(th:text-is("Posted")) .value').innerText(), '3.5');
  });

  it('an unknown account and an unknown page are explained', async () => {
    await page.goto(`${tally.base}/console/account?account=nobody_here`);
    await page.locator('section[aria-labelledby="h-now"] .message').waitFor();
    await page.goto(`${tally.base}/console/nowhere`);
    await page.getByRole('heading', { name: 'Page not found' }).waitFor();
  });

  it('a key rejected mid-session (401) returns to the sign-in page with a message', async () => {
    await page.goto(`${tally.base}/console/accounts`);
    await page.evaluate(() => sessionStorage.setItem('tally.console.key', 'tally_revoked'));
    await page.goto(`${tally.base}/console/entries`);
    await page.getByRole('heading', { name: 'Sign in', level: 1 }).waitFor();
    await page.getByText('no longer accepts this key').waitFor();
    assert.equal(await page.evaluate(() => sessionStorage.length), 0);
  });

  it('keys never appear in URLs or in the server output', () => {
    const { stdout, stderr } = tally.logs();
    for (const key of Object.values(tally.keys)) {
      const secret = key.replace(/^tally_/, '');
      for (const u of seen.urls) assert.ok(!u.includes(secret), `key in URL ${u}`);
      assert.ok(!stdout.includes(secret) && !stderr.includes(secret), 'key in server output');
    }
    assert.deepEqual(seen.errors.filter((e) => /Content Security Policy|pageerror/i.test(e)), []);
  });
});
