//! Slow clients and big bodies: a client that sends half its headers or
//! nothing is disconnected after the header-read timeout, an idle
//! kept-alive connection after the idle timeout, connections past the cap
//! wait unserved while the others are served, and the bytes of request
//! bodies in flight are bounded, shown by the server's resident memory
//! (docs/operations.md, "Slow clients" and "Memory").
//!
//! The settings are given as environment variables, which a server without
//! them ignores, so each test shows the behaviour itself, not a refused flag.
//! Connection handling happens before any database is touched, but the
//! tests run on both engines like every other.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::{Duration, Instant};

use common::{Engine, Ledger, Server};
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

engine_tests!(
    a_client_sending_half_its_headers_is_disconnected,
    an_idle_kept_alive_connection_is_closed,
    connections_past_the_cap_wait_until_one_closes,
    bodies_in_flight_are_bounded_in_memory,
    a_body_that_parses_into_more_than_the_budget_is_refused,
);

const HEALTHZ: &[u8] = b"GET /healthz HTTP/1.1\r\nHost: tally\r\n\r\n";

/// Reads until the peer closes (or resets) the connection; the time it
/// took, or `None` if it was still open after `limit`.
async fn closed_within(stream: &mut TcpStream, limit: Duration) -> Option<Duration> {
    let started = Instant::now();
    let mut buf = [0u8; 4096];
    loop {
        match tokio::time::timeout_at((started + limit).into(), stream.read(&mut buf)).await {
            Err(_) => return None,
            Ok(Ok(0) | Err(_)) => return Some(started.elapsed()),
            Ok(Ok(_)) => {}
        }
    }
}

/// Reads one answer of `/healthz` (a small body with Content-Length).
async fn read_answer(stream: &mut TcpStream) -> String {
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        let n = tokio::time::timeout(Duration::from_secs(10), stream.read(&mut buf))
            .await
            .expect("no answer within 10 s")
            .unwrap();
        assert!(n > 0, "closed before answering: {got:?}");
        got.extend_from_slice(&buf[..n]);
        let text = String::from_utf8_lossy(&got).into_owned();
        if let Some(head_end) = text.find("\r\n\r\n") {
            let length: usize = text[..head_end]
                .lines()
                .find_map(|l| {
                    let (name, value) = l.split_once(':')?;
                    name.eq_ignore_ascii_case("content-length")
                        .then(|| value.trim().parse().unwrap())
                })
                .unwrap_or(0);
            if got.len() >= head_end + 4 + length {
                return text;
            }
        }
    }
}

async fn server_with_env(ledger: &Ledger, env: &[(&str, &str)]) -> Server {
    Server::start_with_env(&ledger.database_url, &[], env).await
}

