// Intents (docs/intents.md) against a real `tally serve`, on each engine:
// once() runs its step at most once per intent and stores the outcome
// (a result with its ledger entries, or a failure, retryable or final);
// heartbeats keep a long step's lease; another claim waits or is refused;
// lost answers to a claim and to a complete are retried into the right
// outcome; a stale worker's finish is refused (lease_lost). Then stubs:
// what the client retries and what it sends for the intent operations.

import { it, test } from "node:test";
import assert from "node:assert/strict";
import { setTimeout as delay } from "node:timers/promises";
import {
  IdempotencyConflict,
  IntentInProgress,
  LeaseLost,
  NotFound,
  RetryableStepError,
  StepResult,
  TallyClient,
  TransportError,
  Unavailable,
  stepResult,
} from "../dist/index.js";
import { stepError } from "../dist/intents.js";
import { problemReply, startLossyProxy, startStub } from "./helpers/net.mjs";
import { forEachEngine, uid } from "./helpers/tally.mjs";

/** A fetch that records `METHOD /path` of every attempt. */
function recordingFetch() {
  const seen = [];
  return {
    seen,
    fetch: (url, init) => {
      seen.push(`${init.method} ${new URL(url).pathname}`);
      return fetch(url, init);
    },
  };
}

async function allEntries(client, query) {
  const entries = [];
  for await (const entry of client.iterateEntries(query)) entries.push(entry);
  return entries;
}

