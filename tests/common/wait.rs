//! Waiting for a condition a test can observe, instead of sleeping and
//! hoping: each helper polls the real condition until it holds, and fails
//! the test with what it waited for once its deadline passes.

use std::future::Future;
use std::time::Duration;

use tokio::time::Instant;

use super::Server;

/// How often a condition is polled.
const POLL: Duration = Duration::from_millis(20);

/// Polls `condition` until it returns true; panics naming `what` after `limit`.
pub async fn until<F, Fut>(what: &str, limit: Duration, mut condition: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    let deadline = Instant::now() + limit;
    while !condition().await {
        assert!(Instant::now() < deadline, "waited {limit:?} for {what}");
        tokio::time::sleep(POLL).await;
    }
}

/// The value of an unlabelled sample in `GET /metrics` (a probe: never
/// limited, needs no key).
pub async fn metric(server: &Server, name: &str) -> Option<f64> {
    let r = server
        .send(server.client.get(format!("{}/metrics", server.base)))
        .await;
    let text = String::from_utf8_lossy(&r.body).into_owned();
    text.lines().find_map(|line| {
        line.strip_prefix(name)?
            .strip_prefix(' ')?
            .trim()
            .parse()
            .ok()
    })
}

/// Waits until the writers hold at least `requests` queued entry requests:
/// the HTTP requests carrying them are inside the server, past every admission check.
pub async fn until_queued(server: &Server, requests: f64) {
    until(
        &format!("{requests} entry requests queued in the writers"),
        Duration::from_secs(10),
        || async { metric(server, "tally_writer_queued_requests").await >= Some(requests) },
    )
    .await;
}

/// Waits until the usage summaries at `path` are current with the log
/// (`current_as_of_seq` = `head_seq`).
pub async fn until_usage_current(server: &Server, key: &str, path: &str) {
    until(
        &format!("the usage summaries at {path} to catch up"),
        Duration::from_secs(20),
        || async {
            let body = server.get(path, key).await.json();
            body["current_as_of_seq"] == body["head_seq"]
        },
    )
    .await;
}
