//! Fresh, empty databases for tally's tests and its benchmark, made one way
//! everywhere: a SQLite file, or a new database on a PostgreSQL server that
//! is dropped again afterwards.
//!
//! Which PostgreSQL server: `TALLY_TEST_POSTGRES_URL`, an admin URL such as
//! `postgres://postgres@127.0.0.1:5432/test`. Without it, PostgreSQL tests
//! are skipped with one notice on standard error, unless
//! `TALLY_REQUIRE_POSTGRES=1` (CI), which turns the skip into a failure:
//! a green run must never hide that half the tests did not run.

// Test support: a failure to create or drop a database is a failed test,
// and the panic says which.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Once;

use sqlx::Connection;

/// The variable naming the PostgreSQL server tests create databases on.
pub const POSTGRES_URL_VAR: &str = "TALLY_TEST_POSTGRES_URL";
/// Set to `1`, a missing [`POSTGRES_URL_VAR`] fails instead of skipping.
pub const REQUIRE_POSTGRES_VAR: &str = "TALLY_REQUIRE_POSTGRES";

static SKIP_NOTICE: Once = Once::new();

/// The PostgreSQL admin URL tests should use, or `None` (skip, after a
/// notice printed once per process). Panics under
/// `TALLY_REQUIRE_POSTGRES=1` when no server is configured.
pub fn postgres_admin_url() -> Option<String> {
    match std::env::var(POSTGRES_URL_VAR) {
        Ok(url) if !url.trim().is_empty() => Some(url),
        _ => {
            if std::env::var(REQUIRE_POSTGRES_VAR).as_deref() == Ok("1") {
                panic!(
                    "TALLY_REQUIRE_POSTGRES=1 but TALLY_TEST_POSTGRES_URL is not set: \
                     PostgreSQL tests must run, not skip"
                );
            }
            SKIP_NOTICE.call_once(|| {
                // Written to the real stderr (not the captured test output)
                // so the skip is visible in every run.
                let _ = writeln!(
                    std::io::stderr(),
                    "\n*** PostgreSQL tests SKIPPED: set TALLY_TEST_POSTGRES_URL=postgres://postgres@127.0.0.1:5432/test to run them ***\n"
                );
            });
            None
        }
    }
}

/// The engine a test runs on.
#[derive(Debug, Clone)]
pub enum Engine {
    Sqlite,
    Postgres { admin_url: String },
}

impl Engine {
    /// The PostgreSQL engine if a server is configured; `None` (skip) otherwise.
    pub fn postgres() -> Option<Engine> {
        postgres_admin_url().map(|admin_url| Engine::Postgres { admin_url })
    }

    /// SQLite, and PostgreSQL when configured.
    pub fn every() -> Vec<Engine> {
        let mut engines = vec![Engine::Sqlite];
        engines.extend(Engine::postgres());
        engines
    }

    pub fn is_postgres(&self) -> bool {
        matches!(self, Engine::Postgres { .. })
    }

    pub fn name(&self) -> &'static str {
        match self {
            Engine::Sqlite => "sqlite",
            Engine::Postgres { .. } => "postgres",
        }
    }
}

/// A fresh, empty database. Dropping it removes it (the SQLite file with
/// its WAL, or the PostgreSQL database), unless [`FreshDatabase::keep`]
/// was called.
pub struct FreshDatabase {
    /// The URL tally connects to (`sqlite://…` or `postgres://…`).
    pub url: String,
    engine: Engine,
    place: Place,
}

enum Place {
    /// A file in a temporary directory of its own, removed with it.
    TempDir(Option<tempfile::TempDir>),
    /// A file in a caller's directory: the file and its `-wal`, `-shm`.
    File(PathBuf),
    /// A database on the server of the admin URL: (admin URL, name).
    Postgres(String, String),
    /// Left in place.
    Kept,
}

impl FreshDatabase {
    /// A database on `engine`, its name starting with `prefix`.
    pub async fn new(engine: &Engine, prefix: &str) -> FreshDatabase {
        match engine {
            Engine::Sqlite => FreshDatabase::sqlite(),
            Engine::Postgres { admin_url } => FreshDatabase::postgres(admin_url, prefix)
                .await
                .unwrap_or_else(|e| panic!("create a database on {POSTGRES_URL_VAR}: {e}")),
        }
    }

    /// A SQLite file in a temporary directory of its own.
    pub fn sqlite() -> FreshDatabase {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let url = format!("sqlite://{}", dir.path().join("tally.db").display());
        FreshDatabase {
            url,
            engine: Engine::Sqlite,
            place: Place::TempDir(Some(dir)),
        }
    }

