// Compile-time checks of the published types (dist/*.d.ts), run by
// `npm test` with `tsc --noEmit`: the client's signatures are the document's
// schemas, money is a string, upstream IDs are required. Each expected
// error below fails the build if its line ever compiles.

import type {
  BatchItemResult,
  BatchOperation,
  Entry,
  IntentError,
  IntentOutcome,
  ListStripeEventsQuery,
  OPERATIONS,
  Schemas,
  StepLease,
  TallyClient,
  stepResult,
} from "../../dist/index.js";

type Equals<A, B> = (<T>() => T extends A ? 1 : 2) extends <T>() => T extends B ? 1 : 2 ? true : false;
function assertType<T extends true>(): T | void {}

type Ops = typeof OPERATIONS;
/** The request body schema the document names for an operation. */
type RequestOf<K extends keyof Ops> = Ops[K]["requestBody"] extends keyof Schemas ? Schemas[Ops[K]["requestBody"]] : never;
/** The 200 answer's schema the document names for an operation. */
type OkOf<K extends keyof Ops> = Ops[K]["responses"] extends { "200": { schema: infer S } } ? (S extends keyof Schemas ? Schemas[S] : never) : never;

// Request bodies are exactly the document's request schemas.
assertType<Equals<Parameters<TallyClient["postUsageDebit"]>[0], RequestOf<"postUsageDebit">>>();
assertType<Equals<Parameters<TallyClient["postPayment"]>[0], RequestOf<"postPayment">>>();
assertType<Equals<Parameters<TallyClient["postHold"]>[0], RequestOf<"postHold">>>();
assertType<Equals<Parameters<TallyClient["postCapture"]>[1], RequestOf<"postCapture">>>();
assertType<Equals<Parameters<TallyClient["postRelease"]>[1], RequestOf<"postRelease">>>();
assertType<Equals<Parameters<TallyClient["postRefund"]>[0], RequestOf<"postRefund">>>();
assertType<Equals<Parameters<TallyClient["postReversal"]>[0], RequestOf<"postReversal">>>();
assertType<Equals<Parameters<TallyClient["postAdjustment"]>[0], RequestOf<"postAdjustment">>>();
assertType<Equals<Parameters<TallyClient["putAccount"]>[1], RequestOf<"putAccount">>>();
assertType<Equals<readonly BatchOperation[], Parameters<TallyClient["postBatch"]>[0]>>();
assertType<Equals<Parameters<TallyClient["postWebhookEndpoint"]>[0], RequestOf<"postWebhookEndpoint">>>();
assertType<Equals<Parameters<TallyClient["patchWebhookEndpoint"]>[1], RequestOf<"patchWebhookEndpoint">>>();
assertType<Equals<Parameters<TallyClient["replayWebhookEvents"]>[1], RequestOf<"replayWebhookEvents">>>();
assertType<Equals<Parameters<TallyClient["putStripeIntegration"]>[0], RequestOf<"putStripeIntegration">>>();
assertType<Equals<RequestOf<"postBatch">, Schemas["BatchRequest"]>>();

