//! What both engines read and decode alike: the filters of log reads, the
//! decoding of entry, head and balance rows, exact decimal text, and the
//! options of a connection pool.

use chrono::{DateTime, Utc};
use sqlx::{ColumnIndex, Decode, Row, Type};

use crate::balance::WideDecimal;
use crate::entry::{EntryStatus, StoredEntry};
use crate::request::EntryKind;
use crate::store::engine_db::EngineDb;
use crate::LedgerError;

/// Filters of `GET /v1/entries`.
#[derive(Debug, Clone, Default)]
pub struct EntryFilter {
    /// Entries whose debit or credit side is this account.
    pub account: Option<String>,
    pub kind: Option<EntryKind>,
    pub after_seq: i64,
    pub limit: i64,
    /// `recorded_at >= from`.
    pub from: Option<DateTime<Utc>>,
    /// `recorded_at < to`.
    pub to: Option<DateTime<Utc>>,
    /// `seq <= upto_seq`. Walks of the whole log set it to
    /// `after_seq + limit` (see [`EntryFilter::log_page`]).
    pub upto_seq: Option<i64>,
    /// Only posted, or only rejected, entries.
    pub status: Option<crate::entry::EntryStatus>,
    /// Only entries keyed by this upstream ID (one per kind at most).
    pub upstream_id: Option<String>,
}

impl EntryFilter {
    /// The next `limit` entries of the log after `after_seq`, bounded by seq
    /// as well as by the limit. Seq is gap-free per tenant (the writer gives
    /// each entry the head's seq + 1 under the head lock; `tally verify`
    /// checks it), so the bound changes no page; it keeps the read to
    /// `limit` rows whatever plan the database picks. Without it,
    /// PostgreSQL with statistics from before a flood of appends estimated a
    /// handful of rows after `after_seq`, chose a bitmap scan and a sort,
    /// and read the whole rest of the log for every page: 1.05 s per page of
    /// 10,000 on a 1,000,000-entry ledger.
    pub fn log_page(after_seq: i64, limit: i64) -> Self {
        EntryFilter {
            after_seq,
            limit,
            upto_seq: Some(after_seq.saturating_add(limit)),
            ..EntryFilter::default()
        }
    }
}

/// One account's entries in one unit, within a seq window and a
/// `recorded_at` range: what statements and balances at a time
/// (tally-projections) read of the log.
#[derive(Debug, Clone)]
pub struct AccountRange<'a> {
    /// Entries whose debit or credit side is this account (each once).
    pub account: &'a str,
    pub unit: &'a str,
    /// `seq > after_seq` (paging).
    pub after_seq: i64,
    /// `seq <= until_seq`: the head the read started at, so every page and
    /// every range of one answer sees the same log.
    pub until_seq: i64,
    /// `recorded_at >= from`; whole microseconds.
    pub from: Option<DateTime<Utc>>,
    /// `recorded_at < to`; whole microseconds.
    pub to: Option<DateTime<Utc>>,
    pub limit: i64,
}

/// One stored balance row with the head seq it was read at.
#[derive(Debug, Clone)]
pub struct BalanceRow {
    pub unit: String,
    pub balance: crate::balance::AccountBalance,
}

/// The use of the connection pool at one moment ([`Storage::pool_stats`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PoolStats {
    /// Connections open (idle + in use).
    pub open: u32,
    pub idle: u32,
    pub in_use: u32,
    /// The most the pool opens (`--pool-size`).
    pub max: u32,
}

/// Database connections per process unless configured.
pub const DEFAULT_POOL_SIZE: u32 = 16;

/// Rows of the log are read in pages of this size by folds and verification.
pub const LOG_PAGE: i64 = 10_000;

/// A pooled connection idle longer than this is pinged when checked out.
const PING_IDLE_AFTER: std::time::Duration = std::time::Duration::from_secs(1);

/// Pool options of both engines. sqlx pings every connection it hands out
/// by default: one more round trip before each group and each look-up,
/// and it already pings every connection it takes back. Only a connection
/// that sat idle (where a restarted database or a dropped socket goes
/// unnoticed) is pinged on checkout; one that breaks in use fails its
/// query, which the writer retries, and is discarded when it comes back.
pub(crate) fn pool_options<DB: sqlx::Database>(size: u32) -> sqlx::pool::PoolOptions<DB> {
    sqlx::pool::PoolOptions::<DB>::new()
        .max_connections(size)
        .test_before_acquire(false)
        .before_acquire(|conn, meta| {
            Box::pin(async move {
                if meta.idle_for > PING_IDLE_AFTER {
                    sqlx::Connection::ping(conn).await?;
                }
                Ok(true)
            })
        })
}

/// SQL selecting, in seq order, the posted entries whose effect on balances
/// is not a plain posting; rows are folded by [`fold_hold_row`]. `$1`/`?` is
/// the tenant.
///
/// `ORDER BY +seq`: the rows are found through the `(tenant_id, kind, …)`
/// key and sorted afterwards. With a plain `seq`, SQLite walked the whole
/// log of the tenant in seq order (its primary key) to find these few rows,
/// looking each entry up by rowid to read its kind.
pub fn hold_rows_sql(placeholder: &str) -> String {
    format!(
        "SELECT kind, upstream_id, account, unit, amount, params FROM entries \
         WHERE tenant_id = {placeholder} AND status = 'posted' AND kind IN {} ORDER BY +seq",
        crate::fold::HOLD_KINDS_SQL
    )
}

