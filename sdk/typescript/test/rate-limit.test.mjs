// Scenario 4: a 429 with Retry-After is honoured. The server allows one
// request per second per key (burst 1); the second request, sent at once,
// gets 429 `rate_limited` with `Retry-After`, and the client waits at least
// that long before it succeeds.

import { it } from "node:test";
import assert from "node:assert/strict";
import { RateLimited, TallyClient } from "../dist/index.js";
import { forEachEngine, uid } from "./helpers/tally.mjs";

forEachEngine("rate limit", { serveArgs: ["--rate-limit-per-second", "1", "--rate-limit-burst", "1"] }, (server) => {
  it("scenario 4: the client waits at least Retry-After after a 429, then succeeds", async () => {
    const { apiKey } = await server().createKey();
    const retries = [];
    const client = new TallyClient({ baseUrl: server().baseUrl, apiKey, onRetry: (event) => retries.push(event) });

    const first = await client.postUsageDebit({ usage_record_id: uid("ur"), account: "cust_rl", amount: "1", unit: "USD" });
    assert.equal(first.attempts, 1, "the first request takes the only token");

    const started = performance.now();
    const second = await client.postUsageDebit({ usage_record_id: uid("ur"), account: "cust_rl", amount: "2", unit: "USD" });
    const elapsed = performance.now() - started;

    assert.equal(second.status, 201);
    assert.equal(second.replayed, false);
    assert.ok(second.attempts >= 2, `retried after the 429 (attempts: ${second.attempts})`);
    assert.ok(retries.length >= 1, "onRetry saw the 429");
    const limited = retries[0].error;
    assert.ok(limited instanceof RateLimited, `got ${limited}`);
    assert.equal(limited.status, 429);
    assert.equal(limited.code, "rate_limited");
    assert.ok(limited.retryAfterMs >= 1000, `Retry-After was read (${limited.retryAfterMs} ms)`);
    for (const event of retries) {
      assert.ok(event.delayMs >= event.error.retryAfterMs, "every wait honours its Retry-After");
    }
    assert.ok(elapsed >= limited.retryAfterMs, `waited ${elapsed.toFixed(0)} ms ≥ Retry-After ${limited.retryAfterMs} ms`);
    assert.ok(elapsed < 10_000, `and not much longer (${elapsed.toFixed(0)} ms)`);

    // The ledger holds both debits, once each: the 429 committed nothing.
    const page = await client.listEntries({ account: "cust_rl" });
    assert.deepEqual(page.entries.map((e) => e.amount), ["1", "2"]);
  });
});
