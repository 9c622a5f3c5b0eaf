//! Is this database ready to serve (`GET /readyz`)? It answers a query on a
//! table, and its schema carries every migration this binary embeds.

use sqlx::migrate::Migrator;
use sqlx::{ConnectOptions, Connection};

use super::Storage;
use crate::LedgerError;

static SQLITE_MIGRATIONS: Migrator = sqlx::migrate!("../migrations/sqlite");
static POSTGRES_MIGRATIONS: Migrator = sqlx::migrate!("../migrations/postgres");

const APPLIED_VERSION: &str =
    "SELECT COALESCE(MAX(version), 0) FROM _sqlx_migrations WHERE success";

impl Storage {
    /// The schema version (the highest migration applied), if it is at
    /// least the one this binary needs; `Unavailable` if the database does
    /// not answer or its schema is behind.
    pub async fn check_ready(&self) -> Result<i64, LedgerError> {
        let (applied, needed): (i64, i64) = match self {
            // SQLite: a fresh connection to the configured path, never
            // creating it. A pooled connection would go on working on a file
            // that was deleted or moved away (its open inode), and every
            // write would be lost with it; such a process must not get
            // traffic.
            Storage::Sqlite(s) => {
                let options = s.pool.connect_options().as_ref().clone();
                let mut conn = options.create_if_missing(false).connect().await?;
                let applied = sqlx::query_scalar(APPLIED_VERSION)
                    .fetch_one(&mut conn)
                    .await?;
                conn.close().await?;
                (applied, latest(&SQLITE_MIGRATIONS))
            }
            Storage::Postgres(s) => (
                sqlx::query_scalar(APPLIED_VERSION)
                    .fetch_one(&s.pool)
                    .await?,
                latest(&POSTGRES_MIGRATIONS),
            ),
        };
        if applied < needed {
            return Err(LedgerError::Unavailable(format!(
                "the schema is at migration {applied}; this tally needs {needed}"
            )));
        }
        Ok(applied)
    }
}

fn latest(migrator: &Migrator) -> i64 {
    migrator.iter().map(|m| m.version).max().unwrap_or(0)
}
