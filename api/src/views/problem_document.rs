//! The problem+json object as the document describes it; `crate::problem`
//! builds the bodies.

use serde::Serialize;
use utoipa::ToSchema;

use super::{Entry, FieldError};

/// The stable machine codes of problems (SPEC §3, docs/ledger-rules.md).
///
/// | status | code | when |
/// | --- | --- | --- |
/// | 400 | `malformed_json` | body is not JSON / wrong content type |
/// | 400 | `invalid_signature` | a Stripe delivery whose `Stripe-Signature` is missing, malformed, older than 300 s or made with no configured secret; nothing written |
/// | 401 | `unauthenticated` | no or unknown key |
/// | 403 | `forbidden` | key lacks the scope |
/// | 404 | `not_found` | unknown id, another tenant's object, a referenced hold/payment/entry that does not exist (`field` names it), or no such route |
/// | 405 | `method_not_allowed` | the path exists, the method does not |
/// | 409 | `idempotency_conflict` | same key, different fingerprint (`entry_id`, `differing_fields`); an intent with another `action` or `params` (`intent_id`, `differing_fields`) |
/// | 409 | `intent_in_progress` | another claim of the intent holds a live lease (`retry_after_seconds`, `fence`; `Retry-After`) |
/// | 409 | `lease_lost` | the token is not the intent's current claim's, or its outcome is another call's; nothing changed |
/// | 413 | `payload_too_large` | body over the limit (1 MiB; 8 MiB for `/v1/batch`) |
/// | 415 | `unsupported_media_type` | a JSON body declared in a `charset` other than UTF-8 |
/// | 422 | `invalid_request` | validation (`errors`); unknown fields and query parameters too |
/// | 422 | `unit_mismatch` | an account already has another unit (`account`, `unit`, `errors`) |
/// | 422 | `insufficient_funds` | stored rejection: below the overdraft floor (`entry`) |
/// | 422 | `hold_not_open` | stored rejection: the hold is captured, released, expired or rejected (`entry`) |
/// | 422 | `hold_expired` | stored rejection: capture after `expires_at` (`entry`) |
/// | 422 | `refund_exceeds_payment` | stored rejection: refunds would exceed the payment (`entry`) |
/// | 422 | `already_reversed` | stored rejection: the entry already has a reversal (`entry`) |
/// | 422 | `total_out_of_range` | stored rejection, no longer decided (totals have no digit limit): only the replay of an entry an earlier version rejected because a total would have passed 28 digits (`entry`) |
/// | 429 | `rate_limited` | writer queue full or the key over its rate limit; `Retry-After` |
/// | 500 | `internal` | a bug; nothing to retry |
/// | 503 | `unavailable` | database unreachable, server saturated or shutting down, request timed out; `Retry-After`; always retryable |
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum ProblemCode {
    MalformedJson,
    /// A Stripe delivery's `Stripe-Signature` does not hold.
    InvalidSignature,
    Unauthenticated,
    Forbidden,
    NotFound,
    MethodNotAllowed,
    IdempotencyConflict,
    PayloadTooLarge,
    UnsupportedMediaType,
    InvalidRequest,
    UnitMismatch,
    InsufficientFunds,
    HoldNotOpen,
    HoldExpired,
    RefundExceedsPayment,
    AlreadyReversed,
    TotalOutOfRange,
    RateLimited,
    Internal,
    Unavailable,
    /// Another claim of the intent holds a live lease (`Retry-After`).
    IntentInProgress,
    /// The token is not the intent's current claim's.
    LeaseLost,
}

/// An RFC 9457 problem (`application/problem+json`). Besides `type`,
/// `title`, `status`, `detail` and `code`, a problem carries the members
/// its code names.
#[derive(Serialize, ToSchema)]
#[schema(example = json!({
    "type": "/problems/idempotency_conflict", "title": "Idempotency conflict", "status": 409,
    "detail": "this upstream ID already names entry ent_0193a8d2c4f07b3e9a51c2d4e6f80a1b with other parameters (amount); a new request needs a new ID",
    "code": "idempotency_conflict", "entry_id": "ent_0193a8d2c4f07b3e9a51c2d4e6f80a1b",
    "differing_fields": ["amount"]
}))]
pub struct Problem {
    /// `/problems/<code>` (a relative URI).
    #[serde(rename = "type")]
    #[schema(format = "uri-reference", example = "/problems/invalid_request")]
    kind: String,
    title: String,
    /// The HTTP status.
    #[schema(minimum = 400, maximum = 599)]
    status: u16,
    detail: String,
    code: ProblemCode,
    /// `invalid_request`, `unit_mismatch`: every problem with the request
    /// at once.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    errors: Option<Vec<FieldError>>,
    /// `idempotency_conflict`: the entry the upstream ID already names.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    entry_id: Option<String>,
    /// `idempotency_conflict`: the request fields whose values differ from
    /// the original's.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    differing_fields: Option<Vec<String>>,
    /// Stored rejections (`insufficient_funds`, `hold_not_open`,
    /// `hold_expired`, `refund_exceeds_payment`, `already_reversed`,
    /// `total_out_of_range`, replays only): the rejected entry (`status: "rejected"`), identical on every replay.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    entry: Option<Entry>,
    /// `not_found` of a referenced object: the request field naming it
    /// (`hold_id`, `payment_id`, `entry_id`).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    field: Option<String>,
    /// `unit_mismatch`: the account and the unit it already has.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    account: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    unit: Option<String>,
    /// `idempotency_conflict`, `intent_in_progress`, `lease_lost` of an intent.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    intent_id: Option<String>,
    /// `intent_in_progress`: seconds until the live lease runs out (≥ 1), as
    /// in `Retry-After`.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    retry_after_seconds: Option<i64>,
    /// `intent_in_progress`: the live claim's fence.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    fence: Option<i64>,
}
