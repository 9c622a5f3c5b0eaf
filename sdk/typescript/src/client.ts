/**
 * `TallyClient`: one method per operation of the OpenAPI document (named
 * by its operationId), each sent through the retrying transport. Methods
 * and paths come from the generated operation table; request and response
 * types are the generated schemas.
 */

import { DecodeError, type TallyError, problemError } from "./errors.js";
import {
  type AccountSettingsRequest,
  type Account,
  type AccountPage,
  type AccountSummary,
  type AdjustmentRequest,
  type AuditHead,
  type AuditVerification,
  type Balance,
  type BatchItem,
  type BatchOperation,
  type CaptureRequest,
  type ClaimIntentRequest,
  type CompleteIntentRequest,
  type Entry,
  type EntryPage,
  type GetAuditExportQuery,
  type GetBalanceQuery,
  type GetStatementQuery,
  type GetUsageQuery,
  type FailIntentRequest,
  type Health,
  type HeartbeatIntentRequest,
  type Hold,
  type HoldRequest,
  type Intent,
  type IntentCompletion,
  type IntentError,
  type IntentPage,
  type ListAccountsQuery,
  type ListEntriesQuery,
  type ListIntentsQuery,
  type ListStripeEventsQuery,
  type ListWebhookDeliveriesQuery,
  OPERATIONS,
  type OperationId,
  type PaymentRequest,
  type RefundRequest,
  type ReleaseRequest,
  type ReversalRequest,
  type Schemas,
  type Statement,
  type StripeEvent,
  type StripeEventPage,
  type StripeIntegration,
  type StripeIntegrationRequest,
  type Usage,
  type UsageDebitRequest,
  type WebhookDelivery,
  type WebhookDeliveryPage,
  type WebhookEndpoint,
  type WebhookEndpointChangeRequest,
  type WebhookEndpointList,
  type WebhookEndpointRequest,
  type WebhookEndpointWithSecret,
  type WebhookReplay,
  type WebhookReplayRequest,
} from "./generated/schema.js";
import { requireDecimalStrings, requireUpstreamId } from "./guards.js";
import { type HttpAnswer, type RetryEvent, Transport } from "./http.js";
import { type IntentOutcome, type OnceOptions, type Step, runOnce } from "./intents.js";
import { DEFAULT_RETRY_POLICY, type RetryPolicy, jitter, validatePolicy } from "./retry.js";
import { type QueryValue, fillPath, queryString } from "./url.js";

export const SDK_VERSION = "0.1.0";

/**
 * The least timeout of one attempt of `postAuditVerify` (ms): the server
 * works on it up to 25 s on a big ledger. A larger `requestTimeoutMs` wins.
 */
export const VERIFY_TIMEOUT_MS = 30_000;

export interface ClientOptions {
  /** The server's root, e.g. `http://127.0.0.1:8080` (a path prefix is kept). */
  readonly baseUrl: string;
  /** An API key from `tally keys create`. */
  readonly apiKey: string;
  /** Overrides of {@link DEFAULT_RETRY_POLICY}. */
  readonly retry?: Partial<RetryPolicy>;
  /** Called before each wait between attempts (logging, metrics, tests). */
  readonly onRetry?: (event: RetryEvent) => void;
  /** The `fetch` to use; the global one by default. */
  readonly fetch?: typeof globalThis.fetch;
  readonly userAgent?: string;
  /** Jitter source, uniform in [0, 1); cryptographic randomness by default. */
  readonly random?: () => number;
}

/** Per-call options. */
export interface CallOptions {
  /** Cancels the call, between or during attempts; never retried. */
  readonly signal?: AbortSignal;
  /**
   * Sent as `X-Request-Id` on every attempt of the call (1–128 visible ASCII
   * characters), so the server's log shows the retries of one call together.
   * A new UUID per call by default.
   */
  readonly requestId?: string;
}

/** The answer of every call that records an entry. */
export interface EntryResult {
  readonly entry: Entry;
  /**
   * The entry already existed: 200 with `Idempotent-Replayed: true`. After
   * a retry this is normal: an earlier attempt committed, its answer was lost.
   */
  readonly replayed: boolean;
  /** This call created the entry (201). */
  readonly created: boolean;
  /** 201, or 200 for a replay. */
  readonly status: number;
  /** HTTP attempts made, 1 when nothing was retried. */
  readonly attempts: number;
  /** `X-Request-Id` of the answer. */
  readonly requestId: string | undefined;
  /** The response body exactly as received (a replay's is byte-identical). */
  readonly body: string;
}

/** One result of a batch: the single endpoint's answer, and its error if any. */
export type BatchItemResult = BatchItem & {
  /** The problem as the error its single endpoint would have thrown. */
  readonly error: TallyError | undefined;
};

export interface BatchResult {
  /** One per operation, in request order. */
  readonly results: readonly BatchItemResult[];
  readonly attempts: number;
  readonly requestId: string | undefined;
}


/**
 * `claimIntent`'s request: the document's `ClaimIntentRequest`
 * (`lease_seconds` defaults to 60, `max_attempts` to 5).
 */
export type ClaimIntentInput = ClaimIntentRequest;

/**
 * `completeIntent`'s request: the document's `CompleteIntentRequest`, with
 * `entries` optional and `result` any JSON value (`null` when left out; the
 * server stores any JSON, not only objects).
 */
