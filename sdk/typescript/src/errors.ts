/**
 * What the client throws. Three families:
 *
 * - {@link TallyError}: the server answered with a problem (RFC 9457
 *   `application/problem+json`); one subclass per problem `code`.
 * - {@link TransportError}: no answer (connection refused or reset, the
 *   attempt timed out). The server may or may not have committed; a retry
 *   with the same upstream ID is safe and answers as a replay.
 * - {@link RetriesExhausted}: the retry policy gave up; carries the last
 *   failure and the number of attempts.
 *
 * Plus {@link DecodeError} for a success answer whose body is not what the
 * API promises.
 */

import type { Entry, FieldError, Problem, ProblemCode } from "./generated/schema.js";
import { isRetryableStatus } from "./retry.js";

/** What every error built from an HTTP answer knows about that answer. */
export interface AnswerContext {
  /** `X-Request-Id` of the answer: quote it to whoever runs the server. */
  readonly requestId?: string | undefined;
  /** `Retry-After`, in milliseconds, when the server sent one. */
  readonly retryAfterMs?: number | undefined;
  /** `Idempotent-Replayed: true`: the stored answer of an earlier request. */
  readonly replayed?: boolean | undefined;
}

/**
 * A problem answered by the server. `problem` is the whole body as
 * received (with members this SDK does not know yet).
 */
export class TallyError extends Error {
  override name = "TallyError";
  /** The HTTP status. */
  readonly status: number;
  /** The problem's stable machine code (e.g. `idempotency_conflict`). */
  readonly code: ProblemCode | (string & {});
  /** The human-readable explanation. */
  readonly detail: string;
  /** The problem+json body exactly as parsed. */
  readonly problem: Problem;
  readonly requestId: string | undefined;
  readonly retryAfterMs: number | undefined;
  /**
   * The server answered from what it stored for this upstream ID
   * (`Idempotent-Replayed: true`): a stored rejection seen again on a retry.
   */
  readonly replayed: boolean;

  constructor(status: number, problem: Problem, context: AnswerContext = {}) {
    const rawCode: unknown = problem.code;
    const rawDetail: unknown = problem.detail;
    const code = typeof rawCode === "string" && rawCode !== "" ? rawCode : `http_${status}`;
    const detail = typeof rawDetail === "string" ? rawDetail : "";
    super(`tally answered ${status} ${code}${detail ? `: ${detail}` : ""}`);
    this.status = status;
    this.code = code;
    this.detail = detail;
    this.problem = problem;
    this.requestId = context.requestId;
    this.retryAfterMs = context.retryAfterMs;
    this.replayed = context.replayed ?? false;
  }

  /** Whether the same request may succeed later (429 and 5xx). */
  get retryable(): boolean {
    return isRetryableStatus(this.status);
  }
}

// --- 4xx: final answers ------------------------------------------------

/** 400 `malformed_json`: the body is not JSON, or not sent as JSON. */
export class MalformedJson extends TallyError {
  override name = "MalformedJson";
}

/**
 * 400 `invalid_signature`: a Stripe delivery (`POST /v1/ingest/stripe/…`)
 * whose `Stripe-Signature` is missing, malformed, stale or made with no
 * configured secret; nothing was written. Only Stripe calls that endpoint:
 * this client never gets it from its own methods.
 */
export class InvalidSignature extends TallyError {
  override name = "InvalidSignature";
}

/** 401 `unauthenticated`: no or unknown API key. */
export class Unauthenticated extends TallyError {
  override name = "Unauthenticated";
}

/** 403 `forbidden`: the API key lacks the scope the operation needs. */
export class Forbidden extends TallyError {
  override name = "Forbidden";
}

/**
 * 404 `not_found`: no such object (or another tenant's), or no such route.
 * For a referenced object (a refund's payment, a capture's hold, a
 * reversal's entry), `field` names the request field.
 */
