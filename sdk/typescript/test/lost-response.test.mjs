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
});
