//! Databases for the ledger's own tests: SQLite always; PostgreSQL when
//! `TALLY_TEST_POSTGRES_URL` names a server (a fresh database per call),
//! and a failure instead of a skip under `TALLY_REQUIRE_POSTGRES=1`, as for
//! the HTTP tests (`tests/common`).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use sqlx::Connection;

use crate::store::Storage;

/// A fresh ledger database; PostgreSQL ones are dropped by [`TestDb::remove`].
pub(crate) struct TestDb {
    pub storage: Storage,
    postgres: Option<(String, String)>,
    _dir: Option<tempfile::TempDir>,
}

impl TestDb {
    /// A SQLite file in a temporary directory.
    pub async fn sqlite(pool_size: u32) -> TestDb {
        let dir = tempfile::tempdir().unwrap();
        let url = format!("sqlite://{}", dir.path().join("t.db").display());
        TestDb {
            storage: Storage::connect_with(&url, pool_size).await.unwrap(),
            postgres: None,
            _dir: Some(dir),
        }
    }

    /// A new PostgreSQL database; `None` when no server is configured.
    pub async fn postgres(pool_size: u32) -> Option<TestDb> {
        let admin = match std::env::var("TALLY_TEST_POSTGRES_URL") {
            Ok(url) if !url.trim().is_empty() => url,
            _ => {
                assert!(
                    std::env::var("TALLY_REQUIRE_POSTGRES").as_deref() != Ok("1"),
                    "TALLY_REQUIRE_POSTGRES=1 but TALLY_TEST_POSTGRES_URL is not set"
                );
                eprintln!(
                    "PostgreSQL part of this test SKIPPED: TALLY_TEST_POSTGRES_URL is not set"
                );
                return None;
            }
        };
        let name = format!("tally_unit_{}", uuid::Uuid::now_v7().simple());
        let mut conn = sqlx::PgConnection::connect(&admin).await.unwrap();
        sqlx::query(&format!("CREATE DATABASE {name}"))
            .execute(&mut conn)
            .await
            .unwrap();
        let url = match admin.rsplit_once('/') {
            Some((server, _)) => format!("{server}/{name}"),
            None => panic!("TALLY_TEST_POSTGRES_URL has no database: {admin}"),
        };
        Some(TestDb {
            storage: Storage::connect_with(&url, pool_size).await.unwrap(),
            postgres: Some((admin, name)),
            _dir: None,
        })
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

    /// Drops a PostgreSQL database (`FORCE` ends the pool's connections).
    pub async fn remove(self) {
        if let Some((admin, name)) = self.postgres {
            let mut conn = sqlx::PgConnection::connect(&admin).await.unwrap();
            sqlx::query(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
                .execute(&mut conn)
                .await
                .unwrap();
        }
    }
}
