//! The usage-summaries projection in the database: its checkpoint, the
//! projector round, reads, the rebuild and the fresh fold `tally verify`
//! compares with. The fold itself is `crate::usage` (pure); the design is
//! in `docs/usage-summaries.md`.
//!
//! A round reads the entries after the checkpoint outside any transaction
//! (the log is immutable), folds them in memory, then in one short
//! transaction locks the checkpoint row, re-checks it and adds the deltas.
//! If another process advanced the checkpoint meanwhile, the round writes
//! nothing: several `tally` processes may project one database and no
//! entry is ever counted twice.

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, NaiveDate, Utc};
use futures_util::TryStreamExt;
use sqlx::{ColumnIndex, Decode, QueryBuilder, Row, Type};

use super::changes::{usage_changes, StoredUsage};
use super::{join_folds, parse_decimal, rebuild_ranges, split_range, Storage, LOG_PAGE};
use crate::entry::EntryStatus;
use crate::intent::EntryKind;
use crate::usage::{
    reversal_target_of, string_or_none, UsageFold, UsageKey, UsageParams, UsageScan, UsageSource,
    UsageTotals, DAY_FORMAT, USAGE_PROJECTOR,
};
use crate::wide::WideDecimal;
use crate::LedgerError;

/// Most entries one projector round folds (and one transaction writes).
pub const USAGE_PAGE: i64 = LOG_PAGE;

/// The same on SQLite, where the round's write transaction holds the one
/// write lock every group of the ledger needs: with rounds of ~900 entries
/// (200 ms at 4,500 posts/s) a group's wait for its turn had a p99 of
/// 21 ms; with 256, 8.6 ms.
const SQLITE_USAGE_PAGE: i64 = 256;

/// SQLite allows 32,766 bound parameters per statement; 8 per row.
const USAGE_ROWS_PER_INSERT: usize = 500;

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

const SQLITE_LOCK_CHECKPOINT: &str =
    "INSERT INTO projector_checkpoints (tenant_id, projector, seq) \
     VALUES (?, ?, 0) ON CONFLICT (tenant_id, projector) DO NOTHING";
const PG_LOCK_CHECKPOINT: &str = "INSERT INTO projector_checkpoints (tenant_id, projector, seq) \
     VALUES ($1, $2, 0) ON CONFLICT (tenant_id, projector) DO NOTHING";

/// A stored usage total or sum: exact decimal text of any size (TEXT on
/// SQLite, NUMERIC read as text on PostgreSQL).
fn parse_wide(text: &str, what: &str) -> Result<WideDecimal, LedgerError> {
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

/// Seq window SQLite packs into one JSON array for the usage fold.
const SQLITE_USAGE_WINDOW: i64 = 16384;

/// One row of [`USAGE_SOURCES`] packed by SQLite ([`PackedUsageRow`]).
/// `->` yields the parameter as JSON (absent: null), so the fold sees a
/// number as a number, exactly as it would parsing `params` itself.
macro_rules! packed_usage_row {
    () => {
        "json_array(seq, kind, account, unit, amount, recorded_at, params -> '$.quantity', \
         params -> '$.meter', params -> '$.occurred_at', params -> '$.entry_id')"
    };
}

/// The usage rows of one seq window; the engine binds tenant, after, upto.
macro_rules! sqlite_usage_window {
    () => {
        " FROM entries WHERE status = 'posted' AND kind IN ('usage_debit', 'reversal') \
         AND tenant_id = ? AND seq > ? AND seq <= ?"
    };
}

/// The rows of [`USAGE_SOURCES`] in one seq window, packed.
const SQLITE_USAGE_WINDOW_SQL: &str = concat!(
    "SELECT json_group_array(",
    packed_usage_row!(),
    ")",
    sqlite_usage_window!()
);

/// The rows of one seq window in two packed arrays: the usage debits that
/// carry usage columns as [`PackedUsageColumns`], the others (reversals, and
/// usage debits stored without columns) as [`PackedUsageRow`]. Taking four
/// values out of each entry's params JSON was most of SQLite's work in a
/// usage rebuild (docs/performance-history.md).
const SQLITE_USAGE_COLUMNS_WINDOW_SQL: &str = concat!(
    "SELECT json_group_array(json_array(account, usage_meter, usage_day, unit, amount, \
     usage_quantity)) FILTER (WHERE kind = 'usage_debit' AND usage_day IS NOT NULL), \
     json_group_array(",
    packed_usage_row!(),
    ") FILTER (WHERE kind = 'reversal' OR usage_day IS NULL)",
    sqlite_usage_window!()
);

/// A posted usage debit of [`SQLITE_USAGE_COLUMNS_WINDOW_SQL`]'s first
/// array: account, usage meter, usage day, unit, amount, usage quantity.
#[derive(serde::Deserialize)]
struct PackedUsageColumns<'a>(
    #[serde(borrow)] Cow<'a, str>,
    #[serde(borrow)] Cow<'a, str>,
    #[serde(borrow)] Cow<'a, str>,
    #[serde(borrow)] Cow<'a, str>,
    #[serde(borrow)] Cow<'a, str>,
    #[serde(borrow)] Cow<'a, str>,
);

