//! The minimal work per entry, as a floor under "the same work": insert a
//! keyed entry (the key UNIQUE) and move one balance, integers in minor
//! units so that both engines add in SQL. No hash, no JSON, no copy of
//! tally's five indexes: the least any ledger that refuses a key twice
//! must do per entry.

use std::collections::BTreeMap;

use rust_decimal::prelude::ToPrimitive;
use rust_decimal::Decimal;
use sqlx::QueryBuilder;

use crate::raw::{RawDb, RawPool, RawRow, TENANT};

/// Creates the minimal tables.
pub async fn create(db: &RawDb) -> anyhow::Result<()> {
    let ddl = "CREATE TABLE raw_min_entries (tenant_id TEXT NOT NULL, upstream_id TEXT NOT NULL, \
                 account TEXT NOT NULL, amount BIGINT NOT NULL, PRIMARY KEY (tenant_id, upstream_id));
               CREATE TABLE raw_min_balances (tenant_id TEXT NOT NULL, account TEXT NOT NULL, \
                 balance BIGINT NOT NULL, PRIMARY KEY (tenant_id, account));";
    match db.pool() {
        RawPool::Postgres(pool) => {
            sqlx::raw_sql(ddl).execute(pool).await?;
        }
        RawPool::Sqlite(pool) => {
            sqlx::raw_sql(ddl).execute(pool).await?;
        }
    }
    Ok(())
}

/// Minor units of an amount (4 decimal places).
fn minor(amount: Decimal) -> i64 {
    (amount * Decimal::from(10_000)).to_i64().unwrap_or(0)
}

/// Inserts `rows` and moves their accounts' balances, in one transaction:
/// two prepared statements whatever the number of rows (arrays on
/// PostgreSQL; on SQLite one multi-row statement each, the same text for
/// the same number of rows). Balances in account order, so concurrent
/// transactions never deadlock.
pub async fn write(pool: &RawPool, rows: &[RawRow]) -> anyhow::Result<()> {
    let mut deltas: BTreeMap<&str, i64> = BTreeMap::new();
    for r in rows {
        *deltas.entry(&r.account).or_default() += minor(r.amount);
    }
    match pool {
        RawPool::Postgres(pool) => {
            let mut tx = pool.begin().await?;
            sqlx::query(
                "INSERT INTO raw_min_entries SELECT $1, u, a, m \
                 FROM UNNEST($2::text[], $3::text[], $4::int8[]) AS x(u, a, m)",
            )
            .bind(TENANT)
            .bind(
                rows.iter()
                    .map(|r| r.upstream_id.as_str())
                    .collect::<Vec<_>>(),
            )
            .bind(rows.iter().map(|r| r.account.as_str()).collect::<Vec<_>>())
            .bind(rows.iter().map(|r| minor(r.amount)).collect::<Vec<_>>())
            .execute(&mut *tx)
            .await?;
            sqlx::query(
                "INSERT INTO raw_min_balances SELECT $1, a, m \
                 FROM UNNEST($2::text[], $3::int8[]) AS x(a, m) \
                 ON CONFLICT (tenant_id, account) DO UPDATE \
                 SET balance = raw_min_balances.balance + EXCLUDED.balance",
            )
            .bind(TENANT)
            .bind(deltas.keys().copied().collect::<Vec<_>>())
            .bind(deltas.values().copied().collect::<Vec<_>>())
            .execute(&mut *tx)
            .await?;
            tx.commit().await?;
        }
        RawPool::Sqlite(pool) => {
            let mut tx = pool.begin_with("BEGIN IMMEDIATE").await?;
            for chunk in rows.chunks(500) {
                let mut q = QueryBuilder::new(
                    "INSERT INTO raw_min_entries (tenant_id, upstream_id, account, amount) ",
                );
                q.push_values(chunk, |mut b, r| {
                    b.push_bind(TENANT)
                        .push_bind(&r.upstream_id)
                        .push_bind(&r.account)
                        .push_bind(minor(r.amount));
                });
                q.build().execute(&mut *tx).await?;
            }
            let deltas: Vec<(&str, i64)> = deltas.into_iter().collect();
            for chunk in deltas.chunks(500) {
                let mut q = QueryBuilder::new(
                    "INSERT INTO raw_min_balances (tenant_id, account, balance) ",
                );
                q.push_values(chunk, |mut b, (account, delta)| {
                    b.push_bind(TENANT).push_bind(*account).push_bind(*delta);
                });
                q.push(
                    " ON CONFLICT (tenant_id, account) DO UPDATE \
                     SET balance = balance + excluded.balance",
                );
                q.build().execute(&mut *tx).await?;
            }
            tx.commit().await?;
        }
    }
    Ok(())
}
