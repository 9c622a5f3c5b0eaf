// The Stripe integration's operations end to end, on each engine: the
// settings (admin; the secrets never come back), the events Stripe
// delivered (read), a reapply (post), the removal; each refusal as its
// error class. Events are delivered as Stripe delivers them, signed with
// `Stripe-Signature` (HMAC-SHA256 of "<t>.<body>"), so that the list has
// something in it. Then a stub: what the client sends for each operation.

import { it, test } from "node:test";
import assert from "node:assert/strict";
import { createHmac } from "node:crypto";
import { Forbidden, InvalidRequest, NotFound, TallyClient } from "../dist/index.js";
import { forEachEngine, uid } from "./helpers/tally.mjs";
import { startStub } from "./helpers/net.mjs";

const SECRET = "whsec_sdk_ts_7c21e9";

/** A `payment_intent.succeeded` event as Stripe sends it. */
function paymentEvent(eventId, pi, metadata) {
  return JSON.stringify({
    id: eventId,
    object: "event",
    type: "payment_intent.succeeded",
    created: 1733500000,
    data: {
      object: {
        id: pi, object: "payment_intent", amount_received: 1999, currency: "usd",
        created: 1733499990, metadata, status: "succeeded",
      },
    },
  });
}

/** POSTs `body` to the integration's path as Stripe does: signed, no API key. */
async function deliver(baseUrl, endpointPath, body, secret = SECRET) {
  const t = Math.floor(Date.now() / 1000);
  const v1 = createHmac("sha256", secret).update(`${t}.${body}`).digest("hex");
  const response = await fetch(`${baseUrl}${endpointPath}`, {
    method: "POST",
    headers: { "content-type": "application/json", "stripe-signature": `t=${t},v1=${v1}` },
    body,
  });
  return { status: response.status, body: await response.json() };
}

forEachEngine("stripe integration", {}, (server) => {
  it("configures, reads without secrets, lists and reapplies events, and removes the integration", async () => {
    const { apiKey } = await server().createKey({ scopes: "post,read,admin" });
    const client = new TallyClient({ baseUrl: server().baseUrl, apiKey });
    const account = uid("cust");

    await assert.rejects(client.getStripeIntegration(), NotFound, "nothing configured yet");
    const made = await client.putStripeIntegration({ signing_secrets: [SECRET], account_metadata_key: "tally_account" });
    assert.match(made.endpoint_path, /^\/v1\/ingest\/stripe\/sie_[0-9a-f]+$/);
    assert.equal(made.account_metadata_key, "tally_account");
    assert.equal(made.signing_secrets_count, 1);
    assert.ok(!JSON.stringify(made).includes("whsec_"), "the secret never comes back");
    const read = await client.getStripeIntegration();
    assert.deepEqual(read, made);

    // Replaced with a second secret: the same path.
    const rotated = await client.putStripeIntegration({ signing_secrets: [SECRET, "whsec_sdk_ts_next"], account_metadata_key: "tally_account" });
    assert.equal(rotated.endpoint_path, made.endpoint_path);
    assert.equal(rotated.signing_secrets_count, 2);

    assert.deepEqual(await client.listStripeEvents(), { events: [], next_after: null });

    // A payment delivered by Stripe: applied.
    const paid = await deliver(server().baseUrl, made.endpoint_path, paymentEvent("evt_ts_1", "pi_ts_1", { tally_account: account }));
    assert.equal(paid.status, 200);
    assert.equal(paid.body.status, "applied");
    const page = await client.listStripeEvents({ status: "applied" });
    assert.equal(page.events.length, 1);
    const [event] = page.events;
    assert.equal(event.event_id, "evt_ts_1");
    assert.equal(event.type, "payment_intent.succeeded");
    assert.equal(event.status, "applied");
    assert.equal(event.reason, null);
    assert.equal(event.waiting_for, null);
    assert.ok(Date.parse(event.received_at) > 0);
    assert.equal((await client.getBalance(account)).posted, "19.99");

    // Its account under another metadata key: unmapped until the key is fixed.
    const other = uid("cust");
    const unmapped = await deliver(server().baseUrl, made.endpoint_path, paymentEvent("evt_ts_2", "pi_ts_2", { customer_account: other }));
    assert.equal(unmapped.body.status, "unmapped");
    const waiting = await client.listStripeEvents({ status: "unmapped" });
    assert.deepEqual(waiting.events.map((e) => e.event_id), ["evt_ts_2"]);
    assert.match(waiting.events[0].reason, /tally_account/);
    assert.equal((await client.reapplyStripeEvent("evt_ts_2")).status, "unmapped", "still unmapped");
    await client.putStripeIntegration({ signing_secrets: [SECRET], account_metadata_key: "customer_account" });
    const fixed = await client.reapplyStripeEvent("evt_ts_2");
    assert.equal(fixed.event_id, "evt_ts_2");
    assert.equal(fixed.status, "applied");
    assert.equal(fixed.reason, null);
    assert.equal((await client.reapplyStripeEvent("evt_ts_2")).status, "applied", "a second reapply replays");
    assert.equal((await client.getBalance(other)).posted, "19.99");

    // Pages, and every page at once.
    const first = await client.listStripeEvents({ limit: 1 });
    assert.deepEqual(first.events.map((e) => e.event_id), ["evt_ts_1"]);
    assert.equal(first.next_after, "evt_ts_1");
    const all = [];
    for await (const e of client.iterateStripeEvents({ limit: 1 })) all.push(e.event_id);
    assert.deepEqual(all, ["evt_ts_1", "evt_ts_2"]);

    await assert.rejects(client.reapplyStripeEvent("evt_ts_unknown"), (error) => {
      assert.ok(error instanceof NotFound, String(error));
      assert.equal(error.status, 404);
      assert.equal(error.code, "not_found");
      return true;
    });

    // Removed: reads NotFound, Stripe's deliveries are refused, the events stay.
    await client.deleteStripeIntegration();
    await assert.rejects(client.getStripeIntegration(), NotFound);
    await assert.rejects(client.deleteStripeIntegration(), NotFound);
    const refused = await deliver(server().baseUrl, made.endpoint_path, paymentEvent("evt_ts_3", "pi_ts_3", { tally_account: account }));
    assert.equal(refused.status, 404);
    assert.equal((await client.listStripeEvents()).events.length, 2);
    await assert.rejects(client.reapplyStripeEvent("evt_ts_2"), InvalidRequest, "no integration to map with");
  });

  it("refuses invalid settings and keys without the scope, as typed errors", async () => {
    const { tenant, apiKey } = await server().createKey({ scopes: "admin" });
    const { apiKey: readKey } = await server().createKey({ tenant, scopes: "read" });
    const admin = new TallyClient({ baseUrl: server().baseUrl, apiKey });
    const reader = new TallyClient({ baseUrl: server().baseUrl, apiKey: readKey });

    await assert.rejects(admin.putStripeIntegration({ signing_secrets: ["not_a_secret"], account_metadata_key: "" }), (error) => {
      assert.ok(error instanceof InvalidRequest, String(error));
      const fields = error.errors.map((e) => e.field);
      assert.ok(fields.includes("signing_secrets") && fields.includes("account_metadata_key"), fields.join());
      assert.ok(!error.message.includes("not_a_secret"), "a secret is never echoed");
      return true;
    });
    await assert.rejects(admin.getStripeIntegration(), NotFound, "nothing was stored");
    await admin.putStripeIntegration({ signing_secrets: [SECRET], account_metadata_key: "tally_account" });

    await assert.rejects(reader.getStripeIntegration(), Forbidden);
    await assert.rejects(reader.putStripeIntegration({ signing_secrets: [SECRET], account_metadata_key: "k" }), Forbidden);
    await assert.rejects(reader.deleteStripeIntegration(), Forbidden);
    await assert.rejects(reader.reapplyStripeEvent("evt_1"), Forbidden, "a reapply needs post");
    await assert.rejects(admin.listStripeEvents(), Forbidden, "the events need read");
    assert.deepEqual((await reader.listStripeEvents()).events, []);
    await assert.rejects(reader.listStripeEvents({ limit: 0 }), InvalidRequest);
    assert.equal((await admin.getStripeIntegration()).account_metadata_key, "tally_account");
  });
});

