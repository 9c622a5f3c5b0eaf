// Scenario 6 and the rest of the retry loop's edges: against a real
// `tally serve` that is then stopped (connection errors until the attempts
// or the time budget are spent, then a terminal RetriesExhausted), and
// against stub servers: final 4xx never retried, 503s until the limit,
// per-attempt timeouts retried, a caller's abort never retried.

import { describe, it, test } from "node:test";
import assert from "node:assert/strict";
import net from "node:net";
import {
  IdempotencyConflict,
  RetriesExhausted,
  TallyClient,
  TransportError,
  Unavailable,
} from "../dist/index.js";
import { problemReply, startStub } from "./helpers/net.mjs";
import { engines, startTally, uid } from "./helpers/tally.mjs";

const debit = { usage_record_id: "ur_terminal", account: "cust", amount: "1.50", unit: "USD" };

function client(baseUrl, retry, extra = {}) {
  return new TallyClient({ baseUrl, apiKey: "test-key", retry, ...extra });
}

test("503 with Retry-After: 0 every time: RetriesExhausted after exactly maxAttempts", async (t) => {
  const stub = await startStub(() => problemReply(503, "unavailable", {}, { "retry-after": "0" }));
  t.after(stub.close);
  const retries = [];
  const c = client(stub.baseUrl, { maxAttempts: 3, baseDelayMs: 10, maxDelayMs: 20 }, { onRetry: (e) => retries.push(e) });

  const error = await c.postUsageDebit(debit).then(
    () => assert.fail("expected RetriesExhausted"),
    (e) => e,
  );
  assert.ok(error instanceof RetriesExhausted, `got ${error}`);
  assert.equal(error.attempts, 3);
  assert.equal(error.reason, "max_attempts");
  assert.equal(stub.requests.length, 3, "the server saw exactly 3 attempts");
  assert.ok(error.lastError instanceof Unavailable);
  assert.equal(error.cause, error.lastError);
  assert.equal(error.status, 503);
  assert.equal(error.code, "unavailable");
  assert.equal(error.lastError.retryAfterMs, 0);
  assert.deepEqual(retries.map((e) => e.attempt), [1, 2], "onRetry before each retry, not after the last");
  assert.match(error.message, /gave up after 3 attempt\(s\).*attempt limit.*503 unavailable/);
  // Every attempt sent the same bytes: the same upstream ID, so a retry is a replay.
  const bodies = new Set(stub.requests.map((r) => r.body));
  assert.deepEqual([...bodies], [JSON.stringify(debit)]);
  assert.ok(stub.requests.every((r) => r.headers.authorization === "Bearer test-key"));
  const requestIds = new Set(stub.requests.map((r) => r.headers["x-request-id"]));
  assert.equal(requestIds.size, 1, "the attempts of one call share one X-Request-Id");
  assert.match([...requestIds][0], /^[0-9a-f-]{36}$/);
});

test("retry options override the defaults one by one", () => {
  const c = client("http://127.0.0.1:1", { maxAttempts: undefined, baseDelayMs: 5 });
  assert.equal(c.retryPolicy.maxAttempts, 8);
  assert.equal(c.retryPolicy.baseDelayMs, 5);
  assert.equal(c.retryPolicy.totalBudgetMs, 30_000);
  assert.throws(() => client("http://127.0.0.1:1", { maxAttempts: 0 }), RangeError);
});

test("the time budget: no retry starts once its wait would pass the budget", async (t) => {
  // Retry-After: 1 makes every wait 1 s; a 400 ms budget allows none.
  const stub = await startStub(() => problemReply(503, "unavailable", {}, { "retry-after": "1" }));
  t.after(stub.close);
  const c = client(stub.baseUrl, { maxAttempts: 10, totalBudgetMs: 400 });
  const started = performance.now();
  const error = await c.getHealthz().catch((e) => e);
  const elapsed = performance.now() - started;
  assert.ok(error instanceof RetriesExhausted, `got ${error}`);
  assert.equal(error.reason, "time_budget");
  assert.equal(error.attempts, 1);
  assert.equal(stub.requests.length, 1);
  assert.ok(elapsed < 400, `gave up at once instead of sleeping past the budget (${elapsed.toFixed(0)} ms)`);
});

test("the time budget with short waits: retries stop inside the budget", async (t) => {
  const stub = await startStub(() => problemReply(503, "unavailable", {}, { "retry-after": "0" }));
  t.after(stub.close);
  const budget = 600;
  // random() ≈ 1: every wait is its full cap of 100 ms.
  const c = client(stub.baseUrl, { maxAttempts: 100, baseDelayMs: 100, maxDelayMs: 100, totalBudgetMs: budget }, { random: () => 0.999 });
  const first = performance.now();
  const error = await c.getHealthz().catch((e) => e);
  assert.ok(error instanceof RetriesExhausted, `got ${error}`);
  assert.equal(error.reason, "time_budget");
  assert.equal(stub.requests.length, error.attempts);
  assert.ok(error.attempts >= 2 && error.attempts <= 7, `about budget/100 attempts, got ${error.attempts}`);
  // Slack for timer lateness and the request's own transit, not for another wait.
  const slack = 60;
  const lastStart = stub.requests.at(-1).at - first;
  assert.ok(lastStart <= budget + slack, `the last attempt started inside the budget (${lastStart.toFixed(0)} ms)`);
  assert.ok(error.elapsedMs <= budget + slack, `gave up without waiting past the budget (${error.elapsedMs.toFixed(0)} ms)`);
});

