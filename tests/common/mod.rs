//! Test harness: real `tally` processes on port 0, spoken to over HTTP, on
//! SQLite or PostgreSQL. Every test takes its engine as a parameter and is
//! run once per engine by [`engine_tests!`].
//!
//! PostgreSQL tests need `TALLY_TEST_POSTGRES_URL` (an admin URL such as
//! `postgres://postgres@127.0.0.1:5432/test`); each test creates and drops
//! its own database. Without the variable they are skipped with a notice,
//! unless `TALLY_REQUIRE_POSTGRES=1` (CI), which turns the skip into a failure.

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

pub mod metrics;
pub mod proxy;
pub mod wait;

use std::process::Stdio;
use std::time::Duration;

use serde_json::Value;
use sqlx::Connection;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

pub const TALLY: &str = env!("CARGO_BIN_EXE_tally");

/// The engine of a test, and whether PostgreSQL runs or is skipped: one
/// definition for every test and the benchmark (`testdb/`).
pub use tally_testdb::Engine;

/// Runs each listed `async fn name(engine: Engine)` once per engine.
#[macro_export]
macro_rules! engine_tests {
    ($($name:ident),* $(,)?) => {
        mod sqlite {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    super::$name($crate::common::Engine::Sqlite).await
                }
            )*
        }
        mod postgres {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    if let Some(engine) = $crate::common::Engine::postgres() {
                        super::$name(engine).await
                    }
                }
            )*
        }
        mod citus {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    if let Some(engine) = $crate::common::Engine::citus() {
                        super::$name(engine).await
                    }
                }
            )*
        }
    };
}

/// A fresh, empty ledger database for one test, removed when dropped.
pub struct Ledger {
    pub engine: Engine,
    pub database_url: String,
    _database: tally_testdb::FreshDatabase,
}

impl Ledger {
    pub async fn new(engine: Engine) -> Ledger {
        let database = tally_testdb::FreshDatabase::new(&engine, "tally_test").await;
        Ledger {
            engine,
            database_url: database.url.clone(),
            _database: database,
        }
    }

    /// `tally keys create`, returning the printed key.
    pub async fn key(&self, tenant: &str, scopes: &str) -> String {
        let out = Command::new(TALLY)
            .args(["keys", "create", "--database-url", &self.database_url])
            .args(["--tenant", tenant, "--scopes", scopes])
            .env("TALLY_LOG", "warn")
            .output()
            .await
            .unwrap();
        assert!(out.status.success(), "keys create failed: {out:?}");
        let key = String::from_utf8(out.stdout).unwrap();
        let key = key.trim();
        assert!(key.starts_with("tally_") && !key.contains('\n'), "{key:?}");
        key.to_owned()
    }

    pub async fn server(&self) -> Server {
        Server::start(&self.database_url, &[]).await
    }

    /// A server with extra `tally serve` flags.
    pub async fn server_with(&self, args: &[&str]) -> Server {
        Server::start(&self.database_url, args).await
    }

    /// Runs a `tally` subcommand against this database: (success, stdout, stderr).
    pub async fn tally(&self, args: &[&str]) -> (bool, String, String) {
        let out = Command::new(TALLY)
            .args(args)
            .args(["--database-url", &self.database_url])
            .env("TALLY_LOG", "warn")
            .output()
            .await
            .unwrap();
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    }

    /// Runs SQL straight against the database, behind tally's back.
    pub async fn sql(&self, statements: &[&str]) {
        match self.engine {
            Engine::Sqlite => {
                let mut c = sqlx::SqliteConnection::connect(&self.database_url)
                    .await
                    .unwrap();
                for s in statements {
                    sqlx::raw_sql(s).execute(&mut c).await.unwrap();
                }
            }
            Engine::Postgres { .. } => {
                let mut c = sqlx::PgConnection::connect(&self.database_url)
                    .await
                    .unwrap();
                for s in statements {
                    sqlx::raw_sql(s).execute(&mut c).await.unwrap();
                }
            }
        }
    }

    /// Runs one statement that is expected to fail; returns the error text.
    pub async fn sql_error(&self, statement: &str) -> String {
        let result = match self.engine {
            Engine::Sqlite => {
                let mut c = sqlx::SqliteConnection::connect(&self.database_url)
                    .await
                    .unwrap();
                sqlx::raw_sql(statement).execute(&mut c).await.map(|_| ())
            }
            Engine::Postgres { .. } => {
                let mut c = sqlx::PgConnection::connect(&self.database_url)
                    .await
                    .unwrap();
                sqlx::raw_sql(statement).execute(&mut c).await.map(|_| ())
            }
        };
        result
            .expect_err(&format!("{statement} should fail"))
            .to_string()
    }

