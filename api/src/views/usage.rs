//! `GET /v1/accounts/{account}/usage`.

use serde::Serialize;
use tally_projections::usage::{self, UsagePeriod as LedgerPeriod, UsageView};
use utoipa::ToSchema;

/// How `GET /v1/accounts/{account}/usage` groups days.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum Granularity {
    Day,
    Month,
}

impl From<usage::Granularity> for Granularity {
    fn from(g: usage::Granularity) -> Self {
        match g {
            usage::Granularity::Day => Granularity::Day,
            usage::Granularity::Month => Granularity::Month,
        }
    }
}

/// One period of one meter in one unit.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, ToSchema)]
pub struct UsagePeriod {
    /// `YYYY-MM-DD` or `YYYY-MM`.
    #[schema(example = "2026-11-29")]
    pub period: String,
    /// Null for usage debits without a meter.
    #[schema(required = true)]
    pub meter: Option<String>,
    pub unit: String,
    #[schema(format = "decimal")]
    pub quantity: String,
    #[schema(format = "decimal")]
    pub amount: String,
    /// Usage debits netted into the period (a reversal counts −1).
    pub entries: i64,
}

impl From<LedgerPeriod> for UsagePeriod {
    fn from(p: LedgerPeriod) -> Self {
        let LedgerPeriod {
            period,
            meter,
            unit,
            quantity,
            amount,
            entries,
        } = p;
        Self {
            period,
            meter,
            unit,
            quantity,
            amount,
            entries,
        }
    }
}

/// The body of `GET /v1/accounts/{account}/usage`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, ToSchema)]
#[schema(example = json!({
    "account": "cust_42", "granularity": "day", "current_as_of_seq": 1041, "head_seq": 1043,
    "usage": [
        {"period": "2026-11-29", "meter": "llm-tokens", "unit": "USD",
         "quantity": "1250", "amount": "0.0125", "entries": 3},
        {"period": "2026-11-29", "meter": null, "unit": "USD",
         "quantity": "0", "amount": "1.1", "entries": 1}
    ]
}))]
pub struct Usage {
    pub account: String,
    pub granularity: Granularity,
    /// The summaries include every entry up to this seq, none after it.
    pub current_as_of_seq: i64,
    /// The tenant's last seq when the summaries were read.
    pub head_seq: i64,
    pub usage: Vec<UsagePeriod>,
}

impl From<UsageView> for Usage {
    fn from(u: UsageView) -> Self {
        let UsageView {
            account,
            granularity,
            current_as_of_seq,
            head_seq,
            usage,
        } = u;
        Self {
            account,
            granularity: granularity.into(),
            current_as_of_seq,
            head_seq,
            usage: usage.into_iter().map(UsagePeriod::from).collect(),
        }
    }
}
