//! Schemas of the OpenAPI document that no handler type carries: the
//! request bodies (handlers read bodies as raw JSON objects, so that every
//! field error is reported at once, see [`crate::body`]), the problem
//! object, and the query parameters.
//!
//! These types are never built; they only describe. They cannot drift
//! silently: tests/openapi.rs checks each request schema's properties
//! against the parser's field list (`tally_ledger::intent::request_fields`)
//! and posts each schema's example to a real server, and the query
//! parameters the handlers accept are read from the [`IntoParams`] types
//! below (`QueryParams::documented`).

#![allow(dead_code)]

use std::collections::BTreeMap;

use serde::Serialize;
use tally_ledger::entry::EntryView;
use tally_ledger::fields::FieldError;
use tally_ledger::intent::EntryKind;
use tally_ledger::names::{MAX_METADATA_KEYS, MAX_METADATA_KEY_BYTES, MAX_METADATA_VALUE_BYTES};
use utoipa::openapi::schema::{ObjectBuilder, Schema, Type};
use utoipa::openapi::RefOr;
use utoipa::{IntoParams, ToSchema};

/// A decimal string: digits, optionally a point and more digits; at most
/// 28 significant and 18 fractional digits.
pub const DECIMAL_PATTERN: &str = r"^[0-9]+(\.[0-9]+)?$";

/// `metadata`: string keys (1–40 bytes, no control characters) to string
/// values (at most 500 bytes); at most 50 keys. Written by hand for
/// `maxProperties`, which the derive cannot say of a map.
#[derive(Serialize)]
pub struct Metadata(BTreeMap<String, String>);

impl utoipa::PartialSchema for Metadata {
    fn schema() -> RefOr<Schema> {
        ObjectBuilder::new()
            .schema_type(Type::Object)
            .description(Some(
                "String keys (1–40 bytes, no control characters) to string values (at most \
                 500 bytes); at most 50 keys.",
            ))
            .property_names(Some(
                ObjectBuilder::new()
                    .schema_type(Type::String)
                    .min_length(Some(1))
                    .max_length(Some(MAX_METADATA_KEY_BYTES)),
            ))
            .additional_properties(Some(
                ObjectBuilder::new()
                    .schema_type(Type::String)
                    .max_length(Some(MAX_METADATA_VALUE_BYTES)),
            ))
            .max_properties(Some(MAX_METADATA_KEYS))
            .examples([serde_json::json!({"model": "m1"})])
            .into()
    }
}

impl ToSchema for Metadata {}

/// `POST /v1/usage-debits`: debit a customer account for usage (credits
/// `@revenue`, or `counter_account`).
#[derive(Serialize, ToSchema)]
#[schema(example = json!({
    "usage_record_id": "ur_123", "account": "cust_42", "amount": "0.0125", "unit": "USD",
    "meter": "llm-tokens", "quantity": "1250", "occurred_at": "2026-11-29T10:00:00Z",
    "metadata": {"model": "m1"}
}))]
pub struct UsageDebitRequest {
    /// The upstream usage-record ID: the idempotency key (1–255 bytes, no
    /// control characters).
    #[schema(min_length = 1, max_length = 255)]
    usage_record_id: String,
    /// The customer account debited (1–128 bytes; not a `@` system account).
    #[schema(min_length = 1, max_length = 128)]
    account: String,
    /// A decimal string > 0 (a JSON number is accepted only if it converts
    /// exactly).
    #[schema(
        format = "decimal",
        pattern = r"^[0-9]+(\.[0-9]+)?$",
        example = "0.0125"
    )]
    amount: String,
    /// Currency or usage unit (1–32 bytes of `A–Z a–z 0–9 _ - . :`,
    /// case-sensitive). Fixed by an account's first entry.
    #[schema(min_length = 1, max_length = 32, pattern = r"^[A-Za-z0-9_.:-]+$")]
    unit: String,
    /// The meter that measured the usage (1–128 bytes).
    #[schema(min_length = 1, max_length = 128)]
    meter: Option<String>,
    /// A decimal string ≥ 0.
    #[schema(format = "decimal", pattern = r"^[0-9]+(\.[0-9]+)?$")]
    quantity: Option<String>,
    /// When the usage happened, RFC 3339 (any offset).
    #[schema(format = DateTime)]
    occurred_at: Option<String>,
    /// The account credited instead of `@revenue` (may be a system account;
    /// not `account` itself).
    #[schema(min_length = 1, max_length = 128)]
    counter_account: Option<String>,
    metadata: Option<Metadata>,
}

