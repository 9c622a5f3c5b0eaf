//! The answer of `GET /v1/accounts/{account}/usage`: stored day rows
//! grouped into periods.

use std::collections::BTreeMap;

use chrono::NaiveDate;
use serde::Serialize;
use tally_ledger::entry::DAY_FORMAT;
use tally_ledger::LedgerError;

use super::fold::{UsageKey, UsageTotals};
use tally_ledger::store::Storage;

use super::rows::UsageQuery;

/// How `GET /v1/accounts/{account}/usage` groups days.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Granularity {
    #[default]
    Day,
    Month,
}

impl Granularity {
    pub fn parse(text: &str) -> Option<Self> {
        match text {
            "day" => Some(Granularity::Day),
            "month" => Some(Granularity::Month),
            _ => None,
        }
    }

    fn period(self, day: NaiveDate) -> String {
        match self {
            Granularity::Day => day.format(DAY_FORMAT).to_string(),
            Granularity::Month => day.format("%Y-%m").to_string(),
        }
    }
}

/// One period of one meter in one unit.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct UsagePeriod {
    /// `YYYY-MM-DD` or `YYYY-MM`.
    pub period: String,
    /// Null for usage debits without a meter.
    pub meter: Option<String>,
    pub unit: String,
    pub quantity: String,
    pub amount: String,
    /// Usage debits netted into the period (a reversal counts −1).
    pub entries: i64,
}

/// The body of `GET /v1/accounts/{account}/usage`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct UsageView {
    pub account: String,
    pub granularity: Granularity,
    /// The summaries include every entry up to this seq, none after it.
    pub current_as_of_seq: i64,
    /// The tenant's last seq when the summaries were read.
    pub head_seq: i64,
    pub usage: Vec<UsagePeriod>,
}

/// Groups stored day rows into periods, sorted by period, meter and unit.
/// Periods whose usage nets to nothing (all reversed) are left out.
pub fn summarise(
    rows: &[(UsageKey, UsageTotals)],
    granularity: Granularity,
) -> Result<Vec<UsagePeriod>, LedgerError> {
    let mut periods: BTreeMap<(String, String, String), UsageTotals> = BTreeMap::new();
    for (key, totals) in rows {
        let slot = periods
            .entry((
                granularity.period(key.day),
                key.meter.clone(),
                key.unit.clone(),
            ))
            .or_default();
        *slot = slot.checked_add(totals)?;
    }
    Ok(periods
        .into_iter()
        .filter(|(_, t)| !t.is_zero())
        .map(|((period, meter, unit), t)| UsagePeriod {
            period,
            meter: (!meter.is_empty()).then_some(meter),
            unit,
            quantity: t.quantity.to_string(),
            amount: t.amount.to_string(),
            entries: t.entries,
        })
        .collect())
}

/// Reads `account`'s usage summaries as the projector last left them.
pub async fn read_usage(
    storage: &Storage,
    tenant: &str,
    query: &UsageQuery,
    granularity: Granularity,
) -> Result<UsageView, LedgerError> {
    let read = super::engine::usage_rows(storage, tenant, query).await?;
    Ok(UsageView {
        account: query.account.clone(),
        granularity,
        current_as_of_seq: read.checkpoint,
        head_seq: read.head_seq,
        usage: summarise(&read.rows, granularity)?,
    })
}