/// Adds up a packed array of [`PackedUsageColumns`], as
/// [`sum_usage_columns`] does in PostgreSQL.
fn fold_usage_columns(scan: &mut UsageScan, packed: &str) -> Result<(), LedgerError> {
    // Consecutive entries mostly share a day: it is parsed when it changes.
    let mut last_day: Option<(String, NaiveDate)> = None;
    super::for_each_packed(packed, "usage columns", |row: PackedUsageColumns| {
        let PackedUsageColumns(account, meter, day_text, unit, amount, quantity) = row;
        let day = match &last_day {
            Some((text, day)) if text == &day_text => *day,
            _ => {
                let day = NaiveDate::parse_from_str(&day_text, DAY_FORMAT).map_err(|_| {
                    LedgerError::Corrupt(format!("usage_day {day_text:?} of an entry"))
                })?;
                last_day = Some((day_text.into_owned(), day));
                day
            }
        };
        let totals = UsageTotals {
            amount: parse_wide(&amount, "amount")?,
            quantity: parse_wide(&quantity, "usage quantity")?,
            entries: 1,
        };
        scan.add_to_key(&account, &meter, day, &unit, &totals)
    })?;
    Ok(())
}

/// Folds a packed array of [`PackedUsageRow`].
fn fold_packed_usage_rows(
    scan: &mut UsageScan,
    reversals: &mut Vec<(i64, String)>,
    packed: &str,
    after: i64,
) -> Result<(), LedgerError> {
    super::for_each_packed(
        packed,
        &format!("usage rows after seq {after}"),
        |row: PackedUsageRow| row.fold(scan, reversals),
    )?;
    Ok(())
}

/// One row of [`SQLITE_USAGE_WINDOW_SQL`].
#[derive(serde::Deserialize)]
struct PackedUsageRow<'a>(
    i64,
    #[serde(borrow)] Cow<'a, str>,
    #[serde(borrow)] Cow<'a, str>,
    #[serde(borrow)] Cow<'a, str>,
    #[serde(borrow)] Cow<'a, str>,
    #[serde(borrow)] Cow<'a, str>,
    #[serde(borrow, deserialize_with = "string_or_none")] Option<Cow<'a, str>>,
    #[serde(borrow, deserialize_with = "string_or_none")] Option<Cow<'a, str>>,
    #[serde(borrow, deserialize_with = "string_or_none")] Option<Cow<'a, str>>,
    #[serde(borrow, deserialize_with = "string_or_none")] Option<Cow<'a, str>>,
);

impl PackedUsageRow<'_> {
    fn fold(
        self,
        scan: &mut UsageScan,
        reversals: &mut Vec<(i64, String)>,
    ) -> Result<(), LedgerError> {
        let PackedUsageRow(
            seq,
            kind,
            account,
            unit,
            amount,
            recorded_at,
            quantity,
            meter,
            occurred_at,
            entry_id,
        ) = self;
        let kind = EntryKind::parse(&kind).ok_or_else(|| {
            LedgerError::Corrupt(format!("kind {kind:?} of the entry at seq {seq}"))
        })?;
        if kind == EntryKind::Reversal {
            if let Some(target) = entry_id {
                reversals.push((seq, target.into_owned()));
            }
            return Ok(());
        }
        let source = UsageSource {
            seq,
            kind,
            status: EntryStatus::Posted,
            account: &account,
            unit: &unit,
            amount: parse_decimal(&amount, "amount")?,
            recorded_at: DateTime::parse_from_rfc3339(&recorded_at)
                .map_err(|_| LedgerError::Corrupt(format!("recorded_at {recorded_at:?}")))?
                .with_timezone(&Utc),
            params: "",
        };
        let params = UsageParams {
            quantity,
            meter,
            occurred_at,
            entry_id: None,
        };
        scan.add_usage(&source, params)
    }
}

/// Folds one PostgreSQL row of [`USAGE_SOURCES`]; a reversal is set aside
/// with the entry it names. Columns are decoded without sqlx's per-value
/// type check (a tenth of the fold's CPU): the statement fixes their types
/// (`int8`, `text`, `text`, `text`, `text`, `timestamptz`, `text`).
fn fold_usage_row(
    row: &sqlx::postgres::PgRow,
    scan: &mut UsageScan,
    reversals: &mut Vec<(i64, String)>,
) -> Result<(), LedgerError> {
    let seq: i64 = row.try_get_unchecked(0)?;
    let kind: &str = row.try_get_unchecked(1)?;
    let amount: &str = row.try_get_unchecked(4)?;
    let source = UsageSource {
        seq,
        kind: EntryKind::parse(kind).ok_or_else(|| {
            LedgerError::Corrupt(format!("kind {kind:?} of the entry at seq {seq}"))
        })?,
        status: EntryStatus::Posted,
        account: row.try_get_unchecked(2)?,
        unit: row.try_get_unchecked(3)?,
        amount: parse_decimal(amount, "amount")?,
        recorded_at: row.try_get_unchecked(5)?,
        params: row.try_get_unchecked(6)?,
    };
    scan.add_source(&source)?;
    if let Some(target) = reversal_target_of(&source)? {
        reversals.push((seq, target));
    }
    Ok(())
}

/// Which usage entries [`Storage::fold_usage_part`] folds from params.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum UsageRows {
    /// All of them.
    All,
    /// Only the reversals and the usage debits stored without usage
    /// columns: the others are added up from their columns, by
    /// [`sum_usage_columns`] in PostgreSQL, by [`fold_usage_columns`] from
    /// SQLite's packed windows.
    WithoutColumns,
}

