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

    /// A new PostgreSQL database written routed by tenant, as on Citus
    /// (`PostgresStore::routed_by_tenant`); `None` when no server is configured.
    pub async fn postgres_routed(pool_size: u32) -> Option<TestDb> {
        let mut db = TestDb::postgres(pool_size).await?;
        if let Storage::Postgres(s) = &db.storage {
            db.storage = Storage::Postgres(s.clone().with_routing_by_tenant(true));
        }
        Some(db)
    }

    /// [`TestDb::every_engine`], and PostgreSQL routed by tenant.
    pub async fn every_engine_and_routed(pool_size: u32) -> Vec<TestDb> {
        let mut dbs = TestDb::every_engine(pool_size).await;
        dbs.extend(TestDb::postgres_routed(pool_size).await);
        dbs
    }

    /// Whether every statement of the write path names one tenant.
    pub fn routed(&self) -> bool {
        matches!(&self.storage, Storage::Postgres(s) if s.routed_by_tenant())
    }

    pub fn engine(&self) -> &'static str {
        if self.routed() {
            return "postgres routed by tenant";
        }
        self.storage.engine_name()
    }

    /// Drops a PostgreSQL database now (`FORCE` ends the pool's connections).
    pub async fn remove(self) {
        self.database.remove().await.unwrap();
    }
}
