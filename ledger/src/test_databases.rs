//! Databases for the ledger's own tests: SQLite always; PostgreSQL when
//! `TALLY_TEST_POSTGRES_URL` names a server (a fresh database per call),
//! and a failure instead of a skip under `TALLY_REQUIRE_POSTGRES=1`, as for
//! the HTTP tests: both made by `tally-testdb`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use tally_testdb::FreshDatabase;

use crate::store::Storage;

/// A fresh ledger database, removed when dropped (or by [`TestDb::remove`]).
pub(crate) struct TestDb {
    pub storage: Storage,
    database: FreshDatabase,
}

impl TestDb {
    async fn open(database: FreshDatabase, pool_size: u32) -> TestDb {
        TestDb {
            storage: Storage::connect_with(&database.url, pool_size)
                .await
                .unwrap(),
            database,
        }
    }

    /// A SQLite file in a temporary directory.
    pub async fn sqlite(pool_size: u32) -> TestDb {
        TestDb::open(FreshDatabase::sqlite(), pool_size).await
    }

    /// A new PostgreSQL database; `None` when no server is configured.
    pub async fn postgres(pool_size: u32) -> Option<TestDb> {
        let database = FreshDatabase::postgres_if_configured("tally_unit").await?;
        Some(TestDb::open(database, pool_size).await)
    }

    /// SQLite, and PostgreSQL when configured.
    pub async fn every_engine(pool_size: u32) -> Vec<TestDb> {
        let mut dbs = vec![TestDb::sqlite(pool_size).await];
        dbs.extend(TestDb::postgres(pool_size).await);
        dbs
    }

    pub fn engine(&self) -> &'static str {
        self.storage.engine_name()
    }

    /// Drops a PostgreSQL database now (`FORCE` ends the pool's connections).
    pub async fn remove(self) {
        self.database.remove().await.unwrap();
    }
}
