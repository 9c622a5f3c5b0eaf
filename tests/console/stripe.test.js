// The Stripe page, in headless Debian Chromium against a real `tally serve`
// whose events were delivered through the Stripe delivery path
// (helpers/seed-stripe.js): every event with its status, reason and what it
// waits for, the unmapped ones counted and highlighted, the status filter,
// a Reapply that a read-only key is refused (a clear message, the post
// scope named), a Reapply that maps an event once its mapping is fixed, one
// that leaves it unmapped, and one the API refuses (its problem shown).
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startTally, client } from './helpers/tally.js';
import { seedStripe, STRIPE_SECRET, XSS_TYPE } from './helpers/seed-stripe.js';
import { launch, openPage, axeCheck, screenshot } from './helpers/browser.js';
import { equal } from './helpers/decimal.js';

let tally; let browser; let page; let seen; let data; let admin; let reader;

async function checkPage(name) {
  await page.waitForLoadState('networkidle');
  await screenshot(page, name);
  const violations = await axeCheck(page);
  assert.deepEqual(violations, [], `axe: serious/critical violations on ${name}: ${JSON.stringify(violations, null, 2)}`);
}

async function signIn(key) {
  await page.goto(`${tally.base}/console`);
  if (await page.getByRole('button', { name: 'Sign out' }).isVisible()) await page.getByRole('button', { name: 'Sign out' }).click();
  await page.getByLabel('API key').fill(key);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.getByRole('heading', { name: 'Accounts', level: 1 }).waitFor();
}

async function waitForList() {
  await page.getByRole('table', { name: /Stripe events/ }).waitFor();
  await page.locator('nav[aria-label="Stripe event pages"]').waitFor();
  await page.locator('#stripe-summary .message').waitFor();
}

const rows = () => page.locator('table.stripe-events tbody tr');
const listedIds = async () => page.locator('table.stripe-events tbody th').allInnerTexts();
const rowOf = (id) => rows().filter({ has: page.locator('th', { hasText: id }) });

/** Every event the API lists for `status`, following next_after. */
async function listAll(status) {
  const out = [];
  let after = null;
  for (let i = 0; i < 100; i += 1) {
    const q = new URLSearchParams({ limit: '1000' });
    if (status) q.set('status', status);
    if (after) q.set('after', after);
    const r = await reader('GET', `/v1/integrations/stripe/events?${q}`);
    assert.equal(r.status, 200);
    out.push(...r.body.events);
    if (r.body.next_after === null) return out;
    after = r.body.next_after;
  }
  throw new Error('too many pages');
}

