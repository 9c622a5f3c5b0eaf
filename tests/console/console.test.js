// The acceptance flow of the finance console, in headless Debian Chromium
// against a real `tally serve`: sign in, find an account by search, read its
// balance, open a statement and check opening + movements = closing on the
// page, download its CSV and compare it with the API, open an entry and follow
// its chain link, run a verification, export, sign out. Every page gets an
// axe-core check and a screenshot (tests/console/screenshots/).
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import { startTally, client } from './helpers/tally.js';
import { seed } from './helpers/seed.js';
import { launch, openPage, axeCheck, screenshot } from './helpers/browser.js';
import * as decimal from './helpers/decimal.js';

let tally; let browser; let page; let seen; let data; let api;

async function checkPage(name) {
  await page.waitForLoadState('networkidle');
  await screenshot(page, name);
  const violations = await axeCheck(page);
  assert.deepEqual(violations, [], `axe: serious/critical violations on ${name}: ${JSON.stringify(violations, null, 2)}`);
}

function parseCsv(text) {
  const rows = []; let row = []; let cell = ''; let quoted = false;
  for (let i = 0; i < text.length; i += 1) {
    const c = text[i];
    if (quoted) {
      if (c === '"' && text[i + 1] === '"') { cell += '"'; i += 1; } else if (c === '"') quoted = false; else cell += c;
    } else if (c === '"') quoted = true;
    else if (c === ',') { row.push(cell); cell = ''; } else if (c === '\n') { row.push(cell.replace(/\r$/, '')); rows.push(row); row = []; cell = ''; } else cell += c;
  }
  if (cell !== '' || row.length) { row.push(cell); rows.push(row); }
  return rows;
}

async function downloadText(trigger) {
  const [download] = await Promise.all([page.waitForEvent('download'), trigger()]);
  return { name: download.suggestedFilename(), text: await readFile(await download.path(), 'utf8') };
}

const cellValue = (selector) => page.locator(selector).first().innerText();

