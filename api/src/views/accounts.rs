//! `GET /v1/accounts/{account}` and `PUT /v1/accounts/{account}`.

use serde::Serialize;
use serde_json::{Map, Value};
use utoipa::ToSchema;

use super::Balance;
use super::{Alerts, Metadata, Overdraft};

/// An account: its settings and its current balance.
#[derive(Debug, Serialize, ToSchema)]
#[schema(as = Account, example = json!({
    "account": "cust_42", "unit": "USD", "overdraft": {"limit": "50"},
    "metadata": {"plan": "pro"}, "alerts": {"low_balance": "10"}, "settings_version": 1,
    "settings_entry_id": "ent_0193a8d2c4f07b3e9a51c2d4e6f80a1b",
    "balance": {"account": "cust_42", "unit": "USD", "debits": "0", "credits": "0",
                "posted": "0", "held": "0", "available": "0", "as_of_seq": 1}
}))]
pub struct AccountView {
    pub account: String,
    pub unit: String,
    /// `"allow"`, `"forbid"` or `{"limit": "<amount>"}`.
    #[schema(value_type = Overdraft)]
    pub overdraft: Value,
    #[schema(value_type = Option<Metadata>, required = true)]
    pub metadata: Option<Map<String, Value>>,
    /// `{"low_balance": "<amount>"}`, or `{}` when no alert is set.
    #[schema(value_type = Alerts)]
    pub alerts: Value,
    /// 0 until the account's settings are first set.
    pub settings_version: i64,
    /// The `account_settings` entry that set the current settings.
    #[schema(required = true)]
    pub settings_entry_id: Option<String>,
    pub balance: Balance,
}

/// One account of `GET /v1/accounts`: its balance now.
#[derive(Debug, Serialize, ToSchema)]
#[schema(example = json!({
    "account": "cust_42", "unit": "USD", "debits": "0.0125", "credits": "10",
    "posted": "9.9875", "held": "2", "available": "7.9875"
}))]
pub struct AccountSummary {
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
}

/// `GET /v1/accounts`: a page of accounts in account order.
#[derive(Debug, Serialize, ToSchema)]
pub struct AccountPage {
    pub accounts: Vec<AccountSummary>,
    /// Pass as `after` for the next page; null on the last.
    #[schema(required = true)]
    pub next_after: Option<String>,
}