/// PostgreSQL adds up, per usage key, the posted usage debits with seq in
/// `(after, upto]` that carry usage columns (`crate::usage::UsageColumns`):
/// one parallel aggregate with exact NUMERIC sums instead of a million rows
/// of params sent to Rust and parsed there (docs/performance-history.md).
async fn sum_usage_columns(
    pool: &sqlx::PgPool,
    tenant: &str,
    after: i64,
    upto: i64,
) -> Result<UsageFold, LedgerError> {
    let mut fold = UsageFold::new();
    let mut rows = sqlx::query(
        "SELECT account, usage_meter, usage_day, unit, sum(amount)::text, \
           sum(usage_quantity)::text, count(*) FROM entries \
         WHERE tenant_id = $1 AND seq > $2 AND seq <= $3 AND kind = 'usage_debit' \
           AND status = 'posted' AND usage_day IS NOT NULL \
         GROUP BY account, usage_meter, usage_day, unit",
    )
    .bind(tenant)
    .bind(after)
    .bind(upto)
    .fetch(pool);
    while let Some(r) = rows.try_next().await? {
        let day: &str = r.try_get(2)?;
        let key = UsageKey {
            account: r.try_get(0)?,
            meter: r.try_get(1)?,
            day: NaiveDate::parse_from_str(day, DAY_FORMAT)
                .map_err(|_| LedgerError::Corrupt(format!("usage_day {day:?} of an entry")))?,
            unit: r.try_get(3)?,
        };
        let totals = UsageTotals {
            amount: parse_wide(r.try_get(4)?, "sum of usage amounts")?,
            quantity: parse_wide(r.try_get(5)?, "sum of usage quantities")?,
            entries: r.try_get(6)?,
        };
        fold.add(key, &totals)?;
    }
    Ok(fold)
}

fn day_text(day: NaiveDate) -> String {
    day.format(DAY_FORMAT).to_string()
}

impl Storage {
    /// The seq up to which the usage summaries of `tenant` are complete.
    pub async fn usage_checkpoint(&self, tenant: &str) -> Result<i64, LedgerError> {
        let seq: Option<i64> =
            match self {
                Storage::Sqlite(s) => sqlx::query_scalar(
                    "SELECT seq FROM projector_checkpoints WHERE tenant_id = ? AND projector = ?",
                )
                .bind(tenant)
                .bind(USAGE_PROJECTOR)
                .fetch_optional(&s.pool)
                .await?,
                Storage::Postgres(s) => sqlx::query_scalar(
                    "SELECT seq FROM projector_checkpoints WHERE tenant_id = $1 AND projector = $2",
                )
                .bind(tenant)
                .bind(USAGE_PROJECTOR)
                .fetch_optional(&s.pool)
                .await?,
            };
        Ok(seq.unwrap_or(0))
    }

    /// The seq up to which `tenant`'s entries were appended before the usage
    /// columns existed (migration 0005): those are folded from params.
    async fn usage_columns_from(&self, tenant: &str) -> Result<i64, LedgerError> {
        let from: Option<i64> = match self {
            Storage::Sqlite(s) => {
                sqlx::query_scalar(
                    "SELECT usage_columns_from FROM ledger_heads WHERE tenant_id = ?",
                )
                .bind(tenant)
                .fetch_optional(&s.pool)
                .await?
            }
            Storage::Postgres(s) => {
                sqlx::query_scalar(
                    "SELECT usage_columns_from FROM ledger_heads WHERE tenant_id = $1",
                )
                .bind(tenant)
                .fetch_optional(&s.pool)
                .await?
            }
        };
        Ok(from.unwrap_or(0))
    }

    /// The usage in the log of `tenant` with seq in `(after, upto]`: the
    /// posted usage debits folded, and the posted reversals (seq, the entry
    /// they name), which the caller folds once the named entries are read.
    /// Reads only those entries, and only the columns the fold needs.
    async fn fold_usage_part(
        &self,
        tenant: &str,
        after: i64,
        upto: i64,
        rows: UsageRows,
    ) -> Result<(UsageFold, Vec<(i64, String)>), LedgerError> {
        let mut part = UsageScan::default();
        let mut reversals = Vec::new();
        match self {
            Storage::Sqlite(s) => {
                // sqlx hands each SQLite row from its worker thread to the
                // task with a wake-up (about 6 µs a row, measured): SQLite
                // packs the rows of a seq window into one JSON array instead,
                // with the parameters the fold reads taken out of `params`
                // (or, for the rebuild, the usage columns where they are).
                let mut from = after;
                while from < upto {
                    let to = upto.min(from.saturating_add(SQLITE_USAGE_WINDOW));
                    match rows {
                        UsageRows::All => {
                            let packed: String = sqlx::query_scalar(SQLITE_USAGE_WINDOW_SQL)
                                .bind(tenant)
                                .bind(from)
                                .bind(to)
                                .fetch_one(&s.pool)
                                .await?;
                            fold_packed_usage_rows(&mut part, &mut reversals, &packed, from)?;
                        }
                        UsageRows::WithoutColumns => {
                            let (columns, others): (String, String) =
                                sqlx::query_as(SQLITE_USAGE_COLUMNS_WINDOW_SQL)
                                    .bind(tenant)
                                    .bind(from)
                                    .bind(to)
                                    .fetch_one(&s.pool)
                                    .await?;
                            fold_usage_columns(&mut part, &columns)?;
                            fold_packed_usage_rows(&mut part, &mut reversals, &others, from)?;
                        }
                    }
                    from = to;
                }
            }
            Storage::Postgres(s) => {
                let sources = USAGE_SOURCES.replace("amount,", "amount::text,");
                let range = "tenant_id = $1 AND seq > $2 AND seq <= $3";
                let sql = match rows {
                    UsageRows::All => format!("{sources} {range}"),
                    // Two index scans instead of a scan of the heap: the
                    // reversals through the (tenant_id, kind, upstream_id)
                    // key, the usage debits without columns through the
                    // partial index of migration 0006.
                    UsageRows::WithoutColumns => format!(
                        "{sources} kind = 'reversal' AND {range} UNION ALL \
                         {sources} kind = 'usage_debit' AND usage_day IS NULL AND {range}"
                    ),
                };
                let mut rows = sqlx::query(&sql)
                    .bind(tenant)
                    .bind(after)
                    .bind(upto)
                    .fetch(&s.pool);
                while let Some(r) = rows.try_next().await? {
                    fold_usage_row(&r, &mut part, &mut reversals)?;
                }
            }
        }
        Ok((part.into_fold()?, reversals))
    }