/// Folds one row of [`hold_rows_sql`].
pub fn fold_hold_row(
    log: &mut crate::fold::LogFold,
    kind: &str,
    upstream_id: &str,
    account: &str,
    unit: &str,
    amount: &str,
    params: &str,
) -> Result<(), LedgerError> {
    let kind = EntryKind::parse(kind)
        .ok_or_else(|| LedgerError::Corrupt(format!("unknown kind {kind:?}")))?;
    let amount = parse_decimal(amount, "amount")?;
    log.apply_holds(kind, upstream_id, account, unit, amount, params)
}

pub fn parse_decimal(text: &str, what: &str) -> Result<rust_decimal::Decimal, LedgerError> {
    crate::amount::parse_exact(text, false)
        .map_err(|m| LedgerError::Corrupt(format!("{what} {text:?} {m}")))
}

/// A stored total (`debits`, `credits`, `held`, `balance_after`): exact
/// decimal text of any size (`NUMERIC::text` on PostgreSQL, TEXT on
/// SQLite), with at most 18 fractional digits.
pub(crate) fn parse_total(text: &str, what: &str) -> Result<WideDecimal, LedgerError> {
    WideDecimal::parse(text).ok_or_else(|| {
        LedgerError::Corrupt(format!(
            "{what} {text:?} is not a plain decimal with at most 18 fractional digits"
        ))
    })
}

/// Decodes the engine-independent columns of an entry row; the engine
/// supplies `recorded_at`, which the two store differently.
pub(crate) fn decode_entry<'r, R>(
    row: &'r R,
    recorded_at: DateTime<Utc>,
) -> Result<StoredEntry, LedgerError>
where
    R: Row,
    &'static str: ColumnIndex<R>,
    String: Decode<'r, R::Database> + Type<R::Database>,
    Option<String>: Decode<'r, R::Database> + Type<R::Database>,
    i64: Decode<'r, R::Database> + Type<R::Database>,
{
    let text = |c: &'static str| row.try_get::<String, _>(c);
    let kind = text("kind")?;
    let status = text("status")?;
    Ok(StoredEntry {
        tenant_id: text("tenant_id")?,
        seq: row.try_get("seq")?,
        id: text("id")?,
        kind: EntryKind::parse(&kind)
            .ok_or_else(|| LedgerError::Corrupt(format!("unknown kind {kind:?}")))?,
        upstream_id: text("upstream_id")?,
        status: EntryStatus::parse(&status)
            .ok_or_else(|| LedgerError::Corrupt(format!("unknown status {status:?}")))?,
        rejection_code: row.try_get("rejection_code")?,
        rejection_message: row.try_get("rejection_message")?,
        account: text("account")?,
        debit_account: text("debit_account")?,
        credit_account: text("credit_account")?,
        amount: parse_decimal(&text("amount")?, "amount")?,
        unit: text("unit")?,
        params: text("params")?,
        fingerprint: text("fingerprint")?,
        recorded_at,
        balance_after: parse_total(&text("balance_after")?, "balance_after")?,
        prev_hash: text("prev_hash")?,
        hash: text("hash")?,
    })
}

/// A balance row as (account, unit, balance): the columns of
/// `BALANCE_COLUMNS`.
pub(crate) fn decode_account_balance<DB: EngineDb>(
    row: &DB::Row,
) -> Result<(String, String, crate::balance::AccountBalance), LedgerError> {
    let balance = balance_from_text(|c| DB::text(row, c))?;
    Ok((DB::text(row, "account")?, DB::text(row, "unit")?, balance))
}

/// A rule-state row selected with `kind, key, value`, as those three.
pub(crate) fn decode_state_record<DB: EngineDb>(
    row: &DB::Row,
) -> Result<(String, String, String), LedgerError> {
    let text = |column| DB::text(row, column);
    Ok((text("kind")?, text("key")?, text("value")?))
}

/// The balance whose `debits`, `credits` and `held` columns `text` reads
/// as exact decimal text.
pub(crate) fn balance_from_text(
    text: impl Fn(&'static str) -> Result<String, sqlx::Error>,
) -> Result<crate::balance::AccountBalance, LedgerError> {
    let amount =
        |c: &'static str| -> Result<WideDecimal, LedgerError> { parse_total(&text(c)?, c) };
    Ok(crate::balance::AccountBalance {
        debits: amount("debits")?,
        credits: amount("credits")?,
        held: amount("held")?,
    })
}

/// The ledger's clock (`crate::clock`).
pub(crate) fn now_micros() -> DateTime<Utc> {
    crate::clock::now()
}

pub(crate) fn new_entry_id() -> String {
    format!("ent_{}", uuid::Uuid::now_v7().simple())
}