describe('finance console (acceptance flow)', () => {
  before(async () => {
    tally = await startTally();
    api = client(tally.apiBase, tally.keys.admin);
    data = await seed(tally.apiBase, tally.keys.admin);
    // Usage summaries are a projection: wait until they caught up.
    for (let i = 0; i < 100; i += 1) {
      const u = await api('GET', '/v1/accounts/cust_alpha/usage');
      if (u.body.current_as_of_seq >= u.body.head_seq) break;
      await new Promise((r) => setTimeout(r, 100));
    }
    browser = await launch();
    ({ page, seen } = await openPage(browser));
    console.log(`# console served by ${tally.viaProxy ? 'the dev proxy (tally does not serve /console yet)' : 'tally serve'} at ${tally.base}`);
  });

  after(async () => {
    await browser?.close();
    await tally?.stop();
  });

  it('signs in with an API key', async () => {
    await page.goto(`${tally.base}/console`);
    await page.getByRole('heading', { name: 'Sign in', level: 1 }).waitFor();
    await checkPage('01-sign-in');
    await page.getByLabel('API key').fill('tally_not_a_real_key');
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByText('Unknown key').waitFor();
    await page.getByLabel('API key').fill(tally.keys.admin);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByRole('heading', { name: 'Accounts', level: 1 }).waitFor();
    assert.equal(await page.evaluate(() => sessionStorage.getItem('tally.console.key')), tally.keys.admin);
    assert.equal(await page.getByLabel('API key').count(), 0);
  });

  it('finds an account by search and reads its balance', async () => {
    await page.getByLabel('Search account IDs').fill('ALPHA');
    await page.getByRole('button', { name: 'Search' }).click();
    await page.waitForURL(/\/console\/accounts\?.*q=ALPHA/);
    const row = page.getByRole('row').filter({ has: page.getByRole('link', { name: 'cust_alpha', exact: true }) });
    await row.waitFor();
    assert.equal(await page.locator('table tbody tr').count(), 1, 'only cust_alpha matches "ALPHA"');
    const account = (await api('GET', '/v1/accounts/cust_alpha')).body;
    const text = await row.innerText();
    for (const figure of [account.balance.posted, account.balance.held, account.balance.available]) {
      assert.ok(text.includes(`${figure}`), `the row shows ${figure}: ${text}`);
    }
    await checkPage('02-accounts-search');

    // Paging: 43 accounts, pages of 25, so two pages in all.
    await page.goto(`${tally.base}/console/accounts?limit=25`);
    await page.getByRole('link', { name: 'Next page' }).click();
    await page.waitForURL(/after=/);
    await page.getByText('Last page.').waitFor();
    // Sorting sorts the page by the clicked column.
    await page.goto(`${tally.base}/console/accounts?q=cust_00&limit=1000`);
    await page.getByRole('button', { name: /^Posted/ }).click();
    await page.getByRole('button', { name: /^Posted/ }).click();
    await page.waitForURL(/sort=posted&dir=desc/);
    const firstPosted = await page.locator('table tbody tr').first().locator('td.num .value').first().innerText();
    assert.equal(firstPosted, '40.4');
    assert.equal(await page.locator('th[aria-sort="descending"]').count(), 1);
  });

  it('opens the account page with its balance now and at a time', async () => {
    await page.goto(`${tally.base}/console/accounts?q=alpha`);
    await page.getByRole('link', { name: 'cust_alpha', exact: true }).click();
    await page.getByRole('heading', { name: 'Account cust_alpha', level: 1 }).waitFor();
    const account = (await api('GET', '/v1/accounts/cust_alpha')).body;
    const now = page.locator('section[aria-labelledby="h-now"]');
    await now.getByRole('table').waitFor();
    for (const [label, key] of [['Posted', 'posted'], ['Held', 'held'], ['Available', 'available']]) {
      const value = await now.locator(`tr:has(th:text-is("${label}")) .value`).innerText();
      assert.equal(value, account.balance[key], `${label} now`);
    }
    assert.equal(account.balance.held, '2');
    // Balance at t1 (before the second half of the seed).
    await page.getByLabel('As of (UTC, RFC 3339)').fill(data.t1);
    await page.getByRole('button', { name: 'Show balance' }).click();
    await page.waitForURL(/as_of=/);
    const at = (await api('GET', `/v1/accounts/cust_alpha/balance?as_of=${encodeURIComponent(data.t1)}`)).body;
    const asOf = page.locator('section[aria-labelledby="h-asof"]');
    assert.equal(await asOf.locator('tr:has(th:text-is("Posted")) .value').innerText(), at.posted);
    // Settings and their history: two versions.
    const history = page.getByRole('table', { name: /Settings history of cust_alpha/ });
    await history.waitFor();
    assert.equal(await history.locator('tbody tr').count(), 2);
    // Usage chart per meter (SVG with a text alternative, values printed).
    const chart = page.getByRole('img', { name: /Usage amount of llm-tokens per day in USD/ });
    await chart.waitFor();
    assert.ok((await chart.locator('text.value').allTextContents()).includes('2.5001'), 'a day of 2.5 + 0.0001 shows exactly 2.5001');
    await page.getByRole('img', { name: /storage-gb/ }).waitFor();
    await checkPage('03-account');
  });

  it('shows a statement whose opening + movements = closing, and its CSV matches the API', async () => {
    await page.getByLabel('From (UTC, inclusive)').fill(data.t1);
    await page.getByLabel('To (UTC, exclusive)').fill(data.t2);
    await page.getByRole('button', { name: 'Show statement' }).click();
    await page.waitForURL((u) => u.searchParams.get('from') === data.t1 && u.searchParams.get('to') === data.t2);
    await page.locator('#st-check').waitFor();
    const opening = await cellValue('#st-opening [data-figure="posted"] .value');
    const movement = await cellValue('#st-movements [data-figure="posted"] .value');
    const closing = await cellValue('#st-closing [data-figure="posted"] .value');
    assert.ok(!decimal.equal(opening, '0'), 'the period opens with a balance');
    assert.ok(decimal.equal(decimal.add(opening, movement), closing), `${opening} + ${movement} = ${closing}`);
    const changes = await page.locator('table.statement-entries td.posted-change .value').allInnerTexts();
    assert.ok(decimal.equal(decimal.add(opening, ...changes), closing), 'opening + every entry = closing');
    assert.match(await page.locator('#st-check').innerText(), /✓ Opening \+ movements = closing/);

    const st = (await api('GET', `/v1/accounts/cust_alpha/statement?from=${encodeURIComponent(data.t1)}&to=${encodeURIComponent(data.t2)}`)).body;
    assert.equal(closing, st.closing_balance.posted);
    assert.equal(opening, st.opening_balance.posted);
    assert.equal(changes.length, st.entries.length);
    const pageText = await page.locator('table.statement-entries').innerText();
    assert.ok(pageText.includes('1.333333333333333333'), 'the reversed amount shows all its digits');
    await checkPage('04-statement');

    const { name, text } = await downloadText(() => page.getByRole('button', { name: 'Download statement CSV' }).click());
    assert.match(name, /^statement_cust_alpha_.*\.csv$/);
    const [header, ...rows] = parseCsv(text).filter((r) => r.length > 1);
    assert.equal(rows.length, st.entries.length);
    rows.forEach((r, i) => {
      const rec = Object.fromEntries(header.map((k, j) => [k, r[j]]));
      const e = st.entries[i];
      for (const k of ['id', 'kind', 'status', 'upstream_id', 'amount', 'unit', 'balance_after', 'recorded_at', 'debit_account', 'credit_account', 'hash']) {
        assert.equal(rec[k], String(e[k]), `CSV row ${i} ${k}`);
      }
      assert.equal(rec.seq, String(e.seq));
      assert.equal(rec.rejection_code, e.rejection?.code ?? '');
    });
  });

  it('explores entries with filters, and opens an entry to follow its chain', async () => {
    await page.getByRole('link', { name: 'Entries' }).click();
    await page.getByRole('heading', { name: 'Entries', level: 1 }).waitFor();
    await page.getByLabel('Kind').selectOption('payment');
    await page.getByLabel('Account').fill('cust_alpha');
    await page.getByRole('button', { name: 'Apply filters' }).click();
    await page.waitForURL((u) => u.searchParams.get('kind') === 'payment' && u.searchParams.get('account') === 'cust_alpha');
    await page.getByRole('table', { name: /Entries/ }).waitFor();
    await page.locator('table tbody tr').first().waitFor();
    assert.equal(await page.locator('table tbody tr').count(), 2);
    await checkPage('05-entries');

    await page.getByRole('link', { name: String(data.pay2.seq), exact: true }).click();
    await page.getByRole('heading', { name: `Entry ${data.pay2.id}`, level: 1 }).waitFor();
    await page.getByText('Refunded by:').waitFor();
    assert.ok(await page.getByRole('link', { name: data.refund.id }).isVisible());
    await page.locator('.chain').waitFor();
    assert.equal(await page.getByText('✓ links').count(), 2, 'both neighbours link by hash');
    await checkPage('06-entry');

    const next = (await api('GET', `/v1/entries?after_seq=${data.pay2.seq}&limit=1`)).body.entries[0];
    await page.getByRole('link', { name: `Next entry (seq ${data.pay2.seq + 1}) →` }).click();
    await page.getByRole('heading', { name: `Entry ${next.id}`, level: 1 }).waitFor();
    await page.getByRole('link', { name: `← Previous entry (seq ${data.pay2.seq})` }).waitFor();
    // The chain link's prev_hash is the payment's hash.
    assert.ok((await page.locator('dl.kv').last().innerText()).includes(data.pay2.hash));

    await page.goto(`${tally.base}/console/entry?id=${data.reversed.id}`);
    await page.getByText('Reversed by').waitFor();
    assert.ok(await page.getByRole('link', { name: data.reversal.id }).first().isVisible());

    await page.goto(`${tally.base}/console/entry?id=${data.rejected.id}`);
    await page.getByText('Rejected:').waitFor();
    await page.getByText(data.rejected.rejection.message).first().waitFor();
    await checkPage('07-entry-rejected');
  });

  it('filters entries by status (rejected)', async () => {
    await page.goto(`${tally.base}/console/entries?status=rejected`);
    await page.getByRole('table', { name: /Entries/ }).waitFor();
    const rows = page.locator('table tbody tr');
    assert.equal(await rows.count(), 1);
    assert.ok((await rows.first().innerText()).includes('ur_beta_1'));
  });

  it('filters entries by upstream ID', async () => {
    await page.goto(`${tally.base}/console/entries?upstream_id=pay_alpha_2`);
    await page.getByRole('table', { name: /Entries/ }).waitFor();
    const rows = page.locator('table tbody tr');
    assert.equal(await rows.count(), 1);
    assert.ok((await rows.first().innerText()).includes('pay_alpha_2'));
  });

  it('shows the signed head and exports the log', async () => {
    await page.goto(`${tally.base}/console/accounts`);
    await page.getByRole('link', { name: 'Audit' }).click();
    await page.getByRole('heading', { name: 'Audit', level: 1 }).waitFor();
    await page.locator('#head-seq').waitFor();
    const head = (await api('GET', '/v1/audit/head')).body;
    assert.equal(await page.locator('#head-seq').innerText(), String(head.seq));
    assert.ok(head.signature, 'the test server signs');
    await page.getByText(head.signature.public_key).waitFor();
    await checkPage('08-audit');

    const { text } = await downloadText(() => page.getByRole('button', { name: 'Download CSV export' }).click());
    const fromApi = (await (await fetch(`${tally.apiBase}/v1/audit/export?format=csv&from_seq=1&to_seq=${head.seq}`, {
      headers: { authorization: `Bearer ${tally.keys.admin}` },
    })).text());
    const dataLines = (t) => t.split(/\r?\n/).filter((l) => l.startsWith('acme,'));
    assert.equal(dataLines(text).length, head.seq);
    assert.deepEqual(dataLines(text), dataLines(fromApi));
    const jsonl = await downloadText(() => page.getByRole('button', { name: 'Download JSONL export' }).click());
    assert.equal(jsonl.text.split('\n').filter((l) => l.includes('"record":"entry"')).length, head.seq);
  });

  it('cancels a verification that takes long', async () => {
    await page.goto(`${tally.base}/console/audit`);
    const held = async (route) => {
      await new Promise((r) => setTimeout(r, 5000));
      await route.continue().catch(() => {});
    };
    await page.route('**/v1/audit/verify', held);
    try {
      await page.getByRole('button', { name: 'Verify the chain on the server' }).click();
      await page.getByText(/Verifying…/).waitFor();
      const cancel = page.getByRole('button', { name: 'Cancel verification' });
      assert.ok(await cancel.isEnabled());
      await cancel.click();
      await page.getByText('Verification cancelled.').waitFor();
      assert.ok(await page.getByRole('button', { name: 'Verify the chain on the server' }).isEnabled());
    } finally {
      await page.unroute('**/v1/audit/verify', held);
    }
  });

  it('runs a verification of the chain on the server', async () => {
    await page.goto(`${tally.base}/console/audit`);
    await page.getByRole('button', { name: 'Verify the chain on the server' }).click();
    await page.locator('#verify-status, .message').first().waitFor();
    const problem = await page.locator('.message').count() ? await page.locator('.message').first().innerText() : '';
    assert.equal(problem, '', `no error message: ${problem}`);
    assert.equal(await page.locator('#verify-status').innerText(), 'verified');
    await checkPage('09-audit-verified');
  });

  it('signs out and forgets the key', async () => {
    await page.getByRole('button', { name: 'Sign out' }).click();
    await page.getByRole('heading', { name: 'Sign in', level: 1 }).waitFor();
    await page.getByText('You are signed out').waitFor();
    assert.equal(await page.evaluate(() => sessionStorage.length), 0);
    await page.goto(`${tally.base}/console/accounts?q=alpha`);
    await page.getByRole('heading', { name: 'Sign in', level: 1 }).waitFor();
  });

  it('never put the key in a URL or a server log, and broke no CSP rule', async () => {
    const key = tally.keys.admin;
    const secret = key.replace(/^tally_/, '');
    assert.ok(seen.urls.length > 20, 'URLs were collected');
    for (const u of seen.urls) assert.ok(!u.includes(secret) && !decodeURIComponent(u).includes(secret), `key in URL ${u}`);
    const { stdout, stderr } = tally.logs();
    assert.ok(!stdout.includes(secret) && !stderr.includes(secret), 'key in server output');
    const csp = seen.errors.filter((e) => /Content Security Policy|pageerror/i.test(e));
    assert.deepEqual(csp, []);
  });
});