    /// Folds the reversals [`Storage::fold_usage_part`] set aside, reading
    /// each entry a reversal names (reversals are rare).
    async fn take_back_reversals(
        &self,
        tenant: &str,
        reversals: &[(i64, String)],
        fold: &mut UsageFold,
    ) -> Result<(), LedgerError> {
        for (seq, target) in reversals {
            if let Some(original) = self.entry_by_id(tenant, target).await? {
                fold.take_back(*seq, &original)?;
            }
        }
        Ok(())
    }

    /// One projector round: folds at most `max_entries` entries after the
    /// checkpoint and adds them to the summaries, checkpoint and rows in one
    /// transaction. Returns the checkpoint after the round (another
    /// process's, if it got there first; then this round wrote nothing).
    pub async fn project_usage(&self, tenant: &str, max_entries: i64) -> Result<i64, LedgerError> {
        let checkpoint = self.usage_checkpoint(tenant).await?;
        // Entries up to the head are committed (the head moves in the same
        // transaction), so the round may stop at the head without reading
        // the entries that carry no usage.
        let head = self.head(tenant).await?.seq;
        if head <= checkpoint {
            return Ok(checkpoint);
        }
        let new_checkpoint = head.min(checkpoint.saturating_add(max_entries.max(1)));
        let (mut delta, reversals) = self
            .fold_usage_part(tenant, checkpoint, new_checkpoint, UsageRows::All)
            .await?;
        self.take_back_reversals(tenant, &reversals, &mut delta)
            .await?;
        match self
            .write_usage(tenant, Some(checkpoint), new_checkpoint, &delta)
            .await?
        {
            Written::Done => Ok(new_checkpoint),
            Written::Stale(seq) => {
                tracing::debug!(
                    tenant,
                    read = checkpoint,
                    found = seq,
                    "usage checkpoint moved by another projector; round dropped"
                );
                Ok(seq)
            }
        }
    }

    /// Projects `tenant` up to the head it has when called. Returns the
    /// checkpoint reached.
    pub async fn project_usage_to_head(&self, tenant: &str) -> Result<i64, LedgerError> {
        let head = self.head(tenant).await?.seq;
        let mut checkpoint = self.usage_checkpoint(tenant).await?;
        let page = match self {
            Storage::Sqlite(_) => SQLITE_USAGE_PAGE,
            Storage::Postgres(_) => USAGE_PAGE,
        };
        while checkpoint < head {
            let next = self.project_usage(tenant, page).await?;
            if next == checkpoint {
                // The log ends before the head we read: nothing to fold.
                break;
            }
            checkpoint = next;
        }
        Ok(checkpoint)
    }

    /// Tenants whose usage checkpoint is behind their head, in one query.
    pub async fn usage_lagging_tenants(&self) -> Result<Vec<String>, LedgerError> {
        const SQL: &str = "SELECT h.tenant_id FROM ledger_heads h \
             LEFT JOIN projector_checkpoints c \
               ON c.tenant_id = h.tenant_id AND c.projector = 'usage' \
             WHERE h.seq > COALESCE(c.seq, 0) ORDER BY h.tenant_id";
        Ok(match self {
            Storage::Sqlite(s) => sqlx::query_scalar(SQL).fetch_all(&s.pool).await?,
            Storage::Postgres(s) => sqlx::query_scalar(SQL).fetch_all(&s.pool).await?,
        })
    }

    /// Tenants whose usage checkpoint is behind their head, with how many
    /// entries behind (`head seq − checkpoint`), in one query.
    pub async fn usage_lags(&self) -> Result<Vec<(String, i64)>, LedgerError> {
        const SQL: &str = "SELECT h.tenant_id, h.seq - COALESCE(c.seq, 0) AS lag \
             FROM ledger_heads h \
             LEFT JOIN projector_checkpoints c \
               ON c.tenant_id = h.tenant_id AND c.projector = 'usage' \
             WHERE h.seq > COALESCE(c.seq, 0) ORDER BY h.tenant_id";
        Ok(match self {
            Storage::Sqlite(s) => sqlx::query_as(SQL).fetch_all(&s.pool).await?,
            Storage::Postgres(s) => sqlx::query_as(SQL).fetch_all(&s.pool).await?,
        })
    }