forEachEngine("intents", {}, (server) => {
  async function newClient(options = {}) {
    const { apiKey } = await server().createKey();
    return new TallyClient({ baseUrl: server().baseUrl, apiKey, ...options });
  }

  it("a step that succeeds is stored; a second once() returns the stored result without calling the step", async () => {
    const client = await newClient();
    const intentId = uid("inv");
    const params = { customer: "cust_42", amount: "49.00", currency: "USD" };
    const leases = [];
    const outcome = await client.once(intentId, "invoice.charge", params, async (lease) => {
      leases.push({ ...lease });
      return { charge_id: "ch_9f3" };
    });
    assert.equal(leases.length, 1);
    const [lease] = leases;
    assert.equal(lease.intentId, intentId);
    assert.equal(lease.action, "invoice.charge");
    assert.deepEqual(lease.params, params);
    assert.equal(lease.attempt, 1);
    assert.equal(lease.fence, 1);
    assert.match(lease.token, /\S{16,}/);
    assert.ok(Date.parse(lease.expiresAt) > Date.now() + 50_000, `a 60 s lease by default (${lease.expiresAt})`);
    assert.equal(lease.signal.aborted, false);
    assert.equal(outcome.status, "succeeded");
    assert.equal(outcome.replayed, false);
    assert.deepEqual(outcome.result, { charge_id: "ch_9f3" });
    assert.deepEqual(outcome.entries, []);
    assert.equal(outcome.intent.status, "succeeded");

    const again = await client.once(intentId, "invoice.charge", params, () => assert.fail("the step ran twice"));
    assert.equal(again.status, "succeeded");
    assert.equal(again.replayed, true);
    assert.deepEqual(again.result, { charge_id: "ch_9f3" });
    assert.equal(again.intent.attempt, 1);

    const read = await client.getIntent(intentId);
    assert.equal(read.status, "succeeded");
    assert.deepEqual(read.result, { charge_id: "ch_9f3" });
    assert.deepEqual(read.history.map((h) => [h.type, h.fence]), [["claimed", 1], ["succeeded", 1]]);
    const listed = await client.listIntents({ status: "succeeded", action: "invoice.charge" });
    assert.deepEqual(listed.intents.map((i) => i.intent_id), [intentId]);

    // A step's plain value of any JSON type is the result; returning nothing stores null.
    assert.equal((await client.once(uid("n"), "count", {}, () => 42)).result, 42);
    assert.equal((await client.once(uid("v"), "noop", {}, () => {})).result, null);

    // The same intent ID with other params is a conflict, before any step.
    const conflict = await client.once(intentId, "invoice.charge", { ...params, amount: "50.00" }, () => assert.fail("ran")).catch((e) => e);
    assert.ok(conflict instanceof IdempotencyConflict, `got ${conflict}`);
    assert.deepEqual(conflict.differingFields, ["params.amount"]);
    assert.equal(conflict.intentId, intentId);
  });

  it("a RetryableStepError releases the intent; the next once() runs attempt 2 and succeeds", async () => {
    const client = await newClient();
    const intentId = uid("sum");
    const params = { document: "doc_771", model: "m1" };
    const overloaded = new RetryableStepError("429 from provider", { code: "model_overloaded" });
    const thrown = await client.once(intentId, "llm.summarize", params, () => { throw overloaded; }, { maxAttempts: 3 }).catch((e) => e);
    assert.equal(thrown, overloaded, "the step's own error is thrown again");
    const released = await client.getIntent(intentId);
    assert.equal(released.status, "released");
    assert.deepEqual(released.error, { code: "model_overloaded", message: "429 from provider" });
    assert.equal(released.max_attempts, 3);

    const attempts = [];
    const outcome = await client.once(intentId, "llm.summarize", params, (lease) => {
      attempts.push([lease.attempt, lease.fence, lease.maxAttempts]);
      return { summary: "renews yearly" };
    });
    assert.deepEqual(attempts, [[2, 2, 3]]);
    assert.equal(outcome.status, "succeeded");
    assert.equal(outcome.replayed, false);
    assert.equal(outcome.intent.attempt, 2);
    const read = await client.getIntent(intentId);
    assert.deepEqual(read.history.map((h) => [h.type, h.attempt]), [["claimed", 1], ["released", 1], ["claimed", 2], ["succeeded", 2]]);
  });

  it("any other error fails the intent for good: thrown once, then the stored failure, replayed", async () => {
    const client = await newClient();
    const intentId = uid("inv");
    const declined = Object.assign(new Error("insufficient funds on the card"), { code: "card_declined" });
    const thrown = await client.once(intentId, "invoice.charge", { invoice: "in_1" }, async () => { throw declined; }).catch((e) => e);
    assert.equal(thrown, declined);

    const again = await client.once(intentId, "invoice.charge", { invoice: "in_1" }, () => assert.fail("the step ran after a final failure"));
    assert.equal(again.status, "failed");
    assert.equal(again.replayed, true);
    assert.deepEqual(again.error, { code: "card_declined", message: "insufficient funds on the card" });
    assert.equal(again.result, undefined);
    assert.equal(again.intent.attempt, 1);
    const read = await client.getIntent(intentId);
    assert.deepEqual(read.history.map((h) => h.type), ["claimed", "failed"]);

    // An error without a code is stored under its name.
    const typeError = await client.once(uid("t"), "x", {}, () => { throw new TypeError("bad input"); }).catch((e) => e);
    assert.ok(typeError instanceof TypeError);
    const failed = (await client.listIntents({ status: "failed", action: "x" })).intents;
    assert.deepEqual(failed.map((i) => i.error), [{ code: "TypeError", message: "bad input" }]);
  });

  it("a step outliving its lease is kept by heartbeats; another claim meets IntentInProgress, or waits for the outcome", async () => {
    const recorder = recordingFetch();
    const { apiKey } = await server().createKey();
    const client = new TallyClient({ baseUrl: server().baseUrl, apiKey, fetch: recorder.fetch });
    const sameTenant = new TallyClient({ baseUrl: server().baseUrl, apiKey });
    const intentId = uid("job");
    const params = { report: "q4" };
    const started = performance.now();
    let firstExpiry;
    let lastExpiry;
    let concurrent;
    let impatient;
    let patient;
    const waits = [];
    const outcome = await client.once(
      intentId,
      "report.render",
      params,
      async (lease) => {
        firstExpiry = lease.expiresAt;
        await delay(2500); // past the end of the first lease (2 s)
        concurrent = await sameTenant.claimIntent({ intent_id: intentId, action: "report.render", params }).catch((e) => e);
        impatient = await sameTenant
          .once(intentId, "report.render", params, () => assert.fail("a second step ran"), { waitBudgetMs: 0 })
          .catch((e) => e);
        patient = sameTenant.once(intentId, "report.render", params, () => assert.fail("a second step ran"), {
          waitBudgetMs: 20_000,
          onWait: (event) => waits.push(event),
        });
        await delay(1000);
        lastExpiry = lease.expiresAt;
        assert.equal(lease.signal.aborted, false, "the lease was never lost");
        return { pages: 12 };
      },
      { leaseSeconds: 2 },
    );
    const elapsed = performance.now() - started;
    assert.ok(elapsed >= 3500, `the step ran 3.5 s (${elapsed.toFixed(0)} ms)`);
    assert.equal(outcome.status, "succeeded");
    assert.equal(outcome.replayed, false);
    assert.deepEqual(outcome.result, { pages: 12 });

    const heartbeats = recorder.seen.filter((r) => r === `POST /v1/intents/${intentId}/heartbeat`);
    assert.ok(heartbeats.length >= 4 && heartbeats.length <= 6, `a heartbeat every 2/3 s: ${heartbeats.length}`);
    assert.ok(Date.parse(lastExpiry) > Date.parse(firstExpiry) + 1000, `the heartbeats moved expiresAt (${firstExpiry} → ${lastExpiry})`);
    const afterwards = recorder.seen.length;
    await delay(1000);
    assert.equal(recorder.seen.length, afterwards, "no heartbeat after the step");

    assert.ok(concurrent instanceof IntentInProgress, `got ${concurrent}`);
    assert.equal(concurrent.status, 409);
    assert.equal(concurrent.code, "intent_in_progress");
    assert.equal(concurrent.fence, 1);
    assert.equal(concurrent.intentId, intentId);
    assert.ok(concurrent.retryAfterSeconds >= 1 && concurrent.retryAfterSeconds <= 2, `retryAfterSeconds ${concurrent.retryAfterSeconds}`);
    assert.equal(concurrent.retryAfterMs, concurrent.retryAfterSeconds * 1000, "the Retry-After header says the same");
    assert.ok(impatient instanceof IntentInProgress, `waitBudgetMs 0 throws at once: got ${impatient}`);

    const waited = await patient;
    assert.equal(waited.status, "succeeded");
    assert.equal(waited.replayed, true, "the waiting call got the stored outcome");
    assert.deepEqual(waited.result, { pages: 12 });
    assert.ok(waits.length >= 1, "it waited for the lease at least once");
    assert.ok(waits.every((w) => w.error instanceof IntentInProgress && w.delayMs >= 1000));

    const read = await client.getIntent(intentId);
    assert.equal(read.fence, 1, "nobody else ever held the intent");
    assert.deepEqual(read.history.map((h) => h.type), ["claimed", "succeeded"]);
  });

  it("a lost lease aborts lease.signal, and the stale worker's complete is refused with LeaseLost", async () => {
    let heartbeatsFail = true;
    const flaky = (url, init) => {
      if (heartbeatsFail && new URL(url).pathname.endsWith("/heartbeat")) return Promise.reject(new TypeError("fetch failed"));
      return fetch(url, init);
    };
    const { apiKey } = await server().createKey();
    const client = new TallyClient({ baseUrl: server().baseUrl, apiKey, fetch: flaky, retry: { maxAttempts: 1 } });
    const rival = new TallyClient({ baseUrl: server().baseUrl, apiKey });
    const intentId = uid("job");
    let rivalClaim;
    let abortedWith;
    const thrown = await client
      .once(
        intentId,
        "email.send",
        {},
        async (lease) => {
          await delay(1300); // the heartbeats did not get through: the 1 s lease ran out
          rivalClaim = await rival.claimIntent({ intent_id: intentId, action: "email.send", params: {} });
          heartbeatsFail = false; // the next heartbeat reaches the server, and learns
          await new Promise((resolve) => lease.signal.addEventListener("abort", resolve, { once: true }));
          abortedWith = lease.signal.reason;
          return { sent: "by the stale worker" };
        },
        { leaseSeconds: 1 },
      )
      .catch((e) => e);
    assert.equal(rivalClaim.status, 201);
    assert.equal(rivalClaim.intent.fence, 2);
    assert.ok(abortedWith instanceof LeaseLost, `lease.signal's reason: ${abortedWith}`);
    assert.ok(thrown instanceof LeaseLost, `the stale complete: got ${thrown}`);

    await rival.completeIntent(intentId, { token: rivalClaim.intent.lease.token, result: { sent: "by the rival" } });
    const read = await client.getIntent(intentId);
    assert.deepEqual(read.result, { sent: "by the rival" }, "the stale worker overwrote nothing");
  });

  it("a lost answer to complete is retried into the stored outcome; the entries are committed once", async (t) => {
    const { apiKey } = await server().createKey();
    let dropNext = true;
    const proxy = await startLossyProxy(server().baseUrl, (req) => {
      if (!dropNext || req.method !== "POST" || !req.url.endsWith("/complete")) return false;
      dropNext = false;
      return true;
    });
    t.after(proxy.close);
    const retries = [];
    const client = new TallyClient({ baseUrl: proxy.baseUrl, apiKey, retry: { baseDelayMs: 10, maxDelayMs: 40 }, onRetry: (e) => retries.push(e) });
    const intentId = uid("inv");
    const account = uid("cust");
    const chargeId = uid("ch");
    let calls = 0;
    const outcome = await client.once(intentId, "invoice.charge", { account, amount: "49.00" }, async () => {
      calls += 1;
      return stepResult({ charge_id: chargeId }, [
        { type: "payment", payment_id: chargeId, account, amount: "49.00", unit: "USD", processor: "payments.example" },
      ]);
    });
    assert.equal(calls, 1);
    assert.equal(outcome.status, "succeeded");
    assert.equal(outcome.replayed, false, "the step ran in this call");
    assert.deepEqual(outcome.result, { charge_id: chargeId });

    const completes = proxy.log.filter((r) => r.url === `/v1/intents/${intentId}/complete`);
    assert.deepEqual(completes.map((r) => [r.status, r.dropped]), [[200, true], [200, false]], "committed, answer lost, then replayed");
    assert.equal(completes[1].body, completes[0].body, "the replay is the first answer byte for byte");
    assert.equal(retries.length, 1);
    assert.ok(retries[0].error instanceof TransportError, `got ${retries[0].error}`);
    assert.deepEqual(outcome.entries.map((e) => [e.status, e.entry.upstream_id, e.error]), [[201, chargeId, undefined]]);

    const again = await client.once(intentId, "invoice.charge", { account, amount: "49.00" }, () => assert.fail("ran twice"));
    assert.equal(again.replayed, true);
    assert.deepEqual(again.result, { charge_id: chargeId });
    const direct = new TallyClient({ baseUrl: server().baseUrl, apiKey });
    assert.deepEqual((await allEntries(direct, { account })).map((e) => [e.kind, e.upstream_id]), [["payment", chargeId]], "one payment");
    assert.equal((await direct.listEntries({ kind: "intent_succeeded", upstream_id: intentId })).entries.length, 1, "one outcome");
  });

  it("entries returned by the step are committed once, with the outcome", async () => {
    const client = await newClient();
    const account = uid("cust");
    await client.putAccount(account, { unit: "USD", overdraft: "forbid" });
    const intentId = uid("sum");
    const debitId = uid("ur");
    const paymentId = uid("pay");
    const tooMuch = uid("ur");
    const entries = [
      { type: "payment", payment_id: paymentId, account, amount: "1", unit: "USD" },
      { type: "usage_debit", usage_record_id: debitId, account, amount: "0.0125", unit: "USD", meter: "llm-tokens", quantity: "1250" },
      { type: "usage_debit", usage_record_id: tooMuch, account, amount: "500", unit: "USD" },
    ];
    const marked = stepResult({ tokens: 1250 }, entries);
    assert.ok(marked instanceof StepResult);
    const outcome = await client.once(intentId, "llm.summarize", { document: "doc_771" }, async () => marked);
    assert.deepEqual(outcome.result, { tokens: 1250 }, "the result alone is stored, not the entries");
    assert.deepEqual(outcome.entries.map((e) => e.status), [201, 201, 422], "each entry decided as in a batch");
    assert.equal(outcome.entries[1].entry.balance_after, "0.9875");
    assert.equal(outcome.entries[2].error?.name, "InsufficientFunds", "a rejected entry's problem is its error, not thrown");

    for (let run = 0; run < 2; run += 1) {
      const again = await client.once(intentId, "llm.summarize", { document: "doc_771" }, () => assert.fail("ran twice"));
      assert.equal(again.replayed, true);
      assert.deepEqual(again.entries, [], "a replay does not repeat the entries' answers");
    }
    const logged = await allEntries(client, { account });
    assert.deepEqual(
      logged.map((e) => [e.kind, e.upstream_id, e.status]),
      [["account_settings", `${account}#1`, "posted"], ["payment", paymentId, "posted"], ["usage_debit", debitId, "posted"], ["usage_debit", tooMuch, "rejected"]],
      "committed once",
    );
    const succeeded = await client.listEntries({ kind: "intent_succeeded", upstream_id: intentId });
    assert.equal(succeeded.entries.length, 1);
    const group = [succeeded.entries[0].seq, ...logged.slice(1).map((e) => e.seq)];
    assert.deepEqual(group, group.map((_, i) => group[0] + i), `the outcome and its entries are one run of the log: ${group}`);
    assert.equal((await client.postAuditVerify()).status, "verified");
  });

  it("a lost answer to a claim meets its own lease: once() waits it out and runs attempt 2", async (t) => {
    const { apiKey } = await server().createKey();
    let dropNext = true;
    const proxy = await startLossyProxy(server().baseUrl, (req) => {
      if (!dropNext || req.method !== "POST" || req.url !== "/v1/intents") return false;
      dropNext = false;
      return true;
    });
    t.after(proxy.close);
    const client = new TallyClient({ baseUrl: proxy.baseUrl, apiKey, retry: { baseDelayMs: 10, maxDelayMs: 40 } });
    const intentId = uid("mail");
    const waits = [];
    const leases = [];
    const outcome = await client.once(intentId, "email.send", { to: "ada@example.com" }, (lease) => {
      leases.push([lease.attempt, lease.fence]);
      return { message_id: "m-81" };
    }, { leaseSeconds: 1, onWait: (event) => waits.push(event) });
    const claims = proxy.log.filter((r) => r.url === "/v1/intents");
    assert.equal(claims[0].dropped, true);
    assert.equal(claims[0].status, 201, "the lost claim had taken the lease");
    assert.equal(claims[1].status, 409, "the client's retry met that lease: intent_in_progress, not retried blindly");
    assert.ok(waits.length >= 1 && waits[0].error.fence === 1, "once() waited for the lost claim's lease");
    assert.deepEqual(leases, [[2, 2]], "the step ran once, under the next claim");
    assert.equal(outcome.status, "succeeded");
  });

  it("the operations directly: a stale token is LeaseLost, the same finish again is a replay", async () => {
    const client = await newClient();
    const intentId = uid("job");
    const claim = { intent_id: intentId, action: "export.run", params: { day: "2026-12-01" } };
    const first = await client.claimIntent({ ...claim, lease_seconds: 1 });
    assert.equal(first.status, 201);
    assert.equal(first.created, true);
    assert.equal(first.replayed, false);
    assert.equal(first.intent.lease.fence, 1);
    const beat = await client.heartbeatIntent(intentId, { token: first.intent.lease.token, lease_seconds: 1 });
    assert.equal(beat.status, "claimed");
    assert.equal(beat.lease, undefined, "the token is shown only once");
    await delay(1300);
    assert.equal((await client.getIntent(intentId)).status, "released", "an expired lease reads released");
    const second = await client.claimIntent(claim);
    assert.deepEqual([second.intent.attempt, second.intent.fence], [2, 2]);

    const token = first.intent.lease.token;
    for (const stale of [
      () => client.completeIntent(intentId, { token, result: { rows: 1 } }),
      () => client.failIntent(intentId, { token, error: { code: "late", message: "stalled" } }),
      () => client.heartbeatIntent(intentId, { token }),
    ]) {
      const error = await stale().catch((e) => e);
      assert.ok(error instanceof LeaseLost, `got ${error}`);
      assert.equal(error.status, 409);
      assert.equal(error.intentId, intentId);
    }

    const finish = { token: second.intent.lease.token, result: { rows: 7 } };
    const done = await client.completeIntent(intentId, finish);
    assert.equal(done.replayed, false);
    assert.equal(done.intent.status, "succeeded");
    assert.deepEqual(done.entries, []);
    const replay = await client.completeIntent(intentId, finish);
    assert.equal(replay.replayed, true);
    assert.equal(replay.body, done.body);
    const other = await client.completeIntent(intentId, { ...finish, result: { rows: 8 } }).catch((e) => e);
    assert.ok(other instanceof LeaseLost, "another finish of a finished intent");
    const stored = await client.claimIntent(claim);
    assert.deepEqual([stored.status, stored.replayed, stored.created, stored.intent.status], [200, true, false, "succeeded"]);

    const missing = await client.completeIntent(uid("never"), finish).catch((e) => e);
    assert.ok(missing instanceof NotFound, `got ${missing}`);

    const failing = uid("job");
    const claimed = await client.claimIntent({ intent_id: failing, action: "export.run", params: {}, max_attempts: 1 });
    const failure = { token: claimed.intent.lease.token, error: { code: "timeout", message: "upstream" }, retryable: true };
    const failed = await client.failIntent(failing, failure);
    assert.equal(failed.intent.status, "failed", "a retryable failure of the last attempt is final");
    assert.equal((await client.failIntent(failing, failure)).replayed, true);

    const seen = [];
    for await (const intent of client.iterateIntents({ action: "export.run", limit: 1 })) seen.push(intent.intent_id);
    assert.deepEqual(seen, [intentId, failing].sort());
  });
});

