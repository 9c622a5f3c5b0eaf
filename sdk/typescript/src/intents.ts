/**
 * `once()`: a costly action done at most once per intent (docs/intents.md).
 *
 * Claim the intent; a stored outcome is the answer (the step is not run);
 * another live claim is waited out (`Retry-After`), within a budget.
 * Otherwise run the step under the lease, extend the lease every third of
 * its length while the step runs, and finish the intent with the step's
 * outcome: complete with what it returned (and the ledger entries it asked
 * for), or fail with what it threw. Complete and fail whose answer is lost
 * are retried with the same bytes by the client, and the server answers
 * them as replays.
 */

import { Buffer } from "node:buffer";
import type { BatchItemResult, ClaimIntentInput, IntentResult, TallyClient } from "./client.js";
import { DecodeError, IntentInProgress, LeaseLost } from "./errors.js";
import type { BatchOperation, ClaimIntentRequest, Intent, IntentError } from "./generated/schema.js";
import { anySignal, sleep } from "./http.js";

/** A claim's lease length when `once()` is not told (the server's default too). */
export const DEFAULT_LEASE_SECONDS = 60;

/** How long `once()` keeps claiming while another claim holds the lease, by default (ms). */
export const DEFAULT_WAIT_BUDGET_MS = 60_000;

/** Server limits of a fail's `error` (UTF-8 bytes). */
const MAX_ERROR_CODE_BYTES = 128;
const MAX_ERROR_MESSAGE_BYTES = 4096;

/** What the step is given: the claim it works under. */
export interface StepLease {
  readonly intentId: string;
  readonly action: string;
  /** The intent's `params` as stored. */
  readonly params: Intent["params"];
  /**
   * 1 for the first claim; more than 1 means an earlier attempt may have
   * acted before it failed or stalled: look downstream before acting again.
   */
  readonly attempt: number;
  readonly maxAttempts: number;
  /** Grows by one with every claim of the intent (`<intent_id>:<fence>` is a per-attempt key). */
  readonly fence: number;
  /** The lease's secret (the client sends it with the heartbeats and the finish). */
  readonly token: string;
  /** When the lease runs out (RFC 3339); moved on by every heartbeat. */
  readonly expiresAt: string;
  /**
   * Aborted when the lease is lost (a heartbeat answered `lease_lost`; the
   * reason is the {@link LeaseLost}) or `once()`'s own `signal` aborts. A
   * step that can stop early should pass it on.
   */
  readonly signal: AbortSignal;
}

/**
 * What a step returns to commit ledger entries with its result: made by
 * {@link stepResult}. Anything else a step returns is the result itself
 * (a plain `{result, entries}` object included).
 */
export class StepResult<R> {
  /** Stored as the intent's `result` (JSON). */
  readonly result: R;
  /**
   * `/v1/batch` operations (each with its `type` and upstream ID),
   * committed in the same transaction as the outcome: both or neither.
   */
  readonly entries: readonly BatchOperation[];
  constructor(result: R, entries: readonly BatchOperation[] = []) {
    this.result = result;
    this.entries = entries;
  }
}

/** A step's result with the ledger entries to commit with it. */
export function stepResult<R>(result: R, entries: readonly BatchOperation[] = []): StepResult<R> {
  return new StepResult(result, entries);
}

/**
 * Thrown by a step whose failure may pass (a timeout, a provider's 429 or
 * 5xx): `once()` fails the intent with `retryable: true`, which releases it
 * for the next call (`attempt` + 1), until `max_attempts`. Every other
 * error a step throws fails the intent for good.
 */
export class RetryableStepError extends Error {
  override name = "RetryableStepError";
  /** Stored as the intent's `error.code` (1–128 bytes). */
  readonly code: string;
  constructor(message: string, options: { code?: string; cause?: unknown } = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.code = options.code !== undefined && options.code !== "" ? options.code : "retryable";
  }
}

/** The work `once()` does under the lease. */
export type Step<R> = (lease: StepLease) => R | StepResult<R> | PromiseLike<R | StepResult<R>>;