/// `POST /v1/payments`: credit a customer account with a payment (debits
/// `@payments`, or `counter_account`).
#[derive(Serialize, ToSchema)]
#[schema(example = json!({
    "payment_id": "pay_123", "account": "cust_42", "amount": "10.00", "unit": "USD",
    "processor": "stripe", "occurred_at": "2026-11-29T09:00:00Z"
}))]
pub struct PaymentRequest {
    /// The upstream payment event ID: the idempotency key (1–255 bytes).
    #[schema(min_length = 1, max_length = 255)]
    payment_id: String,
    /// The customer account credited (not a `@` system account).
    #[schema(min_length = 1, max_length = 128)]
    account: String,
    /// A decimal string > 0.
    #[schema(
        format = "decimal",
        pattern = r"^[0-9]+(\.[0-9]+)?$",
        example = "10.00"
    )]
    amount: String,
    #[schema(min_length = 1, max_length = 32, pattern = r"^[A-Za-z0-9_.:-]+$")]
    unit: String,
    /// The payment processor (1–128 bytes).
    #[schema(min_length = 1, max_length = 128)]
    processor: Option<String>,
    /// When the payment happened, RFC 3339.
    #[schema(format = DateTime)]
    occurred_at: Option<String>,
    /// The account debited instead of `@payments` (the overdraft floor
    /// applies when it is a customer account).
    #[schema(min_length = 1, max_length = 128)]
    counter_account: Option<String>,
    metadata: Option<Metadata>,
}

/// `POST /v1/holds`: reserve an amount of a customer's available balance.
/// Exactly one of `expires_at` and `ttl_seconds` is required.
#[derive(Serialize, ToSchema)]
#[schema(example = json!({
    "hold_id": "hold_123", "account": "cust_42", "amount": "5.00", "unit": "USD",
    "ttl_seconds": 3600
}))]
pub struct HoldRequest {
    /// The upstream hold ID: the idempotency key, and the hold's name in
    /// `/v1/holds/{hold_id}`.
    #[schema(min_length = 1, max_length = 255)]
    hold_id: String,
    #[schema(min_length = 1, max_length = 128)]
    account: String,
    /// A decimal string > 0.
    #[schema(format = "decimal", pattern = r"^[0-9]+(\.[0-9]+)?$", example = "5.00")]
    amount: String,
    #[schema(min_length = 1, max_length = 32, pattern = r"^[A-Za-z0-9_.:-]+$")]
    unit: String,
    /// RFC 3339, in the future and at most 366 days ahead. Not with
    /// `ttl_seconds`.
    #[schema(format = DateTime)]
    expires_at: Option<String>,
    /// Seconds from the hold's `recorded_at` (1–2,592,000). Not with
    /// `expires_at`.
    #[schema(minimum = 1, maximum = 2_592_000)]
    ttl_seconds: Option<i64>,
    /// The account a capture credits (default `@revenue`).
    #[schema(min_length = 1, max_length = 128)]
    counter_account: Option<String>,
    metadata: Option<Metadata>,
}

/// `POST /v1/holds/{hold_id}/capture`: post up to the held amount; the rest
/// of the hold is released.
#[derive(Serialize, ToSchema)]
#[schema(example = json!({"capture_id": "cap_123", "amount": "3.50"}))]
pub struct CaptureRequest {
    /// The upstream capture ID: the idempotency key.
    #[schema(min_length = 1, max_length = 255)]
    capture_id: String,
    /// A decimal string > 0, at most the held amount.
    #[schema(format = "decimal", pattern = r"^[0-9]+(\.[0-9]+)?$", example = "3.50")]
    amount: String,
    metadata: Option<Metadata>,
}

/// `POST /v1/holds/{hold_id}/release`: give the whole hold back.
#[derive(Serialize, ToSchema)]
#[schema(example = json!({"release_id": "rel_123"}))]
pub struct ReleaseRequest {
    /// The upstream release ID: the idempotency key; may not start with `@`
    /// (reserved for the server's release of an expired hold).
    #[schema(min_length = 1, max_length = 255)]
    release_id: String,
    metadata: Option<Metadata>,
}