    /// The stored usage rows of one account, the checkpoint and the head,
    /// read from one snapshot.
    pub async fn usage_rows(&self, tenant: &str, q: &UsageQuery) -> Result<UsageRead, LedgerError> {
        let from = q.from.map(day_text);
        let to = q.to.map(day_text);
        let mut read = UsageRead::default();
        match self {
            Storage::Sqlite(s) => {
                // A WAL read transaction sees one snapshot from its first read.
                let mut tx = s.pool.begin().await?;
                let mut b = QueryBuilder::<sqlx::Sqlite>::new(
                    "SELECT account, meter, day, unit, quantity, amount, entries \
                     FROM usage_summaries WHERE tenant_id = ",
                );
                b.push_bind(tenant)
                    .push(" AND account = ")
                    .push_bind(&q.account);
                if let Some(m) = &q.meter {
                    b.push(" AND meter = ").push_bind(m);
                }
                if let Some(f) = &from {
                    b.push(" AND day >= ").push_bind(f);
                }
                if let Some(t) = &to {
                    b.push(" AND day < ").push_bind(t);
                }
                b.push(" ORDER BY meter, day, unit");
                let rows = b.build().fetch_all(&mut *tx).await?;
                let checkpoint: Option<i64> = sqlx::query_scalar(
                    "SELECT seq FROM projector_checkpoints WHERE tenant_id = ? AND projector = ?",
                )
                .bind(tenant)
                .bind(USAGE_PROJECTOR)
                .fetch_optional(&mut *tx)
                .await?;
                let head: Option<i64> =
                    sqlx::query_scalar("SELECT seq FROM ledger_heads WHERE tenant_id = ?")
                        .bind(tenant)
                        .fetch_optional(&mut *tx)
                        .await?;
                tx.commit().await?;
                read.rows = rows
                    .iter()
                    .map(decode_usage_row)
                    .collect::<Result<_, _>>()?;
                read.checkpoint = checkpoint.unwrap_or(0);
                read.head_seq = head.unwrap_or(0);
            }
            Storage::Postgres(s) => {
                let mut tx = s
                    .pool
                    .begin_with("BEGIN ISOLATION LEVEL REPEATABLE READ, READ ONLY")
                    .await?;
                let mut b = QueryBuilder::<sqlx::Postgres>::new(
                    "SELECT account, meter, day, unit, quantity::text AS quantity, \
                     amount::text AS amount, entries FROM usage_summaries WHERE tenant_id = ",
                );
                b.push_bind(tenant)
                    .push(" AND account = ")
                    .push_bind(&q.account);
                if let Some(m) = &q.meter {
                    b.push(" AND meter = ").push_bind(m);
                }
                if let Some(f) = &from {
                    b.push(" AND day >= ").push_bind(f);
                }
                if let Some(t) = &to {
                    b.push(" AND day < ").push_bind(t);
                }
                b.push(" ORDER BY meter, day, unit");
                let rows = b.build().fetch_all(&mut *tx).await?;
                let checkpoint: Option<i64> = sqlx::query_scalar(
                    "SELECT seq FROM projector_checkpoints WHERE tenant_id = $1 AND projector = $2",
                )
                .bind(tenant)
                .bind(USAGE_PROJECTOR)
                .fetch_optional(&mut *tx)
                .await?;
                let head: Option<i64> =
                    sqlx::query_scalar("SELECT seq FROM ledger_heads WHERE tenant_id = $1")
                        .bind(tenant)
                        .fetch_optional(&mut *tx)
                        .await?;
                tx.commit().await?;
                read.rows = rows
                    .iter()
                    .map(decode_usage_row)
                    .collect::<Result<_, _>>()?;
                read.checkpoint = checkpoint.unwrap_or(0);
                read.head_seq = head.unwrap_or(0);
            }
        }
        Ok(read)
    }

    /// Every stored usage row of `tenant` and the checkpoint they are
    /// complete to, from one snapshot.
    pub async fn stored_usage(&self, tenant: &str) -> Result<(UsageFold, i64), LedgerError> {
        let (rows, checkpoint) = match self {
            Storage::Sqlite(s) => {
                let mut tx = s.pool.begin().await?;
                let checkpoint: Option<i64> = sqlx::query_scalar(
                    "SELECT seq FROM projector_checkpoints WHERE tenant_id = ? AND projector = ?",
                )
                .bind(tenant)
                .bind(USAGE_PROJECTOR)
                .fetch_optional(&mut *tx)
                .await?;
                let rows = sqlx::query(
                    "SELECT account, meter, day, unit, quantity, amount, entries \
                     FROM usage_summaries WHERE tenant_id = ?",
                )
                .bind(tenant)
                .fetch_all(&mut *tx)
                .await?;
                tx.commit().await?;
                let rows = rows
                    .iter()
                    .map(decode_usage_row)
                    .collect::<Result<Vec<_>, _>>()?;
                (rows, checkpoint)
            }
            Storage::Postgres(s) => {
                let mut tx = s
                    .pool
                    .begin_with("BEGIN ISOLATION LEVEL REPEATABLE READ, READ ONLY")
                    .await?;
                let checkpoint: Option<i64> = sqlx::query_scalar(
                    "SELECT seq FROM projector_checkpoints WHERE tenant_id = $1 AND projector = $2",
                )
                .bind(tenant)
                .bind(USAGE_PROJECTOR)
                .fetch_optional(&mut *tx)
                .await?;
                let rows = sqlx::query(
                    "SELECT account, meter, day, unit, quantity::text AS quantity, \
                     amount::text AS amount, entries FROM usage_summaries WHERE tenant_id = $1",
                )
                .bind(tenant)
                .fetch_all(&mut *tx)
                .await?;
                tx.commit().await?;
                let rows = rows
                    .iter()
                    .map(decode_usage_row)
                    .collect::<Result<Vec<_>, _>>()?;
                (rows, checkpoint)
            }
        };
        let mut fold = UsageFold::new();
        for (key, totals) in rows {
            fold.add(key, &totals)?;
        }
        Ok((fold, checkpoint.unwrap_or(0)))
    }

    /// A fresh fold of `tenant`'s log from seq 1 to `upto` (inclusive):
    /// seq ranges folded on one connection each, at once, and added
    /// (decimal sums are exact, so the split cannot change the result).
    pub async fn fold_usage(&self, tenant: &str, upto: i64) -> Result<UsageFold, LedgerError> {
        self.fold_usage_rows(tenant, upto, UsageRows::All).await
    }

