//! `GET /v1/accounts/{account}/balance`, and the balance in an account.

use serde::Serialize;
use tally_projections::balances::BalanceView;
use utoipa::ToSchema;

/// The body of `GET /v1/accounts/{account}/balance`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, ToSchema)]
#[schema(example = json!({
    "account": "cust_42", "unit": "USD", "debits": "0.0125", "credits": "10",
    "posted": "9.9875", "held": "2", "available": "7.9875", "as_of_seq": 17
}))]
pub struct Balance {
    pub account: String,
    pub unit: String,
    #[schema(format = "decimal")]
    pub debits: String,
    #[schema(format = "decimal")]
    pub credits: String,
    /// `credits − debits`.
    #[schema(format = "decimal")]
    pub posted: String,
    /// Reserved by open holds.
    #[schema(format = "decimal")]
    pub held: String,
    /// `posted − held`.
    #[schema(format = "decimal")]
    pub available: String,
    /// The log position the balance is as of.
    pub as_of_seq: i64,
}

impl From<BalanceView> for Balance {
    fn from(b: BalanceView) -> Self {
        let BalanceView {
            account,
            unit,
            debits,
            credits,
            posted,
            held,
            available,
            as_of_seq,
        } = b;
        Self {
            account,
            unit,
            debits,
            credits,
            posted,
            held,
            available,
            as_of_seq,
        }
    }
}
