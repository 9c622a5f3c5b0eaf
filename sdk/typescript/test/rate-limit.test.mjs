// Scenario 4: a 429 with Retry-After is honoured. The server allows one
// request per second per key (burst 1); the second request, sent at once,
// gets 429 `rate_limited` with `Retry-After`, and the client waits at least
// that long before it succeeds. A budget shorter than Retry-After gives up
// at once, with a terminal error.

import { it } from "node:test";
import assert from "node:assert/strict";
import { RateLimited, RetriesExhausted, TallyClient } from "../dist/index.js";
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

  it("a Retry-After beyond the time budget: RetriesExhausted at once, nothing posted", async () => {
    const { apiKey } = await server().createKey();
    const patient = new TallyClient({ baseUrl: server().baseUrl, apiKey });
    await patient.postUsageDebit({ usage_record_id: uid("ur"), account: "cust_rb", amount: "1", unit: "USD" });

    // One attempt only: the 429 itself, with its Retry-After.
    const request = { usage_record_id: uid("ur"), account: "cust_rb", amount: "2", unit: "USD" };
    const once = new TallyClient({ baseUrl: server().baseUrl, apiKey, retry: { maxAttempts: 1 } });
    const limited = await once.postUsageDebit(request).catch((e) => e);
    assert.ok(limited instanceof RetriesExhausted, `got ${limited}`);
    assert.equal(limited.reason, "max_attempts");
    assert.equal(limited.attempts, 1);
    assert.ok(limited.lastError instanceof RateLimited, `last error ${limited.lastError}`);
    assert.equal(limited.status, 429);
    assert.equal(limited.code, "rate_limited");
    assert.ok(limited.lastError.retryAfterMs >= 1000, `Retry-After ${limited.lastError.retryAfterMs} ms`);

    // A budget shorter than the Retry-After: no retry starts, no sleeping first.
    const short = new TallyClient({ baseUrl: server().baseUrl, apiKey, retry: { maxAttempts: 5, totalBudgetMs: 300 } });
    const started = performance.now();
    const error = await short.postUsageDebit(request).catch((e) => e);
    const elapsed = performance.now() - started;
    assert.ok(error instanceof RetriesExhausted, `got ${error}`);
    assert.equal(error.reason, "time_budget");
    assert.equal(error.attempts, 1);
    assert.ok(error.lastError instanceof RateLimited);
    assert.ok(elapsed < 900, `gave up at once (${elapsed.toFixed(0)} ms), not after Retry-After`);

    // The 429s committed nothing (this read waits out the limit itself).
    const page = await patient.listEntries({ account: "cust_rb" });
    assert.deepEqual(page.entries.map((e) => e.amount), ["1"]);
  });
});
