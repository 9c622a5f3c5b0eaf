//! Honest errors: only a failure that goes away by itself is 503 with
//! Retry-After; a database error a retry cannot cure is 500 `internal`,
//! logged with the request ID and counted in `GET /metrics`, on both
//! engines (docs/operations.md, "Errors a retry cannot cure").

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::Duration;

use common::proxy::Proxy;
use common::{debit, Engine, Ledger, Server};

engine_tests!(
    a_permanent_database_error_is_500_not_retryable,
    a_transient_database_error_is_503_with_retry_after,
);

/// The value of `tally_internal_errors_total{cause="…"}`, 0 if absent.
async fn internal_errors(server: &Server, cause: &str) -> u64 {
    common::metrics::scrape(server)
        .await
        .value("tally_internal_errors_total", &[("cause", cause)])
        .map_or(0, |v| v as u64)
}

/// A table the reads and writes need is gone (renamed behind tally's back):
/// every request touching it fails the same way however often it is sent.
async fn a_permanent_database_error_is_500_not_retryable(engine: Engine) {
    let ledger = Ledger::new(engine).await;
    let key = ledger.key("acme", "post,read").await;
    let (server, log) = Server::start_capturing_log(
        &ledger.database_url,
        &["--usage-interval-ms", "3600000"],
        &[],
    )
    .await;
    let r = server
        .post("/v1/usage-debits", &key, &debit("u1", "cust", "1"))
        .await;
    assert_eq!(r.status, 201, "{r:?}");
    ledger
        .sql(&["ALTER TABLE balances RENAME TO balances_elsewhere"])
        .await;

    // A read.
    let before = internal_errors(&server, "schema").await;
    let r = server
        .send(
            server
                .client
                .get(format!("{}/v1/accounts/cust/balance", server.base))
                .bearer_auth(&key)
                .header("x-request-id", "req-permanent-read"),
        )
        .await;
    assert_eq!(r.status, 500, "{r:?}");
    assert_eq!(r.code(), "internal");
    assert!(r.headers.get("retry-after").is_none(), "{r:?}");
    assert_eq!(internal_errors(&server, "schema").await, before + 1);

    // A write: the writer's group fails for the same reason, and its
    // callers hear 500 too, not "retry the same request".
    let r = server
        .post("/v1/usage-debits", &key, &debit("u2", "cust", "1"))
        .await;
    assert_eq!(r.status, 500, "{r:?}");
    assert_eq!(r.code(), "internal");
    assert!(r.headers.get("retry-after").is_none(), "{r:?}");
    assert_eq!(internal_errors(&server, "schema").await, before + 2);

    // The cause is in the log, on a line with the request's ID (written
    // as the answer leaves, so it may trail it by a moment).
    common::wait::until(
        "a log line naming the request and the cause",
        Duration::from_secs(10),
        || async {
            log.lines()
                .iter()
                .any(|l| l.contains("req-permanent-read") && l.contains("balances"))
        },
    )
    .await;
    let lines = log.lines();
    assert!(
        lines
            .iter()
            .any(|l| l.contains("req-permanent-read") && l.contains("balances")),
        "no log line names the request and the cause: {lines:#?}"
    );
    assert!(
        !lines.iter().any(|l| l.contains(&key)),
        "a log line carries the API key"
    );
    // Nothing is wrong with the server itself: what needs no balance works.
    let r = server.get("/v1/entries?limit=10", &key).await;
    assert_eq!(r.status, 200, "{r:?}");
}

/// The database stops answering: that passes, so the answer is 503 with
/// Retry-After. On PostgreSQL the server reaches its database through a
/// proxy that is cut off. SQLite has no such failure that shows quickly
/// (a locked database answers SQLITE_BUSY only after the 30 s busy timeout,
/// a busy pool after its 10 s acquire timeout), so it is shown by holding
/// SQLite's write lock past a short request timeout instead; the SQLite
/// result codes themselves are classified by unit tests in
/// ledger/src/error.rs.
async fn a_transient_database_error_is_503_with_retry_after(engine: Engine) {
    let ledger = Ledger::new(engine.clone()).await;
    let key = ledger.key("acme", "post,read").await;
    match engine {
        Engine::Postgres { .. } => {
            let (authority, port) = common::server_of(&ledger.database_url);
            let sql = std::net::SocketAddr::from(([127, 0, 0, 1], port));
            let proxy = Proxy::start(sql).await;
            let via_proxy = ledger
                .database_url
                .replacen(&authority, &proxy.addr.to_string(), 1);
            let server = Server::start(&via_proxy, &["--usage-interval-ms", "3600000"]).await;
            let r = server
                .post("/v1/usage-debits", &key, &debit("u1", "cust", "1"))
                .await;
            assert_eq!(r.status, 201, "{r:?}");
            proxy.down();
            let before = internal_errors(&server, "connection").await;
            for path in ["/v1/accounts/cust/balance", "/v1/entries?limit=10"] {
                let r = server.get(path, &key).await;
                assert_eq!(r.status, 503, "{path}: {r:?}");
                assert_eq!(r.code(), "unavailable");
                assert_eq!(r.headers.get("retry-after").unwrap(), "1", "{r:?}");
            }
            let r = server
                .post("/v1/usage-debits", &key, &debit("u2", "cust", "1"))
                .await;
            assert_eq!(r.status, 503, "{r:?}");
            assert!(r.headers.get("retry-after").is_some(), "{r:?}");
            assert_eq!(internal_errors(&server, "connection").await, before);
        }
        Engine::Sqlite => {
            let server = ledger.server_with(&["--request-timeout-ms", "500"]).await;
            let r = server
                .post("/v1/usage-debits", &key, &debit("u1", "cust", "1"))
                .await;
            assert_eq!(r.status, 201, "{r:?}");
            let mut lock =
                <sqlx::SqliteConnection as sqlx::Connection>::connect(&ledger.database_url)
                    .await
                    .unwrap();
            sqlx::raw_sql("BEGIN IMMEDIATE")
                .execute(&mut lock)
                .await
                .unwrap();
            let r = server
                .post("/v1/usage-debits", &key, &debit("u2", "cust", "1"))
                .await;
            assert_eq!(r.status, 503, "{r:?}");
            assert!(r.headers.get("retry-after").is_some(), "{r:?}");
            sqlx::raw_sql("ROLLBACK").execute(&mut lock).await.unwrap();
            // Once the lock is gone the same request succeeds.
            let mut status = 0;
            for _ in 0..100 {
                status = server
                    .post("/v1/usage-debits", &key, &debit("u2", "cust", "1"))
                    .await
                    .status;
                if status == 201 || status == 200 {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            assert!(status == 201 || status == 200, "{status}");
        }
    }
}
