//! What the engines' usage SQL reads and hands back, shared by both: the
//! query, the stored rows, a write's outcome, the entries that carry usage.

use chrono::NaiveDate;
use tally_ledger::balance::WideDecimal;
use tally_ledger::entry::DAY_FORMAT;
use tally_ledger::store::{EngineDb, LOG_PAGE};
use tally_ledger::LedgerError;

use super::fold::{UsageKey, UsageTotals};

/// Most entries one projector round folds (and one transaction writes).
pub const USAGE_PAGE: i64 = LOG_PAGE;

/// What `GET /v1/accounts/{account}/usage` asks for.
#[derive(Debug, Clone, Default)]
pub struct UsageQuery {
    pub account: String,
    /// Only this meter (exact match).
    pub meter: Option<String>,
    /// First day included.
    pub from: Option<NaiveDate>,
    /// First day excluded.
    pub to: Option<NaiveDate>,
}

/// Stored usage rows and the seqs they were read at, from one snapshot.
#[derive(Debug, Clone, Default)]
pub struct UsageRead {
    /// Day rows in (account, meter, day, unit) order.
    pub rows: Vec<(UsageKey, UsageTotals)>,
    /// The summaries hold every entry up to this seq.
    pub checkpoint: i64,
    /// The tenant's head seq.
    pub head_seq: i64,
}

/// How a write of the projection ended.
pub(crate) enum Written {
    Done,
    /// Another projector moved the checkpoint to this seq first; nothing
    /// was written.
    Stale(i64),
}

/// A stored usage total or sum: exact decimal text of any size (TEXT on
/// SQLite, NUMERIC read as text on PostgreSQL).
pub(crate) fn parse_wide(text: &str, what: &str) -> Result<WideDecimal, LedgerError> {
    WideDecimal::parse(text)
        .ok_or_else(|| LedgerError::Corrupt(format!("{what} {text:?} is not a decimal")))
}

/// A summary row selected with the engine's summary columns.
pub(crate) fn decode_usage_row<DB: EngineDb>(
    row: &DB::Row,
) -> Result<(UsageKey, UsageTotals), LedgerError> {
    let text = |c: &'static str| DB::text(row, c);
    let day = text("day")?;
    Ok((
        UsageKey {
            account: text("account")?,
            meter: text("meter")?,
            day: NaiveDate::parse_from_str(&day, DAY_FORMAT)
                .map_err(|_| LedgerError::Corrupt(format!("usage day {day:?}")))?,
            unit: text("unit")?,
        },
        UsageTotals {
            quantity: parse_wide(&text("quantity")?, "usage quantity")?,
            amount: parse_wide(&text("amount")?, "usage amount")?,
            entries: DB::int(row, "entries")?,
        },
    ))
}

pub(crate) fn day_text(day: NaiveDate) -> String {
    day.format(DAY_FORMAT).to_string()
}
