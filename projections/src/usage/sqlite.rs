//! The usage summaries on SQLite: the SQL of every read and write of
//! `usage_summaries` and `projector_checkpoints`. The log the fold runs
//! over is read through the ledger (`Storage::for_each_usage_entry`).

use std::collections::HashMap;

use sqlx::{QueryBuilder, Sqlite, SqliteConnection, Transaction};
use tally_ledger::store::{SqliteStore, SqliteWrite};
use tally_ledger::LedgerError;

use super::fold::{UsageFold, UsageKey, UsageTotals, USAGE_PROJECTOR};
use super::rows::{day_text, decode_usage_row, Written};
use super::shared::{UsageEngine, CHECKPOINT};

/// The most entries one projector round folds on SQLite, where the round's
/// write transaction holds the one write lock every group of the ledger
/// needs: with rounds of ~900 entries (200 ms at 4,500 posts/s) a group's
/// wait for its turn had a p99 of 21 ms; with 256, 8.6 ms.
pub(super) const USAGE_PAGE: i64 = 256;

/// SQLite allows 32,766 bound parameters per statement; 8 per row.
const USAGE_ROWS_PER_INSERT: usize = 500;

impl UsageEngine for SqliteStore {
    type Db = Sqlite;
    type Write = SqliteWrite;
    type ReadAhead = HashMap<UsageKey, UsageTotals>;

    const SUMMARY_COLUMNS: &'static str = "account, meter, day, unit, quantity, amount, entries";
    const STORED_COLUMNS: &'static str = "account, meter, day, unit, \
        CAST(quantity AS TEXT) AS quantity, CAST(amount AS TEXT) AS amount, \
        CAST(entries AS INTEGER) AS entries";
    /// `BEGIN IMMEDIATE` already holds the database's write lock.
    const LOCKED_CHECKPOINT: &'static str = CHECKPOINT;

    /// A read transaction: WAL gives it one snapshot from its first read.
    async fn snapshot(&self) -> Result<Transaction<'static, Sqlite>, LedgerError> {
        Ok(self.pool().begin().await?)
    }

    async fn begin_write(&self) -> Result<SqliteWrite, LedgerError> {
        SqliteStore::begin_write(self).await
    }

    async fn commit(write: SqliteWrite) -> Result<(), LedgerError> {
        write.commit().await
    }

    async fn rollback(write: SqliteWrite) -> Result<(), LedgerError> {
        write.rollback().await
    }

    async fn read_ahead(
        &self,
        tenant: &str,
        expected: Option<i64>,
        fold: &UsageFold,
    ) -> Result<Result<Self::ReadAhead, Written>, LedgerError> {
        read_current_rows(self, tenant, expected, fold).await
    }

    async fn remove_rows(
        conn: &mut SqliteConnection,
        tenant: &str,
        keys: &[[String; 4]],
    ) -> Result<(), LedgerError> {
        remove_rows(conn, tenant, keys).await
    }

    async fn add_fold(
        conn: &mut SqliteConnection,
        tenant: &str,
        fold: &UsageFold,
        current_rows: Self::ReadAhead,
    ) -> Result<(), LedgerError> {
        add_sums(conn, tenant, fold, current_rows).await
    }
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
                let (key, totals) = decode_usage_row::<Sqlite>(&row)?;
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
    conn: &mut SqliteConnection,
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
    conn: &mut SqliteConnection,
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
