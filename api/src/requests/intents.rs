//! `POST /v1/intents` and the finishing calls of an intent.

use serde::Deserialize;
use utoipa::ToSchema;

use super::Raw;

/// `POST /v1/intents`: claim an intent (docs/intents.md).
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({
    "intent_id": "inv_2026_11_cust_42", "action": "invoice.charge",
    "params": {"invoice": "in_981", "amount": "19.99", "currency": "USD"},
    "lease_seconds": 60, "max_attempts": 5
}))]
pub struct ClaimIntentRequest {
    /// The caller's stable business ID (1–255 bytes, no control characters).
    #[schema(value_type = String, required = true, min_length = 1, max_length = 255)]
    pub intent_id: Option<Raw>,
    /// What the intent does, e.g. `invoice.charge` (1–128 bytes).
    #[schema(value_type = String, required = true, min_length = 1, max_length = 128)]
    pub action: Option<Raw>,
    /// Any JSON object (at most 64 KiB), fingerprinted canonically: the
    /// same `intent_id` with other `action` or `params` is a 409.
    #[schema(value_type = Option<Object>)]
    pub params: Option<Raw>,
    /// The lease's length (1–3600, default 60).
    #[schema(value_type = Option<i64>, minimum = 1, maximum = 3600, default = 60)]
    pub lease_seconds: Option<Raw>,
    /// Claims allowed before the intent fails for good (1–100, default 5);
    /// fixed by the first claim.
    #[schema(value_type = Option<i64>, minimum = 1, maximum = 100, default = 5)]
    pub max_attempts: Option<Raw>,
}

/// `POST /v1/intents/{intent_id}/complete`.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({
    "token": "lease_…", "result": {"charge": "ch_3P"},
    "entries": [{"type": "payment", "payment_id": "ch_3P", "account": "cust_42",
                 "amount": "19.99", "unit": "USD"}]
}))]
pub struct CompleteIntentRequest {
    /// The claim's `lease.token`.
    #[schema(value_type = String, required = true)]
    pub token: Option<Raw>,
    /// Any JSON (at most 64 KiB), stored as the outcome.
    #[schema(value_type = Option<serde_json::Value>)]
    pub result: Option<Raw>,
    /// Up to 1,000 `/v1/batch` operations, committed in the same
    /// transaction as the outcome: both or neither.
    #[schema(value_type = Option<Vec<super::BatchOperation>>)]
    pub entries: Option<Raw>,
}

/// `POST /v1/intents/{intent_id}/fail`.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({
    "token": "lease_…", "error": {"code": "card_declined", "message": "insufficient funds"},
    "retryable": false
}))]
pub struct FailIntentRequest {
    #[schema(value_type = String, required = true)]
    pub token: Option<Raw>,
    /// `{"code": …, "message": …}`.
    #[schema(value_type = Object, required = true)]
    pub error: Option<Raw>,
    /// `true`: release the lease and count the attempt (stored `failed` at
    /// `max_attempts`); `false` (default): store `failed`.
    #[schema(value_type = Option<bool>, default = false)]
    pub retryable: Option<Raw>,
}

/// `POST /v1/intents/{intent_id}/heartbeat`.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"token": "lease_…", "lease_seconds": 60}))]
pub struct HeartbeatIntentRequest {
    #[schema(value_type = String, required = true)]
    pub token: Option<Raw>,
    /// The lease runs until now + this (1–3600, default 60); never shortened.
    #[schema(value_type = Option<i64>, minimum = 1, maximum = 3600, default = 60)]
    pub lease_seconds: Option<Raw>,
}