export interface OnceOptions {
  /**
   * The lease's length in seconds (1–3600, default 60). While the step
   * runs, a heartbeat every third of it extends the lease.
   */
  readonly leaseSeconds?: number;
  /** Claims allowed before the intent fails for good (1–100, server default 5); fixed by the first claim. */
  readonly maxAttempts?: number;
  /**
   * How long (ms) to keep claiming again while another claim holds the
   * lease (`intent_in_progress`): no wait starts that would end after it,
   * and the last {@link IntentInProgress} is thrown. Default 60,000; 0
   * throws at the first.
   */
  readonly waitBudgetMs?: number;
  /** Called before each wait for another claim's lease. */
  readonly onWait?: (event: { readonly error: IntentInProgress; readonly delayMs: number }) => void;
  /**
   * Cancels the claim and the waits, and is passed on to the step in
   * `lease.signal`. A complete or fail, once started, is not cancelled (the
   * step has acted: its outcome must be stored). A step that throws after
   * this signal aborted is reported retryable: a worker that was stopped
   * releases the intent rather than failing it for good.
   */
  readonly signal?: AbortSignal;
}

/** `once()` stored (or found) a result. */
export interface IntentSucceeded<R> {
  readonly status: "succeeded";
  /** The stored result, as JSON: this call's step's, or an earlier call's. */
  readonly result: R;
  readonly error?: undefined;
  /** The outcome an earlier call stored: the step did not run in this call. */
  readonly replayed: boolean;
  /**
   * The answers to the step's entries, in order, each with `error` as in
   * `postBatch`; empty when `replayed` (a claim's answer does not repeat them).
   */
  readonly entries: readonly BatchItemResult[];
  /** The intent as last answered. */
  readonly intent: Intent;
}

/**
 * The intent's stored outcome is a failure (an earlier call's step threw a
 * final error, or its last attempt failed or ran out). A step that throws
 * in this call is thrown instead.
 */
export interface IntentFailed {
  readonly status: "failed";
  readonly result?: undefined;
  /** `{code, message}` as stored. */
  readonly error: IntentError;
  readonly replayed: true;
  readonly entries: readonly [];
  readonly intent: Intent;
}

export type IntentOutcome<R> = IntentSucceeded<R> | IntentFailed;

type Mutable<T> = { -readonly [K in keyof T]: T[K] };

/** `TallyClient.once` (see there). */
export async function runOnce<R>(
  client: TallyClient,
  intentId: string,
  action: string,
  params: ClaimIntentRequest["params"],
  step: Step<R>,
  options: OnceOptions,
): Promise<IntentOutcome<R>> {
  if (typeof step !== "function") throw new TypeError("once: step must be a function");
  const leaseSeconds = options.leaseSeconds ?? DEFAULT_LEASE_SECONDS;
  if (!Number.isInteger(leaseSeconds) || leaseSeconds < 1 || leaseSeconds > 3600) {
    throw new RangeError(`once: leaseSeconds must be an integer from 1 to 3600, got ${String(leaseSeconds)}`);
  }
  const budgetMs = options.waitBudgetMs ?? DEFAULT_WAIT_BUDGET_MS;
  if (typeof budgetMs !== "number" || !Number.isFinite(budgetMs) || budgetMs < 0) {
    throw new RangeError(`once: waitBudgetMs must be a finite number ≥ 0, got ${String(budgetMs)}`);
  }
  const signal = options.signal;
  const request: ClaimIntentInput = {
    intent_id: intentId,
    action,
    ...(params === undefined ? {} : { params }),
    lease_seconds: leaseSeconds,
    ...(options.maxAttempts === undefined ? {} : { max_attempts: options.maxAttempts }),
  };

  // Claim, waiting out another claim's live lease within the budget.
  const started = performance.now();
  let claim: IntentResult;
  for (;;) {
    try {
      claim = await client.claimIntent(request, signal === undefined ? undefined : { signal });
      break;
    } catch (error) {
      if (!(error instanceof IntentInProgress)) throw error;
      const delayMs = Math.max(1, error.retryAfterSeconds) * 1000;
      if (performance.now() - started + delayMs > budgetMs) throw error;
      options.onWait?.({ error, delayMs });
      await sleep(delayMs, signal);
    }
  }

  const intent = claim.intent;
  const grant = intent.lease;
  if (claim.status !== 201 || grant === null || grant === undefined) {
    if (intent.status === "succeeded") {
      return { status: "succeeded", result: storedResult<R>(intent), replayed: true, entries: [], intent };
    }
    if (intent.status === "failed") {
      const error = intent.error ?? { code: "", message: "" };
      return { status: "failed", error, replayed: true, entries: [], intent };
    }
    throw new DecodeError(`a claim answered ${claim.status} with status ${intent.status} and no lease`, claim.status, claim.body);
  }

  const lost = new AbortController();
  const lease: Mutable<StepLease> = {
    intentId,
    action: intent.action,
    params: intent.params,
    attempt: intent.attempt,
    maxAttempts: intent.max_attempts,
    fence: grant.fence,
    token: grant.token,
    expiresAt: grant.expires_at,
    signal: signal === undefined ? lost.signal : anySignal(signal, lost.signal),
  };
  const heartbeat = startHeartbeat(client, lease, leaseSeconds, lost);
  let returned: R | StepResult<R>;
  try {
    returned = await step(lease);
  } catch (error) {
    await heartbeat.stop();
    if (!lost.signal.aborted) {
      const retryable = error instanceof RetryableStepError || signal?.aborted === true;
      try {
        await client.failIntent(intentId, { token: lease.token, error: stepError(error), retryable });
      } catch {
        // The step's error is what the caller needs. The lease then runs
        // out, and the intent reads `released`: the next call runs the step.
      }
    }
    throw error;
  }
  await heartbeat.stop();

  const { result, entries } = returned instanceof StepResult ? returned : { result: returned, entries: [] };
  const completion = await client.completeIntent(intentId, {
    token: lease.token,
    result: result === undefined ? null : result,
    ...(entries.length === 0 ? {} : { entries }),
  });
  return {
    status: "succeeded",
    result: storedResult<R>(completion.intent),
    replayed: false,
    entries: completion.entries,
    intent: completion.intent,
  };
}

