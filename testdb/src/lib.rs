//! Fresh, empty databases for tally's tests and its benchmark, made one way
//! everywhere: a SQLite file, or a new database on a PostgreSQL server that
//! is dropped again afterwards.
//!
//! Which PostgreSQL server: `TALLY_TEST_POSTGRES_URL`, an admin URL such as
//! `postgres://postgres@127.0.0.1:5432/test`. Without it, PostgreSQL tests
//! are skipped with one notice on standard error, unless
//! `TALLY_REQUIRE_POSTGRES=1` (CI), which turns the skip into a failure:
//! a green run must never hide that half the tests did not run.
//!
//! Which Citus cluster: `TALLY_TEST_CITUS_URL`, the admin URL of a
//! coordinator (`scripts/citus-cluster.sh start` prints it). Each database
//! made there is made on every worker too (the cluster propagates `CREATE
//! DATABASE`) and gets the coordinator's workers registered in it, so tally
//! finds a ready cluster and distributes its schema when it migrates.
//! Without the variable Citus tests are skipped, unless
//! `TALLY_REQUIRE_CITUS=1`.

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

/// The variable naming the Citus coordinator tests create databases on.
pub const CITUS_URL_VAR: &str = "TALLY_TEST_CITUS_URL";
/// Set to `1`, a missing [`CITUS_URL_VAR`] fails instead of skipping.
pub const REQUIRE_CITUS_VAR: &str = "TALLY_REQUIRE_CITUS";

static SKIP_NOTICE: Once = Once::new();
static CITUS_SKIP_NOTICE: Once = Once::new();

/// The Citus coordinator's admin URL tests should use, or `None` (skip,
/// after a notice printed once per process). Panics under
/// `TALLY_REQUIRE_CITUS=1` when no cluster is configured.
pub fn citus_admin_url() -> Option<String> {
    configured_url(
        CITUS_URL_VAR,
        REQUIRE_CITUS_VAR,
        &CITUS_SKIP_NOTICE,
        "Citus tests SKIPPED: run scripts/citus-cluster.sh start and set \
         TALLY_TEST_CITUS_URL to the URL it prints",
    )
}

/// The PostgreSQL admin URL tests should use, or `None` (skip, after a
/// notice printed once per process). Panics under
/// `TALLY_REQUIRE_POSTGRES=1` when no server is configured.
pub fn postgres_admin_url() -> Option<String> {
    configured_url(
        POSTGRES_URL_VAR,
        REQUIRE_POSTGRES_VAR,
        &SKIP_NOTICE,
        "PostgreSQL tests SKIPPED: set \
         TALLY_TEST_POSTGRES_URL=postgres://postgres@127.0.0.1:5432/test to run them",
    )
}

/// The URL in `var`, or `None` after `notice` (once per process), or a
/// panic when `require` is `1`: a green run must not hide a skip there.
fn configured_url(var: &str, require: &str, once: &Once, notice: &str) -> Option<String> {
    match std::env::var(var) {
        Ok(url) if !url.trim().is_empty() => Some(url),
        _ => {
            if std::env::var(require).as_deref() == Ok("1") {
                panic!("{require}=1 but {var} is not set: these tests must run, not skip");
            }
            once.call_once(|| {
                // Written to the real stderr (not the captured test output)
                // so the skip is visible in every run.
                let _ = writeln!(std::io::stderr(), "\n*** {notice} ***\n");
            });
            None
        }
    }
}

/// The engine a test runs on. A Citus cluster is the PostgreSQL engine
/// (tally speaks to its coordinator as to one server), with `citus` set.
#[derive(Debug, Clone)]
pub enum Engine {
    Sqlite,
    Postgres { admin_url: String, citus: bool },
}

impl Engine {
    /// The PostgreSQL engine if a server is configured; `None` (skip) otherwise.
    pub fn postgres() -> Option<Engine> {
        postgres_admin_url().map(|admin_url| Engine::Postgres {
            admin_url,
            citus: false,
        })
    }

    /// The PostgreSQL engine on a Citus cluster if one is configured;
    /// `None` (skip) otherwise.
    pub fn citus() -> Option<Engine> {
        citus_admin_url().map(|admin_url| Engine::Postgres {
            admin_url,
            citus: true,
        })
    }

