//! `POST /v1/holds`, `POST /v1/holds/{hold_id}/capture` and
//! `POST /v1/holds/{hold_id}/release`.

use serde::Deserialize;
use utoipa::ToSchema;

use super::Raw;
use crate::views::Metadata;

/// `POST /v1/holds`: reserve an amount of a customer's available balance.
/// Exactly one of `expires_at` and `ttl_seconds` is required.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({
    "hold_id": "hold_123", "account": "cust_42", "amount": "5.00", "unit": "USD",
    "ttl_seconds": 3600
}))]
pub struct HoldRequest {
    /// The upstream hold ID: the idempotency key, and the hold's name in
    /// `/v1/holds/{hold_id}`.
    #[schema(value_type = String, required = true, min_length = 1, max_length = 255)]
    pub hold_id: Option<Raw>,
    #[schema(value_type = String, required = true, min_length = 1, max_length = 128)]
    pub account: Option<Raw>,
    /// A decimal string > 0.
    #[schema(value_type = String, required = true, format = "decimal", pattern = r"^[0-9]+(\.[0-9]+)?$", example = "5.00")]
    pub amount: Option<Raw>,
    #[schema(value_type = String, required = true, min_length = 1, max_length = 32, pattern = r"^[A-Za-z0-9_.:-]+$")]
    pub unit: Option<Raw>,
    /// RFC 3339, in the future and at most 366 days ahead. Not with
    /// `ttl_seconds`.
    #[schema(value_type = Option<String>, format = DateTime)]
    pub expires_at: Option<Raw>,
    /// Seconds from the hold's `recorded_at` (1–2,592,000). Not with
    /// `expires_at`.
    #[schema(value_type = Option<i64>, minimum = 1, maximum = 2_592_000)]
    pub ttl_seconds: Option<Raw>,
    /// The account a capture credits (default `@revenue`).
    #[schema(value_type = Option<String>, min_length = 1, max_length = 128)]
    pub counter_account: Option<Raw>,
    #[schema(value_type = Option<Metadata>)]
    pub metadata: Option<Raw>,
}

/// `POST /v1/holds/{hold_id}/capture`: post up to the held amount; the rest
/// of the hold is released.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"capture_id": "cap_123", "amount": "3.50"}))]
pub struct CaptureRequest {
    /// The upstream capture ID: the idempotency key.
    #[schema(value_type = String, required = true, min_length = 1, max_length = 255)]
    pub capture_id: Option<Raw>,
    /// A decimal string > 0, at most the held amount.
    #[schema(value_type = String, required = true, format = "decimal", pattern = r"^[0-9]+(\.[0-9]+)?$", example = "3.50")]
    pub amount: Option<Raw>,
    #[schema(value_type = Option<Metadata>)]
    pub metadata: Option<Raw>,
}

/// `POST /v1/holds/{hold_id}/release`: give the whole hold back.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"release_id": "rel_123"}))]
pub struct ReleaseRequest {
    /// The upstream release ID: the idempotency key; may not start with `@`
    /// (reserved for the server's release of an expired hold).
    #[schema(value_type = String, required = true, min_length = 1, max_length = 255)]
    pub release_id: Option<Raw>,
    #[schema(value_type = Option<Metadata>)]
    pub metadata: Option<Raw>,
}