// Answers are the document's response schemas.
assertType<Equals<Awaited<ReturnType<TallyClient["postUsageDebit"]>>["entry"], OkOf<"postUsageDebit">>>();
assertType<Equals<Awaited<ReturnType<TallyClient["getEntry"]>>, OkOf<"getEntry">>>();
assertType<Equals<Awaited<ReturnType<TallyClient["listEntries"]>>, OkOf<"listEntries">>>();
assertType<Equals<Awaited<ReturnType<TallyClient["getHold"]>>, OkOf<"getHold">>>();
assertType<Equals<Awaited<ReturnType<TallyClient["getAccount"]>>, OkOf<"getAccount">>>();
assertType<Equals<Awaited<ReturnType<TallyClient["putAccount"]>>, OkOf<"putAccount">>>();
assertType<Equals<Awaited<ReturnType<TallyClient["getBalance"]>>, OkOf<"getBalance">>>();
assertType<Equals<Awaited<ReturnType<TallyClient["getUsage"]>>, OkOf<"getUsage">>>();
assertType<Equals<Awaited<ReturnType<TallyClient["getStatement"]>>, OkOf<"getStatement">>>();
assertType<Equals<Awaited<ReturnType<TallyClient["getAuditHead"]>>, OkOf<"getAuditHead">>>();
assertType<Equals<Awaited<ReturnType<TallyClient["postAuditVerify"]>>, OkOf<"postAuditVerify">>>();
assertType<Equals<Awaited<ReturnType<TallyClient["listAccounts"]>>, OkOf<"listAccounts">>>();
assertType<Equals<Awaited<ReturnType<TallyClient["getHealthz"]>>, OkOf<"getHealthz">>>();
assertType<Equals<Awaited<ReturnType<TallyClient["listWebhookEndpoints"]>>, OkOf<"listWebhookEndpoints">>>();
assertType<Equals<Awaited<ReturnType<TallyClient["getWebhookEndpoint"]>>, OkOf<"getWebhookEndpoint">>>();
assertType<Equals<Awaited<ReturnType<TallyClient["patchWebhookEndpoint"]>>, OkOf<"patchWebhookEndpoint">>>();
assertType<Equals<Awaited<ReturnType<TallyClient["rotateWebhookSecret"]>>, OkOf<"rotateWebhookSecret">>>();
assertType<Equals<Awaited<ReturnType<TallyClient["listWebhookDeliveries"]>>, OkOf<"listWebhookDeliveries">>>();
assertType<Equals<Awaited<ReturnType<TallyClient["postWebhookEndpoint"]>>, Schemas["WebhookEndpointWithSecret"]>>();
assertType<Equals<Awaited<ReturnType<TallyClient["retryWebhookDelivery"]>>, Schemas["WebhookDelivery"]>>();
assertType<Equals<Awaited<ReturnType<TallyClient["replayWebhookEvents"]>>, Schemas["WebhookReplay"]>>();
assertType<Equals<Awaited<ReturnType<TallyClient["deleteWebhookEndpoint"]>>, void>>();
assertType<Equals<Awaited<ReturnType<TallyClient["putStripeIntegration"]>>, OkOf<"putStripeIntegration">>>();
assertType<Equals<Awaited<ReturnType<TallyClient["getStripeIntegration"]>>, OkOf<"getStripeIntegration">>>();
assertType<Equals<Awaited<ReturnType<TallyClient["listStripeEvents"]>>, OkOf<"listStripeEvents">>>();
assertType<Equals<Awaited<ReturnType<TallyClient["reapplyStripeEvent"]>>, OkOf<"reapplyStripeEvent">>>();
assertType<Equals<Awaited<ReturnType<TallyClient["deleteStripeIntegration"]>>, void>>();
assertType<Equals<Parameters<TallyClient["listStripeEvents"]>[0], ListStripeEventsQuery | undefined>>();
// Stripe's own delivery endpoint is not a client method.
assertType<Equals<"receiveStripeEvent" extends keyof TallyClient ? true : false, false>>();

// Intents: the document's request schemas (the members the server
// defaults are optional there too); a fail's error exactly {code, message}.
type Flat<T> = { [K in keyof T]: T[K] };
type Param<K extends keyof TallyClient, N extends number> = TallyClient[K] extends (...args: infer A) => unknown ? A[N] : never;
assertType<Equals<Flat<Param<"claimIntent", 0>>, RequestOf<"claimIntent">>>();
assertType<Equals<Flat<Param<"heartbeatIntent", 1>>, RequestOf<"heartbeatIntent">>>();
assertType<Equals<Param<"completeIntent", 1>["token"], RequestOf<"completeIntent">["token"]>>();
assertType<Equals<Param<"completeIntent", 1>["entries"], readonly BatchOperation[] | undefined>>();
assertType<Equals<Param<"failIntent", 1>["token"], RequestOf<"failIntent">["token"]>>();
assertType<Equals<Param<"failIntent", 1>["error"], IntentError>>();
assertType<Equals<Param<"failIntent", 1>["retryable"], RequestOf<"failIntent">["retryable"]>>();
assertType<Equals<keyof Param<"claimIntent", 0>, keyof RequestOf<"claimIntent">>>();
assertType<Equals<keyof Param<"completeIntent", 1>, keyof RequestOf<"completeIntent">>>();
assertType<Equals<keyof Param<"failIntent", 1>, keyof RequestOf<"failIntent">>>();
// ... and its answers the document's response schemas.
assertType<Equals<Awaited<ReturnType<TallyClient["claimIntent"]>>["intent"], OkOf<"claimIntent">>>();
assertType<Equals<Awaited<ReturnType<TallyClient["completeIntent"]>>["intent"], OkOf<"completeIntent">>>();
assertType<Equals<Awaited<ReturnType<TallyClient["completeIntent"]>>["entries"], readonly BatchItemResult[]>>();
assertType<Equals<Awaited<ReturnType<TallyClient["failIntent"]>>["intent"], OkOf<"failIntent">>>();
assertType<Equals<Awaited<ReturnType<TallyClient["heartbeatIntent"]>>, OkOf<"heartbeatIntent">>>();
assertType<Equals<Awaited<ReturnType<TallyClient["getIntent"]>>, OkOf<"getIntent">>>();
assertType<Equals<Awaited<ReturnType<TallyClient["listIntents"]>>, OkOf<"listIntents">>>();
assertType<Equals<StepLease["expiresAt"], Schemas["IntentLease"]["expires_at"]>>();
assertType<Equals<StepLease["fence"], Schemas["IntentLease"]["fence"]>>();