// --- stubs: what is retried, what is sent ---------------------------------

function intentBody(extra = {}) {
  return {
    intent_id: "i1", action: "a", params: {}, status: "claimed", attempt: 1, max_attempts: 5, fence: 1,
    lease_expires_at: null, created_at: "2026-12-01T00:00:00Z", updated_at: "2026-12-01T00:00:00Z", ...extra,
  };
}

test("intent_in_progress is thrown at once, never retried by the client's policy", async (t) => {
  const stub = await startStub(() =>
    problemReply(409, "intent_in_progress", { intent_id: "i1", retry_after_seconds: 7, fence: 3 }, { "retry-after": "7" }),
  );
  t.after(stub.close);
  const client = new TallyClient({ baseUrl: stub.baseUrl, apiKey: "k", retry: { maxAttempts: 5, baseDelayMs: 1 } });
  const error = await client.claimIntent({ intent_id: "i1", action: "a", params: {} }).catch((e) => e);
  assert.ok(error instanceof IntentInProgress, `got ${error}`);
  assert.equal(stub.requests.length, 1);
  assert.equal(error.retryable, false);
  assert.deepEqual([error.retryAfterSeconds, error.retryAfterMs, error.fence, error.intentId], [7, 7000, 3, "i1"]);
  const started = performance.now();
  const budgeted = await client.once("i1", "a", {}, () => assert.fail("ran"), { waitBudgetMs: 5000 }).catch((e) => e);
  assert.ok(budgeted instanceof IntentInProgress, "a wait past the budget is not started");
  assert.ok(performance.now() - started < 1000);
  assert.equal(stub.requests.length, 2);
});

