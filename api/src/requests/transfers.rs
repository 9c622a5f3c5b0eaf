//! `POST /v1/usage-debits` and `POST /v1/payments`.

use serde::Deserialize;
use utoipa::ToSchema;

use super::Raw;
use crate::views::Metadata;

/// `POST /v1/usage-debits`: debit a customer account for usage (credits
/// `@revenue`, or `counter_account`).
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({
    "usage_record_id": "ur_123", "account": "cust_42", "amount": "0.0125", "unit": "USD",
    "meter": "llm-tokens", "quantity": "1250", "occurred_at": "2026-11-29T10:00:00Z",
    "metadata": {"model": "m1"}
}))]
pub struct UsageDebitRequest {
    /// The upstream usage-record ID: the idempotency key (1–255 bytes, no
    /// control characters).
    #[schema(value_type = String, required = true, min_length = 1, max_length = 255)]
    pub usage_record_id: Option<Raw>,
    /// The customer account debited (1–128 bytes; not a `@` system account).
    #[schema(value_type = String, required = true, min_length = 1, max_length = 128)]
    pub account: Option<Raw>,
    /// A decimal string > 0 (a JSON number is accepted only if it converts
    /// exactly).
    #[schema(
        value_type = String,
        required = true,
        format = "decimal",
        pattern = r"^[0-9]+(\.[0-9]+)?$",
        example = "0.0125"
    )]
    pub amount: Option<Raw>,
    /// Currency or usage unit (1–32 bytes of `A–Z a–z 0–9 _ - . :`,
    /// case-sensitive). Fixed by an account's first entry.
    #[schema(value_type = String, required = true, min_length = 1, max_length = 32, pattern = r"^[A-Za-z0-9_.:-]+$")]
    pub unit: Option<Raw>,
    /// The meter that measured the usage (1–128 bytes).
    #[schema(value_type = Option<String>, min_length = 1, max_length = 128)]
    pub meter: Option<Raw>,
    /// A decimal string ≥ 0.
    #[schema(value_type = Option<String>, format = "decimal", pattern = r"^[0-9]+(\.[0-9]+)?$")]
    pub quantity: Option<Raw>,
    /// When the usage happened, RFC 3339 (any offset).
    #[schema(value_type = Option<String>, format = DateTime)]
    pub occurred_at: Option<Raw>,
    /// The account credited instead of `@revenue` (may be a system account;
    /// not `account` itself).
    #[schema(value_type = Option<String>, min_length = 1, max_length = 128)]
    pub counter_account: Option<Raw>,
    #[schema(value_type = Option<Metadata>)]
    pub metadata: Option<Raw>,
}

/// `POST /v1/payments`: credit a customer account with a payment (debits
/// `@payments`, or `counter_account`).
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({
    "payment_id": "pay_123", "account": "cust_42", "amount": "10.00", "unit": "USD",
    "processor": "stripe", "occurred_at": "2026-11-29T09:00:00Z"
}))]
pub struct PaymentRequest {
    /// The upstream payment event ID: the idempotency key (1–255 bytes).
    #[schema(value_type = String, required = true, min_length = 1, max_length = 255)]
    pub payment_id: Option<Raw>,
    /// The customer account credited (not a `@` system account).
    #[schema(value_type = String, required = true, min_length = 1, max_length = 128)]
    pub account: Option<Raw>,
    /// A decimal string > 0.
    #[schema(
        value_type = String,
        required = true,
        format = "decimal",
        pattern = r"^[0-9]+(\.[0-9]+)?$",
        example = "10.00"
    )]
    pub amount: Option<Raw>,
    #[schema(value_type = String, required = true, min_length = 1, max_length = 32, pattern = r"^[A-Za-z0-9_.:-]+$")]
    pub unit: Option<Raw>,
    /// The payment processor (1–128 bytes).
    #[schema(value_type = Option<String>, min_length = 1, max_length = 128)]
    pub processor: Option<Raw>,
    /// When the payment happened, RFC 3339.
    #[schema(value_type = Option<String>, format = DateTime)]
    pub occurred_at: Option<Raw>,
    /// The account debited instead of `@payments` (the overdraft floor
    /// applies when it is a customer account).
    #[schema(value_type = Option<String>, min_length = 1, max_length = 128)]
    pub counter_account: Option<Raw>,
    #[schema(value_type = Option<Metadata>)]
    pub metadata: Option<Raw>,
}