test("what the Stripe operations send: methods, paths, encoded ids, the document's query parameters", async (t) => {
  const integration = { endpoint_path: "/v1/ingest/stripe/sie_1", account_metadata_key: "k", signing_secrets_count: 1, created_at: "2026-12-07T10:00:00Z", updated_at: "2026-12-07T10:00:00Z" };
  const event = { event_id: "evt/1 x", type: "charge.refunded", status: "applied", reason: null, waiting_for: null, received_at: "2026-12-07T10:00:00Z", updated_at: "2026-12-07T10:00:00Z" };
  const stub = await startStub((req) => {
    const json = (body, status = 200) => ({ status, headers: { "content-type": "application/json" }, body: JSON.stringify(body) });
    if (req.url.startsWith("/v1/integrations/stripe/events?") || req.url === "/v1/integrations/stripe/events") return json({ events: [event], next_after: null });
    if (req.url.endsWith("/reapply")) return json(event);
    if (req.method === "DELETE") return { status: 204 };
    return json(integration);
  });
  t.after(stub.close);
  const client = new TallyClient({ baseUrl: stub.baseUrl, apiKey: "k" });
  await client.putStripeIntegration({ signing_secrets: ["whsec_1"], account_metadata_key: "k" });
  await client.getStripeIntegration();
  await client.deleteStripeIntegration();
  await client.listStripeEvents({ status: "unmapped", after: "evt 0", limit: 5 });
  assert.deepEqual(await client.reapplyStripeEvent("evt/1 x"), event);
  await assert.rejects(client.listStripeEvents({ state: "unmapped" }), /unknown query parameter "state"/);
  await assert.rejects(client.reapplyStripeEvent(""), /path parameter event_id/);
  assert.deepEqual(stub.requests.map((r) => `${r.method} ${r.url}`), [
    "PUT /v1/integrations/stripe",
    "GET /v1/integrations/stripe",
    "DELETE /v1/integrations/stripe",
    "GET /v1/integrations/stripe/events?status=unmapped&after=evt%200&limit=5",
    "POST /v1/integrations/stripe/events/evt%2F1%20x/reapply",
  ]);
  assert.deepEqual(JSON.parse(stub.requests[0].body), { signing_secrets: ["whsec_1"], account_metadata_key: "k" });
  assert.equal(stub.requests[4].body, "", "a reapply sends no body");
});