/// `POST /v1/refunds`: give (part of) a payment back.
#[derive(Serialize, ToSchema)]
#[schema(example = json!({
    "refund_id": "ref_123", "payment_id": "pay_123", "amount": "2.50",
    "reason": "duplicate charge"
}))]
pub struct RefundRequest {
    /// The upstream refund ID: the idempotency key.
    #[schema(min_length = 1, max_length = 255)]
    refund_id: String,
    /// The refunded payment's `payment_id`.
    #[schema(min_length = 1, max_length = 255)]
    payment_id: String,
    /// A decimal string > 0; all refunds of a payment total at most the
    /// payment.
    #[schema(format = "decimal", pattern = r"^[0-9]+(\.[0-9]+)?$", example = "2.50")]
    amount: String,
    /// At most 500 bytes.
    #[schema(min_length = 1, max_length = 500)]
    reason: Option<String>,
    metadata: Option<Metadata>,
}

/// `POST /v1/reversals`: the compensating entry of a posted entry.
#[derive(Serialize, ToSchema)]
#[schema(example = json!({
    "reversal_id": "rev_123", "entry_id": "ent_0193a8d2c4f07b3e9a51c2d4e6f80a1b",
    "reason": "usage recorded twice upstream"
}))]
pub struct ReversalRequest {
    /// The upstream reversal ID: the idempotency key.
    #[schema(min_length = 1, max_length = 255)]
    reversal_id: String,
    /// The `id` of the entry to reverse (a posted entry that moves money).
    #[schema(min_length = 1, max_length = 255)]
    entry_id: String,
    /// At most 500 bytes.
    #[schema(min_length = 1, max_length = 500)]
    reason: String,
    metadata: Option<Metadata>,
}

/// Which way an adjustment moves money.
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum Direction {
    /// To the account, from `@adjustments`.
    Credit,
    /// From the account, to `@adjustments`.
    Debit,
}

/// `POST /v1/adjustments` (scope `admin`): a correction against
/// `@adjustments`; no overdraft floor applies.
#[derive(Serialize, ToSchema)]
#[schema(example = json!({
    "adjustment_id": "adj_123", "account": "cust_42", "amount": "1.00", "unit": "USD",
    "direction": "credit", "reason": "support credit"
}))]
pub struct AdjustmentRequest {
    /// The upstream adjustment ID: the idempotency key.
    #[schema(min_length = 1, max_length = 255)]
    adjustment_id: String,
    #[schema(min_length = 1, max_length = 128)]
    account: String,
    /// A decimal string > 0.
    #[schema(format = "decimal", pattern = r"^[0-9]+(\.[0-9]+)?$", example = "1.00")]
    amount: String,
    /// Defaults to the account's unit (required if the account has none).
    #[schema(min_length = 1, max_length = 32, pattern = r"^[A-Za-z0-9_.:-]+$")]
    unit: Option<String>,
    direction: Direction,
    /// At most 500 bytes.
    #[schema(min_length = 1, max_length = 500)]
    reason: String,
    metadata: Option<Metadata>,
}

/// `"allow"` or `"forbid"`.
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum OverdraftMode {
    /// No floor (the default).
    Allow,
    /// `available` may not go below 0.
    Forbid,
}

/// `available` may not go below `−limit`.
#[derive(Serialize, ToSchema)]
pub struct OverdraftLimit {
    /// A decimal string ≥ 0.
    #[schema(
        format = "decimal",
        pattern = r"^[0-9]+(\.[0-9]+)?$",
        example = "50.00"
    )]
    limit: String,
}

/// An account's overdraft floor: `"allow"` (default), `"forbid"` or
/// `{"limit": "<amount ≥ 0>"}`. Usage debits, holds, refunds and payments
/// from a customer `counter_account` that would take `available` below it
/// are stored as rejections (`insufficient_funds`).
#[derive(Serialize, ToSchema)]
#[serde(untagged)]
pub enum Overdraft {
    Mode(OverdraftMode),
    Limit(OverdraftLimit),
}

