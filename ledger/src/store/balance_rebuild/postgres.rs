//! The balances rebuild on PostgreSQL: the fold of the log in parallel
//! aggregates, and the SQL of the stored rows it compares with and removes.

use crate::balance::WideDecimal;
use crate::balance::{BalanceProjection, PostingSums, Side};
use crate::fold::LogFold;
use crate::store::hold_rows_sql;
use crate::store::postgres::keyed::{self, KeyColumn};
use crate::LedgerError;
use futures_util::TryStreamExt;
use sqlx::{PgConnection, PgPool, Row};

use crate::fold_parts::{join_folds, merge_postings, rebuild_parts};

/// The balances `tenant`'s log up to `head_seq` folds to. `conn` holds the
/// tenant's head lock.
pub(super) async fn fold(
    pool: &PgPool,
    conn: &mut PgConnection,
    tenant: &str,
    head_seq: i64,
) -> Result<BalanceProjection, LedgerError> {
    // PostgreSQL adds each side's posted amounts per account exactly
    // (NUMERIC sums do not round) in one aggregate per side, run on two
    // connections at once and planned in parallel by PostgreSQL itself;
    // Rust reads one sum per account and side and refuses any it cannot
    // hold exactly. Entries up to the locked head are committed and
    // immutable, whichever snapshot reads them. Measured on 1,000,000
    // entries: 0.55 s; one aggregate over the
    // (debit, credit) pair instead was planned as a sort and took longer.
    //
    // The plan depends on the table's statistics: right after a flood of
    // appends they may count a fraction of the log, and PostgreSQL then
    // sorts the log instead of hashing it in parallel (1.25 s against
    // 0.24 s per side). ANALYZE samples a fixed number of rows, and only
    // the columns the rebuild's plans filter and group on are
    // summarised (with them the usage key's statistics object, migration
    // 0005, which the usage rebuild's plan needs): on 1,000,000 entries
    // 0.20 s instead of 0.44 s for every column (the wide ones, params
    // and hashes, cost the most and no plan here uses them). The sample
    // is the smallest PostgreSQL takes (statistics target 10: 3,000 rows
    // instead of 30,000): the plans need the row count and a rough count
    // of accounts, not fine histograms, and on 1,255,674 entries it took
    // 38 ms instead of 628 ms. Autovacuum, or an operator's ANALYZE,
    // replaces these coarse statistics with full ones in its time.
    let estimated: f32 =
        sqlx::query_scalar("SELECT reltuples FROM pg_class WHERE oid = 'entries'::regclass")
            .fetch_one(pool)
            .await?;
    if f64::from(estimated) < head_seq as f64 / 2.0 {
        let mut analyse = pool.begin().await?;
        sqlx::query("SET LOCAL default_statistics_target = 10")
            .execute(&mut *analyse)
            .await?;
        sqlx::query(
            "ANALYZE entries (tenant_id, seq, status, kind, debit_account, credit_account, \
             unit, account, usage_meter, usage_day)",
        )
        .execute(&mut *analyse)
        .await?;
        analyse.commit().await?;
    }
    let mut log = LogFold::new();
    // The heap is read once, in block ranges on one connection each: a
    // range's aggregate adds up both sides at once (two grouping sets,
    // hashed side by side over one scan). Two per-side aggregates read
    // the whole heap twice; measured on 1,000,000 entries in psql, two
    // connections: 0.85-0.99 s against 0.96-1.13 s.
    // Entries up to the locked head are committed, so they
    // lie in blocks that exist now; the last range is open all the same.
    let blocks: i64 = sqlx::query_scalar(
        "SELECT pg_relation_size('entries') / current_setting('block_size')::int8",
    )
    .fetch_one(pool)
    .await?;
    let tasks = block_ranges(blocks)
        .into_iter()
        .map(|(from, to)| {
            let sql = format!(
                "SELECT debit_account, credit_account, unit, sum(amount)::text, \
                   GROUPING(debit_account) FROM entries \
                 WHERE ctid >= '({from},0)'::tid{} AND tenant_id = $1 AND seq <= $2 \
                   AND status = 'posted' AND kind NOT IN {} \
                 GROUP BY GROUPING SETS ((debit_account, unit), (credit_account, unit))",
                to.map(|to| format!(" AND ctid < '({to},0)'::tid"))
                    .unwrap_or_default(),
                crate::fold::NON_MONEY_KINDS_SQL
            );
            let (pool, tenant) = (pool.clone(), tenant.to_owned());
            tokio::spawn(async move {
                let mut part = PostingSums::new();
                let mut rows = sqlx::query(&sql).bind(&tenant).bind(head_seq).fetch(&pool);
                while let Some(r) = rows.try_next().await? {
                    // GROUPING is 0 for the set that groups by the debit account.
                    let (account, side): (&str, Side) = if r.try_get::<i32, _>(4)? == 0 {
                        (r.try_get(0)?, Side::Debit)
                    } else {
                        (r.try_get(1)?, Side::Credit)
                    };
                    // Exact at any size, like every total (crate::balance::PostingSums).
                    let text: &str = r.try_get(3)?;
                    let total = WideDecimal::parse(text)
                        .ok_or_else(|| LedgerError::Corrupt(format!("sum of amounts {text:?}")))?;
                    part.add(account, r.try_get(2)?, side, &total);
                }
                Ok::<_, LedgerError>(part)
            })
        })
        .collect();
    // Meanwhile, on the locked connection, the holds (order matters
    // there, and they are few); sums of postings are added afterwards.
    let sql = hold_rows_sql("$1").replace("amount,", "amount::text,");
    let mut rows = sqlx::query(&sql).bind(tenant).fetch(&mut *conn);
    while let Some(r) = rows.try_next().await? {
        super::fold_hold(&mut log, &r)?;
    }
    drop(rows);
    merge_postings(&mut log.balances, join_folds(tasks).await?);
    Ok(log.balances)
}

/// Deletes the balance rows of `tenant` named by (account, unit).
pub(super) async fn remove(
    conn: &mut PgConnection,
    tenant: &str,
    rows: &[(String, String)],
) -> Result<(), LedgerError> {
    let (accounts, units): (Vec<&str>, Vec<&str>) =
        rows.iter().map(|(a, u)| (a.as_str(), u.as_str())).unzip();
    let keys: [KeyColumn<'_>; 2] = [("account", &accounts), ("unit", &units)];
    keyed::delete(conn, tenant, "balances", &keys).await
}

/// Block ranges of the entries heap a rebuild reads, one connection each:
/// as many as the machine has cores (2..=8), one for a heap under 512 KB. The
/// last is open (`None`), so a block added since `blocks` was measured is
/// read too.
fn block_ranges(blocks: i64) -> Vec<(i64, Option<i64>)> {
    let parts = rebuild_parts(blocks < 64);
    let step = (blocks.max(0) + parts - 1) / parts;
    (0..parts)
        .map(|i| (i * step, (i + 1 < parts).then_some((i + 1) * step)))
        .collect()
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn block_ranges_cover_the_heap_and_leave_the_last_open() {
        assert_eq!(block_ranges(0), vec![(0, None)]);
        assert_eq!(block_ranges(63), vec![(0, None)]);
        let ranges = block_ranges(66_729);
        assert!(ranges.len() >= 2, "{ranges:?}");
        assert_eq!(ranges[0].0, 0);
        for pair in ranges.windows(2) {
            assert_eq!(pair[0].1, Some(pair[1].0), "{ranges:?}");
        }
        assert_eq!(ranges.last().unwrap().1, None);
    }
}