test("a final 4xx is thrown at once, never retried", async (t) => {
  const stub = await startStub(() =>
    problemReply(409, "idempotency_conflict", { entry_id: "ent_1", differing_fields: ["amount"] }),
  );
  t.after(stub.close);
  const c = client(stub.baseUrl, { maxAttempts: 5, baseDelayMs: 1 });
  const error = await c.postUsageDebit(debit).catch((e) => e);
  assert.ok(error instanceof IdempotencyConflict, `got ${error}`);
  assert.equal(stub.requests.length, 1);
  assert.equal(error.entryId, "ent_1");
  assert.deepEqual(error.differingFields, ["amount"]);
});

test("a refused connection is retried, then reported with its cause", async () => {
  // A port that was free a moment ago: nothing listens there.
  const port = await new Promise((resolvePort) => {
    const s = net.createServer().listen(0, "127.0.0.1", () => {
      const p = s.address().port;
      s.close(() => resolvePort(p));
    });
  });
  const retries = [];
  const c = client(`http://127.0.0.1:${port}`, { maxAttempts: 3, baseDelayMs: 5 }, { onRetry: (e) => retries.push(e) });
  const error = await c.getHealthz().catch((e) => e);
  assert.ok(error instanceof RetriesExhausted, `got ${error}`);
  assert.equal(error.attempts, 3);
  assert.ok(error.lastError instanceof TransportError);
  assert.equal(error.lastError.timeout, false);
  assert.match(error.lastError.message, /ECONNREFUSED/);
  assert.equal(retries.length, 2);
  assert.equal(error.status, undefined);
});

test("an attempt that takes longer than requestTimeoutMs is abandoned and retried", async (t) => {
  const stub = await startStub(() => null); // never answers
  t.after(stub.close);
  const c = client(stub.baseUrl, { maxAttempts: 2, baseDelayMs: 1, requestTimeoutMs: 150 });
  const started = performance.now();
  const error = await c.getHealthz().catch((e) => e);
  const elapsed = performance.now() - started;
  assert.ok(error instanceof RetriesExhausted, `got ${error}`);
  assert.ok(error.lastError instanceof TransportError);
  assert.equal(error.lastError.timeout, true);
  assert.equal(stub.requests.length, 2);
  assert.ok(elapsed >= 300 && elapsed < 2000, `two timeouts of 150 ms (${elapsed.toFixed(0)} ms)`);
});

test("a caller's abort ends the call during a wait, without another attempt", async (t) => {
  const stub = await startStub(() => problemReply(503, "unavailable", {}, { "retry-after": "5" }));
  t.after(stub.close);
  const c = client(stub.baseUrl, { maxAttempts: 5 });
  const controller = new AbortController();
  setTimeout(() => controller.abort(new Error("caller gave up")), 100);
  const error = await c.getHealthz({ signal: controller.signal }).catch((e) => e);
  assert.equal(error.message, "caller gave up");
  assert.equal(stub.requests.length, 1);
});

test("a success answer that is not JSON is a DecodeError, not retried", async (t) => {
  const stub = await startStub(() => ({ status: 200, headers: { "content-type": "text/html" }, body: "<html>" }));
  t.after(stub.close);
  const c = client(stub.baseUrl, { maxAttempts: 3 });
  const error = await c.getHealthz().catch((e) => e);
  assert.equal(error.name, "DecodeError");
  assert.equal(error.body, "<html>");
  assert.equal(stub.requests.length, 1);
});

for (const engine of engines()) {
  describe(`terminal error against a real server [${engine.name}]`, () => {
    it("scenario 6: once the server is gone, RetriesExhausted after the attempt limit, and after the time budget", async () => {
      const server = await startTally(engine);
      let running = true;
      try {
        const { apiKey } = await server.createKey();
        const quick = { baseDelayMs: 10, maxDelayMs: 40, requestTimeoutMs: 500 };
        const client = (baseUrl, retry, extra = {}) => new TallyClient({ baseUrl, apiKey, retry, ...extra });
        const live = client(server.baseUrl, { ...quick, maxAttempts: 4 });
        const request = { usage_record_id: uid("ur"), account: "cust_gone", amount: "1", unit: "USD" };
        const posted = await live.postUsageDebit(request);
        assert.equal(posted.status, 201);

        await server.stop();
        running = false;

        const retries = [];
        const gone = client(server.baseUrl, { ...quick, maxAttempts: 4 }, { onRetry: (e) => retries.push(e) });
        const error = await gone.postUsageDebit(request).then(
          () => assert.fail("expected RetriesExhausted"),
          (e) => e,
        );
        assert.ok(error instanceof RetriesExhausted, `got ${error}`);
        assert.equal(error.reason, "max_attempts");
        assert.equal(error.attempts, 4);
        assert.ok(error.lastError instanceof TransportError, `last error ${error.lastError}`);
        assert.equal(error.lastError.timeout, false);
        assert.equal(retries.length, 3, "a retry before each attempt but the first");
        assert.ok(retries.every((e) => e.error instanceof TransportError));
        assert.match(error.message, /gave up after 4 attempt\(s\)/);

        // The time budget bounds retrying as well as the attempt limit does.
        const budget = 300;
        const bounded = client(server.baseUrl, { ...quick, maxAttempts: 1000, totalBudgetMs: budget });
        const started = performance.now();
        const spent = await bounded.getBalance("cust_gone").catch((e) => e);
        const elapsed = performance.now() - started;
        assert.ok(spent instanceof RetriesExhausted, `got ${spent}`);
        assert.equal(spent.reason, "time_budget");
        assert.ok(spent.attempts > 1 && spent.attempts < 1000, `attempts: ${spent.attempts}`);
        assert.ok(spent.lastError instanceof TransportError);
        assert.ok(elapsed < budget + 500, `gave up near the budget (${elapsed.toFixed(0)} ms)`);
      } finally {
        if (running) await server.stop();
      }
    });
  });
}
