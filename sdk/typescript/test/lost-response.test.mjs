// Scenario 5: the answer is lost after the server committed. A proxy
// forwards the POST to tally, reads its whole answer, then destroys the
// client's socket without sending a byte (the first time only). The client
// sees a connection error, retries with the same bytes, and gets the
// original entry as a replay; the ledger holds it exactly once.

import { it } from "node:test";
import assert from "node:assert/strict";
import { TallyClient, TransportError } from "../dist/index.js";
import { startLossyProxy } from "./helpers/net.mjs";
import { forEachEngine, uid } from "./helpers/tally.mjs";

forEachEngine("lost response", {}, (server) => {
  it("scenario 5: a retry after a lost answer returns the original entry, recorded once", async (t) => {
    const { apiKey } = await server().createKey();
    const proxy = await startLossyProxy(server().baseUrl, (req, _answer, count) => req.method === "POST" && count === 1);
    t.after(proxy.close);
    const retries = [];
    const client = new TallyClient({ baseUrl: proxy.baseUrl, apiKey, onRetry: (event) => retries.push(event) });
    const debit = { usage_record_id: uid("ur"), account: "cust_lost", amount: "0.75", unit: "USD", meter: "calls", quantity: "3" };

    const result = await client.postUsageDebit(debit);

    // What the server answered the first time, which the client never saw.
    const [dropped, delivered] = proxy.log;
    assert.equal(dropped.dropped, true);
    assert.equal(dropped.status, 201, "the first attempt was committed");
    const original = JSON.parse(dropped.body);

    assert.equal(retries.length, 1);
    assert.ok(retries[0].error instanceof TransportError, `got ${retries[0].error}`);
    assert.equal(retries[0].error.timeout, false);
    assert.equal(result.attempts, 2);
    assert.equal(result.status, 200);
    assert.equal(result.replayed, true, "the retry is a replay");
    assert.equal(result.entry.id, original.id, "the very entry the lost answer carried");
    assert.equal(result.body, dropped.body, "byte for byte");
    assert.equal(delivered.dropped, false);

    const direct = new TallyClient({ baseUrl: server().baseUrl, apiKey });
    const entries = [];
    for await (const entry of direct.iterateEntries({ account: "cust_lost" })) entries.push(entry);
    assert.deepEqual(entries.map((e) => e.upstream_id), [debit.usage_record_id], "recorded exactly once");
    assert.equal((await direct.getBalance("cust_lost")).debits, "0.75", "charged once");
  });

  it("every mutation whose answer is lost is replayed into its original result, recorded once", async (t) => {
    const { apiKey } = await server().createKey();
    let dropNext = false;
    const proxy = await startLossyProxy(server().baseUrl, (req) => {
      if (!dropNext || req.method === "GET") return false;
      dropNext = false;
      return true;
    });
    t.after(proxy.close);
    const client = new TallyClient({ baseUrl: proxy.baseUrl, apiKey, retry: { baseDelayMs: 10, maxDelayMs: 40 } });
    const account = "cust_every";

    /** Calls `call` with the next mutation's answer dropped; checks the retry replayed it. */
    async function lost(name, call) {
      const before = proxy.log.length;
      dropNext = true;
      const result = await call();
      const [dropped, delivered, ...rest] = proxy.log.slice(before);
      assert.equal(dropped?.dropped, true, `${name}: the first answer was dropped`);
      assert.ok(dropped.status === 200 || dropped.status === 201, `${name}: the dropped attempt committed (${dropped.status})`);
      assert.equal(delivered?.dropped, false, `${name}: the retry was answered`);
      assert.deepEqual(rest, [], `${name}: two attempts, no more`);
      assert.equal(result.attempts ?? 2, 2, `${name}: attempts`);
      if (result.entry !== undefined && result.replayed !== undefined) {
        assert.equal(result.replayed, true, `${name}: the retry is a replay`);
        assert.equal(result.status, 200, `${name}: 200 on the replay`);
        assert.equal(result.entry.id, JSON.parse(dropped.body).id, `${name}: the original entry`);
        assert.equal(result.body, dropped.body, `${name}: byte for byte`);
      }
      return result;
    }

    const settings = await lost("putAccount", () => client.putAccount(account, { unit: "USD", metadata: { plan: "pro" } }));
    assert.equal(settings.settings_version, 1, "the retried PUT wrote the settings once");
    const paymentId = uid("pay");
    await lost("postPayment", () => client.postPayment({ payment_id: paymentId, account, amount: "100", unit: "USD" }));
    const debit = await lost("postUsageDebit", () => client.postUsageDebit({ usage_record_id: uid("ur"), account, amount: "1", unit: "USD" }));
    const holdId = uid("hold");
    await lost("postHold", () => client.postHold({ hold_id: holdId, account, amount: "10", unit: "USD", ttl_seconds: 300 }));
    await lost("postCapture", () => client.postCapture(holdId, { capture_id: uid("cap"), amount: "4" }));
    const releasedHold = uid("hold");
    await lost("postHold", () => client.postHold({ hold_id: releasedHold, account, amount: "2", unit: "USD", ttl_seconds: 300 }));
    await lost("postRelease", () => client.postRelease(releasedHold, { release_id: uid("rel") }));
    await lost("postRefund", () => client.postRefund({ refund_id: uid("re"), payment_id: paymentId, amount: "5" }));
    await lost("postReversal", () => client.postReversal({ reversal_id: uid("rev"), entry_id: debit.entry.id, reason: "billing error" }));
    await lost("postAdjustment", () => client.postAdjustment({ adjustment_id: uid("adj"), account, amount: "3", direction: "credit", reason: "credit" }));

    const batch = await lost("postBatch", () =>
      client.postBatch([
        { type: "usage_debit", usage_record_id: uid("ur"), account, amount: "2.5", unit: "USD" },
        { type: "payment", payment_id: uid("pay"), account, amount: "1", unit: "USD" },
      ]),
    );
    const droppedBatch = JSON.parse(proxy.log.at(-2).body);
    assert.deepEqual(droppedBatch.results.map((r) => r.status), [201, 201], "the lost batch had committed both");
    assert.deepEqual(batch.results.map((r) => [r.status, r.replayed]), [[200, true], [200, true]], "replayed item by item");
    assert.deepEqual(batch.results.map((r) => r.entry.id), droppedBatch.results.map((r) => r.entry.id));

    const direct = new TallyClient({ baseUrl: server().baseUrl, apiKey });
    const entries = [];
    for await (const entry of direct.iterateEntries({ account })) entries.push(entry);
    const ids = entries.map((e) => `${e.kind}:${e.upstream_id}`);
    assert.equal(new Set(ids).size, ids.length, `nothing recorded twice: ${ids.join(", ")}`);
    assert.equal(entries.filter((e) => e.kind === "account_settings").length, 1, "one settings entry");
    const balance = await direct.getBalance(account);
    // 100 − 1 − 4 (capture) − 5 (refund) + 1 (reversal) + 3 (adjustment) − 2.5 + 1 (batch)
    assert.equal(balance.posted, "92.5", "every amount moved exactly once");
    assert.equal(balance.held, "0");
  });
});
