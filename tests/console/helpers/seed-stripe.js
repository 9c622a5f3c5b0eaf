// Seeds Stripe events through the real delivery path: the integration is
// configured with the admin key, then events are POSTed to its endpoint
// path signed as Stripe signs them (`Stripe-Signature: t=…,v1=<hex
// HMAC-SHA256 of "<t>.<body>">`). One payment applied, one event of a type
// tally ignores (its type full of markup), a payment whose account is under
// another metadata key (unmapped until the key is fixed), and a refund that
// came before its payment (unmapped, waiting for it).
import assert from 'node:assert/strict';
import { createHmac } from 'node:crypto';
import { client } from './tally.js';

export const STRIPE_SECRET = 'whsec_console_test_5e2a';
export const XSS_TYPE = 'customer.<img src=x onerror="window.__tallyXss=3">';

function paymentEvent(id, pi, metadata, amount = 1999) {
  return {
    id, object: 'event', type: 'payment_intent.succeeded', created: 1733500000,
    data: { object: { id: pi, object: 'payment_intent', amount_received: amount, currency: 'usd', created: 1733499990, metadata, status: 'succeeded' } },
  };
}

function refundEvent(id, pi, refundId, amount) {
  return {
    id, object: 'event', type: 'charge.refunded', created: 1733500100,
    data: {
      object: {
        id: `ch_${pi}`, object: 'charge', amount: 1999, amount_refunded: amount, currency: 'usd', payment_intent: pi, status: 'succeeded',
        refunds: { object: 'list', has_more: false, data: [{ id: refundId, object: 'refund', amount, currency: 'usd', payment_intent: pi, status: 'succeeded' }] },
      },
    },
  };
}

/** POSTs `event` to `endpointPath` as Stripe does: signed, no API key. */
export async function deliver(apiBase, endpointPath, event, secret = STRIPE_SECRET) {
  const body = JSON.stringify(event);
  const t = Math.floor(Date.now() / 1000);
  const v1 = createHmac('sha256', secret).update(`${t}.${body}`).digest('hex');
  const res = await fetch(`${apiBase}${endpointPath}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'stripe-signature': `t=${t},v1=${v1}` },
    body,
  });
  return { status: res.status, body: await res.json() };
}

export async function seedStripe(apiBase, adminKey) {
  const admin = client(apiBase, adminKey);
  const put = await admin('PUT', '/v1/integrations/stripe', { signing_secrets: [STRIPE_SECRET], account_metadata_key: 'tally_account' });
  assert.equal(put.status, 200, JSON.stringify(put.body));
  const path = put.body.endpoint_path;
  const expect = async (event, status) => {
    const r = await deliver(apiBase, path, event);
    assert.equal(r.status, 200, `${event.id}: ${JSON.stringify(r.body)}`);
    assert.equal(r.body.status, status, `${event.id}: ${JSON.stringify(r.body)}`);
  };
  const ids = {
    applied: 'evt_a_payment',
    ignored: 'evt_b_customer',
    unmappedKey: 'evt_c_other_key',
    waiting: 'evt_d_refund_first',
  };
  await expect(paymentEvent(ids.applied, 'pi_s1', { tally_account: 'cust_stripe_1' }), 'applied');
  await expect({ id: ids.ignored, object: 'event', type: XSS_TYPE, created: 1733500000, data: { object: { id: 'cus_1', object: 'customer' } } }, 'ignored');
  await expect(paymentEvent(ids.unmappedKey, 'pi_s2', { customer_account: 'cust_stripe_2' }, 4200), 'unmapped');
  await expect(refundEvent(ids.waiting, 'pi_s9', 're_s9', 500), 'unmapped');
  return { ids, endpointPath: path, waitingFor: 'pi_s9' };
}
