//! The entry object (SPEC §3), as the document describes it.
//!
//! Only schemas: the handlers serialize `tally_ledger::entry::EntryView`
//! itself, the one type a first answer and every replay are built from, so
//! they stay byte for byte the same. tests/openapi.rs checks every answer
//! against these schemas, and `details` against `DETAIL_FIELDS`.

use std::collections::BTreeMap;

use serde::Serialize;
use serde_json::Value;
use utoipa::ToSchema;

// What kind of request made the entry.
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum EntryKind {
    UsageDebit,
    Payment,
    /// A change of an account's settings (unit, overdraft, metadata).
    AccountSettings,
    Hold,
    HoldCapture,
    HoldRelease,
    Refund,
    Reversal,
    Adjustment,
    /// An intent's claim (no amount, no account; docs/intents.md).
    IntentClaimed,
    /// An intent's claim let go without an outcome.
    IntentReleased,
    IntentSucceeded,
    IntentFailed,
}

#[derive(Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum EntryStatus {
    Posted,
    Rejected,
}

/// Why a ledger rule rejected the entry (SPEC §1.4): stored with it.
#[derive(Serialize, ToSchema)]
#[schema(example = json!({
    "code": "insufficient_funds",
    "message": "available balance of cust_42 is 2 USD; taking 5 would leave -3, below the floor of 0"
}))]
pub struct Rejection {
    /// `insufficient_funds`, `hold_not_open`, `hold_expired`,
    /// `refund_exceeds_payment` or `already_reversed`.
    pub code: String,
    pub message: String,
}

/// The entry object of the HTTP API (SPEC §3). Built only from a
/// [`StoredEntry`], so a first answer and every replay serialise to the same
/// bytes.
#[derive(Serialize, ToSchema)]
#[schema(example = json!({
    "id": "ent_0193a8d2c4f07b3e9a51c2d4e6f80a1b", "seq": 17, "kind": "usage_debit",
    "upstream_id": "ur_123", "status": "posted", "rejection": null,
    "account": "cust_42", "debit_account": "cust_42", "credit_account": "@revenue",
    "amount": "0.0125", "unit": "USD",
    "meter": "llm-tokens", "quantity": "1250", "processor": null,
    "occurred_at": "2026-11-29T10:00:00Z", "recorded_at": "2026-11-29T10:00:00.123456Z",
    "metadata": {"model": "m1"},
    "fingerprint": "sha256:5f0c2d7e4b1a9c8d3e6f7a0b1c2d3e4f5a6b7c8d9e0f1a2b3c4d5e6f7a8b9c0d",
    "prev_hash": "9b1e4c7a2d5f8b0e3a6c9d2f5b8e1a4c7d0f3b6e9a2c5d8f1b4e7a0c3d6f9b2e",
    "hash": "3c6f9b2e5a8d1c4f7b0e3a6d9c2f5b8e1a4d7c0f3b6e9a2d5c8f1b4e7a0d3c6f",
    "balance_after": "-0.0125"
}))]
pub struct Entry {
    /// `ent_` and 32 hex digits.
    pub id: String,
    /// Gap-free position in the tenant's log, from 1.
    pub seq: i64,
    pub kind: EntryKind,
    /// The request's upstream ID (`usage_record_id`, `payment_id`, `hold_id`, …).
    pub upstream_id: String,
    pub status: EntryStatus,
    /// Null unless `status` is `rejected`.
    #[schema(required = true)]
    pub rejection: Option<Rejection>,
    /// The customer account the entry is about.
    pub account: String,
    pub debit_account: String,
    pub credit_account: String,
    /// A decimal string, > 0 (0 for `account_settings`).
    #[schema(format = "decimal", example = "0.0125")]
    pub amount: String,
    pub unit: String,
    #[schema(required = true)]
    pub meter: Option<String>,
    /// A decimal string ≥ 0.
    #[schema(required = true, format = "decimal")]
    pub quantity: Option<String>,
    #[schema(required = true)]
    pub processor: Option<String>,
    /// The client's RFC 3339 time of the event, normalised to UTC.
    #[schema(required = true, format = DateTime)]
    pub occurred_at: Option<String>,
    /// The ledger's time of the decision: UTC, six fractional digits.
    #[schema(format = DateTime)]
    pub recorded_at: String,
    /// String keys to string values, ≤ 50 keys.
    #[schema(required = true)]
    pub metadata: Option<BTreeMap<String, String>>,
    /// `sha256:` and the hex digest of the canonical business parameters.
    pub fingerprint: String,
    /// Hex; 64 zeros for seq 1.
    pub prev_hash: String,
    /// Hex `sha256(prev_hash ‖ canonical entry)`.
    pub hash: String,
    /// The `posted` balance of `account` right after this entry.
    #[schema(format = "decimal")]
    pub balance_after: String,
    /// The request fields of the later kinds (`hold_id`, `payment_id`,
    /// `entry_id`, `reason`, `direction`, `overdraft`, `expires_at`, …),
    /// under their request names; absent for debits and payments.
    #[serde(flatten)]
    pub details: EntryDetails,
    /// Set by reads (not by writes or replays) once the entry is reversed:
    /// the id of the reversal.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub reversed_by: Option<String>,
}

/// The schema of [`EntryView::details`]: the request fields an entry of a
/// later kind shows ([`DETAIL_FIELDS`]; tests/openapi.rs checks they are
/// the same), each present only when its request had it.
#[derive(Serialize, ToSchema)]
pub struct EntryDetails {
    /// Holds, captures, releases.
    pub hold_id: Option<String>,
    /// Holds: the expiry (also for a `ttl_seconds` hold: `recorded_at + ttl`).
    #[schema(format = DateTime)]
    pub expires_at: Option<String>,
    /// Holds that asked for a time to live.
    pub ttl_seconds: Option<i64>,
    /// Holds: the account a capture credits.
    pub counter_account: Option<String>,
    /// Refunds: the refunded payment's upstream ID.
    pub payment_id: Option<String>,
    /// Reversals: the reversed entry.
    pub entry_id: Option<String>,
    /// Refunds, reversals, adjustments; `"expired"` on the server's release of an expired hold.
    pub reason: Option<String>,
    /// Adjustments: `credit` or `debit`.
    pub direction: Option<String>,
    /// `account_settings`: `"allow"`, `"forbid"` or `{"limit": "<amount>"}`.
    pub overdraft: Option<Value>,
    /// `account_settings` that set an alert: `{"low_balance": "<amount>"}`.
    #[schema(value_type = Option<super::Alerts>)]
    pub alerts: Option<Value>,
}
