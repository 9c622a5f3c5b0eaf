//! How many of PostgreSQL's commits shared one WAL flush during a
//! scenario: concurrent transactions whose commit records sit in the WAL
//! buffer when one of them flushes are made durable by that one fsync.
//! With every group of 300 tenants committing on its own, this is the
//! group commit PostgreSQL already does across connections.

use sqlx::{Connection, PgConnection};

/// `pg_stat_wal.wal_sync` (WAL fsyncs since the statistics reset) of the
/// server at `url`; `None` where it cannot be read.
pub async fn wal_syncs(url: &str) -> Option<f64> {
    let mut conn = PgConnection::connect(url).await.ok()?;
    let syncs: i64 = sqlx::query_scalar("SELECT wal_sync FROM pg_stat_wal")
        .fetch_one(&mut conn)
        .await
        .ok()?;
    Some(syncs as f64)
}

/// One line: WAL flushes per second, and rows made durable per flush.
pub fn describe(before: f64, after: f64, rows: u64, seconds: f64) -> String {
    let syncs = after - before;
    format!(
        "postgres WAL: {:.0} fsyncs/s, {:.1} rows per fsync",
        syncs / seconds.max(1e-9),
        if syncs > 0.0 {
            rows as f64 / syncs
        } else {
            0.0
        }
    )
}
