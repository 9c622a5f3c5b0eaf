// Seeds intents through the HTTP API (claim, complete, fail): one that
// succeeded after a retryable failure, one failed for good with an error
// message full of markup, one claimed, e-mails released and succeeded (one
// with markup in its ID), and report intents to page through. Returns the
// ids the tests open.
import assert from 'node:assert/strict';
import { client } from './tally.js';

export const XSS_MESSAGE = 'Declined <img src=x onerror="window.__tallyXss=1"> & "quoted" <script>window.__tallyXss=2</script>';

export async function seedIntents(apiBase, postKey) {
  const call = client(apiBase, postKey);
  const path = (id, op) => `/v1/intents/${encodeURIComponent(id)}${op ? `/${op}` : ''}`;
  const claim = async (intent_id, action, params, extra = {}) => {
    const r = await call('POST', '/v1/intents', { intent_id, action, params, lease_seconds: 600, max_attempts: 5, ...extra });
    assert.equal(r.status, 201, `claim ${intent_id} -> ${r.status} ${JSON.stringify(r.body)}`);
    return r.body.lease.token;
  };
  const complete = async (id, token, result) => {
    const r = await call('POST', path(id, 'complete'), { token, result });
    assert.equal(r.status, 200, `complete ${id} -> ${r.status} ${JSON.stringify(r.body)}`);
  };
  const fail = async (id, token, code, message, retryable) => {
    const r = await call('POST', path(id, 'fail'), { token, error: { code, message }, retryable });
    assert.equal(r.status, 200, `fail ${id} -> ${r.status} ${JSON.stringify(r.body)}`);
  };

  const succeeded = 'inv_2026_0041';
  const invoice = { customer: 'cust_41', amount: '49.00', currency: 'USD', memo: '<b>not bold</b>' };
  await fail(succeeded, await claim(succeeded, 'invoice.charge', invoice), 'gateway_timeout', 'no answer within 30 s', true);
  await complete(succeeded, await claim(succeeded, 'invoice.charge', invoice), { charge_id: 'ch_9f3', note: '<i>not italic</i>' });

  const failed = 'inv_2026_0042';
  await fail(failed, await claim(failed, 'invoice.charge', { customer: 'cust_42', amount: '12.00', currency: 'USD' }), 'card_declined', XSS_MESSAGE, false);

  const claimed = 'inv_2026_0043';
  await claim(claimed, 'invoice.charge', { customer: 'cust_43', amount: '7.50', currency: 'USD' }, { lease_seconds: 3600 });

  const released = 'mail_<script>alert(1)</script>';
  await fail(released, await claim(released, 'email.send', { template: 'welcome', to: 'eve@example.com' }), 'smtp_busy', '421 try later', true);
  const mail = 'mail_welcome_cust_42';
  await complete(mail, await claim(mail, 'email.send', { template: 'welcome', to: 'ada@example.com' }), { message_id: '<m-81@mail.example>' });

  for (let i = 1; i <= 12; i += 1) {
    const id = `rep_${String(i).padStart(2, '0')}`;
    const token = await claim(id, 'report.build', { month: `2026-${String(i).padStart(2, '0')}` });
    if (i % 3 === 0) await fail(id, token, 'no_data', `nothing recorded in month ${i}`, false);
    else await complete(id, token, { rows: i * 10 });
  }
  return { succeeded, failed, claimed, released, mail, total: 17 };
}