/** `result` as the server stored it (any JSON; absent means null). */
function storedResult<R>(intent: Intent): R {
  return (intent.result === undefined ? null : intent.result) as unknown as R;
}

/**
 * Heartbeats every third of the lease while the step runs, one at a time.
 * A `lease_lost` answer stops them and aborts `lost`; other failures (the
 * server unreachable past the retry policy) are left to the next beat, and
 * the finish decides.
 */
function startHeartbeat(
  client: TallyClient,
  lease: Mutable<StepLease>,
  leaseSeconds: number,
  lost: AbortController,
): { stop(): Promise<void> } {
  const stopped = new AbortController();
  let inFlight: Promise<void> | undefined;
  const beat = (): void => {
    if (inFlight !== undefined || lost.signal.aborted || stopped.signal.aborted) return;
    inFlight = client
      .heartbeatIntent(lease.intentId, { token: lease.token, lease_seconds: leaseSeconds }, { signal: stopped.signal })
      .then(
        (intent) => {
          if (typeof intent.lease_expires_at === "string") lease.expiresAt = intent.lease_expires_at;
        },
        (error: unknown) => {
          if (error instanceof LeaseLost) {
            clearInterval(timer);
            lost.abort(error);
          }
        },
      )
      .finally(() => {
        inFlight = undefined;
      });
  };
  const timer = setInterval(beat, (leaseSeconds * 1000) / 3);
  return {
    async stop() {
      clearInterval(timer);
      stopped.abort();
      await inFlight;
    },
  };
}

/** A thrown value as a fail's `error`: its `code` (a string) or its name, and its message. */
export function stepError(error: unknown): IntentError {
  const raw: unknown = typeof error === "object" && error !== null ? (error as { code?: unknown }).code : undefined;
  const code = typeof raw === "string" && raw !== "" ? raw : error instanceof Error && error.name !== "" ? error.name : "error";
  const message = error instanceof Error ? error.message : String(error);
  return { code: truncateUtf8(code, MAX_ERROR_CODE_BYTES), message: truncateUtf8(message, MAX_ERROR_MESSAGE_BYTES) };
}

/** At most `limit` UTF-8 bytes of `text`, cut between characters. */
function truncateUtf8(text: string, limit: number): string {
  let bytes = 0;
  let end = 0;
  for (const char of text) {
    const size = Buffer.byteLength(char, "utf8");
    if (bytes + size > limit) break;
    bytes += size;
    end += char.length;
  }
  return text.slice(0, end);
}