test("a complete or fail whose answer is a 503 is sent again, byte for byte", async (t) => {
  const stub = await startStub((req, count) =>
    count % 2 === 1
      ? problemReply(503, "unavailable", {}, { "retry-after": "0" })
      : { status: 200, headers: { "content-type": "application/json" }, body: JSON.stringify(intentBody(req.url.endsWith("/complete") ? { status: "succeeded", result: 1, entries: [] } : { status: "released" })) },
  );
  t.after(stub.close);
  const retries = [];
  const client = new TallyClient({ baseUrl: stub.baseUrl, apiKey: "k", retry: { baseDelayMs: 1 }, onRetry: (e) => retries.push(e) });
  const done = await client.completeIntent("i 1", { token: "tok", result: 1 });
  assert.equal(done.attempts, 2);
  const failed = await client.failIntent("i 1", { token: "tok", error: { code: "c", message: "m" }, retryable: true });
  assert.equal(failed.intent.status, "released");
  assert.deepEqual(stub.requests.map((r) => `${r.method} ${r.url}`), [
    "POST /v1/intents/i%201/complete", "POST /v1/intents/i%201/complete", "POST /v1/intents/i%201/fail", "POST /v1/intents/i%201/fail",
  ]);
  assert.equal(stub.requests[0].body, stub.requests[1].body);
  assert.equal(stub.requests[2].body, stub.requests[3].body);
  assert.ok(retries.every((r) => r.error instanceof Unavailable));
});