async fn a_client_sending_half_its_headers_is_disconnected(engine: Engine) {
    let ledger = Ledger::new(engine).await;
    let server = server_with_env(
        &ledger,
        &[
            ("TALLY_HEADER_READ_TIMEOUT_MS", "400"),
            ("TALLY_IDLE_TIMEOUT_MS", "30000"),
        ],
    )
    .await;
    // Half the headers, then nothing.
    let mut half = TcpStream::connect(server.addr()).await.unwrap();
    half.write_all(b"GET /healthz HTTP/1.1\r\nHost: tally\r\nX-Slow: ")
        .await
        .unwrap();
    // Nothing at all.
    let mut silent = TcpStream::connect(server.addr()).await.unwrap();
    let half_closed = closed_within(&mut half, Duration::from_secs(5)).await;
    let silent_closed = closed_within(&mut silent, Duration::from_secs(5)).await;
    let half_closed = half_closed.expect("half a request head kept its connection open for 5 s");
    assert!(
        silent_closed.is_some(),
        "a silent connection stayed open for 5 s"
    );
    assert!(half_closed >= Duration::from_millis(300), "{half_closed:?}");

    // A head sent in pieces, all within the timeout, is served.
    let mut slow = TcpStream::connect(server.addr()).await.unwrap();
    for piece in HEALTHZ.chunks(10) {
        slow.write_all(piece).await.unwrap();
        // A slow client is the behaviour under test.
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let answer = read_answer(&mut slow).await;
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
}

async fn an_idle_kept_alive_connection_is_closed(engine: Engine) {
    let ledger = Ledger::new(engine).await;
    let server = server_with_env(
        &ledger,
        &[
            ("TALLY_HEADER_READ_TIMEOUT_MS", "300"),
            ("TALLY_IDLE_TIMEOUT_MS", "1500"),
        ],
    )
    .await;
    let mut conn = TcpStream::connect(server.addr()).await.unwrap();
    conn.write_all(HEALTHZ).await.unwrap();
    assert!(read_answer(&mut conn).await.starts_with("HTTP/1.1 200"));
    // Idle longer than the header timeout (the idleness is the behaviour
    // under test): still open, and serves again.
    tokio::time::sleep(Duration::from_millis(800)).await;
    conn.write_all(HEALTHZ).await.unwrap();
    assert!(read_answer(&mut conn).await.starts_with("HTTP/1.1 200"));
    // Then idle past the idle timeout: closed.
    let closed = closed_within(&mut conn, Duration::from_secs(6))
        .await
        .expect("an idle kept-alive connection stayed open for 6 s");
    assert!(closed >= Duration::from_millis(1_300), "{closed:?}");
}

async fn connections_past_the_cap_wait_until_one_closes(engine: Engine) {
    let ledger = Ledger::new(engine).await;
    let server = server_with_env(&ledger, &[("TALLY_MAX_CONNECTIONS", "2")]).await;
    // Two kept-alive connections, each served once: both slots are taken.
    let mut first = TcpStream::connect(server.addr()).await.unwrap();
    first.write_all(HEALTHZ).await.unwrap();
    assert!(read_answer(&mut first).await.starts_with("HTTP/1.1 200"));
    let mut second = TcpStream::connect(server.addr()).await.unwrap();
    second.write_all(HEALTHZ).await.unwrap();
    assert!(read_answer(&mut second).await.starts_with("HTTP/1.1 200"));

    // A third is accepted by the kernel but not served.
    let mut third = TcpStream::connect(server.addr()).await.unwrap();
    third.write_all(HEALTHZ).await.unwrap();
    let mut buf = [0u8; 64];
    let early = tokio::time::timeout(Duration::from_millis(700), third.read(&mut buf)).await;
    assert!(
        early.is_err(),
        "a connection past the cap was answered: {early:?}"
    );
    // The served ones keep being served.
    second.write_all(HEALTHZ).await.unwrap();
    assert!(read_answer(&mut second).await.starts_with("HTTP/1.1 200"));

    // One closes: the waiting one is served, the other still is.
    drop(first);
    assert!(read_answer(&mut third).await.starts_with("HTTP/1.1 200"));
    second.write_all(HEALTHZ).await.unwrap();
    assert!(read_answer(&mut second).await.starts_with("HTTP/1.1 200"));
}

/// VmRSS of a process, in bytes.
fn rss_bytes(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let line = status
        .lines()
        .find(|l| l.starts_with("VmRSS:"))
        .expect("VmRSS in /proc/<pid>/status");
    let kib: u64 = line
        .split_whitespace()
        .nth(1)
        .and_then(|v| v.parse().ok())
        .unwrap();
    kib * 1024
}

/// A batch of 1,000 valid debits of about 7.4 MiB (metadata fills it).
fn big_batch(prefix: &str) -> Vec<u8> {
    let pad = "x".repeat(500);
    let metadata: serde_json::Map<String, serde_json::Value> =
        (0..15).map(|k| (format!("k{k}"), json!(pad))).collect();
    let operations: Vec<_> = (0..1000)
        .map(|i| {
            json!({"type": "usage_debit", "usage_record_id": format!("{prefix}-{i}"),
                   "account": "cust", "amount": "1", "unit": "USD", "metadata": metadata})
        })
        .collect();
    serde_json::to_vec(&json!({ "operations": operations })).unwrap()
}

/// Sends `body` to `/v1/batch` slowly (with `Expect: 100-continue`, so a
/// request refused before its body is read is not sent it); the status
/// and whether the answer had Retry-After.
async fn slow_batch(addr: std::net::SocketAddr, key: String, body: Vec<u8>) -> (u16, bool) {
    let mut conn = TcpStream::connect(addr).await.unwrap();
    let head = format!(
        "POST /v1/batch HTTP/1.1\r\nHost: tally\r\nAuthorization: Bearer {key}\r\n\
         Content-Type: application/json\r\nContent-Length: {}\r\n\
         Expect: 100-continue\r\nConnection: close\r\n\r\n",
        body.len()
    );
    conn.write_all(head.as_bytes()).await.unwrap();
    let mut got = Vec::new();
    let mut buf = vec![0u8; 64 * 1024];
    let n = tokio::time::timeout(Duration::from_secs(30), conn.read(&mut buf))
        .await
        .expect("no interim or final answer within 30 s")
        .unwrap();
    got.extend_from_slice(&buf[..n]);
    if got.starts_with(b"HTTP/1.1 100") {
        got.clear();
        // 16 pieces, 50 ms apart (a slow upload is the behaviour under
        // test): every admitted body is in flight at once.
        for piece in body.chunks(body.len().div_ceil(16)) {
            conn.write_all(piece).await.unwrap();
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
    loop {
        match tokio::time::timeout(Duration::from_secs(60), conn.read(&mut buf)).await {
            Ok(Ok(0)) | Ok(Err(_)) => break,
            Ok(Ok(n)) => got.extend_from_slice(&buf[..n]),
            Err(_) => panic!("no answer within 60 s"),
        }
    }
    let text = String::from_utf8_lossy(&got);
    let status = text
        .get(9..12)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no status line: {:?}", &text[..text.len().min(200)]));
    let head = text.split("\r\n\r\n").next().unwrap_or("");
    let retry_after = head
        .lines()
        .any(|l| l.to_ascii_lowercase().starts_with("retry-after:"));
    (status, retry_after)
}

/// The bound: with `--max-body-mib-in-flight` at 48, 24 batches of
/// ~7.4 MiB sent at once and slowly (~180 MiB of bodies, more once parsed)
/// grow the server's RSS by less than the budget plus 64 MiB of slack
/// (connection buffers, the allocator's retained pages, the answers); the
/// ones past the budget get 503 with Retry-After, the others are posted,
/// and the server answers normally afterwards.
async fn bodies_in_flight_are_bounded_in_memory(engine: Engine) {
    const MIB: u64 = 1024 * 1024;
    const BUDGET_MIB: u64 = 48;
    const CLIENTS: usize = 24;
    const SLACK_MIB: u64 = 64;
    let ledger = Ledger::new(engine).await;
    let key = ledger.key("acme", "post,read").await;
    let server = server_with_env(
        &ledger,
        &[("TALLY_MAX_BODY_MIB_IN_FLIGHT", &BUDGET_MIB.to_string())],
    )
    .await;
    // One batch first: what any batch allocates once is in the baseline.
    let (status, _) = slow_batch(server.addr(), key.clone(), big_batch("warm")).await;
    assert_eq!(status, 200);
    let pid = server.pid();
    let before = rss_bytes(pid);

    let bodies: Vec<Vec<u8>> = (0..CLIENTS).map(|c| big_batch(&format!("c{c}"))).collect();
    let sampling = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(true));
    let sampler = {
        let sampling = sampling.clone();
        tokio::spawn(async move {
            let mut peak = 0;
            while sampling.load(std::sync::atomic::Ordering::Relaxed) {
                peak = peak.max(rss_bytes(pid));
                // The sampling period of the memory watch, not a wait.
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            peak
        })
    };
    let clients: Vec<_> = bodies
        .into_iter()
        .map(|body| tokio::spawn(slow_batch(server.addr(), key.clone(), body)))
        .collect();
    let mut answers = Vec::new();
    for c in clients {
        answers.push(c.await.unwrap());
    }
    sampling.store(false, std::sync::atomic::Ordering::Relaxed);
    let peak = sampler.await.unwrap();
    let grew = peak.saturating_sub(before);
    let posted = answers.iter().filter(|(s, _)| *s == 200).count();
    let shed = answers
        .iter()
        .filter(|(s, retry)| *s == 503 && *retry)
        .count();
    eprintln!(
        "{CLIENTS} batches: {posted} posted, {shed} shed; RSS {} MiB before, peak +{:.1} MiB",
        before / MIB,
        grew as f64 / MIB as f64
    );
    assert_eq!(posted + shed, CLIENTS, "{answers:?}");
    assert!(posted >= 1 && shed >= 1, "{answers:?}");
    assert!(
        grew < (BUDGET_MIB + SLACK_MIB) * MIB,
        "the server's RSS grew by {:.1} MiB with a budget of {BUDGET_MIB} MiB",
        grew as f64 / MIB as f64
    );
    // Still serving.
    let r = server
        .post(
            "/v1/usage-debits",
            &key,
            &common::debit("after", "cust", "1"),
        )
        .await;
    assert_eq!(r.status, 201, "{r:?}");
}

/// A 1 MiB body of tiny objects parses into ~100 MiB of `serde_json`
/// values: with a 16 MiB budget it can never be served, and is refused
/// with 413 before it is parsed.
async fn a_body_that_parses_into_more_than_the_budget_is_refused(engine: Engine) {
    let ledger = Ledger::new(engine).await;
    let key = ledger.key("acme", "post,read").await;
    let server = server_with_env(&ledger, &[("TALLY_MAX_BODY_MIB_IN_FLIGHT", "16")]).await;
    let mut body =
        String::from(r#"{"usage_record_id":"u1","account":"cust","amount":"1","unit":"USD","x":["#);
    while body.len() < 1_000_000 {
        body.push_str(r#"{"a":0},"#);
    }
    body.push_str("{}]}");
    let r = server
        .post_raw(
            "/v1/usage-debits",
            &key,
            "application/json",
            body.into_bytes(),
        )
        .await;
    assert_eq!(r.status, 413, "{r:?}");
    assert_eq!(r.code(), "payload_too_large");
    // The same request without the padding is served.
    let r = server
        .post("/v1/usage-debits", &key, &common::debit("u1", "cust", "1"))
        .await;
    assert_eq!(r.status, 201, "{r:?}");
}