export class NotFound extends TallyError {
  override name = "NotFound";
  readonly field: string | undefined;
  constructor(status: number, problem: Problem, context?: AnswerContext) {
    super(status, problem, context);
    this.field = typeof problem.field === "string" ? problem.field : undefined;
  }
}

/** 405 `method_not_allowed`. */
export class MethodNotAllowed extends TallyError {
  override name = "MethodNotAllowed";
}

/**
 * 409 `idempotency_conflict`: the upstream ID already names an entry with
 * other parameters, or the `intent_id` an intent with another `action` or
 * other `params`. A new request needs a new ID; retrying cannot help.
 */
export class IdempotencyConflict extends TallyError {
  override name = "IdempotencyConflict";
  /** The entry the upstream ID already names (`""` for an intent's conflict). */
  readonly entryId: string;
  /** The intent the `intent_id` already names (a claim's conflict only). */
  readonly intentId: string | undefined;
  /** The request fields whose values differ from the original's (`action`, `params.<key>` for an intent). */
  readonly differingFields: readonly string[];
  constructor(status: number, problem: Problem, context?: AnswerContext) {
    super(status, problem, context);
    this.entryId = typeof problem.entry_id === "string" ? problem.entry_id : "";
    this.intentId = typeof problem.intent_id === "string" ? problem.intent_id : undefined;
    this.differingFields = Array.isArray(problem.differing_fields) ? [...problem.differing_fields] : [];
  }
}

/**
 * 409 `intent_in_progress`: another claim of the intent holds a live lease;
 * nothing was written. Final for the retry policy (a claim is not retried
 * blindly): claim again after `retryAfterSeconds`, when that lease has run
 * out or the intent has its outcome. `once()` does exactly that, within its
 * `waitBudgetMs`.
 */
export class IntentInProgress extends TallyError {
  override name = "IntentInProgress";
  readonly intentId: string | undefined;
  /** Seconds until the live lease runs out (at least 1): `retry_after_seconds`, else `Retry-After`. */
  readonly retryAfterSeconds: number;
  /** The live claim's fence. */
  readonly fence: number | undefined;
  constructor(status: number, problem: Problem, context?: AnswerContext) {
    super(status, problem, context);
    this.intentId = typeof problem.intent_id === "string" ? problem.intent_id : undefined;
    const fromBody = problem.retry_after_seconds;
    const fromHeader = context?.retryAfterMs;
    this.retryAfterSeconds =
      typeof fromBody === "number" && Number.isFinite(fromBody) && fromBody >= 0
        ? fromBody
        : fromHeader !== undefined
          ? Math.ceil(fromHeader / 1000)
          : 1;
    this.fence = typeof problem.fence === "number" ? problem.fence : undefined;
  }
}

/**
 * 409 `lease_lost`: the token is not the intent's current claim's (the lease
 * ran out and another claim took the intent), or the intent's outcome was
 * stored by another call. Nothing changed; this worker must not finish the
 * intent. (The very same complete or fail sent again is a replay, never this.)
 */
export class LeaseLost extends TallyError {
  override name = "LeaseLost";
  readonly intentId: string | undefined;
  constructor(status: number, problem: Problem, context?: AnswerContext) {
    super(status, problem, context);
    this.intentId = typeof problem.intent_id === "string" ? problem.intent_id : undefined;
  }
}

/** 413 `payload_too_large`. */
export class PayloadTooLarge extends TallyError {
  override name = "PayloadTooLarge";
}

/** 415 `unsupported_media_type`. */
export class UnsupportedMediaType extends TallyError {
  override name = "UnsupportedMediaType";
}

/** 422 `invalid_request`: `errors` lists every problem with the request at once. */
export class InvalidRequest extends TallyError {
  override name = "InvalidRequest";
  readonly errors: readonly FieldError[];
  constructor(status: number, problem: Problem, context?: AnswerContext) {
    super(status, problem, context);
    this.errors = Array.isArray(problem.errors) ? [...problem.errors] : [];
  }
}

