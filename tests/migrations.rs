//! A database migrated by the earlier text of the migration files opens
//! with the current tally: the files whose comments were reworded are
//! accepted by their earlier checksums
//! (ledger/src/store/migration_checksums.rs). A checksum that is neither
//! the earlier nor the current text still stops start-up.
//!
//! tests/fixtures/old_migrations/ holds, byte for byte, the earlier text of
//! only the reworded files (their old comments are the text whose checksum
//! is accepted); the earlier set is those files plus the current text of
//! every other migration up to the last one the fixtures name.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::{Path, PathBuf};
use std::str::FromStr;

use common::{debit, Engine, Ledger};
use sqlx::migrate::Migrator;
use sqlx::sqlite::SqliteConnectOptions;
use sqlx::{ConnectOptions, Connection};

fn migrations_dir(root: &str, engine: &Engine) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join(root)
        // A Citus coordinator runs PostgreSQL's migrations.
        .join(if engine.is_postgres() {
            "postgres"
        } else {
            "sqlite"
        })
}

/// The version a migration file's name starts with (`0005_…` → 5).
fn version(file: &Path) -> i64 {
    let name = file.file_name().unwrap().to_str().unwrap();
    name.split('_').next().unwrap().parse().unwrap()
}

/// The migration files an earlier tally ran, in a directory of their own:
/// the reworded files as they were, the others as they are, up to the
/// last version the fixtures name.
fn earlier_migrations(engine: &Engine) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let fixtures: Vec<PathBuf> =
        std::fs::read_dir(migrations_dir("tests/fixtures/old_migrations", engine))
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
    let last = fixtures.iter().map(|f| version(f)).max().unwrap();
    for entry in std::fs::read_dir(migrations_dir("migrations", engine)).unwrap() {
        let current = entry.unwrap().path();
        if version(&current) <= last {
            std::fs::copy(&current, dir.path().join(current.file_name().unwrap())).unwrap();
        }
    }
    for earlier in &fixtures {
        std::fs::copy(earlier, dir.path().join(earlier.file_name().unwrap())).unwrap();
    }
    dir
}

/// Applies the migrations in `dir` the way an earlier tally did.
async fn apply(ledger: &Ledger, dir: PathBuf) {
    let migrator = Migrator::new(dir).await.unwrap();
    match ledger.engine {
        Engine::Sqlite => {
            let mut conn = SqliteConnectOptions::from_str(&ledger.database_url)
                .unwrap()
                .create_if_missing(true)
                .connect()
                .await
                .unwrap();
            migrator.run(&mut conn).await.unwrap();
            conn.close().await.unwrap();
        }
        Engine::Postgres { .. } => {
            let mut conn = sqlx::PgConnection::connect(&ledger.database_url)
                .await
                .unwrap();
            migrator.run(&mut conn).await.unwrap();
            conn.close().await.unwrap();
        }
    }
}

/// (version, checksum) of every applied migration.
async fn stored_checksums(ledger: &Ledger) -> Vec<(i64, Vec<u8>)> {
    let q = "SELECT version, checksum FROM _sqlx_migrations ORDER BY version";
    match ledger.engine {
        Engine::Sqlite => {
            let mut c = sqlx::SqliteConnection::connect(&ledger.database_url)
                .await
                .unwrap();
            sqlx::query_as(q).fetch_all(&mut c).await.unwrap()
        }
        Engine::Postgres { .. } => {
            let mut c = sqlx::PgConnection::connect(&ledger.database_url)
                .await
                .unwrap();
            sqlx::query_as(q).fetch_all(&mut c).await.unwrap()
        }
    }
}

async fn a_database_migrated_by_the_earlier_files_opens(engine: Engine) {
    let ledger = Ledger::new(engine.clone()).await;
    let earlier = earlier_migrations(&engine);
    apply(&ledger, earlier.path().to_owned()).await;
    let current = Migrator::new(migrations_dir("migrations", &engine))
        .await
        .unwrap();
    let before = stored_checksums(&ledger).await;
    assert!(
        current.iter().any(|m| before
            .iter()
            .any(|(v, c)| *v == m.version && *c != *m.checksum)),
        "the fixtures should hold an earlier text of some migration"
    );

    // Opening the database (the CLI and the server both run the migrations).
    let key = ledger.key("acme", "post,read").await;
    let server = ledger.server().await;
    let r = server
        .post("/v1/usage-debits", &key, &debit("u1", "acct", "1.5"))
        .await;
    assert_eq!(r.status, 201, "{r:?}");
    let r = server.get("/readyz", &key).await;
    assert_eq!(r.status, 200, "{r:?}");

    let after = stored_checksums(&ledger).await;
    let expected: Vec<(i64, Vec<u8>)> = current
        .iter()
        .map(|m| (m.version, m.checksum.to_vec()))
        .collect();
    assert_eq!(
        after, expected,
        "every stored checksum is the current file's"
    );
}

async fn an_unknown_checksum_still_stops_start_up(engine: Engine) {
    let ledger = Ledger::new(engine.clone()).await;
    let earlier = earlier_migrations(&engine);
    apply(&ledger, earlier.path().to_owned()).await;
    let zeros = match engine {
        Engine::Sqlite => "zeroblob(48)",
        Engine::Postgres { .. } => "decode(repeat('00', 48), 'hex')",
    };
    ledger
        .sql(&[&format!(
            "UPDATE _sqlx_migrations SET checksum = {zeros} WHERE version = 5"
        )])
        .await;
    let (ok, _, stderr) = ledger
        .tally(&["keys", "create", "--tenant", "acme", "--scopes", "read"])
        .await;
    assert!(
        !ok,
        "a migration changed after it ran must stop tally: {stderr}"
    );
    assert!(stderr.contains("migration"), "{stderr}");
}

engine_tests!(
    a_database_migrated_by_the_earlier_files_opens,
    an_unknown_checksum_still_stops_start_up
);
