//! `POST /v1/refunds`, `POST /v1/reversals` and `POST /v1/adjustments`.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::Raw;
use crate::views::Metadata;

/// `POST /v1/refunds`: give (part of) a payment back.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({
    "refund_id": "ref_123", "payment_id": "pay_123", "amount": "2.50",
    "reason": "duplicate charge"
}))]
pub struct RefundRequest {
    /// The upstream refund ID: the idempotency key.
    #[schema(value_type = String, required = true, min_length = 1, max_length = 255)]
    pub refund_id: Option<Raw>,
    /// The refunded payment's `payment_id`.
    #[schema(value_type = String, required = true, min_length = 1, max_length = 255)]
    pub payment_id: Option<Raw>,
    /// A decimal string > 0; all refunds of a payment total at most the
    /// payment.
    #[schema(value_type = String, required = true, format = "decimal", pattern = r"^[0-9]+(\.[0-9]+)?$", example = "2.50")]
    pub amount: Option<Raw>,
    /// At most 500 bytes.
    #[schema(value_type = Option<String>, min_length = 1, max_length = 500)]
    pub reason: Option<Raw>,
    #[schema(value_type = Option<Metadata>)]
    pub metadata: Option<Raw>,
}

/// `POST /v1/reversals`: the compensating entry of a posted entry.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({
    "reversal_id": "rev_123", "entry_id": "ent_0193a8d2c4f07b3e9a51c2d4e6f80a1b",
    "reason": "usage recorded twice upstream"
}))]
pub struct ReversalRequest {
    /// The upstream reversal ID: the idempotency key.
    #[schema(value_type = String, required = true, min_length = 1, max_length = 255)]
    pub reversal_id: Option<Raw>,
    /// The `id` of the entry to reverse (a posted entry that moves money).
    #[schema(value_type = String, required = true, min_length = 1, max_length = 255)]
    pub entry_id: Option<Raw>,
    /// At most 500 bytes.
    #[schema(value_type = String, required = true, min_length = 1, max_length = 500)]
    pub reason: Option<Raw>,
    #[schema(value_type = Option<Metadata>)]
    pub metadata: Option<Raw>,
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
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({
    "adjustment_id": "adj_123", "account": "cust_42", "amount": "1.00", "unit": "USD",
    "direction": "credit", "reason": "support credit"
}))]
pub struct AdjustmentRequest {
    /// The upstream adjustment ID: the idempotency key.
    #[schema(value_type = String, required = true, min_length = 1, max_length = 255)]
    pub adjustment_id: Option<Raw>,
    #[schema(value_type = String, required = true, min_length = 1, max_length = 128)]
    pub account: Option<Raw>,
    /// A decimal string > 0.
    #[schema(value_type = String, required = true, format = "decimal", pattern = r"^[0-9]+(\.[0-9]+)?$", example = "1.00")]
    pub amount: Option<Raw>,
    /// Defaults to the account's unit (required if the account has none).
    #[schema(value_type = Option<String>, min_length = 1, max_length = 32, pattern = r"^[A-Za-z0-9_.:-]+$")]
    pub unit: Option<Raw>,
    #[schema(value_type = Direction, required = true)]
    pub direction: Option<Raw>,
    /// At most 500 bytes.
    #[schema(value_type = String, required = true, min_length = 1, max_length = 500)]
    pub reason: Option<Raw>,
    #[schema(value_type = Option<Metadata>)]
    pub metadata: Option<Raw>,
}
