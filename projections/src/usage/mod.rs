//! The usage summaries: the pure fold ([`fold`]), the projector that keeps
//! the `usage_summaries` table ([`projector`]), reads, the rebuild and the
//! fresh fold `tally verify` compares with. Each engine's own SQL is in
//! its own file; the reads and the write both engines run alike are in
//! `shared.rs`; what does not touch the database is here, once. The design
//! is in `docs/usage-summaries.md`.
//!
//! A round reads the entries after the checkpoint outside any transaction
//! (the log is immutable), folds them in memory, then in one short
//! transaction locks the checkpoint row, re-checks it and adds the deltas.
//! If another process advanced the checkpoint meanwhile, the round writes
//! nothing: several `tally` processes may project one database and no
//! entry is ever counted twice.

pub mod fold;
mod postgres;
pub mod projector;
mod shared;
mod sqlite;
#[cfg(test)]
mod tests;
pub mod verify;
mod view;

use chrono::NaiveDate;
use sqlx::{ColumnIndex, Decode, Row, Type};
pub use tally_ledger::entry::DAY_FORMAT;
use tally_ledger::store::{EngineRef, Storage, LOG_PAGE};
use tally_ledger::wide::WideDecimal;
use tally_ledger::LedgerError;

pub use fold::{UsageFold, UsageKey, UsageScan, UsageTotals, USAGE_PROJECTOR};
pub use projector::{
    project_usage, project_usage_to_head, run_usage_projector, usage_lagging_tenants, usage_lags,
    ProjectorStats,
};
pub use view::{read_usage, summarise, Granularity, UsagePeriod, UsageView};

use crate::parts::{join_folds, rebuild_ranges, split_range};

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
enum Written {
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

fn decode_usage_row<'r, R>(row: &'r R) -> Result<(UsageKey, UsageTotals), LedgerError>
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
/// PostgreSQL's work for these rows (docs/performance-history.md).
const USAGE_SOURCES: &str =
    "SELECT seq, kind, account, unit, amount, recorded_at, params FROM entries \
     WHERE status = 'posted' AND kind IN ('usage_debit', 'reversal') AND";

/// Which usage entries [`fold_usage_part`] folds from params.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum UsageRows {
    /// All of them.
    All,
    /// Only the reversals and the usage debits stored without usage
    /// columns: the others are added up from their columns, by
    /// `postgres::sum_usage_columns` in PostgreSQL, by
    /// `sqlite::fold_usage_columns` from SQLite's packed windows.
    WithoutColumns,
}

fn day_text(day: NaiveDate) -> String {
    day.format(DAY_FORMAT).to_string()
}

/// The seq up to which the usage summaries of `tenant` are complete.
pub async fn usage_checkpoint(storage: &Storage, tenant: &str) -> Result<i64, LedgerError> {
    match storage.engine() {
        EngineRef::Sqlite(s) => sqlite::checkpoint(s.pool(), tenant).await,
        EngineRef::Postgres(s) => postgres::checkpoint(s.pool(), tenant).await,
    }
}

/// The seq up to which `tenant`'s entries were appended before the usage
/// columns existed (migration 0005): those are folded from params.
async fn usage_columns_from(storage: &Storage, tenant: &str) -> Result<i64, LedgerError> {
    match storage.engine() {
        EngineRef::Sqlite(s) => sqlite::usage_columns_from(s.pool(), tenant).await,
        EngineRef::Postgres(s) => postgres::usage_columns_from(s.pool(), tenant).await,
    }
}

/// The usage in the log of `tenant` with seq in `(after, upto]`: the
/// posted usage debits folded, and the posted reversals (seq, the entry
/// they name), which the caller folds once the named entries are read.
/// Reads only those entries, and only the columns the fold needs.
async fn fold_usage_part(
    storage: &Storage,
    tenant: &str,
    after: i64,
    upto: i64,
    rows: UsageRows,
) -> Result<(UsageFold, Vec<(i64, String)>), LedgerError> {
    let mut part = UsagePart {
        tenant,
        after,
        upto,
        rows,
        scan: UsageScan::default(),
        reversals: Vec::new(),
    };
    match storage.engine() {
        EngineRef::Sqlite(s) => sqlite::fold_part(s.pool(), &mut part).await?,
        EngineRef::Postgres(s) => postgres::fold_part(s.pool(), &mut part).await?,
    }
    Ok((part.scan.into_fold()?, part.reversals))
}

/// One part of a usage fold: what the engine reads (the entries of
/// `tenant` with seq in `(after, upto]`, `rows` of them) and what it
/// gathers (the usage debits folded into `scan`, the reversals set aside
/// as (seq, the entry they name)).
struct UsagePart<'a> {
    tenant: &'a str,
    after: i64,
    upto: i64,
    rows: UsageRows,
    scan: UsageScan,
    reversals: Vec<(i64, String)>,
}

/// Folds the reversals [`fold_usage_part`] set aside, reading each entry a
/// reversal names (reversals are rare).
async fn take_back_reversals(
    storage: &Storage,
    tenant: &str,
    reversals: &[(i64, String)],
    fold: &mut UsageFold,
) -> Result<(), LedgerError> {
    for (seq, target) in reversals {
        if let Some(original) = storage.entry_by_id(tenant, target).await? {
            fold.take_back(*seq, &original)?;
        }
    }
    Ok(())
}

/// The stored usage rows of one account, the checkpoint and the head,
/// read from one snapshot.
pub async fn usage_rows(
    storage: &Storage,
    tenant: &str,
    q: &UsageQuery,
) -> Result<UsageRead, LedgerError> {
    match storage.engine() {
        EngineRef::Sqlite(s) => sqlite::usage_rows(s.pool(), tenant, q).await,
        EngineRef::Postgres(s) => postgres::usage_rows(s.pool(), tenant, q).await,
    }
}

