//! What the engines' usage SQL reads and hands back, shared by both: the
//! query, the stored rows, a write's outcome, the entries that carry usage.

use chrono::NaiveDate;
use sqlx::{ColumnIndex, Decode, Row, Type};
use tally_ledger::entry::DAY_FORMAT;
use tally_ledger::store::LOG_PAGE;
use tally_ledger::wide::WideDecimal;
use tally_ledger::LedgerError;

use super::fold::{UsageKey, UsageScan, UsageTotals};

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

pub(crate) fn decode_usage_row<'r, R>(row: &'r R) -> Result<(UsageKey, UsageTotals), LedgerError>
where
    R: Row,
    &'static str: ColumnIndex<R>,
    String: Decode<'r, R::Database> + Type<R::Database>,
    i64: Decode<'r, R::Database> + Type<R::Database>,
{
    let text = |c: &'static str| row.try_get::<String, _>(c);
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
            entries: row.try_get("entries")?,
        },
    ))
}

/// The entries that carry usage, and the columns the fold reads of them
/// (`recorded_at` is column 5; every row is posted). The engine adds the seq
/// range. Each column costs: dropping `id` and `status` took a quarter off
/// PostgreSQL's work for these rows.
pub(crate) const USAGE_SOURCES: &str =
    "SELECT seq, kind, account, unit, amount, recorded_at, params FROM entries \
     WHERE status = 'posted' AND kind IN ('usage_debit', 'reversal') AND";

/// Which usage entries [`fold_usage_part`] folds from params.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum UsageRows {
    /// All of them.
    All,
    /// Only the reversals and the usage debits stored without usage
    /// columns: the others are added up from their columns, by
    /// `postgres::sum_usage_columns` in PostgreSQL, by
    /// `sqlite::fold_usage_columns` from SQLite's packed windows.
    WithoutColumns,
}

pub(crate) fn day_text(day: NaiveDate) -> String {
    day.format(DAY_FORMAT).to_string()
}

/// One part of a usage fold: what the engine reads (the entries of
/// `tenant` with seq in `(after, upto]`, `rows` of them) and what it
/// gathers (the usage debits folded into `scan`, the reversals set aside
/// as (seq, the entry they name)).
pub(crate) struct UsagePart<'a> {
    pub(crate) tenant: &'a str,
    pub(crate) after: i64,
    pub(crate) upto: i64,
    pub(crate) rows: UsageRows,
    pub(crate) scan: UsageScan,
    pub(crate) reversals: Vec<(i64, String)>,
}
