// The Intents page, in headless Debian Chromium against a real `tally serve`
// seeded through the intents API: the list with its status and action
// filters and its paging (a filtered page is filled by following
// next_after), one succeeded and one failed intent with their history and
// the history's links to the log's entries, and untrusted text (IDs,
// params, results, error messages) shown as text, never as markup.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startTally, client } from './helpers/tally.js';
import { seedIntents, XSS_MESSAGE } from './helpers/seed-intents.js';
import { launch, openPage, axeCheck, screenshot } from './helpers/browser.js';

let tally; let browser; let page; let seen; let data; let api;

async function checkPage(name) {
  await page.waitForLoadState('networkidle');
  await screenshot(page, name);
  const violations = await axeCheck(page);
  assert.deepEqual(violations, [], `axe: serious/critical violations on ${name}: ${JSON.stringify(violations, null, 2)}`);
}

/** Every intent the API lists for these filters, following next_after. */
async function listAll(filters = {}) {
  const ids = [];
  let after = null;
  for (let i = 0; i < 100; i += 1) {
    const q = new URLSearchParams({ ...filters, limit: '1000' });
    if (after) q.set('after', after);
    const r = await api('GET', `/v1/intents?${q}`);
    assert.equal(r.status, 200);
    ids.push(...r.body.intents.map((x) => x.intent_id));
    if (r.body.next_after === null) return ids;
    after = r.body.next_after;
  }
  throw new Error('too many pages');
}

const rows = () => page.locator('table tbody tr');
const listedIds = async () => page.locator('table tbody th a').allInnerTexts();

async function waitForList() {
  await page.getByRole('table', { name: /Intents/ }).waitFor();
  await page.locator('nav[aria-label="Intent pages"]').waitFor();
}

