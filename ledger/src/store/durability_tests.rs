//! The durability every connection tally opens commits with: a 2xx means
//! the entry is on disk, so no connection may trade that for speed.

#![allow(clippy::unwrap_used)]

use super::Storage;
use crate::test_databases::TestDb;

/// SQLite: WAL and `synchronous=FULL` on the read pool and on the write
/// connection (each connection has its own setting). PostgreSQL: tally's
/// connections keep `synchronous_commit = on`; tally sets nothing that
/// turns it off (the server's own setting is the operator's, see
/// docs/operations.md).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_connection_commits_durably() {
    for db in TestDb::every_engine(2).await {
        match &db.storage {
            Storage::Sqlite(s) => {
                for (name, pool) in [("read pool", &s.pool), ("write connection", &s.write_pool)] {
                    let level: i64 = sqlx::query_scalar("PRAGMA synchronous")
                        .fetch_one(pool)
                        .await
                        .unwrap();
                    assert_eq!(level, 2, "{name}: synchronous=FULL is 2");
                    let journal: String = sqlx::query_scalar("PRAGMA journal_mode")
                        .fetch_one(pool)
                        .await
                        .unwrap();
                    assert_eq!(journal, "wal", "{name}");
                }
            }
            Storage::Postgres(s) => {
                let setting: String = sqlx::query_scalar("SHOW synchronous_commit")
                    .fetch_one(&s.pool)
                    .await
                    .unwrap();
                assert_eq!(setting, "on");
            }
        }
        db.remove().await;
    }
}
