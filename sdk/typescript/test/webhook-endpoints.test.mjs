// The webhook operations end to end, on each engine: a server started with
// --webhook-allow-insecure delivers to a local receiver, which verifies
// each delivery with verifyWebhook and the secret postWebhookEndpoint and
// rotateWebhookSecret returned; the deliveries API shows the attempts; a
// disabled endpoint's pending delivery waits until it is enabled.

import { it } from "node:test";
import assert from "node:assert/strict";
import { TallyClient, WebhookVerificationError, verifyWebhook } from "../dist/index.js";
import { forEachEngine, uid } from "./helpers/tally.mjs";
import { startStub } from "./helpers/net.mjs";

forEachEngine("webhook endpoints", { serveArgs: ["--webhook-allow-insecure", "--webhook-poll-ms", "50"] }, (server) => {
  it("a delivery is signed with the endpoint's secret, and a retry after a rotation with both", async (t) => {
    const receiver = await startStub(() => ({ status: 204 }));
    t.after(receiver.close);
    const { apiKey } = await server().createKey();
    const client = new TallyClient({ baseUrl: server().baseUrl, apiKey });
    const account = uid("cust");

    const endpoint = await client.postWebhookEndpoint({ url: `${receiver.baseUrl}/hooks`, event_types: ["entry.posted"] });
    const payment = await client.postPayment({ payment_id: uid("pay"), account, amount: "12.50", unit: "USD" });
    await waitFor(() => receiver.requests.length >= 1, "the first delivery");
    const [first] = receiver.requests;
    assert.equal(first.method, "POST");
    assert.equal(first.url, "/hooks");
    const event = verifyWebhook(first.body, first.headers, endpoint.secret);
    assert.equal(event.type, "entry.posted");
    assert.equal(event.seq, payment.entry.seq);
    assert.equal(event.data.entry.id, payment.entry.id);
    assert.equal(event.data.entry.amount, "12.5", "money stays a decimal string");

    const delivered = await waitForDelivery(client, endpoint.id, (d) => d.status === "delivered");
    assert.equal(delivered.event_id, first.headers["webhook-id"]);
    assert.deepEqual(delivered.attempts.map((a) => [a.attempt, a.outcome, a.http_status]), [[1, "delivered", 204]]);
    assert.deepEqual(delivered.event, JSON.parse(first.body), "the event exactly as sent");

    const rotated = await client.rotateWebhookSecret(endpoint.id);
    const retried = await client.retryWebhookDelivery(delivered.id);
    assert.equal(retried.status, "pending");
    await waitFor(() => receiver.requests.length >= 2, "the retried delivery");
    const second = receiver.requests[1];
    assert.equal(second.headers["webhook-id"], first.headers["webhook-id"], "a retry keeps the event id");
    assert.equal(verifyWebhook(second.body, second.headers, rotated.secret).id, event.id, "signed with the new secret");
    assert.equal(verifyWebhook(second.body, second.headers, endpoint.secret).id, event.id, "and the old one, during the grace period");
    assert.throws(() => verifyWebhook(second.body, second.headers, `whsec_${Buffer.alloc(32, 7).toString("base64")}`), WebhookVerificationError);
    const twice = await waitForDelivery(client, endpoint.id, (d) => d.id === delivered.id && d.attempts.length === 2 && d.status === "delivered");
    assert.equal(twice.attempts[1].outcome, "delivered");

    // Disabled: a delivery made pending again waits until the endpoint is enabled.
    const disabled = await client.patchWebhookEndpoint(endpoint.id, { enabled: false });
    assert.equal(disabled.disabled_reason, "disabled");
    const waiting = await client.retryWebhookDelivery(delivered.id);
    assert.equal(waiting.status, "pending");
    await new Promise((r) => setTimeout(r, 500));
    assert.equal(receiver.requests.length, 2, "nothing sent while disabled");
    const enabled = await client.patchWebhookEndpoint(endpoint.id, { enabled: true });
    assert.equal(enabled.disabled_reason, null);
    await waitFor(() => receiver.requests.length >= 3, "the delivery that waited");
    assert.equal(receiver.requests[2].headers["webhook-id"], event.id);
    await client.deleteWebhookEndpoint(endpoint.id);
  });
});

async function waitFor(predicate, what) {
  const deadline = Date.now() + 15_000;
  while (!predicate()) {
    if (Date.now() > deadline) assert.fail(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

async function waitForDelivery(client, endpointId, predicate, query = {}) {
  const deadline = Date.now() + 15_000;
  for (;;) {
    const page = await client.listWebhookDeliveries(endpointId, query);
    const found = page.deliveries.find(predicate);
    if (found) return found;
    if (Date.now() > deadline) assert.fail(`no matching delivery: ${JSON.stringify(page.deliveries)}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}