    /// A SQLite file named `{prefix}-{uuid}.db` in `dir` (not created yet).
    pub fn sqlite_in(dir: &Path, prefix: &str) -> FreshDatabase {
        let path = dir.join(format!("{prefix}-{}.db", uuid::Uuid::now_v7().simple()));
        FreshDatabase {
            url: format!("sqlite://{}", path.display()),
            engine: Engine::Sqlite,
            place: Place::File(path),
        }
    }

    /// A new database named `{prefix}_{uuid}` on the server of `admin_url`.
    pub async fn postgres(admin_url: &str, prefix: &str) -> Result<FreshDatabase, sqlx::Error> {
        let name = format!("{prefix}_{}", uuid::Uuid::now_v7().simple());
        let mut admin = sqlx::PgConnection::connect(admin_url).await?;
        sqlx::query(&format!("CREATE DATABASE {name}"))
            .execute(&mut admin)
            .await?;
        admin.close().await?;
        Ok(FreshDatabase {
            url: with_database(admin_url, &name),
            engine: Engine::Postgres {
                admin_url: admin_url.to_owned(),
            },
            place: Place::Postgres(admin_url.to_owned(), name),
        })
    }

    /// A new PostgreSQL database if a server is configured ([`postgres_admin_url`]).
    pub async fn postgres_if_configured(prefix: &str) -> Option<FreshDatabase> {
        let admin_url = postgres_admin_url()?;
        Some(FreshDatabase::new(&Engine::Postgres { admin_url }, prefix).await)
    }

    pub fn engine(&self) -> &Engine {
        &self.engine
    }

    /// Leaves the database in place when this value is dropped; its URL.
    pub fn keep(mut self) -> String {
        if let Place::TempDir(dir) = &mut self.place {
            if let Some(dir) = dir.take() {
                let _ = dir.keep();
            }
        }
        self.place = Place::Kept;
        self.url.clone()
    }

    /// Removes the database now, waiting for it (a PostgreSQL database is
    /// dropped with `FORCE`, which ends the connections still open on it).
    pub async fn remove(mut self) -> Result<(), sqlx::Error> {
        let place = std::mem::replace(&mut self.place, Place::Kept);
        match place {
            Place::Postgres(admin_url, name) => drop_postgres(&admin_url, &name).await,
            Place::File(path) => {
                remove_sqlite_files(&path);
                Ok(())
            }
            Place::TempDir(_) | Place::Kept => Ok(()),
        }
    }
}

impl Drop for FreshDatabase {
    fn drop(&mut self) {
        match std::mem::replace(&mut self.place, Place::Kept) {
            Place::Postgres(admin_url, name) => {
                // Drop runs outside async (and maybe inside a runtime that
                // must not block): a private runtime on its own thread.
                let _ = std::thread::spawn(move || {
                    let runtime = tokio::runtime::Builder::new_current_thread()
                        .enable_all()
                        .build()
                        .expect("a runtime to drop the test database");
                    let _ = runtime.block_on(drop_postgres(&admin_url, &name));
                })
                .join();
            }
            Place::File(path) => remove_sqlite_files(&path),
            Place::TempDir(_) | Place::Kept => {}
        }
    }
}

async fn drop_postgres(admin_url: &str, name: &str) -> Result<(), sqlx::Error> {
    let mut admin = sqlx::PgConnection::connect(admin_url).await?;
    sqlx::query(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
        .execute(&mut admin)
        .await?;
    admin.close().await
}

fn remove_sqlite_files(path: &Path) {
    for suffix in ["", "-wal", "-shm"] {
        let mut file = path.as_os_str().to_owned();
        file.push(suffix);
        let _ = std::fs::remove_file(file);
    }
}

/// `url` with its database replaced by `name`, keeping the query string.
pub fn with_database(url: &str, name: &str) -> String {
    let (base, query) = match url.split_once('?') {
        Some((b, q)) => (b, Some(q)),
        None => (url, None),
    };
    let scheme_end = base.find("://").map(|i| i + 3).unwrap_or(0);
    let base = match base[scheme_end..].find('/') {
        Some(i) => &base[..scheme_end + i],
        None => base,
    };
    match query {
        Some(q) => format!("{base}/{name}?{q}"),
        None => format!("{base}/{name}"),
    }
}

#[cfg(test)]
mod tests {
    use super::with_database;

    #[test]
    fn with_database_keeps_the_server_and_the_query() {
        assert_eq!(
            with_database("postgres://u@h:5432/test?sslmode=disable", "x"),
            "postgres://u@h:5432/x?sslmode=disable"
        );
        assert_eq!(
            with_database("postgres://u@h:5432", "x"),
            "postgres://u@h:5432/x"
        );
    }
}