describe('stripe page', () => {
  before(async () => {
    tally = await startTally();
    admin = client(tally.apiBase, tally.keys.admin);
    reader = client(tally.apiBase, tally.keys.read);
    data = await seedStripe(tally.apiBase, tally.keys.admin);
    browser = await launch();
    ({ page, seen } = await openPage(browser));
    await signIn(tally.keys.read);
  });

  after(async () => {
    await browser?.close();
    await tally?.stop();
  });

  it('lists every event with status, reason and what it waits for; the unmapped ones counted and highlighted', async () => {
    await page.getByRole('link', { name: 'Stripe', exact: true }).click();
    await page.getByRole('heading', { name: 'Stripe events', level: 1 }).waitFor();
    await waitForList();
    assert.equal(await page.getByRole('link', { name: 'Stripe', exact: true }).getAttribute('aria-current'), 'page');
    const all = await listAll();
    assert.equal(all.length, 4);
    assert.deepEqual(await listedIds(), all.map((e) => e.event_id), 'every event, in event ID order');
    for (const e of all) {
      const text = await rowOf(e.event_id).innerText();
      for (const part of [e.type, e.status, e.received_at, e.reason, e.waiting_for].filter(Boolean)) {
        assert.ok(text.includes(part), `row of ${e.event_id} shows ${part}: ${text}`);
      }
    }
    // The unmapped ones: counted, highlighted, each with its Reapply button.
    assert.equal(await page.locator('#stripe-unmapped-count').innerText(), '2');
    assert.match(await page.locator('#stripe-summary').innerText(), /2 unmapped events/);
    const unmapped = all.filter((e) => e.status === 'unmapped').map((e) => e.event_id);
    assert.deepEqual(unmapped, [data.ids.unmappedKey, data.ids.waiting]);
    assert.deepEqual(await page.locator('table.stripe-events tbody tr.unmapped th').allInnerTexts(), unmapped);
    assert.deepEqual(await page.getByRole('button', { name: /^Reapply / }).evaluateAll((bs) => bs.map((b) => b.getAttribute('aria-label'))),
      unmapped.map((id) => `Reapply ${id}`), 'a Reapply button for each unmapped event, none for the others');
    const keyReason = all.find((e) => e.event_id === data.ids.unmappedKey).reason;
    assert.match(keyReason, /tally_account/);
    const waitingRow = await rowOf(data.ids.waiting).innerText();
    assert.ok(waitingRow.includes(data.waitingFor), waitingRow);
    // A type full of markup is shown as text.
    assert.ok((await rowOf(data.ids.ignored).innerText()).includes(XSS_TYPE));
    assert.equal(await page.locator('main img, main script').count(), 0);
    assert.equal(await page.evaluate(() => window.__tallyXss), undefined);
    await page.getByText('Last page.').waitFor();
    await checkPage('14-stripe-events');
  });

  it('filters by status, and links from the count to the unmapped ones', async () => {
    await page.getByRole('link', { name: 'Show only the unmapped events' }).click();
    await page.waitForURL((u) => u.pathname === '/console/stripe' && u.searchParams.get('status') === 'unmapped');
    await waitForList();
    assert.deepEqual(await listedIds(), (await listAll('unmapped')).map((e) => e.event_id));
    assert.equal(await page.getByLabel('Status').inputValue(), 'unmapped');
    for (const status of ['applied', 'ignored']) {
      await page.getByLabel('Status').selectOption(status);
      await page.getByRole('button', { name: 'Apply filters' }).click();
      await page.waitForURL((u) => u.searchParams.get('status') === status);
      await waitForList();
      const expected = (await listAll(status)).map((e) => e.event_id);
      assert.equal(expected.length, 1);
      assert.deepEqual(await listedIds(), expected);
      for (const t of await rows().allInnerTexts()) assert.ok(t.includes(status), t);
      assert.equal(await page.getByRole('button', { name: /^Reapply / }).count(), 0);
    }
    // Paging: one event a page, the filter kept.
    await page.goto(`${tally.base}/console/stripe?status=unmapped&limit=1`);
    await waitForList();
    assert.deepEqual(await listedIds(), [data.ids.unmappedKey]);
    await page.getByRole('link', { name: 'Next page' }).click();
    await page.waitForURL((u) => u.searchParams.get('after') === data.ids.unmappedKey);
    assert.equal(new URL(page.url()).searchParams.get('status'), 'unmapped', 'the filter is kept');
    await page.getByRole('link', { name: 'First page' }).waitFor();
    await waitForList();
    assert.deepEqual(await listedIds(), [data.ids.waiting]);
  });

  it('a read-only key may not reapply: a clear message names the post scope', async () => {
    await page.goto(`${tally.base}/console/stripe?status=unmapped`);
    await waitForList();
    const before403 = seen.forbidden.length;
    await page.getByRole('button', { name: `Reapply ${data.ids.unmappedKey}` }).click();
    const alert = page.locator('#stripe-notice').getByRole('alert');
    await alert.waitFor();
    const text = await alert.innerText();
    assert.match(text, /This key lacks the post scope, so event evt_c_other_key cannot be reapplied/);
    assert.match(text, /read and post scopes/);
    assert.deepEqual(seen.forbidden.slice(before403).map((u) => new URL(u).pathname),
      [`/v1/integrations/stripe/events/${data.ids.unmappedKey}/reapply`], 'the one 403, explained above');
    assert.equal(await page.getByRole('button', { name: `Reapply ${data.ids.unmappedKey}` }).isEnabled(), true, 'it can be tried again');
    assert.equal((await listAll('unmapped')).length, 2, 'nothing changed');
    await checkPage('15-stripe-reapply-forbidden');
  });

  it('reapplies an event once its mapping is fixed, and says when one stays unmapped', async () => {
    // The account was under customer_account: fix the mapping (admin, API).
    const fixed = await admin('PUT', '/v1/integrations/stripe', { signing_secrets: [STRIPE_SECRET], account_metadata_key: 'customer_account' });
    assert.equal(fixed.status, 200);
    await signIn(tally.keys.admin);
    await page.goto(`${tally.base}/console/stripe`);
    await waitForList();
    assert.equal(await page.locator('#stripe-unmapped-count').innerText(), '2');

    await page.getByRole('button', { name: `Reapply ${data.ids.unmappedKey}` }).click();
    const notice = page.locator('#stripe-notice .message.ok');
    await notice.waitFor();
    assert.match(await notice.innerText(), /Reapplied evt_c_other_key: now applied/);
    const row = rowOf(data.ids.unmappedKey);
    await row.locator('.badge.stripe-applied').waitFor();
    assert.equal(await row.evaluate((r) => r.classList.contains('unmapped')), false, 'no longer highlighted');
    assert.equal(await row.getByRole('button').count(), 0, 'nothing more to reapply');
    const api = (await listAll('applied')).find((e) => e.event_id === data.ids.unmappedKey);
    assert.ok(api, 'applied in the API too');
    assert.ok((await row.innerText()).includes(api.updated_at));
    await page.locator('#stripe-unmapped-count', { hasText: '1' }).waitFor();
    assert.match(await page.locator('#stripe-summary').innerText(), /1 unmapped event\b/);
    const balance = await admin('GET', '/v1/accounts/cust_stripe_2/balance');
    assert.ok(equal(balance.body.posted, '42'), `the payment is in the ledger: ${JSON.stringify(balance.body)}`);

    // The refund still waits for its payment: reapplied, still unmapped.
    await page.getByRole('button', { name: `Reapply ${data.ids.waiting}` }).click();
    const warn = page.locator('#stripe-notice .message.warn');
    await warn.waitFor();
    const text = await warn.innerText();
    assert.match(text, /Reapplied evt_d_refund_first: still unmapped/);
    assert.ok(text.includes(data.waitingFor), text);
    assert.equal(await rowOf(data.ids.waiting).evaluate((r) => r.classList.contains('unmapped')), true, 'still highlighted');
    await checkPage('16-stripe-reapplied');
  });

  it('shows the API\u2019s problem when a reapply is refused', async () => {
    // Without an integration an event cannot be mapped: 422 invalid_request.
    assert.equal((await admin('DELETE', '/v1/integrations/stripe')).status, 204);
    const expected = await admin('POST', `/v1/integrations/stripe/events/${data.ids.waiting}/reapply`);
    assert.equal(expected.status, 422);
    await page.goto(`${tally.base}/console/stripe?status=unmapped`);
    await waitForList();
    await page.getByRole('button', { name: `Reapply ${data.ids.waiting}` }).click();
    const alert = page.locator('#stripe-notice').getByRole('alert');
    await alert.waitFor();
    const text = await alert.innerText();
    assert.ok(text.includes(`Could not reapply event ${data.ids.waiting}: ${expected.body.detail}`), text);
    assert.ok(text.includes('HTTP 422, invalid_request'), text);
    for (const e of expected.body.errors ?? []) assert.ok(text.includes(e.field) && text.includes(e.message), text);
    await checkPage('17-stripe-reapply-refused');
  });

  it('never put a key in a URL and broke no CSP rule', () => {
    assert.ok(seen.urls.length > 10, 'URLs were collected');
    const { stdout, stderr } = tally.logs();
    for (const key of [tally.keys.read, tally.keys.admin]) {
      const secret = key.replace(/^tally_/, '');
      for (const u of seen.urls) assert.ok(!u.includes(secret) && !decodeURIComponent(u).includes(secret), `key in URL ${u}`);
      assert.ok(!stdout.includes(secret) && !stderr.includes(secret), 'key in server output');
    }
    assert.ok(!tally.logs().stdout.includes(STRIPE_SECRET) && !tally.logs().stderr.includes(STRIPE_SECRET), 'the signing secret in server output');
    assert.deepEqual(seen.errors.filter((e) => /Content Security Policy|pageerror/i.test(e)), []);
  });
});
