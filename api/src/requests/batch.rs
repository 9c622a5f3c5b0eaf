//! `POST /v1/batch`.

use serde::Deserialize;
use utoipa::ToSchema;

use super::{HoldRequest, PaymentRequest, Raw, RefundRequest, ReversalRequest, UsageDebitRequest};

/// One operation of a batch: the body of its single endpoint plus `type`.
// Describes only: the handler reads each operation's `type` itself, so an
// operation with a bad one is answered alone (`crate::routes::batch`), and
// the rest through the operation's own request struct.
#[derive(Deserialize, ToSchema)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum BatchOperation {
    UsageDebit(UsageDebitRequest),
    Payment(PaymentRequest),
    Hold(HoldRequest),
    Refund(RefundRequest),
    Reversal(ReversalRequest),
}

/// `POST /v1/batch`: 1 to 1,000 operations, decided in order in one group.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"operations": [
    {"type": "payment", "payment_id": "pay_b1", "account": "cust_7", "amount": "20", "unit": "USD"},
    {"type": "usage_debit", "usage_record_id": "ur_b1", "account": "cust_7", "amount": "0.50",
     "unit": "USD", "meter": "api-calls", "quantity": "50"}
]}))]
pub struct BatchRequest {
    #[schema(value_type = Vec<BatchOperation>, required = true, min_items = 1, max_items = 1000)]
    pub operations: Option<Raw>,
}