/** 422 `unit_mismatch`: `account` already holds another `unit`. */
export class UnitMismatch extends InvalidRequest {
  override name = "UnitMismatch";
  readonly account: string | undefined;
  readonly unit: string | undefined;
  constructor(status: number, problem: Problem, context?: AnswerContext) {
    super(status, problem, context);
    this.account = typeof problem.account === "string" ? problem.account : undefined;
    this.unit = typeof problem.unit === "string" ? problem.unit : undefined;
  }
}

/**
 * 422, a ledger rule said no. A stored rejection carries the rejected
 * entry (`status: "rejected"`, in the log, the same body on every replay):
 * a new attempt needs a new upstream ID.
 */
export class RuleRejection extends TallyError {
  override name = "RuleRejection";
  /** The stored rejected entry; absent only when nothing was stored. */
  readonly entry: Entry | undefined;
  constructor(status: number, problem: Problem, context?: AnswerContext) {
    super(status, problem, context);
    this.entry = isObject(problem.entry) ? problem.entry : undefined;
  }
}

/** 422 `insufficient_funds` (stored): below the account's overdraft floor. */
export class InsufficientFunds extends RuleRejection {
  override name = "InsufficientFunds";
}

/**
 * 422 `hold_not_open`: the hold was captured, released, expired or itself
 * rejected. Stored (with `entry`) when decided by the writer.
 */
export class HoldNotOpen extends RuleRejection {
  override name = "HoldNotOpen";
}

/** 422 `hold_expired` (stored): capture after the hold's `expires_at`. */
export class HoldExpired extends RuleRejection {
  override name = "HoldExpired";
}

/** 422 `refund_exceeds_payment` (stored). */
export class RefundExceedsPayment extends RuleRejection {
  override name = "RefundExceedsPayment";
}

/** 422 `already_reversed` (stored): the entry already has a reversal. */
export class AlreadyReversed extends RuleRejection {
  override name = "AlreadyReversed";
}

/**
 * 422 `total_out_of_range` (stored): only the replay of an entry an earlier
 * server version rejected because a total would have passed 28 digits;
 * totals no longer have a limit.
 */
export class TotalOutOfRange extends RuleRejection {
  override name = "TotalOutOfRange";
}

// --- retryable answers -------------------------------------------------

/** 429 `rate_limited`: retried after `Retry-After`. */
export class RateLimited extends TallyError {
  override name = "RateLimited";
}

/** 503 `unavailable`: nothing was committed, or a replay will say so; retried. */
export class Unavailable extends TallyError {
  override name = "Unavailable";
}

/** 500 `internal`: a server bug. Retried like every 5xx, as the Rust client does. */
export class Internal extends TallyError {
  override name = "Internal";
}

// --- no answer, or no usable answer -----------------------------------

/**
 * No answer: the connection failed, was reset, or the attempt timed out.
 * The server may have committed; a retry under the same upstream ID is a
 * replay, never a second entry.
 */
export class TransportError extends Error {
  override name = "TransportError";
  /** The attempt hit the policy's `requestTimeoutMs`. */
  readonly timeout: boolean;
  readonly retryable = true;
  constructor(message: string, options: { timeout: boolean; cause?: unknown }) {
    super(`no answer from tally (${options.timeout ? "timed out" : "connection failed"}): ${message}`, {
      cause: options.cause,
    });
    this.timeout = options.timeout;
  }
}

/** A failure of one attempt that the retry loop reasons about. */
export type AttemptFailure = TallyError | TransportError;