test("once() sends what the step threw as {code, message}, within the server's limits", async (t) => {
  const stub = await startStub((req) =>
    req.url === "/v1/intents"
      ? { status: 201, headers: { "content-type": "application/json" }, body: JSON.stringify(intentBody({ lease: { token: "tok", fence: 1, expires_at: "2026-12-01T00:01:00Z" } })) }
      : { status: 200, headers: { "content-type": "application/json" }, body: JSON.stringify(intentBody({ status: "failed" })) },
  );
  t.after(stub.close);
  const client = new TallyClient({ baseUrl: stub.baseUrl, apiKey: "k" });
  const retryable = new RetryableStepError("later", { code: "busy" });
  assert.equal(await client.once("i1", "a", {}, () => { throw retryable; }).catch((e) => e), retryable);
  assert.equal(await client.once("i1", "a", {}, () => Promise.reject(new RangeError("no"))).catch((e) => e.name), "RangeError");
  const fails = stub.requests.filter((r) => r.url === "/v1/intents/i1/fail").map((r) => JSON.parse(r.body));
  assert.deepEqual(fails, [
    { token: "tok", error: { code: "busy", message: "later" }, retryable: true },
    { token: "tok", error: { code: "RangeError", message: "no" }, retryable: false },
  ]);
  assert.deepEqual(JSON.parse(stub.requests[0].body), { intent_id: "i1", action: "a", params: {}, lease_seconds: 60 });

  // A worker stopped by its own signal releases the intent rather than failing it for good.
  const controller = new AbortController();
  const stopped = await client
    .once("i1", "a", {}, (lease) => new Promise((_, reject) => {
      lease.signal.addEventListener("abort", () => reject(lease.signal.reason), { once: true });
      setTimeout(() => controller.abort(new Error("shutting down")), 20);
    }), { signal: controller.signal })
    .catch((e) => e);
  assert.equal(stopped.message, "shutting down");
  assert.deepEqual(JSON.parse(stub.requests.at(-1).body), { token: "tok", error: { code: "Error", message: "shutting down" }, retryable: true });

  assert.deepEqual(stepError("a string"), { code: "error", message: "a string" });
  assert.deepEqual(stepError(new RetryableStepError("m")), { code: "retryable", message: "m" });
  const long = stepError(Object.assign(new Error("é".repeat(3000)), { code: "x".repeat(200) }));
  assert.equal(long.code.length, 128);
  assert.equal(Buffer.byteLength(long.message), 4096, "cut between characters, at most 4096 bytes");
});