export type CompleteIntentInput = { [P in Exclude<keyof CompleteIntentRequest, "result" | "entries">]: CompleteIntentRequest[P] } & {
  result?: unknown;
  entries?: readonly BatchOperation[];
};

/**
 * `failIntent`'s request: the document's `FailIntentRequest`, with `error`
 * exactly `{code, message}` (what the server accepts) and `retryable`
 * optional (default `false`).
 */
export type FailIntentInput = { [P in Exclude<keyof FailIntentRequest, "error" | "retryable">]: FailIntentRequest[P] } & {
  error: IntentError;
  retryable?: FailIntentRequest["retryable"];
};

/** `heartbeatIntent`'s request: the document's (`lease_seconds` defaults to 60). */
export type HeartbeatIntentInput = HeartbeatIntentRequest;

/** The answer of `claimIntent` and `failIntent`. */
export interface IntentResult<T extends Intent = Intent> {
  /**
   * The intent. After a claim answered 201 it has `lease` (`token`, `fence`,
   * `expires_at`), shown only in this answer; after a stored outcome,
   * `status` `succeeded` with `result` or `failed` with `error`.
   */
  readonly intent: T;
  /**
   * `Idempotent-Replayed: true`: for a claim, the outcome an earlier call
   * stored; for a complete or fail, the same call answered again (normal
   * after a retry whose first answer was lost).
   */
  readonly replayed: boolean;
  /** A claim that took the lease (201). */
  readonly created: boolean;
  /** 201 (a new claim) or 200. */
  readonly status: number;
  /** HTTP attempts made, 1 when nothing was retried. */
  readonly attempts: number;
  readonly requestId: string | undefined;
  /** The response body exactly as received (a replay's is byte-identical). */
  readonly body: string;
}

/** The answer of `completeIntent`. */
export interface IntentCompletionResult extends IntentResult<IntentCompletion> {
  /** One per entry sent, in order, each with `error` as in `postBatch`'s results: check every item. */
  readonly entries: readonly BatchItemResult[];
}

/** `GET /v1/audit/export`: the log as JSON Lines or CSV. */
export interface AuditExport {
  readonly format: "jsonl" | "csv";
  readonly contentType: string;
  /** From `Content-Disposition`, e.g. `tally-export-acme-1-42.jsonl`. */
  readonly filename: string | undefined;
  /** The export exactly as received: what `tally verify --export` checks. */
  readonly text: string;
  /**
   * JSON Lines only: each line parsed (`record` is `header`, `entry` or
   * `trailer`). The document gives these records no schema.
   */
  readonly records: readonly AuditExportRecord[] | undefined;
}

export interface AuditExportRecord {
  readonly record: "header" | "entry" | "trailer" | (string & {});
  readonly [key: string]: unknown;
}

/**
 * The operations this client covers: every `/v1` operation called with an
 * API key, and the probes. Not `receiveStripeEvent` (`POST
 * /v1/ingest/stripe/{endpoint_id}`, no scope): Stripe calls it, signing
 * the body with `Stripe-Signature`.
 */
export type SdkOperationId =
  | {
      [K in OperationId]: (typeof OPERATIONS)[K]["path"] extends `/v1/${string}`
        ? (typeof OPERATIONS)[K]["scopes"] extends readonly [] ? never : K
        : never;
    }[OperationId]
  | "getHealthz"
  | "getReadyz";

type Operations = typeof OPERATIONS;
/** The request body schema the document names for operation `K`. */
type RequestOf<K extends OperationId> = Operations[K]["requestBody"] extends keyof Schemas
  ? Schemas[Operations[K]["requestBody"]]
  : never;
type EntryOperationId =
  | "postUsageDebit"
  | "postPayment"
  | "postHold"
  | "postCapture"
  | "postRelease"
  | "postRefund"
  | "postReversal"
  | "postAdjustment";

/**
 * Operations that record an entry, and the request field holding their
 * upstream ID (checked against the document's request schemas).
 */
const UPSTREAM_ID = {
  postUsageDebit: "usage_record_id",
  postPayment: "payment_id",
  postHold: "hold_id",
  postCapture: "capture_id",
  postRelease: "release_id",
  postRefund: "refund_id",
  postReversal: "reversal_id",
  postAdjustment: "adjustment_id",
} as const satisfies { readonly [K in EntryOperationId]: keyof RequestOf<K> & string };

/** The upstream ID field of each batch operation type. */
const BATCH_UPSTREAM_ID: { readonly [T in BatchOperation["type"]]: keyof Extract<BatchOperation, { type: T }> & string } = {
  usage_debit: "usage_record_id",
  payment: "payment_id",
  hold: "hold_id",
  refund: "refund_id",
  reversal: "reversal_id",
};

const JSON_TYPE = "application/json";

export class TallyClient {
  readonly #transport: Transport;

