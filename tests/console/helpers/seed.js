// Seeds the ledger through the HTTP API: settings with alerts, payments,
// metered usage over several days, a reversal, a refund, a hold, a stored
// rejection, and filler accounts for the search. Returns what the tests need
// (ids and the statement period [t1, t2) with a non-zero opening balance).
import assert from 'node:assert/strict';
import { client } from './tally.js';

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const day = (daysAgo, hour = 10) => {
  const d = new Date(Date.now() - daysAgo * 86_400_000);
  d.setUTCHours(hour, 0, 0, 0);
  return d.toISOString().replace('.000Z', 'Z');
};

export async function seed(apiBase, adminKey) {
  const call = client(apiBase, adminKey);
  const ok = async (method, p, body, expect = [200, 201]) => {
    const r = await call(method, p, body);
    assert.ok(expect.includes(r.status), `${method} ${p} -> ${r.status} ${JSON.stringify(r.body)}`);
    return r.body;
  };

  await ok('PUT', '/v1/accounts/cust_alpha', { unit: 'USD', overdraft: { limit: '50' }, alerts: { low_balance: '5' }, metadata: { plan: 'pro' } });
  await ok('PUT', '/v1/accounts/cust_beta', { unit: 'USD', overdraft: 'forbid' });

  const filler = [];
  for (let i = 1; i <= 40; i += 1) {
    filler.push({ type: 'payment', payment_id: `pay_fill_${i}`, account: `cust_${String(i).padStart(4, '0')}`, amount: `${i}.${String(i).padStart(2, '0')}`, unit: 'USD' });
  }
  filler.push({ type: 'payment', payment_id: 'pay_eur_1', account: 'acct_eu_1', amount: '12.3456', unit: 'EUR' });
  await ok('POST', '/v1/batch', { operations: filler });

  const pay1 = await ok('POST', '/v1/payments', { payment_id: 'pay_alpha_1', account: 'cust_alpha', amount: '100.00', unit: 'USD', processor: 'stripe', occurred_at: day(6, 8) });
  const usage = [
    ['ur_alpha_1', '0.0125', 'llm-tokens', '1250', 5],
    ['ur_alpha_2', '1.333333333333333333', 'llm-tokens', '133333', 4],
    ['ur_alpha_3', '2.5', 'llm-tokens', '250000', 3],
    ['ur_alpha_4', '0.0001', 'llm-tokens', '10', 3],
    ['ur_alpha_5', '3.10', 'storage-gb', '31', 4],
    ['ur_alpha_6', '0.90', 'storage-gb', '9', 2],
  ];
  const debits = {};
  for (const [id, amount, meter, quantity, ago] of usage) {
    debits[id] = await ok('POST', '/v1/usage-debits', { usage_record_id: id, account: 'cust_alpha', amount, unit: 'USD', meter, quantity, occurred_at: day(ago), metadata: { model: 'm1' } });
  }
  const pay2 = await ok('POST', '/v1/payments', { payment_id: 'pay_alpha_2', account: 'cust_alpha', amount: '25.50', unit: 'USD', processor: 'stripe', occurred_at: day(2, 9) });

  await sleep(30);
  const t1 = new Date().toISOString();
  await sleep(30);

  const late = await ok('POST', '/v1/usage-debits', { usage_record_id: 'ur_alpha_7', account: 'cust_alpha', amount: '7.777777', unit: 'USD', meter: 'llm-tokens', quantity: '777777', occurred_at: day(1) });
  const reversal = await ok('POST', '/v1/reversals', { reversal_id: 'rev_alpha_1', entry_id: debits.ur_alpha_2.id, reason: 'usage recorded twice upstream' });
  const refund = await ok('POST', '/v1/refunds', { refund_id: 'ref_alpha_1', payment_id: 'pay_alpha_2', amount: '5.25', reason: 'goodwill' });
  await ok('POST', '/v1/holds', { hold_id: 'hold_alpha_1', account: 'cust_alpha', amount: '2.00', unit: 'USD', ttl_seconds: 3600 });
  await ok('PUT', '/v1/accounts/cust_alpha', { unit: 'USD', overdraft: { limit: '50' }, alerts: { low_balance: '10' }, metadata: { plan: 'pro' } });
  await ok('POST', '/v1/payments', { payment_id: 'pay_beta_1', account: 'cust_beta', amount: '1.00', unit: 'USD' });
  const rejectedAnswer = await call('POST', '/v1/usage-debits', { usage_record_id: 'ur_beta_1', account: 'cust_beta', amount: '5.00', unit: 'USD', meter: 'llm-tokens', quantity: '500' });
  const rejected = rejectedAnswer.body?.entry;
  assert.equal(rejected?.status, 'rejected', `expected a stored rejection, got ${rejectedAnswer.status} ${JSON.stringify(rejectedAnswer.body)}`);

  await sleep(1100);
  const t2 = new Date().toISOString();
  await sleep(50);
  return { t1, t2, pay1, pay2, refund, reversal, reversed: debits.ur_alpha_2, late, rejected, debits };
}