/// `PUT /v1/accounts/{account}` (scope `admin`): the account's settings,
/// in full. Idempotent by content: the same settings write nothing.
#[derive(Serialize, ToSchema)]
#[schema(example = json!({"unit": "USD", "overdraft": {"limit": "50.00"}, "metadata": {"plan": "pro"}}))]
pub struct AccountSettingsRequest {
    /// The account's unit; cannot change once the account has one.
    #[schema(min_length = 1, max_length = 32, pattern = r"^[A-Za-z0-9_.:-]+$")]
    unit: String,
    overdraft: Option<Overdraft>,
    metadata: Option<Metadata>,
}

/// One operation of a batch: the body of its single endpoint plus `type`.
#[derive(Serialize, ToSchema)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum BatchOperation {
    UsageDebit(UsageDebitRequest),
    Payment(PaymentRequest),
    Hold(HoldRequest),
    Refund(RefundRequest),
    Reversal(ReversalRequest),
}

/// `POST /v1/batch`: 1 to 1,000 operations, decided in order in one group.
#[derive(Serialize, ToSchema)]
#[schema(example = json!({"operations": [
    {"type": "payment", "payment_id": "pay_b1", "account": "cust_7", "amount": "20", "unit": "USD"},
    {"type": "usage_debit", "usage_record_id": "ur_b1", "account": "cust_7", "amount": "0.50",
     "unit": "USD", "meter": "api-calls", "quantity": "50"}
]}))]
pub struct BatchRequest {
    #[schema(min_items = 1, max_items = 1000)]
    operations: Vec<BatchOperation>,
}

/// The stable machine codes of problems (SPEC §3, docs/ledger-rules.md).
///
/// | status | code | when |
/// | --- | --- | --- |
/// | 400 | `malformed_json` | body is not JSON / wrong content type |
/// | 401 | `unauthenticated` | no or unknown key |
/// | 403 | `forbidden` | key lacks the scope |
/// | 404 | `not_found` | unknown id, another tenant's object, a referenced hold/payment/entry that does not exist (`field` names it), or no such route |
/// | 405 | `method_not_allowed` | the path exists, the method does not |
/// | 409 | `idempotency_conflict` | same key, different fingerprint (`entry_id`, `differing_fields`) |
/// | 413 | `payload_too_large` | body over the limit (1 MiB; 8 MiB for `/v1/batch`) |
/// | 415 | `unsupported_media_type` | a JSON body declared in a `charset` other than UTF-8 |
/// | 422 | `invalid_request` | validation (`errors`); unknown fields and query parameters too |
/// | 422 | `unit_mismatch` | an account already has another unit (`account`, `unit`, `errors`) |
/// | 422 | `insufficient_funds` | stored rejection: below the overdraft floor (`entry`) |
/// | 422 | `hold_not_open` | stored rejection: the hold is captured, released, expired or rejected (`entry`) |
/// | 422 | `hold_expired` | stored rejection: capture after `expires_at` (`entry`) |
/// | 422 | `refund_exceeds_payment` | stored rejection: refunds would exceed the payment (`entry`) |
/// | 422 | `already_reversed` | stored rejection: the entry already has a reversal (`entry`) |
/// | 422 | `total_out_of_range` | stored rejection: a total of an account it touches (`debits`, `credits`, `held`, `posted`, `available`) or a payment's refunded total would leave the amount domain, 28 significant digits of which at most 18 fractional (`entry`) |
/// | 429 | `rate_limited` | writer queue full or the key over its rate limit; `Retry-After` |
/// | 500 | `internal` | a bug; nothing to retry |
/// | 503 | `unavailable` | database unreachable, server saturated or shutting down, request timed out; `Retry-After`; always retryable |
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum ProblemCode {
    MalformedJson,
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
}

/// An RFC 9457 problem (`application/problem+json`). Besides `type`,
/// `title`, `status`, `detail` and `code`, a problem carries the members
/// its code names.
#[derive(Serialize, ToSchema)]
#[schema(example = json!({
    "type": "/problems/idempotency_conflict", "title": "Idempotency conflict", "status": 409,
    "detail": "this upstream ID already names entry ent_0193a8d2c4f07b3e9a51c2d4e6f80a1b with other parameters (amount); a new intent needs a new ID",
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
    /// `total_out_of_range`): the rejected entry (`status: "rejected"`), identical on every replay.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    entry: Option<EntryView>,
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
}