  constructor(options: ClientOptions) {
    if (typeof options.baseUrl !== "string" || !/^https?:\/\//.test(options.baseUrl)) {
      throw new TypeError(`baseUrl must be an http(s) URL, got ${String(options.baseUrl)}`);
    }
    if (typeof options.apiKey !== "string" || options.apiKey === "") {
      throw new TypeError("apiKey is required");
    }
    const fetchImpl = options.fetch ?? globalThis.fetch;
    if (typeof fetchImpl !== "function") throw new TypeError("no fetch: Node ≥ 20 has one built in");
    this.#transport = new Transport({
      baseUrl: options.baseUrl.replace(/\/+$/, ""),
      apiKey: options.apiKey,
      policy: validatePolicy({ ...DEFAULT_RETRY_POLICY, ...definedOnly(options.retry ?? {}) }),
      fetch: fetchImpl,
      userAgent: options.userAgent ?? `tally-client-ts/${SDK_VERSION}`,
      random: options.random ?? jitter,
      onRetry: options.onRetry,
    });
  }

  /** The effective retry policy. */
  get retryPolicy(): RetryPolicy {
    return this.#transport.policy;
  }

  // --- entries --------------------------------------------------------

  /** `POST /v1/usage-debits`, keyed by `usage_record_id`. */
  postUsageDebit(request: UsageDebitRequest, options?: CallOptions): Promise<EntryResult> {
    return this.#postEntry("postUsageDebit", request, {}, options);
  }

  /** `POST /v1/payments`, keyed by `payment_id`. */
  postPayment(request: PaymentRequest, options?: CallOptions): Promise<EntryResult> {
    return this.#postEntry("postPayment", request, {}, options);
  }

  /**
   * `POST /v1/batch`: up to 1,000 operations, one result each, in order.
   * Transient failures retry the whole batch; its items keep their upstream
   * IDs, so what already committed is replayed, not doubled. A problem of
   * one item is in its result (`problem`, `error`), not thrown.
   */
  async postBatch(operations: readonly BatchOperation[], options?: CallOptions): Promise<BatchResult> {
    if (!Array.isArray(operations) || operations.length === 0) {
      throw new TypeError("postBatch: operations must be a non-empty array");
    }
    requireBatchOperations(operations, "postBatch", "operations");
    const answer = await this.#send("postBatch", { body: { operations } }, options);
    const parsed = decodeObject<{ results?: unknown }>(answer);
    if (!Array.isArray(parsed.results) || parsed.results.length !== operations.length) {
      throw new DecodeError(`expected ${operations.length} results`, answer.status, answer.text);
    }
    return { results: batchItemResults(parsed.results as BatchItem[]), attempts: answer.attempts, requestId: requestIdOf(answer) };
  }

  /** `GET /v1/entries/{id}`: the entry as first recorded (plus `reversed_by`). */
  async getEntry(id: string, options?: CallOptions): Promise<Entry> {
    return decodeEntry(await this.#send("getEntry", { path: { id } }, options));
  }

  /**
   * `GET /v1/entries`: one page; pass `next_after_seq` as `after_seq` for the next.
   * `wait_ms` (0–30,000) long-polls: when no entry matches yet, the server
   * answers as soon as one is committed, or with an empty page after the
   * wait; each attempt's timeout (`requestTimeoutMs`) is extended by it.
   * `status` (`posted` or `rejected`) and `upstream_id` (the
   * `usage_record_id`, `payment_id`, … that keyed an entry) filter further.
   */
  async listEntries(query: ListEntriesQuery = {}, options?: CallOptions): Promise<EntryPage> {
    const answer = await this.#send("listEntries", { query, waitMs: query.wait_ms }, options);
    const page = decodeObject<EntryPage>(answer);
    if (!Array.isArray(page.entries)) throw new DecodeError("no entries array", answer.status, answer.text);
    return page;
  }

  /** Every entry matching `query`, page after page (`limit` is the page size). */
  async *iterateEntries(query: ListEntriesQuery = {}, options?: CallOptions): AsyncGenerator<Entry, void, undefined> {
    let after = query.after_seq;
    for (;;) {
      const page = await this.listEntries(after === undefined ? query : { ...query, after_seq: after }, options);
      yield* page.entries;
      if (page.next_after_seq === null || page.next_after_seq === undefined) return;
      after = page.next_after_seq;
    }
  }

  // --- accounts -------------------------------------------------------

  /**
   * `GET /v1/accounts`: one page of the tenant's customer accounts that have
   * entries, in account order (bytes), each with its balance now; `q` keeps
   * those whose id contains it (ASCII letters in any case). Pass
   * `next_after` as `after` for the next page (or use `iterateAccounts`).
   */
  async listAccounts(query: ListAccountsQuery = {}, options?: CallOptions): Promise<AccountPage> {
    const answer = await this.#send("listAccounts", { query }, options);
    const page = decodeObject<AccountPage>(answer);
    if (!Array.isArray(page.accounts)) throw new DecodeError("no accounts array", answer.status, answer.text);
    return page;
  }

  /** Every account matching `query`, page after page (`limit` is the page size). */
  async *iterateAccounts(query: ListAccountsQuery = {}, options?: CallOptions): AsyncGenerator<AccountSummary, void, undefined> {
    let after = query.after;
    for (;;) {
      const page = await this.listAccounts(after === undefined ? query : { ...query, after }, options);
      yield* page.accounts;
      if (page.next_after === null || page.next_after === undefined) return;
      after = page.next_after;
    }
  }

  // --- holds ----------------------------------------------------------

  /** `POST /v1/holds`, keyed by `hold_id`. */
  postHold(request: HoldRequest, options?: CallOptions): Promise<EntryResult> {
    return this.#postEntry("postHold", request, {}, options);
  }

  /** `GET /v1/holds/{hold_id}`. */
  async getHold(holdId: string, options?: CallOptions): Promise<Hold> {
    return decodeObject<Hold>(await this.#send("getHold", { path: { hold_id: holdId } }, options));
  }

  /** `POST /v1/holds/{hold_id}/capture`, keyed by `capture_id`. */
  postCapture(holdId: string, request: CaptureRequest, options?: CallOptions): Promise<EntryResult> {
    return this.#postEntry("postCapture", request, { hold_id: holdId }, options);
  }

  /** `POST /v1/holds/{hold_id}/release`, keyed by `release_id`. */
  postRelease(holdId: string, request: ReleaseRequest, options?: CallOptions): Promise<EntryResult> {
    return this.#postEntry("postRelease", request, { hold_id: holdId }, options);
  }

  // --- rules ----------------------------------------------------------

  /** `POST /v1/refunds`, keyed by `refund_id`. */
  postRefund(request: RefundRequest, options?: CallOptions): Promise<EntryResult> {
    return this.#postEntry("postRefund", request, {}, options);
  }

  /** `POST /v1/reversals`, keyed by `reversal_id`. */
  postReversal(request: ReversalRequest, options?: CallOptions): Promise<EntryResult> {
    return this.#postEntry("postReversal", request, {}, options);
  }

  /** `POST /v1/adjustments` (scope `admin`), keyed by `adjustment_id`. */
  postAdjustment(request: AdjustmentRequest, options?: CallOptions): Promise<EntryResult> {
    return this.#postEntry("postAdjustment", request, {}, options);
  }

  // --- accounts -------------------------------------------------------

  /** `GET /v1/accounts/{account}`: settings and current balance. */
  async getAccount(account: string, options?: CallOptions): Promise<Account> {
    return decodeObject<Account>(await this.#send("getAccount", { path: { account } }, options));
  }

  /**
   * `PUT /v1/accounts/{account}` (scope `admin`): the settings in full.
   * Idempotent by content, so retrying it is always safe. `alerts:
   * { low_balance: "10" }` sets the low-balance alert; leaving `alerts` out
   * (or `{}`, or `low_balance: null`) sets none.
   */
  async putAccount(account: string, settings: AccountSettingsRequest, options?: CallOptions): Promise<Account> {
    requireDecimalStrings(settings, "putAccount");
    return decodeObject<Account>(await this.#send("putAccount", { path: { account }, body: settings }, options));
  }

  /** `GET /v1/accounts/{account}/balance`: now, `as_of_seq` or `as_of`. */
  async getBalance(account: string, query: GetBalanceQuery = {}, options?: CallOptions): Promise<Balance> {
    return decodeObject<Balance>(await this.#send("getBalance", { path: { account }, query }, options));
  }

  /** `GET /v1/accounts/{account}/usage`: per meter and day or month. */
  async getUsage(account: string, query: GetUsageQuery = {}, options?: CallOptions): Promise<Usage> {
    return decodeObject<Usage>(await this.#send("getUsage", { path: { account }, query }, options));
  }

  /** `GET /v1/accounts/{account}/statement`: `from` and `to` are required. */
  async getStatement(account: string, query: GetStatementQuery, options?: CallOptions): Promise<Statement> {
    return decodeObject<Statement>(await this.#send("getStatement", { path: { account }, query }, options));
  }

  // --- audit ----------------------------------------------------------

  /** `GET /v1/audit/export` (scope `audit`): the log, JSON Lines by default. */
  async getAuditExport(query: GetAuditExportQuery = {}, options?: CallOptions): Promise<AuditExport> {
    const format = query.format ?? "jsonl";
    if (format !== "jsonl" && format !== "csv") throw new TypeError(`format must be jsonl or csv, got ${format}`);
    const accept = format === "csv" ? "text/csv" : "application/x-ndjson";
    const answer = await this.#send("getAuditExport", { query, accept }, options);
    const disposition = answer.headers.get("content-disposition") ?? "";
    return {
      format,
      contentType: answer.headers.get("content-type") ?? "",
      filename: /filename="([^"]*)"/.exec(disposition)?.[1],
      text: answer.text,
      records: format === "jsonl" ? parseJsonLines(answer) : undefined,
    };
  }

  /** `GET /v1/audit/head` (scope `audit`): the chain head, signed when signing is on. */
  async getAuditHead(options?: CallOptions): Promise<AuditHead> {
    return decodeObject<AuditHead>(await this.#send("getAuditHead", {}, options));
  }

  /**
   * `POST /v1/audit/verify` (scope `audit`): the server checks the tenant's
   * ledger now (chain, fingerprints, balances, rule state, usage summaries)
   * and reports `verified`, `broken` (with `problems`) or `incomplete`. It
   * can take up to ~25 s on a big ledger, so each attempt may last
   * {@link VERIFY_TIMEOUT_MS} (or `requestTimeoutMs` if larger). It only
   * reads, so it is retried like every call.
   */
  async postAuditVerify(options?: CallOptions): Promise<AuditVerification> {
    const waitMs = Math.max(0, VERIFY_TIMEOUT_MS - this.#transport.policy.requestTimeoutMs);
    const answer = await this.#send("postAuditVerify", { waitMs }, options);
    const report = decodeObject<AuditVerification>(answer);
    if (typeof report.status !== "string" || !Array.isArray(report.problems)) {
      throw new DecodeError("not a verification report (no status or problems)", answer.status, answer.text);
    }
    return report;
  }

  // --- webhooks (scope `admin`) ---------------------------------------

  /**
   * `POST /v1/webhook-endpoints`: a new endpoint, with its signing `secret`
   * (`whsec_…`), shown only in this answer. Endpoints have no upstream ID:
   * when an attempt's answer is lost (connection error, timeout, 5xx) and
   * the call is retried, the server may have made the endpoint already, and
   * the retry makes a second one. Check `listWebhookEndpoints()` after a
   * `RetriesExhausted`, or pass `retry: { maxAttempts: 1 }` to never retry.
   */
  async postWebhookEndpoint(request: WebhookEndpointRequest, options?: CallOptions): Promise<WebhookEndpointWithSecret> {
    return decodeWebhookEndpoint<WebhookEndpointWithSecret>(
      await this.#send("postWebhookEndpoint", { body: request }, options),
      true,
    );
  }

  /** `GET /v1/webhook-endpoints`: every endpoint of the tenant, oldest first, without secrets. */
  async listWebhookEndpoints(options?: CallOptions): Promise<WebhookEndpointList> {
    const answer = await this.#send("listWebhookEndpoints", {}, options);
    const list = decodeObject<WebhookEndpointList>(answer);
    if (!Array.isArray(list.endpoints)) throw new DecodeError("no endpoints array", answer.status, answer.text);
    return list;
  }

  /** `GET /v1/webhook-endpoints/{id}`: the endpoint, without its secret. */
  async getWebhookEndpoint(id: string, options?: CallOptions): Promise<WebhookEndpoint> {
    return decodeWebhookEndpoint<WebhookEndpoint>(await this.#send("getWebhookEndpoint", { path: { id } }, options), false);
  }

  /**
   * `PATCH /v1/webhook-endpoints/{id}`: changes the fields given (`url`,
   * `event_types`, `description` — `null` clears it —, `enabled`); at least
   * one, or the server answers 422. The same change twice is the same
   * endpoint, so a retry is harmless.
   */
  async patchWebhookEndpoint(id: string, change: WebhookEndpointChangeRequest, options?: CallOptions): Promise<WebhookEndpoint> {
    return decodeWebhookEndpoint<WebhookEndpoint>(
      await this.#send("patchWebhookEndpoint", { path: { id }, body: change }, options),
      false,
    );
  }

  /**
   * `DELETE /v1/webhook-endpoints/{id}`: the endpoint and its deliveries
   * are gone (204, no body). A retry after a lost answer gets `NotFound`.
   */
  async deleteWebhookEndpoint(id: string, options?: CallOptions): Promise<void> {
    await this.#send("deleteWebhookEndpoint", { path: { id } }, options);
  }

  /**
   * `POST /v1/webhook-endpoints/{id}/rotate-secret`: a new `secret`; the
   * previous one also signs until `previous_secret_expires_at`. A retry
   * after a lost answer rotates again (the lost secret is never shown).
   */
  async rotateWebhookSecret(id: string, options?: CallOptions): Promise<WebhookEndpointWithSecret> {
    return decodeWebhookEndpoint<WebhookEndpointWithSecret>(
      await this.#send("rotateWebhookSecret", { path: { id } }, options),
      true,
    );
  }

  /**
   * `GET /v1/webhook-endpoints/{id}/deliveries`: one page, newest first,
   * each delivery with its attempts and the `event` as sent; pass
   * `next_after` as `after` for the next page.
   */
  async listWebhookDeliveries(id: string, query: ListWebhookDeliveriesQuery = {}, options?: CallOptions): Promise<WebhookDeliveryPage> {
    const answer = await this.#send("listWebhookDeliveries", { path: { id }, query }, options);
    const page = decodeObject<WebhookDeliveryPage>(answer);
    if (!Array.isArray(page.deliveries)) throw new DecodeError("no deliveries array", answer.status, answer.text);
    return page;
  }

  /**
   * `POST /v1/webhook-deliveries/{id}/retry` (202): the delivery is pending
   * again, due now, with the same event id (receivers deduplicate by it).
   */
  async retryWebhookDelivery(id: string, options?: CallOptions): Promise<WebhookDelivery> {
    const answer = await this.#send("retryWebhookDelivery", { path: { id } }, options);
    const delivery = decodeObject<WebhookDelivery>(answer);
    if (typeof delivery.id !== "string" || !Array.isArray(delivery.attempts)) {
      throw new DecodeError("not a delivery (no id or attempts)", answer.status, answer.text);
    }
    return delivery;
  }

  /**
   * `POST /v1/webhook-endpoints/{id}/replay` (202): the endpoint's events
   * from `from_seq` on are sent again with their original ids, at most
   * 10,000 entries per call; go on from `next_from_seq` until it is null.
   */
  async replayWebhookEvents(id: string, request: WebhookReplayRequest, options?: CallOptions): Promise<WebhookReplay> {
    return decodeObject<WebhookReplay>(await this.#send("replayWebhookEvents", { path: { id }, body: request }, options));
  }

  // --- the Stripe integration (docs/ingest.md) -------------------------

  /**
   * `PUT /v1/integrations/stripe` (scope `admin`): creates or replaces the
   * tenant's Stripe settings (`signing_secrets`: 1 to 5 `whsec_…` from
   * Stripe's dashboard, write-only; `account_metadata_key`: the
   * PaymentIntent metadata key naming the ledger account). The answer's
   * `endpoint_path` is the path to give Stripe; it stays the same when the
   * settings are replaced. The same settings again are harmless, so a
   * retry is.
   */
  async putStripeIntegration(request: StripeIntegrationRequest, options?: CallOptions): Promise<StripeIntegration> {
    return decodeStripeIntegration(await this.#send("putStripeIntegration", { body: request }, options));
  }

  /** `GET /v1/integrations/stripe` (scope `admin`): the settings, never the secrets; `NotFound` when none. */
  async getStripeIntegration(options?: CallOptions): Promise<StripeIntegration> {
    return decodeStripeIntegration(await this.#send("getStripeIntegration", {}, options));
  }

  /**
   * `DELETE /v1/integrations/stripe` (scope `admin`, 204): deliveries to its
   * path are refused from now on; the events received stay listed and
   * their entries stay in the ledger. `NotFound` when none is configured
   * (also for a retry after a lost answer).
   */
  async deleteStripeIntegration(options?: CallOptions): Promise<void> {
    await this.#send("deleteStripeIntegration", {}, options);
  }

  /**
   * `GET /v1/integrations/stripe/events` (scope `read`): one page of the
   * events received, in `event_id` order, filtered by `status` (`applied`,
   * `ignored`, `unmapped`); pass `next_after` as `after` for the next page
   * (or use `iterateStripeEvents`).
   */
  async listStripeEvents(query: ListStripeEventsQuery = {}, options?: CallOptions): Promise<StripeEventPage> {
    const answer = await this.#send("listStripeEvents", { query }, options);
    const page = decodeObject<StripeEventPage>(answer);
    if (!Array.isArray(page.events)) throw new DecodeError("no events array", answer.status, answer.text);
    return page;
  }

  /** Every Stripe event matching `query`, page after page (`limit` is the page size). */
  async *iterateStripeEvents(query: ListStripeEventsQuery = {}, options?: CallOptions): AsyncGenerator<StripeEvent, void, undefined> {
    let after = query.after;
    for (;;) {
      const page = await this.listStripeEvents(after === undefined ? query : { ...query, after }, options);
      yield* page.events;
      if (page.next_after === null || page.next_after === undefined) return;
      after = page.next_after;
    }
  }

  /**
   * `POST /v1/integrations/stripe/events/{event_id}/reapply` (scope `post`):
   * maps the recorded event again with the current settings and decides
   * its operations (for an `unmapped` event once its mapping is fixed);
   * resolves to the event as recorded now. Idempotent: the entries are
   * keyed by Stripe's ids, so what was applied before replays. `NotFound`
   * for an unknown event; `InvalidRequest` when no integration is configured.
   */
  async reapplyStripeEvent(eventId: string, options?: CallOptions): Promise<StripeEvent> {
    const answer = await this.#send("reapplyStripeEvent", { path: { event_id: eventId } }, options);
    const event = decodeObject<StripeEvent>(answer);
    if (typeof event.event_id !== "string" || typeof event.status !== "string") {
      throw new DecodeError("not a Stripe event (no event_id or status)", answer.status, answer.text);
    }
    return event;
  }

  // --- intents (docs/intents.md) ------------------------------------

  /**
   * `POST /v1/intents` (scope `post`), keyed by `intent_id`: 201 with the
   * `lease` when this call took it; 200 (`replayed`) with the stored outcome
   * (`succeeded` with `result`, `failed` with `error`). Another live claim
   * throws {@link IntentInProgress} at once, never retried by the client:
   * claim again after its `retryAfterSeconds` (or use {@link TallyClient.once}). A claim
   * whose answer was lost and retried meets its own lease that way: the
   * token is shown only once, so it waits for the lease to run out.
   */
  async claimIntent(request: ClaimIntentInput, options?: CallOptions): Promise<IntentResult> {
    requireUpstreamId(request, "intent_id", "claimIntent");
    const answer = await this.#send("claimIntent", { body: request }, options);
    const intent = decodeIntent(answer);
    if (answer.status === 201 && typeof intent.lease?.token !== "string") {
      throw new DecodeError("a new claim without its lease token", answer.status, answer.text);
    }
    return intentResult(answer, intent);
  }

  /**
   * `POST /v1/intents/{intent_id}/complete`: stores `succeeded` with
   * `result`, and commits `entries` (`/v1/batch` operations) in the same
   * transaction. A lost answer is retried with the same bytes, which the
   * server answers as a replay of the first. {@link LeaseLost} when the
   * token is not the current claim's (nothing written).
   */
  async completeIntent(intentId: string, request: CompleteIntentInput, options?: CallOptions): Promise<IntentCompletionResult> {
    requireToken(request, "completeIntent");
    if (request.result !== undefined && JSON.stringify(request.result) === undefined) {
      throw new TypeError(`completeIntent: result must be a JSON value, got ${typeof request.result}`);
    }
    const sent = request.entries;
    if (sent !== undefined) {
      if (!Array.isArray(sent)) throw new TypeError("completeIntent: entries must be an array of batch operations");
      requireBatchOperations(sent, "completeIntent", "entries");
    }
    const answer = await this.#send("completeIntent", { path: { intent_id: intentId }, body: request }, options);
    const intent = decodeIntent<IntentCompletion>(answer);
    if (!Array.isArray(intent.entries) || intent.entries.length !== (sent?.length ?? 0)) {
      throw new DecodeError(`expected ${sent?.length ?? 0} entries`, answer.status, answer.text);
    }
    return { ...intentResult(answer, intent), entries: batchItemResults(intent.entries) };
  }

  /**
   * `POST /v1/intents/{intent_id}/fail`: `retryable: false` (the default)
   * stores `failed` with `error`; `true` releases the lease (`released`),
   * or stores `failed` at the last allowed attempt. Retried and replayed
   * like a complete; {@link LeaseLost} when the token is not the current
   * claim's.
   */
  async failIntent(intentId: string, request: FailIntentInput, options?: CallOptions): Promise<IntentResult> {
    requireToken(request, "failIntent");
    const error: unknown = (request as { error?: unknown }).error;
    const { code, message } = (typeof error === "object" && error !== null ? error : {}) as Partial<Record<"code" | "message", unknown>>;
    if (typeof code !== "string" || code === "" || typeof message !== "string") {
      throw new TypeError("failIntent: error must be {code: a non-empty string, message: a string}");
    }
    const answer = await this.#send("failIntent", { path: { intent_id: intentId }, body: request }, options);
    return intentResult(answer, decodeIntent(answer));
  }

  /**
   * `POST /v1/intents/{intent_id}/heartbeat`: the live lease runs until now
   * + `lease_seconds` (never shortened); the answer's `lease_expires_at`
   * says until when. {@link LeaseLost} when the lease is no longer this
   * token's.
   */
  async heartbeatIntent(intentId: string, request: HeartbeatIntentInput, options?: CallOptions): Promise<Intent> {
    requireToken(request, "heartbeatIntent");
    return decodeIntent(await this.#send("heartbeatIntent", { path: { intent_id: intentId }, body: request }, options));
  }

  /** `GET /v1/intents/{intent_id}` (scope `read`): the intent and its `history` (never the token). */
  async getIntent(intentId: string, options?: CallOptions): Promise<Intent> {
    return decodeIntent(await this.#send("getIntent", { path: { intent_id: intentId } }, options));
  }

  /**
   * `GET /v1/intents` (scope `read`): one page in `intent_id` order,
   * filtered by `status` (as read now: an expired lease reads `released`)
   * and `action`; pass `next_after` as `after` for the next page.
   */
  async listIntents(query: ListIntentsQuery = {}, options?: CallOptions): Promise<IntentPage> {
    const answer = await this.#send("listIntents", { query }, options);
    const page = decodeObject<IntentPage>(answer);
    if (!Array.isArray(page.intents)) throw new DecodeError("no intents array", answer.status, answer.text);
    return page;
  }

  /** Every intent matching `query`, page after page (`limit` is the page size). */
  async *iterateIntents(query: ListIntentsQuery = {}, options?: CallOptions): AsyncGenerator<Intent, void, undefined> {
    let after = query.after;
    for (;;) {
      const page = await this.listIntents(after === undefined ? query : { ...query, after }, options);
      yield* page.intents;
      if (page.next_after === null || page.next_after === undefined) return;
      after = page.next_after;
    }
  }

  /**
   * Does `step` at most once for `intentId` (docs/intents.md): claims the
   * intent; a stored outcome is returned as it is (`replayed`, the step is
   * not called); while another claim holds the lease it claims again after
   * `Retry-After`, within `waitBudgetMs`, then throws {@link IntentInProgress}.
   * Otherwise it runs `await step(lease)`, extending the lease every third
   * of `leaseSeconds` while the step runs, and then completes the intent
   * with what the step returned (a JSON value, or `stepResult(result,
   * entries)` to commit ledger entries with it), or, if the step threw,
   * fails it (`retryable` for a {@link RetryableStepError}, final for any
   * other error) and throws the step's error again.
   */
  once<R>(intentId: string, action: string, params: ClaimIntentRequest["params"], step: Step<R>, options: OnceOptions = {}): Promise<IntentOutcome<R>> {
    return runOnce(this, intentId, action, params, step, options);
  }

  // --- probes ---------------------------------------------------------

  /** `GET /healthz`: the database answers. */
  async getHealthz(options?: CallOptions): Promise<Health> {
    return decodeObject<Health>(await this.#send("getHealthz", {}, options));
  }

  /** `GET /readyz`: this process should get traffic. */
  async getReadyz(options?: CallOptions): Promise<Health> {
    return decodeObject<Health>(await this.#send("getReadyz", {}, options));
  }

  // --- plumbing -------------------------------------------------------

  async #postEntry(
    id: keyof typeof UPSTREAM_ID,
    request: object,
    path: Readonly<Record<string, string>>,
    options: CallOptions | undefined,
  ): Promise<EntryResult> {
    requireUpstreamId(request, UPSTREAM_ID[id], id);
    requireDecimalStrings(request, id);
    const answer = await this.#send(id, { path, body: request }, options);
    const entry = decodeEntry(answer);
    return {
      entry,
      replayed: answer.headers.get("idempotent-replayed") === "true",
      created: answer.status === 201,
      status: answer.status,
      attempts: answer.attempts,
      requestId: requestIdOf(answer),
      body: answer.text,
    };
  }

  /** Builds the request of operation `id` from the generated table and sends it. */
  #send(
    id: SdkOperationId,
    parts: { path?: Readonly<Record<string, string>>; query?: object; body?: unknown; accept?: string; waitMs?: number | undefined },
    options: CallOptions | undefined,
  ): Promise<HttpAnswer> {
    const operation = OPERATIONS[id];
    if ((operation.requestBody === null) !== (parts.body === undefined)) {
      throw new Error(`${id}: the document says requestBody ${operation.requestBody}, the client disagrees`);
    }
    const path =
      fillPath(operation.path, parts.path ?? {}) +
      queryString(parts.query as Readonly<Record<string, QueryValue>> | undefined, operation.queryParams);
    return this.#transport.send({
      method: operation.method,
      path,
      body: parts.body === undefined ? undefined : JSON.stringify(parts.body),
      accept: parts.accept ?? JSON_TYPE,
      signal: options?.signal,
      requestId: options?.requestId ?? globalThis.crypto.randomUUID(),
      waitMs: parts.waitMs,
    });
  }
}

/**
 * Compile-time coverage: fails to build when the document gains a `/v1`
 * operation this class has no method for (the method is named by the
 * operationId).
 */
type MissingOperations = Exclude<SdkOperationId, keyof TallyClient>;
const everyOperationHasAMethod: [MissingOperations] extends [never] ? true : MissingOperations = true;
void everyOperationHasAMethod;

/** `{maxAttempts: undefined}` keeps the default rather than breaking the policy. */
function definedOnly<T extends object>(values: T): Partial<T> {
  return Object.fromEntries(Object.entries(values).filter(([, value]) => value !== undefined)) as Partial<T>;
}

function requestIdOf(answer: HttpAnswer): string | undefined {
  return answer.headers.get("x-request-id") ?? undefined;
}

function decodeObject<T>(answer: HttpAnswer): T {
  let value: unknown;
  try {
    value = JSON.parse(answer.text);
  } catch (error) {
    throw new DecodeError("not JSON", answer.status, answer.text, error);
  }
  if (typeof value !== "object" || value === null || Array.isArray(value)) {
    throw new DecodeError("not a JSON object", answer.status, answer.text);
  }
  return value as T;
}

function decodeEntry(answer: HttpAnswer): Entry {
  const entry = decodeObject<Entry>(answer);
  if (typeof entry.id !== "string" || typeof entry.seq !== "number") {
    throw new DecodeError("not an entry (no id or seq)", answer.status, answer.text);
  }
  return entry;
}

function decodeIntent<T extends Intent = Intent>(answer: HttpAnswer): T {
  const intent = decodeObject<T>(answer);
  if (typeof intent.intent_id !== "string" || typeof intent.status !== "string") {
    throw new DecodeError("not an intent (no intent_id or status)", answer.status, answer.text);
  }
  return intent;
}

function intentResult<T extends Intent>(answer: HttpAnswer, intent: T): IntentResult<T> {
  return {
    intent,
    replayed: answer.headers.get("idempotent-replayed") === "true",
    created: answer.status === 201,
    status: answer.status,
    attempts: answer.attempts,
    requestId: requestIdOf(answer),
    body: answer.text,
  };
}

/** A finish or heartbeat names its claim by the lease's token. */
function requireToken(request: unknown, operation: string): void {
  const token: unknown = typeof request === "object" && request !== null ? (request as { token?: unknown }).token : undefined;
  if (typeof token !== "string" || token === "") {
    throw new TypeError(`${operation}: token is required (the lease.token of the claim's 201 answer)`);
  }
}

/** Each batch operation (of `postBatch`, or a complete's `entries`) has a known `type` and its upstream ID. */
function requireBatchOperations(operations: readonly unknown[], operation: string, field: string): void {
  operations.forEach((item, index) => {
    const type: unknown = (item as { type?: unknown } | null)?.type;
    const idField = typeof type === "string" && Object.hasOwn(BATCH_UPSTREAM_ID, type)
      ? BATCH_UPSTREAM_ID[type as BatchOperation["type"]]
      : undefined;
    if (idField === undefined) {
      throw new TypeError(`${operation}: ${field}[${index}].type must be one of ${Object.keys(BATCH_UPSTREAM_ID).join(", ")}`);
    }
    requireUpstreamId(item, idField, `${operation}: ${field}[${index}]`);
  });
  requireDecimalStrings(operations, operation, field);
}

/** Batch items with each problem as the error its single endpoint would have thrown. */
function batchItemResults(items: readonly BatchItem[]): BatchItemResult[] {
  return items.map((item) => ({
    ...item,
    error: item.problem === undefined ? undefined : problemError(item.status, item.problem, { replayed: item.replayed }),
  }));
}

function decodeWebhookEndpoint<T extends WebhookEndpoint>(answer: HttpAnswer, withSecret: boolean): T {
  const endpoint = decodeObject<T>(answer);
  if (typeof endpoint.id !== "string" || !Array.isArray(endpoint.event_types)) {
    throw new DecodeError("not a webhook endpoint (no id or event_types)", answer.status, answer.text);
  }
  if (withSecret && typeof (endpoint as { secret?: unknown }).secret !== "string") {
    throw new DecodeError("no secret in the answer", answer.status, answer.text);
  }
  return endpoint;
}

function decodeStripeIntegration(answer: HttpAnswer): StripeIntegration {
  const integration = decodeObject<StripeIntegration>(answer);
  if (typeof integration.endpoint_path !== "string" || typeof integration.signing_secrets_count !== "number") {
    throw new DecodeError("not a Stripe integration (no endpoint_path or signing_secrets_count)", answer.status, answer.text);
  }
  return integration;
}

function parseJsonLines(answer: HttpAnswer): AuditExportRecord[] {
  return answer.text
    .split("\n")
    .filter((line) => line.trim() !== "")
    .map((line, index) => {
      try {
        return JSON.parse(line) as AuditExportRecord;
      } catch (error) {
        throw new DecodeError(`line ${index + 1} of the export is not JSON`, answer.status, answer.text, error);
      }
    });
}