    /// Counts rows straight from the database.
    pub async fn count(&self, table: &str) -> i64 {
        let q = format!("SELECT COUNT(*) FROM {table}");
        match self.engine {
            Engine::Sqlite => {
                let mut c = sqlx::SqliteConnection::connect(&self.database_url)
                    .await
                    .unwrap();
                sqlx::query_scalar(&q).fetch_one(&mut c).await.unwrap()
            }
            Engine::Postgres { .. } => {
                let mut c = sqlx::PgConnection::connect(&self.database_url)
                    .await
                    .unwrap();
                sqlx::query_scalar(&q).fetch_one(&mut c).await.unwrap()
            }
        }
    }
}

/// The `host:port` of a PostgreSQL URL and its port: a test's proxy
/// stands in for that server (5432, or a Citus coordinator's own port).
pub fn server_of(database_url: &str) -> (String, u16) {
    let authority = database_url
        .split('@')
        .nth(1)
        .and_then(|rest| rest.split('/').next())
        .expect("a postgres://user@host:port/db URL")
        .to_owned();
    let port = authority
        .rsplit(':')
        .next()
        .and_then(|p| p.parse().ok())
        .unwrap_or(5432);
    (authority, port)
}

/// A running `tally serve`.
pub struct Server {
    child: Child,
    pub base: String,
    pub client: reqwest::Client,
}

/// An HTTP answer, with its body kept as bytes for byte-for-byte comparison.
#[derive(Debug, Clone)]
pub struct Resp {
    pub status: u16,
    pub headers: reqwest::header::HeaderMap,
    pub body: Vec<u8>,
}

impl Resp {
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|_| panic!("not JSON: {}", String::from_utf8_lossy(&self.body)))
    }

    pub fn replayed(&self) -> bool {
        self.headers
            .get("idempotent-replayed")
            .map(|v| v == "true")
            .unwrap_or(false)
    }

    pub fn content_type(&self) -> String {
        self.headers
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_owned()
    }

    /// The problem `code`, asserting the body is problem+json.
    pub fn code(&self) -> String {
        assert_eq!(self.content_type(), "application/problem+json", "{self:?}");
        self.json()["code"].as_str().unwrap_or("").to_owned()
    }
}

impl Server {
    pub async fn start(database_url: &str, extra: &[&str]) -> Server {
        Server::start_with_env(database_url, extra, &[]).await
    }

    /// A server with extra flags and environment variables.
    pub async fn start_with_env(
        database_url: &str,
        extra: &[&str],
        env: &[(&str, &str)],
    ) -> Server {
        let mut args = vec!["--database-url", database_url, "--listen", "127.0.0.1:0"];
        args.extend_from_slice(extra);
        Server::start_args(&args, env).await
    }

    /// `tally serve` with exactly these flags and environment variables
    /// (the database and the address may come from a configuration file).
    pub async fn start_args(args: &[&str], env: &[(&str, &str)]) -> Server {
        let mut child = Command::new(TALLY)
            .arg("serve")
            .args(args)
            .envs(env.iter().copied())
            .env("TALLY_LOG", "warn")
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let mut lines = BufReader::new(stdout).lines();
        let line = tokio::time::timeout(Duration::from_secs(60), lines.next_line())
            .await
            .expect("tally serve did not start within 60 s")
            .unwrap()
            .expect("tally serve exited before listening");
        let base = line
            .strip_prefix("tally listening on ")
            .unwrap_or_else(|| panic!("unexpected first line {line:?}"))
            .to_owned();
        // Keep draining stdout so the child never blocks on a full pipe.
        tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
        let client = reqwest::Client::builder()
            .timeout(Duration::from_secs(60))
            .build()
            .unwrap();
        Server {
            child,
            base,
            client,
        }
    }

    /// The server's socket address.
    pub fn addr(&self) -> std::net::SocketAddr {
        self.base
            .trim_start_matches("http://")
            .parse()
            .expect("the server prints an address")
    }

    /// The server's process id.
    pub fn pid(&self) -> u32 {
        self.child.id().expect("running")
    }

    /// The exit code once the process has stopped by itself (None if
    /// killed by a signal).
    pub async fn wait(mut self) -> Option<i32> {
        let exit = tokio::time::timeout(Duration::from_secs(30), self.child.wait())
            .await
            .expect("tally serve did not stop within 30 s")
            .unwrap();
        exit.code()
    }

