// What the client sends, checked against a stub: names percent-encoded,
// query parameters only the document's, and requests that would break the
// retry contract (no upstream ID, money as a number) refused before any
// byte is sent.

import { test } from "node:test";
import assert from "node:assert/strict";
import { TallyClient } from "../dist/index.js";
import { startStub } from "./helpers/net.mjs";

async function recordingClient(t) {
  const body = JSON.stringify({ entries: [], next_after_seq: null });
  const stub = await startStub(() => ({ status: 200, headers: { "content-type": "application/json" }, body }));
  t.after(stub.close);
  return { stub, client: new TallyClient({ baseUrl: `${stub.baseUrl}/`, apiKey: "k" }) };
}

test("path and query values are percent-encoded like the Rust client's", async (t) => {
  const { stub, client } = await recordingClient(t);
  await client.getBalance("@revenue", { unit: "USD", as_of_seq: 7 });
  await client.getAccount("a b/c+é");
  await client.listEntries({ account: "cust 1", from: "2026-11-01T00:00:00+01:00", limit: 10, kind: undefined });
  assert.deepEqual(stub.requests.map((r) => `${r.method} ${r.url}`), [
    "GET /v1/accounts/%40revenue/balance?unit=USD&as_of_seq=7",
    "GET /v1/accounts/a%20b%2Fc%2B%C3%A9",
    "GET /v1/entries?account=cust%201&from=2026-11-01T00%3A00%3A00%2B01%3A00&limit=10",
  ]);
});

test("an unknown query parameter is refused before sending", async (t) => {
  const { stub, client } = await recordingClient(t);
  await assert.rejects(client.listEntries({ acount: "x" }), /unknown query parameter "acount"/);
  await assert.rejects(client.getUsage("cust", { granularity: "day", unit: "USD" }), /unknown query parameter "unit"/);
  assert.equal(stub.requests.length, 0);
});

test("a mutation without its upstream ID is refused before sending", async (t) => {
  const { stub, client } = await recordingClient(t);
  await assert.rejects(client.postUsageDebit({ account: "cust", amount: "1", unit: "USD" }), /usage_record_id is required/);
  await assert.rejects(client.postPayment({ payment_id: "", account: "cust", amount: "1", unit: "USD" }), /payment_id is required/);
  await assert.rejects(client.postCapture("hold_1", { amount: "1" }), /capture_id is required/);
  await assert.rejects(client.postCapture("", { capture_id: "c", amount: "1" }), /path parameter hold_id/);
  await assert.rejects(
    client.postBatch([{ type: "usage_debit", usage_record_id: "ur_1", account: "c", amount: "1", unit: "USD" }, { type: "refund", payment_id: "p", amount: "1" }]),
    /operations\[1\]: refund_id is required/,
  );
  await assert.rejects(client.postBatch([{ type: "adjustment", adjustment_id: "a" }]), /operations\[0\]\.type must be one of/);
  assert.equal(stub.requests.length, 0);
});

test("money as a JS number is refused before sending", async (t) => {
  const { stub, client } = await recordingClient(t);
  await assert.rejects(client.postUsageDebit({ usage_record_id: "ur_1", account: "c", amount: 0.1, unit: "USD" }), /amount must be a decimal string/);
  await assert.rejects(client.postUsageDebit({ usage_record_id: "ur_1", account: "c", amount: "1", unit: "USD", quantity: 3 }), /quantity must be a decimal string/);
  await assert.rejects(client.putAccount("c", { unit: "USD", overdraft: { limit: 50 } }), /overdraft\.limit must be a decimal string/);
  await assert.rejects(
    client.postBatch([{ type: "payment", payment_id: "p", account: "c", amount: 10, unit: "USD" }]),
    /operations\[0\]\.amount must be a decimal string/,
  );
  assert.equal(stub.requests.length, 0);
  // Metadata is the caller's own: a key named "amount" there is just a string map entry.
  await client.postPayment({ payment_id: "p", account: "c", amount: "1", unit: "USD", metadata: { amount: "x" } }).catch(() => {});
  assert.equal(stub.requests.length, 1);
  assert.deepEqual(JSON.parse(stub.requests[0].body).metadata, { amount: "x" });
  assert.equal(stub.requests[0].headers["content-type"], "application/json");
});

test("postAuditVerify gives each attempt 30 s (VERIFY_TIMEOUT_MS), beyond a shorter requestTimeoutMs", async () => {
  const { VERIFY_TIMEOUT_MS } = await import("../dist/index.js");
  assert.equal(VERIFY_TIMEOUT_MS, 30_000);
  const report = { tenant: "t", status: "verified", checked_entries: 0, head: null, balances: 0, records: 0, usage_rows: 0, problems: [], elapsed_ms: 250, budget_ms: 25_000 };
  const seen = [];
  const slowFetch = async (url, init) => {
    seen.push(`${init.method} ${new URL(url).pathname}`);
    await new Promise((resolve) => setTimeout(resolve, 250));
    if (init.signal?.aborted) throw init.signal.reason;
    return new Response(JSON.stringify(report), { status: 200, headers: { "content-type": "application/json" } });
  };
  const client = new TallyClient({ baseUrl: "http://tally.invalid", apiKey: "k", fetch: slowFetch, retry: { requestTimeoutMs: 100, maxAttempts: 1 } });
  assert.deepEqual(await client.postAuditVerify(), report);
  await assert.rejects(client.getAuditHead(), "an ordinary call still times out after requestTimeoutMs");
  assert.deepEqual(seen, ["POST /v1/audit/verify", "GET /v1/audit/head"]);
});
