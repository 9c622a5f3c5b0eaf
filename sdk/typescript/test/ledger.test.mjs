// Scenarios 1–3 against a real `tally serve`, on each engine: replays,
// conflicts, every operation once, and the error classes the server's
// problem codes map to.

import { it } from "node:test";
import assert from "node:assert/strict";
import {
  Forbidden,
  IdempotencyConflict,
  InsufficientFunds,
  InvalidRequest,
  NotFound,
  OPERATIONS,
  TallyClient,
  Unauthenticated,
} from "../dist/index.js";
import { forEachEngine, uid } from "./helpers/tally.mjs";
import { operationOf, sdkOperationIds } from "./helpers/operations.mjs";

forEachEngine("ledger", {}, (server, engine) => {
  async function newClient(options = {}) {
    const { apiKey } = await server().createKey(options.key);
    return new TallyClient({ baseUrl: server().baseUrl, apiKey, ...options.client });
  }

  it("scenario 1: a usage debit is created once, and the same body again is a replay", async () => {
    const client = await newClient();
    const debit = {
      usage_record_id: uid("ur"),
      account: "cust_42",
      amount: "0.0125",
      unit: "USD",
      meter: "llm-tokens",
      quantity: "1250",
      metadata: { model: "m1" },
    };
    const first = await client.postUsageDebit(debit);
    assert.equal(first.status, 201);
    assert.equal(first.created, true);
    assert.equal(first.replayed, false);
    assert.equal(first.attempts, 1);
    assert.match(first.entry.id, /^ent_[0-9a-f]{32}$/);
    assert.equal(first.entry.kind, "usage_debit");
    assert.equal(first.entry.upstream_id, debit.usage_record_id);
    assert.equal(first.replayed, false);
    assert.equal(first.entry.amount, "0.0125");
    assert.equal(first.entry.balance_after, "-0.0125");
    assert.equal(typeof first.entry.amount, "string", "money stays a string");

    // "0.01250" is the same amount: still the same request.
    const again = await client.postUsageDebit({ ...debit, amount: "0.01250" });
    assert.equal(again.status, 200);
    assert.equal(again.replayed, true);
    assert.equal(again.created, false);
    assert.equal(again.entry.id, first.entry.id);
    assert.equal(again.body, first.body, "a replay is the first answer byte for byte");

    const page = await client.listEntries({ account: "cust_42" });
    assert.equal(page.entries.length, 1, "one entry, however often it was sent");
  });

  it("scenario 2: the same usage_record_id with another amount is an IdempotencyConflict", async () => {
    const client = await newClient();
    const debit = { usage_record_id: uid("ur"), account: "cust_c", amount: "1", unit: "USD" };
    const original = await client.postUsageDebit(debit);
    const error = await client.postUsageDebit({ ...debit, amount: "2" }).catch((e) => e);
    assert.ok(error instanceof IdempotencyConflict, `got ${error}`);
    assert.equal(error.status, 409);
    assert.equal(error.code, "idempotency_conflict");
    assert.equal(error.entryId, original.entry.id);
    assert.ok(error.differingFields.includes("amount"), `differingFields: ${error.differingFields}`);
    assert.equal(error.problem.entry_id, original.entry.id, "the raw problem body is kept");
    assert.deepEqual(error.problem.differing_fields, error.differingFields);
    assert.match(error.requestId, /\S/, "the answer's X-Request-Id is kept");
    const balance = await client.getBalance("cust_c");
    assert.equal(balance.debits, "1", "the conflicting retry charged nothing");
  });

  it("scenario 3: every operation once, with meaningful results", async () => {
    const seen = [];
    const recordingFetch = (url, init) => {
      seen.push(`${init.method} ${new URL(url).pathname}`);
      return fetch(url, init);
    };
    const client = await newClient({ client: { fetch: recordingFetch } });
    const startedAt = new Date(Date.now() - 1000).toISOString();
    const account = "cust_7";

    const health = await client.getHealthz();
    assert.equal(health.status, "ok");
    assert.equal(health.engine, engine.name);
    const ready = await client.getReadyz();
    assert.equal(ready.status, "ready");
    assert.ok(ready.schema_version >= 1);

    const settings = await client.putAccount(account, { unit: "USD", overdraft: { limit: "5" }, metadata: { plan: "pro" } });
    assert.equal(settings.settings_version, 1);
    assert.deepEqual(settings.overdraft, { limit: "5" });
    assert.match(settings.settings_entry_id, /^ent_/);
    const unchanged = await client.putAccount(account, { unit: "USD", overdraft: { limit: "5.00" }, metadata: { plan: "pro" } });
    assert.equal(unchanged.settings_version, 1, "equal settings write nothing");
    const read = await client.getAccount(account);
    assert.equal(read.unit, "USD");
    assert.deepEqual(read.metadata, { plan: "pro" });
    assert.equal(read.balance.available, "0");

    const paymentId = uid("pay");
    const payment = await client.postPayment({ payment_id: paymentId, account, amount: "100", unit: "USD", processor: "stripe" });
    assert.equal(payment.entry.kind, "payment");
    assert.equal(payment.entry.credit_account, account);
    assert.equal(payment.entry.balance_after, "100");

    const debit = await client.postUsageDebit({ usage_record_id: uid("ur"), account, amount: "1.25", unit: "USD", meter: "tokens", quantity: "1250" });
    assert.equal(debit.entry.balance_after, "98.75");
    assert.equal(debit.entry.debit_account, account);
    assert.equal(debit.entry.credit_account, "@revenue");

    const holdId = uid("hold");
    const hold = await client.postHold({ hold_id: holdId, account, amount: "10", unit: "USD", ttl_seconds: 300 });
    assert.equal(hold.entry.kind, "hold");
    assert.equal(hold.entry.upstream_id, holdId);
    assert.equal(hold.entry.ttl_seconds, 300);
    assert.ok(Date.parse(hold.entry.expires_at) > Date.parse(hold.entry.recorded_at), "expires_at = recorded_at + ttl");
    const open = await client.getHold(holdId);
    assert.equal(open.status, "open");
    assert.equal(open.amount, "10");
    assert.equal(open.entry_id, hold.entry.id);
    assert.equal((await client.getBalance(account)).available, "88.75", "held money is not available");

    const capture = await client.postCapture(holdId, { capture_id: uid("cap"), amount: "4" });
    assert.equal(capture.entry.kind, "hold_capture");
    assert.equal(capture.entry.hold_id, holdId);
    assert.equal(capture.entry.balance_after, "94.75");
    const captured = await client.getHold(holdId);
    assert.equal(captured.status, "captured");
    assert.equal(captured.closed_by, capture.entry.id);

    const secondHold = uid("hold");
    await client.postHold({ hold_id: secondHold, account, amount: "2", unit: "USD", ttl_seconds: 300 });
    const release = await client.postRelease(secondHold, { release_id: uid("rel") });
    assert.equal(release.entry.kind, "hold_release");
    assert.equal((await client.getHold(secondHold)).status, "released");

    const refund = await client.postRefund({ refund_id: uid("re"), payment_id: paymentId, amount: "20", reason: "goodwill" });
    assert.equal(refund.entry.kind, "refund");
    assert.equal(refund.entry.payment_id, paymentId);
    assert.equal(refund.entry.balance_after, "74.75");

    const reversal = await client.postReversal({ reversal_id: uid("rev"), entry_id: debit.entry.id, reason: "billing error" });
    assert.equal(reversal.entry.kind, "reversal");
    assert.equal(reversal.entry.entry_id, debit.entry.id);
    assert.equal(reversal.entry.balance_after, "76");
    const reversed = await client.getEntry(debit.entry.id);
    assert.equal(reversed.reversed_by, reversal.entry.id);
    assert.equal(reversed.hash, debit.entry.hash, "the reversed entry itself never changes");

    const adjustment = await client.postAdjustment({ adjustment_id: uid("adj"), account, amount: "3", direction: "credit", reason: "support credit" });
    assert.equal(adjustment.entry.kind, "adjustment");
    assert.equal(adjustment.entry.direction, "credit");
    assert.equal(adjustment.entry.balance_after, "79");

    const batch = await client.postBatch([
      { type: "usage_debit", usage_record_id: uid("ur"), account, amount: "2.5", unit: "USD", meter: "tokens", quantity: "10" },
      { type: "payment", payment_id: uid("pay"), account, amount: "1", unit: "USD" },
      { type: "usage_debit", usage_record_id: uid("ur"), account, amount: "1000", unit: "USD" },
    ]);
    assert.deepEqual(batch.results.map((r) => r.status), [201, 201, 422]);
    assert.equal(batch.results[0].entry.balance_after, "76.5");
    assert.equal(batch.results[1].entry.balance_after, "77.5");
    const rejected = batch.results[2];
    assert.ok(rejected.error instanceof InsufficientFunds, `got ${rejected.error}`);
    assert.equal(rejected.error.entry.status, "rejected");
    assert.equal(rejected.problem.code, "insufficient_funds");
    assert.equal(batch.results[0].error, undefined);

    const firstPage = await client.listEntries({ account, limit: 3 });
    assert.equal(firstPage.entries.length, 3);
    assert.equal(firstPage.next_after_seq, firstPage.entries[2].seq);
    const all = [];
    for await (const entry of client.iterateEntries({ account, limit: 3 })) all.push(entry);
    const kinds = new Set(all.map((e) => e.kind));
    for (const kind of ["account_settings", "payment", "usage_debit", "hold", "hold_capture", "hold_release", "refund", "reversal", "adjustment"]) {
      assert.ok(kinds.has(kind), `the log lists a ${kind}`);
    }
    assert.deepEqual(all.map((e) => e.seq), [...all.map((e) => e.seq)].sort((a, b) => a - b), "in seq order");
    assert.equal(all.at(-1).status, "rejected", "the stored rejection is in the log");
    const payments = await client.listEntries({ account, kind: "payment" });
    assert.equal(payments.entries.length, 2);
    const refused = await client.listEntries({ account, status: "rejected" });
    assert.deepEqual(refused.entries.map((e) => e.id), [rejected.error.entry.id], "only the stored rejection");
    const posted = await client.listEntries({ account, status: "posted", limit: 1000 });
    assert.deepEqual(posted.entries.map((e) => e.id), all.filter((e) => e.status === "posted").map((e) => e.id));
    const byUpstream = await client.listEntries({ upstream_id: paymentId });
    assert.deepEqual(byUpstream.entries.map((e) => e.id), [payment.entry.id]);

    const balance = await client.getBalance(account);
    assert.equal(balance.posted, "77.5");
    assert.equal(balance.held, "0");
    assert.equal(balance.available, "77.5");
    const accounts = await client.listAccounts();
    assert.deepEqual(accounts, {
      accounts: [{ account, unit: "USD", debits: balance.debits, credits: balance.credits, posted: "77.5", held: "0", available: "77.5" }],
      next_after: null,
    });
    assert.deepEqual((await client.listAccounts({ q: "CUST_" })).accounts, accounts.accounts, "q ignores case");
    assert.deepEqual((await client.listAccounts({ q: "nobody" })).accounts, []);
    const earlier = await client.getBalance(account, { as_of_seq: payment.entry.seq });
    assert.equal(earlier.posted, "100");
    assert.equal(earlier.as_of_seq, payment.entry.seq);

    const usage = await waitForUsage(client, account);
    assert.equal(usage.granularity, "day");
    assert.deepEqual(
      usage.usage.map((u) => ({ meter: u.meter, amount: u.amount, quantity: u.quantity, entries: u.entries })),
      [{ meter: "tokens", amount: "2.5", quantity: "10", entries: 1 }],
      "the reversed debit nets out; the batch's debit remains",
    );

    const statement = await client.getStatement(account, { from: startedAt, to: new Date().toISOString() });
    assert.equal(statement.opening_balance.posted, "0");
    assert.equal(statement.closing_balance.posted, "77.5");
    assert.equal(statement.movements.net, "77.5");
    assert.equal(statement.movements.entries, all.length);
    assert.equal(statement.entries.length, all.length);

    const head = await client.getAuditHead();
    const last = all.at(-1);
    assert.equal(head.seq, last.seq);
    assert.equal(head.hash, last.hash);
    assert.equal(head.signing, "off");
    assert.equal(head.signature, null);
    const verified = await client.postAuditVerify();
    assert.equal(verified.status, "verified", JSON.stringify(verified));
    assert.deepEqual(verified.head, { seq: head.seq, hash: head.hash });
    assert.equal(verified.checked_entries, head.seq);
    assert.equal(verified.tenant, head.tenant);
    assert.deepEqual(verified.problems, []);

    const exported = await client.getAuditExport();
    assert.equal(exported.format, "jsonl");
    assert.match(exported.filename, /^tally-export-.*\.jsonl$/);
    assert.equal(exported.records[0].record, "header");
    const trailer = exported.records.at(-1);
    assert.equal(trailer.record, "trailer");
    assert.equal(trailer.last_hash, head.hash);
    assert.equal(exported.records.filter((r) => r.record === "entry").length, head.seq);
    const csv = await client.getAuditExport({ format: "csv", from_seq: 1, to_seq: 2 });
    assert.equal(csv.records, undefined);
    assert.equal(csv.text.trim().split("\n").length, 3, "a header line and two entries");
    assert.match(csv.text, /^tenant_id,seq,id,kind/);

    // Webhooks: an https:// URL of a public name is accepted without the
    // server's --webhook-allow-insecure; it is only contacted later, and its
    // delivery failures change nothing here.
    const created = await client.postWebhookEndpoint({ url: "https://hooks.example.com/tally", event_types: ["entry.posted", "balance.low"], description: "billing" });
    assert.match(created.id, /^we_[0-9a-f]{32}$/);
    assert.match(created.secret, /^whsec_/);
    assert.equal(created.previous_secret_expires_at, null);
    assert.deepEqual([...created.event_types].sort(), ["balance.low", "entry.posted"]);
    assert.equal(created.enabled, true);
    assert.equal(created.after_seq, head.seq, "events after the head when it was made");
    const listed = await client.listWebhookEndpoints();
    assert.deepEqual(listed.endpoints.map((e) => e.id), [created.id]);
    assert.equal("secret" in listed.endpoints[0], false, "no secret when listed");
    const fetched = await client.getWebhookEndpoint(created.id);
    assert.equal(fetched.url, "https://hooks.example.com/tally");
    assert.equal(fetched.description, "billing");
    assert.equal("secret" in fetched, false, "no secret when read");
    const disabled = await client.patchWebhookEndpoint(created.id, { enabled: false, description: null });
    assert.equal(disabled.enabled, false);
    assert.equal(disabled.disabled_reason, "disabled");
    assert.equal(disabled.description, null, "null clears the description");
    const emptyChange = await client.patchWebhookEndpoint(created.id, {}).catch((e) => e);
    assert.ok(emptyChange instanceof InvalidRequest, `an empty change is refused: got ${emptyChange}`);
    const rotated = await client.rotateWebhookSecret(created.id);
    assert.match(rotated.secret, /^whsec_/);
    assert.notEqual(rotated.secret, created.secret);
    assert.ok(Date.parse(rotated.previous_secret_expires_at) > Date.now(), "the old secret signs a while longer");
    const replay = await client.replayWebhookEvents(created.id, { from_seq: 1 });
    assert.equal(replay.from_seq, 1);
    assert.equal(replay.to_seq, head.seq);
    assert.equal(replay.next_from_seq, null, "one call reached the head");
    assert.ok(replay.scheduled >= 1, `scheduled ${replay.scheduled}`);
    const deliveries = await client.listWebhookDeliveries(created.id, { limit: 100 });
    assert.equal(deliveries.deliveries.length, replay.scheduled);
    assert.equal(deliveries.next_after, null);
    const delivery = deliveries.deliveries[0];
    assert.match(delivery.id, /^wd_[0-9a-f]{32}$/);
    assert.equal(delivery.endpoint_id, created.id);
    assert.equal(delivery.status, "pending", "a disabled endpoint's deliveries wait");
    assert.equal(delivery.event.id, delivery.event_id, "the event is the body as sent");
    assert.equal(delivery.event.type, delivery.event_type);
    assert.equal(typeof delivery.event.data, "object");
    const onePending = await client.listWebhookDeliveries(created.id, { status: "pending", limit: 1 });
    assert.equal(onePending.deliveries.length, 1);
    if (replay.scheduled > 1) assert.equal(onePending.next_after, onePending.deliveries[0].id);
    const retried = await client.retryWebhookDelivery(delivery.id);
    assert.equal(retried.id, delivery.id);
    assert.equal(retried.event_id, delivery.event_id, "a retry keeps the event id");
    assert.equal(retried.status, "pending");
    await client.deleteWebhookEndpoint(created.id);
    assert.deepEqual((await client.listWebhookEndpoints()).endpoints, []);
    const gone = await client.getWebhookEndpoint(created.id).catch((e) => e);
    assert.ok(gone instanceof NotFound, `got ${gone}`);

    // Intents: a claim, a heartbeat, a complete with an entry, a fail, the reads.
    const intentId = uid("inv");
    const claimed = await client.claimIntent({ intent_id: intentId, action: "invoice.charge", params: { invoice: "in_1" }, lease_seconds: 30 });
    assert.deepEqual([claimed.status, claimed.created, claimed.intent.status, claimed.intent.attempt], [201, true, "claimed", 1]);
    const token = claimed.intent.lease.token;
    const extended = await client.heartbeatIntent(intentId, { token, lease_seconds: 60 });
    assert.ok(Date.parse(extended.lease_expires_at) > Date.parse(claimed.intent.lease.expires_at), "the heartbeat extended the lease");
    const chargeId = uid("ch");
    const completed = await client.completeIntent(intentId, {
      token,
      result: { charge_id: chargeId },
      entries: [{ type: "payment", payment_id: chargeId, account, amount: "49", unit: "USD" }],
    });
    assert.equal(completed.intent.status, "succeeded");
    assert.deepEqual(completed.entries.map((e) => [e.status, e.entry.kind, e.entry.balance_after]), [[201, "payment", "126.5"]]);
    const failedId = uid("inv");
    const second = await client.claimIntent({ intent_id: failedId, action: "invoice.charge", params: { invoice: "in_2" } });
    const failed = await client.failIntent(failedId, { token: second.intent.lease.token, error: { code: "card_declined", message: "declined" } });
    assert.deepEqual([failed.intent.status, failed.intent.error], ["failed", { code: "card_declined", message: "declined" }]);
    const intent = await client.getIntent(intentId);
    assert.deepEqual(intent.result, { charge_id: chargeId });
    assert.deepEqual(intent.history.map((h) => h.type), ["claimed", "succeeded"]);
    const intents = await client.listIntents({ action: "invoice.charge" });
    assert.deepEqual(intents.intents.map((i) => [i.intent_id, i.status]), [[intentId, "succeeded"], [failedId, "failed"]].sort());
    assert.equal(intents.next_after, null);

    // The Stripe integration: configured (the secret never comes back), read,
    // no event yet, an unknown event, removed.
    const stripe = await client.putStripeIntegration({ signing_secrets: ["whsec_every_operation"], account_metadata_key: "tally_account" });
    assert.match(stripe.endpoint_path, /^\/v1\/ingest\/stripe\//);
    assert.deepEqual(await client.getStripeIntegration(), stripe);
    assert.equal(stripe.signing_secrets_count, 1);
    assert.deepEqual(await client.listStripeEvents({ status: "unmapped" }), { events: [], next_after: null });
    const noEvent = await client.reapplyStripeEvent("evt_unknown").catch((e) => e);
    assert.ok(noEvent instanceof NotFound, `got ${noEvent}`);
    await client.deleteStripeIntegration();
    const noIntegration = await client.getStripeIntegration().catch((e) => e);
    assert.ok(noIntegration instanceof NotFound, `got ${noIntegration}`);

    // Every operation this SDK covers was exercised above.
    const exercised = new Set(seen.map((request) => operationOf(request)));
    const missing = sdkOperationIds().filter((id) => !exercised.has(id));
    assert.deepEqual(missing, [], "operations not exercised");
  });

  it("accounts are listed in byte order with their balances, searched and paged", async () => {
    const client = await newClient();
    const names = ["zeta-1", "beta", "alpha-3", "Alpha-2"];
    for (const [i, account] of names.entries()) {
      await client.postPayment({ payment_id: uid("pay"), account, amount: String(10 + i), unit: "USD" });
    }
    await client.postUsageDebit({ usage_record_id: uid("ur"), account: "beta", amount: "2.5", unit: "USD" });
    await client.postHold({ hold_id: uid("hold"), account: "alpha-3", amount: "4", unit: "USD", ttl_seconds: 300 });

    const listed = await client.listAccounts();
    assert.deepEqual(listed.accounts.map((a) => a.account), ["Alpha-2", "alpha-3", "beta", "zeta-1"]);
    assert.equal(listed.next_after, null);
    for (const summary of listed.accounts) {
      const { as_of_seq: _, ...balance } = await client.getBalance(summary.account);
      assert.deepEqual(summary, balance, `${summary.account}: the balance now`);
    }
    const byName = Object.fromEntries(listed.accounts.map((a) => [a.account, a]));
    assert.equal(byName.beta.posted, "8.5");
    assert.equal(typeof byName.beta.posted, "string", "money stays a string");
    assert.deepEqual([byName["alpha-3"].held, byName["alpha-3"].available], ["4", "8"]);

    assert.deepEqual((await client.listAccounts({ q: "ALPHA" })).accounts.map((a) => a.account), ["Alpha-2", "alpha-3"]);
    assert.deepEqual((await client.listAccounts({ q: "ta" })).accounts.map((a) => a.account), ["beta", "zeta-1"]);

    const first = await client.listAccounts({ limit: 2 });
    assert.deepEqual(first.accounts.map((a) => a.account), ["Alpha-2", "alpha-3"]);
    assert.equal(first.next_after, "alpha-3");
    const second = await client.listAccounts({ after: first.next_after, limit: 2 });
    assert.deepEqual(second.accounts.map((a) => a.account), ["beta", "zeta-1"]);
    const all = [];
    for await (const summary of client.iterateAccounts({ limit: 1 })) all.push(summary);
    assert.deepEqual(all, listed.accounts);
    const some = [];
    for await (const summary of client.iterateAccounts({ q: "a-", limit: 1 })) some.push(summary.account);
    assert.deepEqual(some, ["Alpha-2", "alpha-3", "zeta-1"]);
    const tooMany = await client.listAccounts({ limit: 1001 }).catch((e) => e);
    assert.ok(tooMany instanceof InvalidRequest, `got ${tooMany}`);
  });

  it("entries filter by status and upstream_id: a debit refused by overdraft forbid", async () => {
    const client = await newClient();
    const account = uid("cust");
    await client.putAccount(account, { unit: "USD", overdraft: "forbid" });
    const paid = await client.postPayment({ payment_id: uid("pay"), account, amount: "5", unit: "USD" });
    const ok = await client.postUsageDebit({ usage_record_id: uid("ur"), account, amount: "1", unit: "USD" });
    const refusedId = uid("ur");
    const refusal = await client.postUsageDebit({ usage_record_id: refusedId, account, amount: "50", unit: "USD" }).catch((e) => e);
    assert.ok(refusal instanceof InsufficientFunds, `got ${refusal}`);

    const rejected = await client.listEntries({ status: "rejected" });
    assert.deepEqual(rejected.entries.map((e) => [e.id, e.status, e.upstream_id]), [[refusal.entry.id, "rejected", refusedId]]);
    assert.equal(rejected.entries[0].rejection.code, "insufficient_funds");
    const posted = await client.listEntries({ account, status: "posted" });
    assert.deepEqual(posted.entries.map((e) => e.kind), ["account_settings", "payment", "usage_debit"]);
    assert.deepEqual(posted.entries.slice(1).map((e) => e.id), [paid.entry.id, ok.entry.id]);
    const byId = await client.listEntries({ upstream_id: refusedId });
    assert.deepEqual(byId.entries.map((e) => e.id), [refusal.entry.id]);
    assert.deepEqual((await client.listEntries({ upstream_id: refusedId, status: "posted" })).entries, []);
    assert.deepEqual((await client.listEntries({ upstream_id: ok.entry.upstream_id })).entries, [ok.entry]);
    assert.equal((await client.getBalance(account)).posted, "4", "the refusal moved nothing");

    const report = await client.postAuditVerify();
    const head = await client.getAuditHead();
    assert.equal(report.status, "verified");
    assert.deepEqual(report.head, { seq: head.seq, hash: head.hash });
    assert.equal(report.head.seq, refusal.entry.seq, "the stored rejection is the head");
  });

  it("account alerts: set, read back, shown on the settings entry, cleared", async () => {
    const client = await newClient();
    const account = uid("cust");
    const set = await client.putAccount(account, { unit: "USD", overdraft: "forbid", alerts: { low_balance: "10.50" } });
    assert.equal(typeof set.alerts.low_balance, "string", "money stays a string");
    assert.equal(Number(set.alerts.low_balance), 10.5);
    assert.deepEqual((await client.getAccount(account)).alerts, set.alerts);
    const same = await client.putAccount(account, { unit: "USD", overdraft: "forbid", alerts: { low_balance: "10.5" } });
    assert.equal(same.settings_version, set.settings_version, "an equal alert writes nothing");

    const negative = await client.putAccount(account, { unit: "USD", overdraft: "allow", alerts: { low_balance: "-25" } });
    assert.deepEqual(negative.alerts, { low_balance: "-25" }, "any sign");
    const nulled = await client.putAccount(account, { unit: "USD", overdraft: "allow", alerts: { low_balance: null } });
    assert.deepEqual(nulled.alerts, {});
    assert.equal(nulled.settings_version, negative.settings_version + 1);
    await client.putAccount(account, { unit: "USD", overdraft: "allow", alerts: { low_balance: "1" } });
    const omitted = await client.putAccount(account, { unit: "USD", overdraft: "allow" });
    assert.deepEqual(omitted.alerts, {}, "the settings are in full: no alerts clears the alert");
    assert.deepEqual((await client.getAccount(account)).alerts, {});

    const settings = await client.listEntries({ account, kind: "account_settings" });
    assert.deepEqual(
      settings.entries.map((e) => e.alerts === undefined ? undefined : Number(e.alerts.low_balance)),
      [10.5, -25, undefined, 1, undefined],
      "an account_settings entry shows alerts only when set",
    );
    await assert.rejects(client.putAccount(account, { unit: "USD", alerts: { low_balance: 10 } }), /alerts\.low_balance must be a decimal string/);
  });

  it("a long poll (wait_ms) answers as soon as a matching entry is committed", async () => {
    const client = await newClient();
    const account = uid("cust");
    await client.putAccount(account, { unit: "USD" });
    const after = (await client.listEntries({ account })).entries.at(-1).seq;
    const paymentId = uid("pay");
    const started = performance.now();
    const posting = new Promise((resolve, reject) => {
      setTimeout(() => client.postPayment({ payment_id: paymentId, account, amount: "1.25", unit: "USD" }).then(resolve, reject), 300);
    });
    const [page] = await Promise.all([client.listEntries({ account, after_seq: after, wait_ms: 10_000 }), posting]);
    const elapsed = performance.now() - started;
    assert.deepEqual(page.entries.map((e) => [e.kind, e.upstream_id, e.amount]), [["payment", paymentId, "1.25"]]);
    assert.ok(elapsed > 200 && elapsed < 8000, `answered after ${elapsed} ms`);
  });

  it("a long poll answers an empty page after the wait, even past requestTimeoutMs", async () => {
    const retries = [];
    const client = await newClient({ client: { retry: { requestTimeoutMs: 300, maxAttempts: 2 }, onRetry: (e) => retries.push(e) } });
    const account = uid("cust");
    await client.putAccount(account, { unit: "USD" });
    const after = (await client.listEntries({ account })).entries.at(-1).seq;
    let started = performance.now();
    const short = await client.listEntries({ account, after_seq: after, wait_ms: 200 });
    assert.deepEqual(short.entries, []);
    assert.ok(performance.now() - started > 150, "the server waited");
    started = performance.now();
    const long = await client.listEntries({ account, after_seq: after, wait_ms: 1000 });
    assert.deepEqual(long.entries, []);
    assert.ok(performance.now() - started > 900, "the server waited the whole wait_ms");
    assert.deepEqual(retries, [], "the attempt timeout was extended by wait_ms: no timeout, no retry");
  });

  it("a stored rejection throws InsufficientFunds with the entry, the same on every replay", async () => {
    const client = await newClient();
    await client.putAccount("cust_p", { unit: "USD", overdraft: "forbid" });
    const debit = { usage_record_id: uid("ur"), account: "cust_p", amount: "50", unit: "USD" };
    const first = await client.postUsageDebit(debit).catch((e) => e);
    assert.ok(first instanceof InsufficientFunds, `got ${first}`);
    assert.equal(first.status, 422);
    assert.equal(first.entry.status, "rejected");
    assert.equal(first.entry.rejection.code, "insufficient_funds");
    assert.equal(first.entry.upstream_id, debit.usage_record_id);
    assert.equal(first.replayed, false);
    await client.postPayment({ payment_id: uid("pay"), account: "cust_p", amount: "100", unit: "USD" });
    const replay = await client.postUsageDebit(debit).catch((e) => e);
    assert.ok(replay instanceof InsufficientFunds, "still rejected after a top-up: the decision is stored");
    assert.equal(replay.entry.id, first.entry.id);
    assert.equal(replay.replayed, true, "Idempotent-Replayed: true on the stored rejection");
    assert.deepEqual(replay.problem, first.problem, "the same body on every replay");
  });

  it("problems map to their error classes", async () => {
    const client = await newClient();
    const invalid = await client.postUsageDebit({ usage_record_id: uid("ur"), account: "cust", amount: "1e3", unit: "USD" }).catch((e) => e);
    assert.ok(invalid instanceof InvalidRequest, `got ${invalid}`);
    assert.ok(invalid.errors.some((e) => e.field === "amount"), JSON.stringify(invalid.errors));

    const missing = await client.getEntry("ent_00000000000000000000000000000000").catch((e) => e);
    assert.ok(missing instanceof NotFound, `got ${missing}`);
    const noPayment = await client.postRefund({ refund_id: uid("re"), payment_id: "pay_missing", amount: "1" }).catch((e) => e);
    assert.ok(noPayment instanceof NotFound);
    assert.equal(noPayment.field, "payment_id");

    const anonymous = new TallyClient({ baseUrl: server().baseUrl, apiKey: "tally_not_a_key" });
    const unauthenticated = await anonymous.getAuditHead().catch((e) => e);
    assert.ok(unauthenticated instanceof Unauthenticated, `got ${unauthenticated}`);
    assert.equal(unauthenticated.status, 401);

    const reader = await newClient({ key: { scopes: "read" } });
    const forbidden = await reader.postPayment({ payment_id: uid("pay"), account: "cust", amount: "1", unit: "USD" }).catch((e) => e);
    assert.ok(forbidden instanceof Forbidden, `got ${forbidden}`);
  });

  it("the running server's OpenAPI document is the committed one the types came from", async () => {
    const live = await (await fetch(`${server().baseUrl}/openapi.json`)).json();
    const { generate } = await import("../scripts/generate-types.mjs");
    const { readCommittedSchemaModule } = await import("./helpers/operations.mjs");
    assert.equal(generate(live), readCommittedSchemaModule(), "src/generated/schema.ts differs from what this server documents");
    assert.deepEqual(Object.keys(OPERATIONS).sort(), Object.keys(live.paths).flatMap((p) => Object.values(live.paths[p]).map((o) => o.operationId)).sort());
  });
});

/** The usage projection is asynchronous: wait until it caught up with the head. */
async function waitForUsage(client, account) {
  const deadline = Date.now() + 10_000;
  for (;;) {
    const usage = await client.getUsage(account);
    if (usage.current_as_of_seq === usage.head_seq) return usage;
    if (Date.now() > deadline) assert.fail(`usage projection stuck at ${usage.current_as_of_seq} of ${usage.head_seq}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}