/** The retry policy gave up: attempts or time budget spent. */
export class RetriesExhausted extends Error {
  override name = "RetriesExhausted";
  /** HTTP attempts made, the first included. */
  readonly attempts: number;
  /** Milliseconds since the first attempt started. */
  readonly elapsedMs: number;
  /** The failure of the last attempt (also `cause`). */
  readonly lastError: AttemptFailure;
  /** Why it stopped: the attempt limit, or the next wait would pass the budget. */
  readonly reason: "max_attempts" | "time_budget";
  constructor(attempts: number, elapsedMs: number, lastError: AttemptFailure, reason: "max_attempts" | "time_budget") {
    super(
      `gave up after ${attempts} attempt(s) in ${(elapsedMs / 1000).toFixed(1)} s ` +
        `(${reason === "max_attempts" ? "attempt limit" : "time budget"}); last error: ${lastError.message}`,
      { cause: lastError },
    );
    this.attempts = attempts;
    this.elapsedMs = elapsedMs;
    this.lastError = lastError;
    this.reason = reason;
  }

  /** The HTTP status of the last answer, if the last attempt got one. */
  get status(): number | undefined {
    return this.lastError instanceof TallyError ? this.lastError.status : undefined;
  }

  /** The problem code of the last answer, if the last attempt got one. */
  get code(): string | undefined {
    return this.lastError instanceof TallyError ? this.lastError.code : undefined;
  }
}

/** A success answer whose body is not what the API promises. */
export class DecodeError extends Error {
  override name = "DecodeError";
  readonly status: number;
  readonly body: string;
  constructor(message: string, status: number, body: string, cause?: unknown) {
    super(`unexpected response body (HTTP ${status}): ${message}`, { cause });
    this.status = status;
    this.body = body;
  }
}

// --- mapping ----------------------------------------------------------

type ProblemErrorClass = new (status: number, problem: Problem, context?: AnswerContext) => TallyError;

/**
 * The error class of each problem code. Typed over every code of the
 * document: a code added to the server's `ProblemCode` fails compilation
 * here until it has a class.
 */
const ERROR_BY_CODE: { readonly [C in ProblemCode]: ProblemErrorClass } = {
  malformed_json: MalformedJson,
  invalid_signature: InvalidSignature,
  unauthenticated: Unauthenticated,
  forbidden: Forbidden,
  not_found: NotFound,
  method_not_allowed: MethodNotAllowed,
  idempotency_conflict: IdempotencyConflict,
  intent_in_progress: IntentInProgress,
  lease_lost: LeaseLost,
  payload_too_large: PayloadTooLarge,
  unsupported_media_type: UnsupportedMediaType,
  invalid_request: InvalidRequest,
  unit_mismatch: UnitMismatch,
  insufficient_funds: InsufficientFunds,
  hold_not_open: HoldNotOpen,
  hold_expired: HoldExpired,
  refund_exceeds_payment: RefundExceedsPayment,
  already_reversed: AlreadyReversed,
  total_out_of_range: TotalOutOfRange,
  rate_limited: RateLimited,
  internal: Internal,
  unavailable: Unavailable,
};

/** The class for a status when the body has no known code (a proxy's 502, …). */
function classForStatus(status: number): ProblemErrorClass {
  switch (status) {
    case 401:
      return Unauthenticated;
    case 403:
      return Forbidden;
    case 404:
      return NotFound;
    case 429:
      return RateLimited;
    case 500:
      return Internal;
    default:
      return status >= 500 ? Unavailable : TallyError;
  }
}

/**
 * The error for a problem answer: the class of its `code`, else of its
 * status. `body` is the parsed JSON when there was any.
 */
export function problemError(status: number, body: unknown, context: AnswerContext = {}): TallyError {
  const problem: Problem = isObject(body)
    ? (body as unknown as Problem)
    : ({ type: "about:blank", title: "", status, detail: "", code: "" } as unknown as Problem);
  const code = problem.code;
  const byCode = typeof code === "string" && Object.hasOwn(ERROR_BY_CODE, code) ? ERROR_BY_CODE[code] : undefined;
  if (byCode) return new byCode(status, problem, context);
  // A stored rejection whose code this SDK does not know yet still carries its entry.
  if (status === 422 && isObject(problem.entry)) return new RuleRejection(status, problem, context);
  const Class = classForStatus(status);
  return new Class(status, problem, context);
}

function isObject(value: unknown): value is Record<string, never> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}
