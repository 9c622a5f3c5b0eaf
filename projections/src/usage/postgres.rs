//! The usage summaries on PostgreSQL: the SQL of every read and write of
//! `usage_summaries` and `projector_checkpoints`. The log the fold runs
//! over is read through the ledger (`Storage::for_each_usage_entry`,
//! `PostgresStore::for_each_usage_sum`).

use sqlx::{PgConnection, PgPool, Postgres, Transaction};
use tally_ledger::store::LOG_PAGE;
use tally_ledger::LedgerError;

use super::fold::{UsageFold, UsageKey, UsageTotals};
use super::rows::{day_text, Written};
use super::shared::UsageEngine;

impl UsageEngine for PgPool {
    type Db = Postgres;
    type Write = Transaction<'static, Postgres>;
    type ReadAhead = ();

    const SUMMARY_COLUMNS: &'static str = "account, meter, day, unit, \
        quantity::text AS quantity, amount::text AS amount, entries";
    const STORED_COLUMNS: &'static str = Self::SUMMARY_COLUMNS;
    const LOCKED_CHECKPOINT: &'static str = "SELECT seq FROM projector_checkpoints \
        WHERE tenant_id = $1 AND projector = $2 FOR UPDATE";

    /// A read-only transaction on one snapshot.
    async fn snapshot(&self) -> Result<Transaction<'static, Postgres>, LedgerError> {
        Ok(self
            .begin_with("BEGIN ISOLATION LEVEL REPEATABLE READ, READ ONLY")
            .await?)
    }

    async fn begin_write(&self) -> Result<Self::Write, LedgerError> {
        Ok(self.begin().await?)
    }

    async fn commit(write: Self::Write) -> Result<(), LedgerError> {
        Ok(write.commit().await?)
    }

    async fn rollback(write: Self::Write) -> Result<(), LedgerError> {
        Ok(write.rollback().await?)
    }

    /// NUMERIC adds exactly in the database: nothing is read ahead.
    async fn read_ahead(
        &self,
        _tenant: &str,
        _expected: Option<i64>,
        _fold: &UsageFold,
    ) -> Result<Result<(), Written>, LedgerError> {
        Ok(Ok(()))
    }

    async fn remove_rows(
        conn: &mut PgConnection,
        tenant: &str,
        keys: &[[String; 4]],
    ) -> Result<(), LedgerError> {
        remove_rows(conn, tenant, keys).await
    }

    async fn add_fold(
        conn: &mut PgConnection,
        tenant: &str,
        fold: &UsageFold,
        _read_ahead: (),
    ) -> Result<(), LedgerError> {
        add_deltas(conn, tenant, fold).await
    }
}

/// Deletes the summary rows of `tenant` with these keys, in one statement.
async fn remove_rows(
    conn: &mut PgConnection,
    tenant: &str,
    remove: &[[String; 4]],
) -> Result<(), LedgerError> {
    if remove.is_empty() {
        return Ok(());
    }
    let column = |i: usize| remove.iter().map(|k| k[i].as_str()).collect::<Vec<&str>>();
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
    .execute(&mut *conn)
    .await?;
    Ok(())
}

/// NUMERIC adds exactly: the database adds each delta to its row.
async fn add_deltas(
    conn: &mut PgConnection,
    tenant: &str,
    fold: &UsageFold,
) -> Result<(), LedgerError> {
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
        .execute(&mut *conn)
        .await?;
    }
    Ok(())
}