// Money and quantities are strings, in requests and answers.
assertType<Equals<Entry["amount"], string>>();
assertType<Equals<Entry["balance_after"], string>>();

declare const client: TallyClient;
export async function compileOnly(): Promise<void> {
  await client.postUsageDebit({ usage_record_id: "ur_1", account: "cust", amount: "0.0125", unit: "USD" });
  // @ts-expect-error money is never a JS number
  await client.postUsageDebit({ usage_record_id: "ur_1", account: "cust", amount: 0.0125, unit: "USD" });
  // @ts-expect-error the upstream ID is required: a retry must be a replay
  await client.postPayment({ account: "cust", amount: "10", unit: "USD" });
  // @ts-expect-error a capture names its hold and has its own upstream ID
  await client.postCapture("hold_1", { amount: "1" });
  // @ts-expect-error unknown fields are refused (the server says additionalProperties: false)
  await client.postRefund({ refund_id: "r", payment_id: "p", amount: "1", amout: "1" });
  // @ts-expect-error a batch operation needs its type
  await client.postBatch([{ usage_record_id: "ur_1", account: "cust", amount: "1", unit: "USD" }]);
  // @ts-expect-error an endpoint subscribes to documented event types only
  await client.postWebhookEndpoint({ url: "https://hooks.example.com/x", event_types: ["entry.created"] });
  // @ts-expect-error a statement needs its period
  await client.getStatement("cust", {});
  // @ts-expect-error the Stripe settings need their metadata key
  await client.putStripeIntegration({ signing_secrets: ["whsec_x"] });
  // @ts-expect-error events are filtered by a documented status only
  await client.listStripeEvents({ status: "failed" });

  // @ts-expect-error a claim needs its intent_id: a retry must name the same intent
  await client.claimIntent({ action: "invoice.charge", params: {} });
  // @ts-expect-error a fail's error is {code, message}
  await client.failIntent("inv_1", { token: "t", error: { code: "declined" } });
  // @ts-expect-error a complete's entries are batch operations, each with its type
  await client.completeIntent("inv_1", { token: "t", result: {}, entries: [{ payment_id: "p", account: "c", amount: "1", unit: "USD" }] });
}

declare const makeResult: typeof stepResult;
export async function onceTypes(): Promise<void> {
  // A step's plain return value is the outcome's result type.
  const plain = await client.once("inv_1", "invoice.charge", { amount: "49.00" }, async (lease) => {
    const attempt: number = lease.attempt;
    const signal: AbortSignal = lease.signal;
    void [attempt, signal];
    return { charge_id: "ch_1" };
  });
  assertType<Equals<typeof plain, IntentOutcome<{ charge_id: string }>>>();
  if (plain.status === "succeeded") {
    const chargeId: string = plain.result.charge_id;
    void chargeId;
  } else {
    const error: IntentError = plain.error;
    // @ts-expect-error a failed outcome has no result
    void plain.result.charge_id;
    void error;
  }
  // stepResult(result, entries): the result's type is the outcome's.
  const marked = await client.once("sum_1", "llm.summarize", {}, () =>
    makeResult({ tokens: 1250 }, [{ type: "usage_debit", usage_record_id: "ur_1", account: "c", amount: "0.01", unit: "USD" }]),
  );
  assertType<Equals<typeof marked, IntentOutcome<{ tokens: number }>>>();
  // @ts-expect-error entries carry money as decimal strings
  makeResult({}, [{ type: "payment", payment_id: "p", account: "c", amount: 1, unit: "USD" }]);
  // @ts-expect-error the lease is read-only
  await client.once("inv_1", "invoice.charge", {}, (lease) => { lease.token = "x"; });
  // @ts-expect-error options are checked
  await client.once("inv_1", "invoice.charge", {}, () => 1, { leaseSecond: 5 });
}