    /// [`Storage::fold_usage`], or with [`UsageRows::WithoutColumns`] the
    /// rebuild's: on PostgreSQL the usage debits that carry usage columns
    /// are added up by the database instead of folded from params.
    async fn fold_usage_rows(
        &self,
        tenant: &str,
        upto: i64,
        rows: UsageRows,
    ) -> Result<UsageFold, LedgerError> {
        let mut tasks = Vec::new();
        let mut from_params = upto;
        if rows == UsageRows::WithoutColumns {
            // Entries appended before the usage columns existed are folded
            // from params below; after them, the columns are added up, and
            // only reversals (and any usage debit without columns) are
            // folded from params.
            from_params = self.usage_columns_from(tenant).await?.clamp(0, upto);
            match self {
                Storage::Postgres(s) => {
                    let (pool, tenant) = (s.pool.clone(), tenant.to_owned());
                    let storage = self.clone();
                    tasks.push(tokio::spawn(async move {
                        let (summed, (rest, reversals)) = tokio::try_join!(
                            sum_usage_columns(&pool, &tenant, from_params, upto),
                            storage.fold_usage_part(
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
                Storage::Sqlite(_) => {
                    tasks.extend(
                        split_range(from_params, upto)
                            .into_iter()
                            .map(|(after, to)| {
                                let (storage, tenant) = (self.clone(), tenant.to_owned());
                                tokio::spawn(async move {
                                    storage
                                        .fold_usage_part(
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
            let (storage, tenant) = (self.clone(), tenant.to_owned());
            tokio::spawn(async move {
                storage
                    .fold_usage_part(&tenant, after, to, UsageRows::All)
                    .await
            })
        }));
        let mut fold = UsageFold::new();
        let mut reversals = Vec::new();
        for (part, mut taken_back) in join_folds(tasks).await? {
            fold.merge(part)?;
            reversals.append(&mut taken_back);
        }
        self.take_back_reversals(tenant, &reversals, &mut fold)
            .await?;
        Ok(fold)
    }

    /// Replaces `tenant`'s usage summaries with a fresh fold of its whole
    /// log, rows and checkpoint in one transaction (readers see the old
    /// summaries or the new ones, never none). Returns (seq folded to, rows).
    pub async fn rebuild_usage(&self, tenant: &str) -> Result<(i64, usize), LedgerError> {
        let head = self.head(tenant).await?.seq;
        let started = std::time::Instant::now();
        // From the usage columns where the writer stored them (PostgreSQL),
        // from params elsewhere; `tally verify` folds everything from
        // params and compares.
        let fold = self
            .fold_usage_rows(tenant, head, UsageRows::WithoutColumns)
            .await?;
        let folded = started.elapsed();
        let written = self.write_usage(tenant, None, head, &fold).await?;
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
    /// checkpoint row's lock. With `expected`, `fold` holds deltas added to
    /// the stored rows, and nothing is written unless the checkpoint is
    /// still `expected`. Without it, `fold` replaces every row of the tenant.
    async fn write_usage(
        &self,
        tenant: &str,
        expected: Option<i64>,
        to: i64,
        mut fold: &UsageFold,
    ) -> Result<Written, LedgerError> {
        // A rebuild (`expected` None) writes only the rows that differ from
        // what is stored (store/changes.rs): these.
        let replaced: UsageFold;
        match self {
            Storage::Sqlite(s) => {
                // SQLite cannot add decimal text exactly: the touched rows are
                // read, added to in Rust and written back. The reads happen
                // before the write lock, in one snapshot with the checkpoint,
                // so the lock is held only for the writes: the ledger's own
                // writer waits for the projector no longer than that. The
                // rows read are still current if the checkpoint has not moved
                // by the time the lock is taken, since every change of the
                // rows moves the checkpoint in the same transaction.
                let mut current_rows: HashMap<UsageKey, UsageTotals> = HashMap::new();
                if let Some(expected_seq) = expected {
                    let mut read = s.pool.begin().await?;
                    let seen: Option<i64> = sqlx::query_scalar(
                        "SELECT seq FROM projector_checkpoints WHERE tenant_id = ? AND projector = ?",
                    )
                    .bind(tenant)
                    .bind(USAGE_PROJECTOR)
                    .fetch_optional(&mut *read)
                    .await?;
                    let seen = seen.unwrap_or(0);
                    if seen != expected_seq {
                        read.rollback().await?;
                        return Ok(Written::Stale(seen));
                    }
                    let keys: Vec<&UsageKey> = fold.iter().map(|(k, _)| k).collect();
                    for chunk in keys.chunks(USAGE_ROWS_PER_INSERT / 4) {
                        let mut b = QueryBuilder::<sqlx::Sqlite>::new(
                            "SELECT account, meter, day, unit, quantity, amount, entries \
                             FROM usage_summaries WHERE tenant_id = ",
                        );
                        b.push_bind(tenant)
                            .push(" AND (account, meter, day, unit) IN (VALUES ");
                        let mut sep = b.separated(", ");
                        for key in chunk {
                            sep.push("(")
                                .push_bind_unseparated(&key.account)
                                .push_unseparated(", ")
                                .push_bind_unseparated(&key.meter)
                                .push_unseparated(", ")
                                .push_bind_unseparated(day_text(key.day))
                                .push_unseparated(", ")
                                .push_bind_unseparated(&key.unit)
                                .push_unseparated(")");
                        }
                        b.push(")");
                        for row in b.build().fetch_all(&mut *read).await? {
                            let (key, totals) = decode_usage_row(&row)?;
                            current_rows.insert(key, totals);
                        }
                    }
                    read.commit().await?;
                }
                // This process's turn, then the database's write lock.
                let mut tx = s.begin_write().await?;
                sqlx::query(SQLITE_LOCK_CHECKPOINT)
                    .bind(tenant)
                    .bind(USAGE_PROJECTOR)
                    .execute(&mut *tx)
                    .await?;
                let current: i64 = sqlx::query_scalar(
                    "SELECT seq FROM projector_checkpoints WHERE tenant_id = ? AND projector = ?",
                )
                .bind(tenant)
                .bind(USAGE_PROJECTOR)
                .fetch_one(&mut *tx)
                .await?;
                match expected {
                    Some(seq) if seq != current => {
                        tx.rollback().await?;
                        return Ok(Written::Stale(current));
                    }
                    Some(_) => {}
                    None => {
                        let stored = sqlx::query(
                            "SELECT account, meter, day, unit, CAST(quantity AS TEXT), \
                             CAST(amount AS TEXT), CAST(entries AS INTEGER) \
                             FROM usage_summaries WHERE tenant_id = ?",
                        )
                        .bind(tenant)
                        .fetch_all(&mut *tx)
                        .await?;
                        let changes = usage_changes(StoredUsage::from_rows(&stored)?, fold);
                        for chunk in changes.remove.chunks(USAGE_ROWS_PER_INSERT / 4) {
                            let mut b = QueryBuilder::<sqlx::Sqlite>::new(
                                "DELETE FROM usage_summaries WHERE tenant_id = ",
                            );
                            b.push_bind(tenant)
                                .push(" AND (account, meter, day, unit) IN ");
                            b.push_tuples(chunk, |mut t, [account, meter, day, unit]| {
                                t.push_bind(account)
                                    .push_bind(meter)
                                    .push_bind(day)
                                    .push_bind(unit);
                            });
                            b.build().execute(&mut *tx).await?;
                        }
                        replaced = changes.write;
                        fold = &replaced;
                    }
                }
                let mut sums: Vec<(&UsageKey, UsageTotals)> = Vec::with_capacity(fold.len());
                for (key, delta) in fold.iter() {
                    let sum = match current_rows.get(key) {
                        Some(row) => row.checked_add(delta)?,
                        None => delta.clone(),
                    };
                    sums.push((key, sum));
                }
                for chunk in sums.chunks(USAGE_ROWS_PER_INSERT) {
                    let mut b = QueryBuilder::<sqlx::Sqlite>::new(
                        "INSERT INTO usage_summaries \
                         (tenant_id, account, meter, day, unit, quantity, amount, entries) ",
                    );
                    b.push_values(chunk, |mut v, (key, t)| {
                        v.push_bind(tenant)
                            .push_bind(&key.account)
                            .push_bind(&key.meter)
                            .push_bind(day_text(key.day))
                            .push_bind(&key.unit)
                            .push_bind(t.quantity.to_string())
                            .push_bind(t.amount.to_string())
                            .push_bind(t.entries);
                    });
                    b.push(
                        " ON CONFLICT (tenant_id, account, meter, day, unit) DO UPDATE SET \
                         quantity = excluded.quantity, amount = excluded.amount, \
                         entries = excluded.entries",
                    );
                    b.build().execute(&mut *tx).await?;
                }
                sqlx::query(
                    "UPDATE projector_checkpoints SET seq = ? WHERE tenant_id = ? AND projector = ?",
                )
                .bind(to)
                .bind(tenant)
                .bind(USAGE_PROJECTOR)
                .execute(&mut *tx)
                .await?;
                tx.commit().await?;
            }
            Storage::Postgres(s) => {
                let mut tx = s.pool.begin().await?;
                sqlx::query(PG_LOCK_CHECKPOINT)
                    .bind(tenant)
                    .bind(USAGE_PROJECTOR)
                    .execute(&mut *tx)
                    .await?;
                let current: i64 = sqlx::query_scalar(
                    "SELECT seq FROM projector_checkpoints \
                     WHERE tenant_id = $1 AND projector = $2 FOR UPDATE",
                )
                .bind(tenant)
                .bind(USAGE_PROJECTOR)
                .fetch_one(&mut *tx)
                .await?;
                match expected {
                    Some(seq) if seq != current => {
                        tx.rollback().await?;
                        return Ok(Written::Stale(current));
                    }
                    Some(_) => {}
                    None => {
                        let stored = sqlx::query(
                            "SELECT account, meter, day, unit, quantity::text, amount::text, \
                             entries FROM usage_summaries WHERE tenant_id = $1",
                        )
                        .bind(tenant)
                        .fetch_all(&mut *tx)
                        .await?;
                        let changes = usage_changes(StoredUsage::from_rows(&stored)?, fold);
                        if !changes.remove.is_empty() {
                            let column = |i: usize| {
                                changes
                                    .remove
                                    .iter()
                                    .map(|k| k[i].as_str())
                                    .collect::<Vec<&str>>()
                            };
                            sqlx::query(
                                "DELETE FROM usage_summaries u USING UNNEST($2::text[], \
                                   $3::text[], $4::text[], $5::text[]) AS k(account, meter, day, unit) \
                                 WHERE u.tenant_id = $1 AND u.account = k.account \
                                   AND u.meter = k.meter AND u.day = k.day AND u.unit = k.unit",
                            )
                            .bind(tenant)
                            .bind(column(0))
                            .bind(column(1))
                            .bind(column(2))
                            .bind(column(3))
                            .execute(&mut *tx)
                            .await?;
                        }
                        replaced = changes.write;
                        fold = &replaced;
                    }
                }
                // NUMERIC adds exactly: the database adds each delta to its row.
                let rows: Vec<(&UsageKey, &UsageTotals)> = fold.iter().collect();
                for chunk in rows.chunks(LOG_PAGE as usize) {
                    let col = |f: fn(&UsageKey, &UsageTotals) -> String| {
                        chunk.iter().map(|(k, t)| f(k, t)).collect::<Vec<String>>()
                    };
                    let entries: Vec<i64> = chunk.iter().map(|(_, t)| t.entries).collect();
                    sqlx::query(
                        "INSERT INTO usage_summaries \
                           (tenant_id, account, meter, day, unit, quantity, amount, entries) \
                         SELECT $1, r.account, r.meter, r.day, r.unit, r.quantity::numeric, \
                                r.amount::numeric, r.entries \
                         FROM UNNEST($2::text[], $3::text[], $4::text[], $5::text[], $6::text[], \
                                     $7::text[], $8::int8[]) \
                           AS r(account, meter, day, unit, quantity, amount, entries) \
                         ON CONFLICT (tenant_id, account, meter, day, unit) DO UPDATE SET \
                           quantity = usage_summaries.quantity + excluded.quantity, \
                           amount = usage_summaries.amount + excluded.amount, \
                           entries = usage_summaries.entries + excluded.entries",
                    )
                    .bind(tenant)
                    .bind(col(|k, _| k.account.clone()))
                    .bind(col(|k, _| k.meter.clone()))
                    .bind(col(|k, _| day_text(k.day)))
                    .bind(col(|k, _| k.unit.clone()))
                    .bind(col(|_, t| t.quantity.to_string()))
                    .bind(col(|_, t| t.amount.to_string()))
                    .bind(entries)
                    .execute(&mut *tx)
                    .await?;
                }
                sqlx::query(
                    "UPDATE projector_checkpoints SET seq = $1 \
                     WHERE tenant_id = $2 AND projector = $3",
                )
                .bind(to)
                .bind(tenant)
                .bind(USAGE_PROJECTOR)
                .execute(&mut *tx)
                .await?;
                tx.commit().await?;
            }
        }
        Ok(Written::Done)
    }
}

/// The usage projector of `tally serve`: every `every`, projects every
/// tenant that is behind up to its head. Errors are logged and retried on the next tick;
/// the task never ends on its own.
pub async fn run_usage_projector(storage: Storage, every: Duration, stats: Arc<ProjectorStats>) {
    // The first round runs one interval after start, not at once.
    let mut tick = tokio::time::interval_at(tokio::time::Instant::now() + every, every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let tenants = match storage.usage_lagging_tenants().await {
            Ok(t) => t,
            Err(e) => {
                stats.failures.fetch_add(1, Ordering::Relaxed);
                tracing::warn!(error = %e, "usage projection failed; will retry");
                continue;
            }
        };
        // A tenant that fails does not hold up the others.
        for tenant in tenants {
            if let Err(e) = storage.project_usage_to_head(&tenant).await {
                stats.failures.fetch_add(1, Ordering::Relaxed);
                tracing::warn!(tenant, error = %e, "usage projection failed; will retry");
            }
        }
        stats.rounds.fetch_add(1, Ordering::Relaxed);
    }
}

/// Observations of this process's usage projector, for operators (the lag
/// itself is read from the database: [`Storage::usage_lags`]).
#[derive(Debug, Default)]
pub struct ProjectorStats {
    /// Rounds completed (failed tenants included).
    pub rounds: AtomicU64,
    /// Failed reads of the lagging tenants and failed tenant projections;
    /// each is retried next round.
    pub failures: AtomicU64,
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::intent::Intent;
    use crate::store::EntryFilter;
    use crate::Decision;

    fn body(v: serde_json::Value) -> serde_json::Map<String, serde_json::Value> {
        v.as_object().unwrap().clone()
    }

    /// The rebuild's fold (SQLite packs rows into JSON, parameters taken out
    /// in SQL) and the projector's equal the fold of whole entries, one by
    /// one, through `UsageFold::apply`: escaped text, absent parameters,
    /// another day, a reversal.
    #[tokio::test]
    async fn the_packed_fold_equals_the_fold_of_whole_entries() {
        let storage = Storage::connect_with("sqlite::memory:", 1).await.unwrap();
        let debits = [
            json!({"usage_record_id": "u1", "account": "c\"1", "amount": "0.10", "unit": "USD",
                   "meter": "tok\"ens\\", "quantity": "1.500"}),
            json!({"usage_record_id": "u2", "account": "c\"1", "amount": "2", "unit": "USD"}),
            json!({"usage_record_id": "u3", "account": "c2", "amount": "0.5", "unit": "EUR",
                   "meter": "tok", "quantity": "7", "occurred_at": "2026-01-02T23:59:59.5+00:00"}),
            json!({"usage_record_id": "u4", "account": "c2", "amount": "0.25", "unit": "EUR",
                   "meter": "tok", "quantity": "3"}),
        ];
        let mut ids = Vec::new();
        for d in debits {
            let intent = Intent::usage_debit(body(d)).unwrap();
            match &storage.commit_group("t", &[&intent]).await.unwrap()[0] {
                Decision::Created(e) => ids.push(e.id.clone()),
                other => panic!("not created: {other:?}"),
            }
        }
        let payment = Intent::payment(body(
            json!({"payment_id": "p1", "account": "c2", "amount": "9", "unit": "EUR"}),
        ))
        .unwrap();
        let reversal = Intent::reversal(body(
            json!({"reversal_id": "r1", "entry_id": ids[3], "reason": "duplicate"}),
        ))
        .unwrap();
        storage
            .commit_group("t", &[&payment, &reversal])
            .await
            .unwrap();

        let head = storage.head("t").await.unwrap().seq;
        let entries = storage
            .list_entries("t", &EntryFilter::log_page(0, 100))
            .await
            .unwrap();
        assert_eq!(entries.len() as i64, head);
        let mut expected = UsageFold::new();
        for e in &entries {
            let original = match crate::usage::reversal_target(e).unwrap() {
                Some(id) => storage.entry_by_id("t", &id).await.unwrap(),
                None => None,
            };
            expected.apply(e, original.as_ref()).unwrap();
        }
        // Four keys: the reversed one stays, at zero.
        assert_eq!(expected.len(), 4, "{expected:?}");

        assert_eq!(storage.fold_usage("t", head).await.unwrap(), expected);
        assert_eq!(storage.project_usage_to_head("t").await.unwrap(), head);
        let (stored, checkpoint) = storage.stored_usage("t").await.unwrap();
        assert_eq!(checkpoint, head);
        assert_eq!(stored, expected);
    }
}