    /// SQLite, and PostgreSQL and Citus when configured.
    pub fn every() -> Vec<Engine> {
        let mut engines = vec![Engine::Sqlite];
        engines.extend(Engine::postgres());
        engines.extend(Engine::citus());
        engines
    }

    pub fn is_postgres(&self) -> bool {
        matches!(self, Engine::Postgres { .. })
    }

    pub fn is_citus(&self) -> bool {
        matches!(self, Engine::Postgres { citus: true, .. })
    }

    pub fn name(&self) -> &'static str {
        match self {
            Engine::Sqlite => "sqlite",
            Engine::Postgres { citus: false, .. } => "postgres",
            Engine::Postgres { citus: true, .. } => "citus",
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
            Engine::Postgres {
                admin_url,
                citus: false,
            } => FreshDatabase::postgres(admin_url, prefix)
                .await
                .unwrap_or_else(|e| panic!("create a database on {POSTGRES_URL_VAR}: {e}")),
            Engine::Postgres {
                admin_url,
                citus: true,
            } => FreshDatabase::citus(admin_url, prefix)
                .await
                .unwrap_or_else(|e| panic!("create a database on {CITUS_URL_VAR}: {e}")),
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
                citus: false,
            },
            place: Place::Postgres(admin_url.to_owned(), name),
        })
    }

    /// A new database named `{prefix}_{uuid}` on the Citus coordinator of
    /// `admin_url`, with the coordinator and the workers of the admin
    /// database registered in it: a cluster ready for tally to distribute
    /// its schema on. The cluster propagates `CREATE DATABASE` to the
    /// workers and its template carries the extension
    /// (`scripts/citus-cluster.sh`).
    pub async fn citus(admin_url: &str, prefix: &str) -> Result<FreshDatabase, sqlx::Error> {
        let mut database = FreshDatabase::postgres(admin_url, prefix).await?;
        database.engine = Engine::Postgres {
            admin_url: admin_url.to_owned(),
            citus: true,
        };
        let mut admin = sqlx::PgConnection::connect(admin_url).await?;
        let (coordinator_host, coordinator_port): (String, i32) =
            sqlx::query_as("SELECT nodename, nodeport FROM pg_dist_node WHERE groupid = 0")
                .fetch_one(&mut admin)
                .await?;
        let workers: Vec<(String, i32)> = sqlx::query_as(
            "SELECT nodename, nodeport FROM pg_dist_node \
             WHERE groupid <> 0 AND noderole = 'primary' ORDER BY nodeid",
        )
        .fetch_all(&mut admin)
        .await?;
        admin.close().await?;
        let mut fresh = sqlx::PgConnection::connect(&database.url).await?;
        sqlx::query("CREATE EXTENSION IF NOT EXISTS citus")
            .execute(&mut fresh)
            .await?;
        sqlx::query("SELECT citus_set_coordinator_host($1, $2)")
            .bind(&coordinator_host)
            .bind(coordinator_port)
            .execute(&mut fresh)
            .await?;
        for (host, port) in &workers {
            sqlx::query("SELECT citus_add_node($1, $2)")
                .bind(host)
                .bind(port)
                .execute(&mut fresh)
                .await?;
        }
        fresh.close().await?;
        Ok(database)
    }

    /// A new PostgreSQL database if a server is configured ([`postgres_admin_url`]).
    pub async fn postgres_if_configured(prefix: &str) -> Option<FreshDatabase> {
        Some(FreshDatabase::new(&Engine::postgres()?, prefix).await)
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
    // On a Citus coordinator the drop goes to the workers too, where the
    // coordinator's cached connections of the sessions just ended may
    // linger a moment ("being accessed by other users"): tried again.
    let drop = format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)");
    let mut tries = 0;
    loop {
        match sqlx::query(&drop).execute(&mut admin).await {
            Ok(_) => break,
            Err(_) if tries < 20 => {
                tries += 1;
                tokio::time::sleep(std::time::Duration::from_millis(250)).await;
            }
            Err(e) => return Err(e),
        }
    }
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