/// What a hold is now.
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum HoldStatus {
    Open,
    Captured,
    Released,
    /// Released by the server when its time ran out.
    Expired,
    /// The hold itself was rejected (e.g. insufficient funds).
    Rejected,
}

/// `GET /healthz`, `GET /readyz`.
#[derive(Serialize, ToSchema)]
#[schema(example = json!({"status": "ok", "engine": "sqlite"}))]
pub struct Health {
    /// `ok` (`/healthz`) or `ready` (`/readyz`).
    status: String,
    /// `sqlite` or `postgres`.
    engine: String,
    /// `/readyz`: the latest applied migration.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    schema_version: Option<i64>,
}

/// Query of `GET /v1/entries`.
#[derive(IntoParams)]
#[into_params(parameter_in = Query)]
pub struct EntriesQuery {
    /// Entries whose debit or credit side is this account (system accounts too).
    #[param(example = "cust_42")]
    account: Option<String>,
    /// Only entries of this kind.
    kind: Option<EntryKind>,
    /// Entries with `seq` greater than this (pass the previous page's
    /// `next_after_seq`); default 0.
    #[param(minimum = 0, example = 0)]
    after_seq: Option<i64>,
    /// Page size, 1–1,000; default 100.
    #[param(minimum = 1, maximum = 1000, example = 100)]
    limit: Option<i64>,
    /// `recorded_at` at or after this RFC 3339 time.
    #[param(format = DateTime, example = "2026-11-01T00:00:00Z")]
    from: Option<String>,
    /// `recorded_at` before this RFC 3339 time.
    #[param(format = DateTime, example = "2026-12-01T00:00:00Z")]
    to: Option<String>,
}

/// Query of `GET /v1/accounts/{account}/balance`.
#[derive(IntoParams)]
#[into_params(parameter_in = Query)]
pub struct BalanceQuery {
    /// The balance as of this log position (not beyond the head). Not with
    /// `as_of`.
    #[param(minimum = 0, example = 17)]
    as_of_seq: Option<i64>,
    /// The balance from the entries recorded at or before this RFC 3339
    /// time (not in the future). Not with `as_of_seq`.
    #[param(format = DateTime, example = "2026-11-29T12:00:00Z")]
    as_of: Option<String>,
    /// Required for a system account holding several units.
    #[param(example = "USD")]
    unit: Option<String>,
}

/// Query of `GET /v1/accounts/{account}/usage`.
#[derive(IntoParams)]
#[into_params(parameter_in = Query)]
pub struct UsageQuery {
    /// Only this meter (exact match).
    #[param(example = "llm-tokens")]
    meter: Option<String>,
    /// First day included: `YYYY-MM-DD`, or an RFC 3339 time taken as its
    /// UTC date.
    #[param(example = "2026-11-01")]
    from: Option<String>,
    /// First day excluded (same forms); after `from`.
    #[param(example = "2026-12-01")]
    to: Option<String>,
    /// `day` (default) or `month`.
    granularity: Option<tally_projections::usage::Granularity>,
}

/// Query of `GET /v1/accounts/{account}/statement`.
#[derive(IntoParams)]
#[into_params(parameter_in = Query)]
pub struct StatementQuery {
    /// Start of the period (inclusive), RFC 3339, on `recorded_at`.
    #[param(format = DateTime, example = "2026-11-01T00:00:00Z")]
    from: String,
    /// End of the period (exclusive), RFC 3339; after `from`, not in the
    /// future.
    #[param(format = DateTime, example = "2026-11-29T00:00:00Z")]
    to: String,
    /// Required for a system account holding several units.
    #[param(example = "USD")]
    unit: Option<String>,
}

/// Query of `GET /v1/audit/export`.
#[derive(IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ExportQuery {
    /// `jsonl` (default) or `csv`.
    #[param(example = "jsonl")]
    format: Option<String>,
    /// First seq exported (default 1).
    #[param(minimum = 1, example = 1)]
    from_seq: Option<i64>,
    /// Last seq exported (default: the head when the request starts).
    #[param(minimum = 0, example = 100)]
    to_seq: Option<i64>,
}
