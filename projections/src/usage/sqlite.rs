//! The usage summaries on SQLite: the SQL of every read and write of
//! `usage_summaries` and `projector_checkpoints`, and the packed reads of
//! the log the fold runs over.

use std::borrow::Cow;
use std::collections::HashMap;

use chrono::{DateTime, NaiveDate, Utc};
use sqlx::{QueryBuilder, SqlitePool};
use tally_ledger::entry::{string_or_none, EntryStatus, UsageParams, UsageSource, DAY_FORMAT};
use tally_ledger::request::EntryKind;
use tally_ledger::store::{parse_decimal, SqliteStore};
use tally_ledger::LedgerError;

use super::fold::{UsageFold, UsageKey, UsageScan, UsageTotals, USAGE_PROJECTOR};
use super::rows::{day_text, decode_usage_row, parse_wide, UsagePart, UsageRows, Written};
use super::shared::{usage_reads, usage_write, CHECKPOINT};

usage_reads! {
    db = sqlx::Sqlite,
    pool = SqlitePool,
    connection = sqlx::SqliteConnection,
    summary_columns = "account, meter, day, unit, quantity, amount, entries",
    snapshot = snapshot,
}

/// A read transaction: WAL gives it one snapshot from its first read.
async fn snapshot(
    pool: &SqlitePool,
) -> Result<sqlx::Transaction<'static, sqlx::Sqlite>, sqlx::Error> {
    pool.begin().await
}

use crate::packed::for_each_packed;

/// The most entries one projector round folds on SQLite, where the round's
/// write transaction holds the one write lock every group of the ledger
/// needs: with rounds of ~900 entries (200 ms at 4,500 posts/s) a group's
/// wait for its turn had a p99 of 21 ms; with 256, 8.6 ms.
pub(super) const USAGE_PAGE: i64 = 256;

/// SQLite allows 32,766 bound parameters per statement; 8 per row.
const USAGE_ROWS_PER_INSERT: usize = 500;

/// Seq window SQLite packs into one JSON array for the usage fold.
const SQLITE_USAGE_WINDOW: i64 = 16384;

/// One row of [`super::USAGE_SOURCES`] packed by SQLite ([`PackedUsageRow`]).
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
         AND tenant_id = $1 AND seq > $2 AND seq <= $3"
    };
}

/// The rows of [`super::USAGE_SOURCES`] in one seq window, packed.
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
/// usage rebuild.
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
/// `postgres::sum_usage_columns` does in PostgreSQL.
fn fold_usage_columns(scan: &mut UsageScan, packed: &str) -> Result<(), LedgerError> {
    // Consecutive entries mostly share a day: it is parsed when it changes.
    let mut last_day: Option<(String, NaiveDate)> = None;
    for_each_packed(packed, "usage columns", |row: PackedUsageColumns| {
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
    for_each_packed(
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

/// Folds the usage rows with seq in `(after, upto]` into `part`, setting
/// reversals aside (see `super::fold_usage_part`).
pub(super) async fn fold_part(
    pool: &SqlitePool,
    into: &mut UsagePart<'_>,
) -> Result<(), LedgerError> {
    let (tenant, after, upto, rows) = (into.tenant, into.after, into.upto, into.rows);
    let (part, reversals) = (&mut into.scan, &mut into.reversals);
    // sqlx hands each SQLite row from its worker thread to the task with a
    // wake-up (about 6 µs a row, measured): SQLite packs the rows of a seq
    // window into one JSON array instead, with the parameters the fold
    // reads taken out of `params` (or, for the rebuild, the usage columns
    // where they are).
    let mut from = after;
    while from < upto {
        let to = upto.min(from.saturating_add(SQLITE_USAGE_WINDOW));
        match rows {
            UsageRows::All => {
                let packed: String = sqlx::query_scalar(SQLITE_USAGE_WINDOW_SQL)
                    .bind(tenant)
                    .bind(from)
                    .bind(to)
                    .fetch_one(pool)
                    .await?;
                fold_packed_usage_rows(part, reversals, &packed, from)?;
            }
            UsageRows::WithoutColumns => {
                let (columns, others): (String, String) =
                    sqlx::query_as(SQLITE_USAGE_COLUMNS_WINDOW_SQL)
                        .bind(tenant)
                        .bind(from)
                        .bind(to)
                        .fetch_one(pool)
                        .await?;
                fold_usage_columns(part, &columns)?;
                fold_packed_usage_rows(part, reversals, &others, from)?;
            }
        }
        from = to;
    }
    Ok(())
}

usage_write! {
    store = SqliteStore,
    begin = SqliteStore::begin_write,
    read_ahead = read_current_rows,
    lock = CHECKPOINT,
    stored = "SELECT account, meter, day, unit, CAST(quantity AS TEXT), \
        CAST(amount AS TEXT), CAST(entries AS INTEGER) \
        FROM usage_summaries WHERE tenant_id = $1",
    remove = remove_rows,
    add = add_sums,
}

/// The stored rows the fold adds to, read before the write begins (this
/// process's turn, then the database's write lock).
///
/// SQLite cannot add decimal text exactly: the touched rows are read,
/// added to in Rust and written back. The reads happen before the write
/// lock, in one snapshot with the checkpoint, so the lock is held only
/// for the writes: the ledger's own writer waits for the projector no
/// longer than that. The rows read are still current if the checkpoint
/// has not moved by the time the lock is taken, since every change of
/// the rows moves the checkpoint in the same transaction.
async fn read_current_rows(
    store: &SqliteStore,
    tenant: &str,
    expected: Option<i64>,
    fold: &UsageFold,
) -> Result<Result<HashMap<UsageKey, UsageTotals>, Written>, LedgerError> {
    let mut current_rows: HashMap<UsageKey, UsageTotals> = HashMap::new();
    if let Some(expected_seq) = expected {
        let mut read = store.pool().begin().await?;
        let seen: Option<i64> = sqlx::query_scalar(CHECKPOINT)
            .bind(tenant)
            .bind(USAGE_PROJECTOR)
            .fetch_optional(&mut *read)
            .await?;
        let seen = seen.unwrap_or(0);
        if seen != expected_seq {
            read.rollback().await?;
            return Ok(Err(Written::Stale(seen)));
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
    Ok(Ok(current_rows))
}

/// Deletes the summary rows of `tenant` with these keys, in chunks below
/// SQLite's bound-parameter limit.
async fn remove_rows(
    conn: &mut sqlx::SqliteConnection,
    tenant: &str,
    remove: &[[String; 4]],
) -> Result<(), LedgerError> {
    for chunk in remove.chunks(USAGE_ROWS_PER_INSERT / 4) {
        let mut b =
            QueryBuilder::<sqlx::Sqlite>::new("DELETE FROM usage_summaries WHERE tenant_id = ");
        b.push_bind(tenant)
            .push(" AND (account, meter, day, unit) IN ");
        b.push_tuples(chunk, |mut t, [account, meter, day, unit]| {
            t.push_bind(account)
                .push_bind(meter)
                .push_bind(day)
                .push_bind(unit);
        });
        b.build().execute(&mut *conn).await?;
    }
    Ok(())
}

/// SQLite cannot add decimal text exactly: each delta is added here to the
/// row read ahead (`current_rows`) and the sum written back.
async fn add_sums(
    conn: &mut sqlx::SqliteConnection,
    tenant: &str,
    fold: &UsageFold,
    current_rows: HashMap<UsageKey, UsageTotals>,
) -> Result<(), LedgerError> {
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
        b.build().execute(&mut *conn).await?;
    }
    Ok(())
}
