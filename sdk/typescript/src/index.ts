/**
 * @tally/client — a retry-safe client for the tally usage ledger.
 *
 * Every call that records an entry takes the upstream system's stable ID
 * and sends the same bytes on every attempt, so a retry after a lost answer
 * is a replay (`replayed: true`), never a second entry. Only what may be
 * transient is retried (connection errors, timeouts, 429, 5xx), with capped
 * exponential backoff, full jitter and `Retry-After` as a floor.
 * `once()` does a costly action outside tally at most once per intent.
 */

export {
  TallyClient,
  SDK_VERSION,
  VERIFY_TIMEOUT_MS,
  type ClientOptions,
  type CallOptions,
  type EntryResult,
  type BatchResult,
  type BatchItemResult,
  type ClaimIntentInput,
  type CompleteIntentInput,
  type FailIntentInput,
  type HeartbeatIntentInput,
  type IntentResult,
  type IntentCompletionResult,
  type AuditExport,
  type AuditExportRecord,
  type SdkOperationId,
} from "./client.js";
export type { RetryEvent } from "./http.js";
export {
  RetryableStepError,
  StepResult,
  stepResult,
  DEFAULT_LEASE_SECONDS,
  DEFAULT_WAIT_BUDGET_MS,
  type Step,
  type StepLease,
  type OnceOptions,
  type IntentOutcome,
  type IntentSucceeded,
  type IntentFailed,
} from "./intents.js";
export {
  DEFAULT_RETRY_POLICY,
  backoffDelay,
  isRetryableStatus,
  parseRetryAfter,
  type RetryPolicy,
} from "./retry.js";
export {
  TallyError,
  MalformedJson,
  InvalidSignature,
  Unauthenticated,
  Forbidden,
  NotFound,
  MethodNotAllowed,
  IdempotencyConflict,
  IntentInProgress,
  LeaseLost,
  PayloadTooLarge,
  UnsupportedMediaType,
  InvalidRequest,
  UnitMismatch,
  RuleRejection,
  InsufficientFunds,
  HoldNotOpen,
  HoldExpired,
  RefundExceedsPayment,
  AlreadyReversed,
  TotalOutOfRange,
  RateLimited,
  Unavailable,
  Internal,
  TransportError,
  RetriesExhausted,
  DecodeError,
  problemError,
  type AttemptFailure,
  type AnswerContext,
} from "./errors.js";
export { OPERATIONS, PROBLEM_CODES } from "./generated/schema.js";
export type * from "./generated/schema.js";
export {
  verifyWebhook,
  signWebhook,
  WebhookVerificationError,
  DEFAULT_WEBHOOK_TOLERANCE_SECONDS,
  type WebhookEvent,
  type WebhookHeaders,
  type WebhookVerificationReason,
  type VerifyWebhookOptions,
} from "./webhooks.js";