describe('intents page', () => {
  before(async () => {
    tally = await startTally();
    api = client(tally.apiBase, tally.keys.admin);
    data = await seedIntents(tally.apiBase, tally.keys.post);
    browser = await launch();
    ({ page, seen } = await openPage(browser));
    await page.goto(`${tally.base}/console`);
    await page.getByLabel('API key').fill(tally.keys.read);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByRole('heading', { name: 'Accounts', level: 1 }).waitFor();
  });

  after(async () => {
    await browser?.close();
    await tally?.stop();
  });

  it('lists every intent from the navigation, with action, status, attempts and time', async () => {
    await page.getByRole('link', { name: 'Intents', exact: true }).click();
    await page.getByRole('heading', { name: 'Intents', level: 1 }).waitFor();
    await waitForList();
    assert.equal(await page.getByRole('link', { name: 'Intents', exact: true }).getAttribute('aria-current'), 'page');
    const all = await listAll();
    assert.equal(all.length, data.total);
    assert.deepEqual(await listedIds(), all, 'every intent, in intent ID order');
    const api41 = (await api('GET', `/v1/intents/${data.succeeded}`)).body;
    const row = rows().filter({ has: page.getByRole('link', { name: data.succeeded, exact: true }) });
    const text = await row.innerText();
    for (const part of ['invoice.charge', 'succeeded', '2 / 5', api41.updated_at]) assert.ok(text.includes(part), `row shows ${part}: ${text}`);
    const failedRow = await rows().filter({ has: page.getByRole('link', { name: data.failed, exact: true }) }).innerText();
    assert.ok(failedRow.includes('failed') && failedRow.includes('card_declined') && failedRow.includes('1 / 5'), failedRow);
    // An ID with markup is a link whose text is the ID itself.
    await page.getByRole('link', { name: data.released, exact: true }).waitFor();
    assert.equal(await page.locator('table script').count(), 0);
    await page.getByText('Last page.').waitFor();
    await checkPage('11-intents');
  });

  it('filters by status', async () => {
    await page.getByLabel('Status').selectOption('failed');
    await page.getByRole('button', { name: 'Apply filters' }).click();
    await page.waitForURL((u) => u.pathname === '/console/intents' && u.searchParams.get('status') === 'failed');
    await waitForList();
    const expected = await listAll({ status: 'failed' });
    assert.deepEqual(expected, ['inv_2026_0042', 'rep_03', 'rep_06', 'rep_09', 'rep_12']);
    assert.deepEqual(await listedIds(), expected);
    for (const t of await rows().allInnerTexts()) assert.match(t, /\bfailed\b/);
  });

  it('filters by action, and by both', async () => {
    await page.goto(`${tally.base}/console/intents`);
    await waitForList();
    await page.getByLabel('Action', { exact: true }).fill('email.send');
    await page.getByRole('button', { name: 'Apply filters' }).click();
    await page.waitForURL((u) => u.searchParams.get('action') === 'email.send' && !u.searchParams.has('status'));
    await waitForList();
    assert.deepEqual(await listedIds(), await listAll({ action: 'email.send' }));
    assert.deepEqual((await listedIds()).sort(), [data.released, data.mail].sort());

    await page.getByLabel('Status').selectOption('released');
    await page.getByRole('button', { name: 'Apply filters' }).click();
    await page.waitForURL((u) => u.searchParams.get('action') === 'email.send' && u.searchParams.get('status') === 'released');
    await waitForList();
    assert.deepEqual(await listedIds(), [data.released]);

    await page.goto(`${tally.base}/console/intents?action=no.such.action`);
    await page.getByText('No intents match these filters.').waitFor();
  });

  it('pages through a filtered list, each page filled by following next_after', async () => {
    // The first three intents by ID are succeeded, failed, claimed: the
    // server's first page of 3 holds one succeeded intent, the console's three.
    await page.goto(`${tally.base}/console/intents?status=succeeded&limit=3`);
    await waitForList();
    const expected = await listAll({ status: 'succeeded' });
    assert.equal(expected.length, 10);
    const seenIds = [];
    for (let i = 0; i < 10; i += 1) {
      await waitForList();
      const ids = await listedIds();
      assert.ok(ids.length <= 3, `a page of at most 3: ${ids}`);
      if (i === 0) assert.equal(ids.length, 3, 'the first page is filled');
      seenIds.push(...ids);
      const next = page.getByRole('link', { name: 'Next page' });
      if (!(await next.count())) break;
      const before = page.url();
      await next.click();
      await page.waitForURL((u) => u.toString() !== before && u.searchParams.has('after'));
      assert.equal(new URL(page.url()).searchParams.get('status'), 'succeeded', 'the filter is kept');
      await page.getByRole('link', { name: 'First page' }).waitFor();
    }
    assert.deepEqual(seenIds, expected);
    await page.getByText('Last page.').waitFor();
  });

  it('shows a succeeded intent: params, result and its history, each change linked to its entry', async () => {
    await page.goto(`${tally.base}/console/intents?action=invoice.charge`);
    await waitForList();
    await page.getByRole('link', { name: data.succeeded, exact: true }).click();
    await page.getByRole('heading', { name: `Intent ${data.succeeded}`, level: 1 }).waitFor();
    await page.waitForURL((u) => u.pathname === '/console/intent' && u.searchParams.get('id') === data.succeeded);
    assert.equal(await page.getByRole('link', { name: 'Intents', exact: true }).getAttribute('aria-current'), 'page');
    const x = (await api('GET', `/v1/intents/${data.succeeded}`)).body;
    assert.equal(x.status, 'succeeded');
    const history = page.getByRole('table', { name: /History of inv_2026_0041/ });
    await history.waitFor();
    assert.equal(await page.locator('#intent-fence').innerText(), '2');
    const state = await page.locator('section[aria-labelledby="h-intent-state"]').innerText();
    assert.ok(state.includes('2 of 5') && state.includes('no live lease'), state);
    // Params and result: the JSON as text; the markup in them is not markup.
    const params = await page.locator('section[aria-labelledby="h-intent-params"] pre').innerText();
    assert.deepEqual(JSON.parse(params), x.params);
    const result = await page.locator('section[aria-labelledby="h-intent-outcome"] pre').innerText();
    assert.deepEqual(JSON.parse(result), x.result);
    assert.equal(await page.locator('main pre b, main pre i').count(), 0);

    const trs = history.locator('tbody tr');
    assert.equal(await trs.count(), 4);
    assert.deepEqual(x.history.map((c) => c.type), ['claimed', 'released', 'claimed', 'succeeded']);
    for (const [i, c] of x.history.entries()) {
      const cells = await trs.nth(i).locator('td').allInnerTexts();
      assert.equal(cells[0], c.type);
      assert.ok(cells[1].includes(c.at), `change ${i} at ${c.at}: ${cells[1]}`);
      assert.deepEqual(cells.slice(2, 5), [String(c.fence), String(c.attempt), String(c.seq)]);
      assert.equal(await trs.nth(i).getByRole('link', { name: c.entry_id }).getAttribute('href'), `/console/entry?id=${c.entry_id}`);
    }
    await checkPage('12-intent-succeeded');

    // The outcome's entry in the log, and back to the intent from it.
    const last = x.history[3];
    await trs.nth(3).getByRole('link', { name: last.entry_id }).click();
    await page.getByRole('heading', { name: `Entry ${last.entry_id}`, level: 1 }).waitFor();
    assert.ok((await page.locator('dl.kv').last().innerText()).includes('intent_succeeded'));
    await page.getByRole('link', { name: data.succeeded, exact: true }).click();
    await page.getByRole('heading', { name: `Intent ${data.succeeded}`, level: 1 }).waitFor();
  });

  it('shows a failed intent with its error as text and its history', async () => {
    await page.goto(`${tally.base}/console/intents?status=failed`);
    await waitForList();
    await page.getByRole('link', { name: data.failed, exact: true }).click();
    await page.getByRole('heading', { name: `Intent ${data.failed}`, level: 1 }).waitFor();
    const x = (await api('GET', `/v1/intents/${data.failed}`)).body;
    await page.locator('#intent-error-message').waitFor();
    assert.equal(await page.locator('#intent-error-code').innerText(), 'card_declined');
    assert.equal(await page.locator('#intent-error-message').innerText(), XSS_MESSAGE);
    const outcome = await page.locator('section[aria-labelledby="h-intent-outcome"]').innerText();
    assert.ok(outcome.includes('card_declined') && outcome.includes(XSS_MESSAGE), outcome);
    assert.equal(await page.locator('main img, main script').count(), 0, 'the message made no element');
    assert.equal(await page.evaluate(() => window.__tallyXss), undefined, 'the message ran no script');

    const trs = page.getByRole('table', { name: /History of inv_2026_0042/ }).locator('tbody tr');
    assert.equal(await trs.count(), 2);
    assert.deepEqual(x.history.map((c) => c.type), ['claimed', 'failed']);
    for (const [i, c] of x.history.entries()) {
      const cells = await trs.nth(i).locator('td').allInnerTexts();
      assert.equal(cells[0], c.type);
      assert.deepEqual(cells.slice(2, 5), [String(c.fence), String(c.attempt), String(c.seq)]);
      await trs.nth(i).getByRole('link', { name: c.entry_id }).waitFor();
    }
    await checkPage('13-intent-failed');
  });

  it('shows a claimed intent with its lease expiry, and an ID with markup as text', async () => {
    await page.goto(`${tally.base}/console/intent?id=${data.claimed}`);
    const x = (await api('GET', `/v1/intents/${data.claimed}`)).body;
    assert.ok(x.lease_expires_at);
    const state = page.locator('section[aria-labelledby="h-intent-state"]');
    await state.waitFor();
    assert.ok((await state.innerText()).includes(x.lease_expires_at));
    await page.getByText('None yet: a worker holds the lease.').waitFor();

    await page.goto(`${tally.base}/console/intents?action=email.send`);
    await waitForList();
    await page.getByRole('link', { name: data.released, exact: true }).click();
    await page.getByRole('heading', { name: `Intent ${data.released}`, level: 1 }).waitFor();
    await page.getByText('Last attempt released:').waitFor();
    assert.equal(await page.locator('main script').count(), 0);
    assert.equal(await page.locator('main h1').innerText(), `Intent ${data.released}`);

    await page.goto(`${tally.base}/console/intent?id=no_such_intent`);
    await page.locator('main .message').waitFor();
  });

  it('never put the key in a URL and broke no CSP rule', () => {
    const secret = tally.keys.read.replace(/^tally_/, '');
    assert.ok(seen.urls.length > 10, 'URLs were collected');
    for (const u of seen.urls) assert.ok(!u.includes(secret) && !decodeURIComponent(u).includes(secret), `key in URL ${u}`);
    const { stdout, stderr } = tally.logs();
    assert.ok(!stdout.includes(secret) && !stderr.includes(secret), 'key in server output');
    assert.deepEqual(seen.errors.filter((e) => /Content Security Policy|pageerror/i.test(e)), []);
  });
});