/// Every stored usage row of `tenant` and the checkpoint they are
/// complete to, from one snapshot.
pub async fn stored_usage(
    storage: &Storage,
    tenant: &str,
) -> Result<(UsageFold, i64), LedgerError> {
    let (rows, checkpoint) = match storage.engine() {
        EngineRef::Sqlite(s) => sqlite::stored_usage(s.pool(), tenant).await?,
        EngineRef::Postgres(s) => postgres::stored_usage(s.pool(), tenant).await?,
    };
    let mut fold = UsageFold::new();
    for (key, totals) in rows {
        fold.add(key, &totals)?;
    }
    Ok((fold, checkpoint.unwrap_or(0)))
}

/// A fresh fold of `tenant`'s log from seq 1 to `upto` (inclusive): seq
/// ranges folded on one connection each, at once, and added (decimal sums
/// are exact, so the split cannot change the result).
pub async fn fold_usage(
    storage: &Storage,
    tenant: &str,
    upto: i64,
) -> Result<UsageFold, LedgerError> {
    fold_usage_rows(storage, tenant, upto, UsageRows::All).await
}

/// [`fold_usage`], or with [`UsageRows::WithoutColumns`] the rebuild's: on
/// PostgreSQL the usage debits that carry usage columns are added up by the
/// database instead of folded from params.
async fn fold_usage_rows(
    storage: &Storage,
    tenant: &str,
    upto: i64,
    rows: UsageRows,
) -> Result<UsageFold, LedgerError> {
    let mut tasks = Vec::new();
    let mut from_params = upto;
    if rows == UsageRows::WithoutColumns {
        // Entries appended before the usage columns existed are folded from
        // params below; after them, the columns are added up, and only
        // reversals (and any usage debit without columns) are folded from
        // params.
        from_params = usage_columns_from(storage, tenant).await?.clamp(0, upto);
        match storage.engine() {
            EngineRef::Postgres(s) => {
                let (pool, tenant) = (s.pool().clone(), tenant.to_owned());
                let storage = storage.clone();
                tasks.push(tokio::spawn(async move {
                    let (summed, (rest, reversals)) = tokio::try_join!(
                        postgres::sum_usage_columns(&pool, &tenant, from_params, upto),
                        fold_usage_part(
                            &storage,
                            &tenant,
                            from_params,
                            upto,
                            UsageRows::WithoutColumns
                        ),
                    )?;
                    let mut fold = summed;
                    fold.merge(rest)?;
                    Ok((fold, reversals))
                }));
            }
            EngineRef::Sqlite(_) => {
                tasks.extend(
                    split_range(from_params, upto)
                        .into_iter()
                        .map(|(after, to)| {
                            let (storage, tenant) = (storage.clone(), tenant.to_owned());
                            tokio::spawn(async move {
                                fold_usage_part(
                                    &storage,
                                    &tenant,
                                    after,
                                    to,
                                    UsageRows::WithoutColumns,
                                )
                                .await
                            })
                        }),
                );
            }
        }
    }
    tasks.extend(rebuild_ranges(from_params).into_iter().map(|(after, to)| {
        let (storage, tenant) = (storage.clone(), tenant.to_owned());
        tokio::spawn(
            async move { fold_usage_part(&storage, &tenant, after, to, UsageRows::All).await },
        )
    }));
    let mut fold = UsageFold::new();
    let mut reversals = Vec::new();
    for (part, mut taken_back) in join_folds(tasks).await? {
        fold.merge(part)?;
        reversals.append(&mut taken_back);
    }
    take_back_reversals(storage, tenant, &reversals, &mut fold).await?;
    Ok(fold)
}

/// Replaces `tenant`'s usage summaries with a fresh fold of its whole log,
/// rows and checkpoint in one transaction (readers see the old summaries or
/// the new ones, never none). Returns (seq folded to, rows).
pub async fn rebuild_usage(storage: &Storage, tenant: &str) -> Result<(i64, usize), LedgerError> {
    let head = storage.head(tenant).await?.seq;
    let started = std::time::Instant::now();
    // From the usage columns where the writer stored them (PostgreSQL),
    // from params elsewhere; `tally verify` folds everything from params
    // and compares.
    let fold = fold_usage_rows(storage, tenant, head, UsageRows::WithoutColumns).await?;
    let folded = started.elapsed();
    let written = write_usage(storage, tenant, None, head, &fold).await?;
    tracing::debug!(
        tenant,
        fold_ms = folded.as_secs_f64() * 1e3,
        write_ms = (started.elapsed() - folded).as_secs_f64() * 1e3,
        "usage summaries rebuilt"
    );
    match written {
        Written::Done => Ok((head, fold.len())),
        // Unreachable: a replacing write never checks the checkpoint.
        Written::Stale(seq) => Err(LedgerError::Unavailable(format!(
            "usage checkpoint moved to {seq} during the rebuild"
        ))),
    }
}

/// Writes `fold` and the checkpoint `to` in one transaction, under the
/// checkpoint row's lock. With `expected`, `fold` holds deltas added to the
/// stored rows, and nothing is written unless the checkpoint is still
/// `expected`. Without it, `fold` replaces every row of the tenant.
async fn write_usage(
    storage: &Storage,
    tenant: &str,
    expected: Option<i64>,
    to: i64,
    fold: &UsageFold,
) -> Result<Written, LedgerError> {
    match storage.engine() {
        EngineRef::Sqlite(s) => sqlite::write_usage(s, tenant, expected, to, fold).await,
        EngineRef::Postgres(s) => postgres::write_usage(s.pool(), tenant, expected, to, fold).await,
    }
}