test("intent requests that cannot be right are refused before sending", async (t) => {
  const stub = await startStub(() => ({ status: 500 }));
  t.after(stub.close);
  const client = new TallyClient({ baseUrl: stub.baseUrl, apiKey: "k" });
  await assert.rejects(client.claimIntent({ action: "a", params: {} }), /claimIntent: intent_id is required/);
  await assert.rejects(client.completeIntent("i1", { result: {} }), /completeIntent: token is required/);
  await assert.rejects(client.completeIntent("i1", { token: "t", result: () => 1 }), /result must be a JSON value/);
  await assert.rejects(
    client.completeIntent("i1", { token: "t", result: {}, entries: [{ type: "payment", account: "c", amount: "1", unit: "USD" }] }),
    /completeIntent: entries\[0\]: payment_id is required/,
  );
  await assert.rejects(
    client.completeIntent("i1", { token: "t", result: {}, entries: [{ type: "payment", payment_id: "p", account: "c", amount: 1, unit: "USD" }] }),
    /entries\[0\]\.amount must be a decimal string/,
  );
  await assert.rejects(client.failIntent("i1", { token: "t", error: { message: "m" } }), /error must be \{code/);
  await assert.rejects(client.heartbeatIntent("", { token: "t" }), /path parameter intent_id/);
  await assert.rejects(client.once("i1", "a", {}, () => 1, { leaseSeconds: 0 }), RangeError);
  await assert.rejects(client.once("i1", "a", {}, () => 1, { waitBudgetMs: -1 }), RangeError);
  assert.equal(stub.requests.length, 0);
});