    /// SIGTERM, then the exit code (None if killed by a signal).
    pub async fn terminate(mut self) -> Option<i32> {
        let pid = self.child.id().expect("running").to_string();
        let status = std::process::Command::new("kill")
            .args(["-TERM", &pid])
            .status()
            .unwrap();
        assert!(status.success());
        let exit = tokio::time::timeout(Duration::from_secs(30), self.child.wait())
            .await
            .expect("tally serve did not stop within 30 s after SIGTERM")
            .unwrap();
        exit.code()
    }

    /// SIGKILL: no graceful anything.
    pub async fn kill9(mut self) {
        self.child.start_kill().unwrap();
        self.child.wait().await.unwrap();
    }

    pub async fn send(&self, req: reqwest::RequestBuilder) -> Resp {
        let r = req.send().await.unwrap();
        Resp {
            status: r.status().as_u16(),
            headers: r.headers().clone(),
            body: r.bytes().await.unwrap().to_vec(),
        }
    }

    pub async fn post(&self, path: &str, key: &str, body: &Value) -> Resp {
        self.post_raw(path, key, "application/json", body.to_string().into_bytes())
            .await
    }

    pub async fn post_raw(&self, path: &str, key: &str, content_type: &str, body: Vec<u8>) -> Resp {
        self.send(
            self.client
                .post(format!("{}{path}", self.base))
                .bearer_auth(key)
                .header("content-type", content_type)
                .body(body),
        )
        .await
    }

    pub async fn put(&self, path: &str, key: &str, body: &Value) -> Resp {
        self.send(
            self.client
                .put(format!("{}{path}", self.base))
                .bearer_auth(key)
                .header("content-type", "application/json")
                .body(body.to_string()),
        )
        .await
    }

    pub async fn get(&self, path: &str, key: &str) -> Resp {
        self.send(
            self.client
                .get(format!("{}{path}", self.base))
                .bearer_auth(key),
        )
        .await
    }

    /// Every entry of the tenant, following `next_after_seq`.
    pub async fn all_entries(&self, key: &str) -> Vec<Value> {
        let mut out = Vec::new();
        let mut after = 0;
        loop {
            let r = self
                .get(&format!("/v1/entries?limit=1000&after_seq={after}"), key)
                .await;
            assert_eq!(r.status, 200, "{r:?}");
            let page = r.json();
            out.extend(page["entries"].as_array().unwrap().iter().cloned());
            match page["next_after_seq"].as_i64() {
                Some(n) => after = n,
                None => return out,
            }
        }
    }

    pub async fn balance(&self, key: &str, account: &str) -> Value {
        let r = self
            .get(&format!("/v1/accounts/{account}/balance"), key)
            .await;
        assert_eq!(r.status, 200, "{r:?}");
        r.json()
    }
}

/// A usage debit body.
pub fn debit(id: &str, account: &str, amount: &str) -> Value {
    serde_json::json!({
        "usage_record_id": id, "account": account, "amount": amount, "unit": "USD"
    })
}

/// What a server wrote to standard error, line by line, as it runs.
#[derive(Clone, Default)]
pub struct ServerLog {
    lines: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
}

impl ServerLog {
    /// Every line so far.
    pub fn lines(&self) -> Vec<String> {
        self.lines.lock().unwrap().clone()
    }
}

impl Server {
    /// `tally serve` like [`Server::start_with_env`], but its standard error
    /// is captured instead of inherited, and `env` may set `TALLY_LOG`
    /// (default `warn`).
    pub async fn start_capturing_log(
        database_url: &str,
        extra: &[&str],
        env: &[(&str, &str)],
    ) -> (Server, ServerLog) {
        let mut child = Command::new(TALLY)
            .args([
                "serve",
                "--database-url",
                database_url,
                "--listen",
                "127.0.0.1:0",
            ])
            .args(extra)
            .env("TALLY_LOG", "warn")
            .envs(env.iter().copied())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        let log = ServerLog::default();
        let mut stderr = BufReader::new(child.stderr.take().unwrap()).lines();
        let sink = log.lines.clone();
        tokio::spawn(async move {
            while let Ok(Some(line)) = stderr.next_line().await {
                sink.lock().unwrap().push(line);
            }
        });
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let line = tokio::time::timeout(Duration::from_secs(60), lines.next_line())
            .await
            .expect("tally serve did not start within 60 s")
            .unwrap()
            .unwrap_or_else(|| panic!("tally serve exited before listening: {:?}", log.lines()));
        let base = line
            .strip_prefix("tally listening on ")
            .unwrap_or_else(|| panic!("unexpected first line {line:?}"))
            .to_owned();
        tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
        let client = reqwest::Client::builder()
            .timeout(Duration::from_secs(60))
            .build()
            .unwrap();
        (
            Server {
                child,
                base,
                client,
            },
            log,
        )
    }
}
