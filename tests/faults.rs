//! The fault suite: every request takes effect exactly once and nothing
//! acknowledged is lost, with real processes and real faults, on both engines.
//!
//! Run alone with `cargo test -p tally-api --test faults -- --nocapture`;
//! `TALLY_FAULT_SOAK=N` multiplies requests and workers by N (bounded: every
//! scenario still stops by itself). Each engine prints its table:
//! scenario × requests, deliveries, faults injected, entries posted,
//! duplicates, lost acknowledgements, late replay, verify.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::collections::HashMap;
use std::io::Write;
use std::str::FromStr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::proxy::{Fault, Proxy};
use common::{Engine, Ledger, Server};
use rust_decimal::Decimal;
use tally_client::{Client, ClientError, RetryPolicy, UsageDebit};

engine_tests!(every_request_takes_effect_exactly_once_under_faults);

fn soak() -> usize {
    std::env::var("TALLY_FAULT_SOAK")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1)
        .clamp(1, 50)
}

fn policy() -> RetryPolicy {
    RetryPolicy {
        max_attempts: 200,
        base_delay: Duration::from_millis(10),
        max_delay: Duration::from_millis(400),
        total_budget: Duration::from_secs(120),
        request_timeout: Duration::from_millis(1500),
    }
}

fn request(scenario: &str, i: usize) -> UsageDebit {
    let mut d = UsageDebit::new(
        format!("{scenario}-{i}"),
        format!("cust_{}", i % 7),
        Decimal::from_str(&format!("{}.{:02}", i % 5 + 1, i % 100)).unwrap(),
        "USD",
    );
    d.meter = Some("api-calls".into());
    d
}

/// What one scenario did and what the ledger shows afterwards.
struct Report {
    scenario: &'static str,
    requests: usize,
    deliveries: u64,
    faults: u64,
    posted: usize,
    duplicates: usize,
    lost_acks: usize,
    late_replay_identical: bool,
    verify: bool,
}

/// First acknowledgement (exact body) per upstream ID.
#[derive(Default, Clone)]
struct Acks(Arc<Mutex<HashMap<String, Vec<u8>>>>);

impl Acks {
    fn record(&self, id: &str, body: &[u8]) {
        let mut acks = self.0.lock().unwrap();
        let first = acks.entry(id.to_owned()).or_insert_with(|| body.to_vec());
        // Every acknowledgement of one request is the same entry, byte for byte.
        assert_eq!(
            String::from_utf8_lossy(first),
            String::from_utf8_lossy(body),
            "two different answers for {id}"
        );
    }
}

/// Sends `debit` until it is acknowledged, counting every HTTP delivery
/// (each retry of the client is a delivery too).
async fn deliver(client: &Client, debit: &UsageDebit, acks: &Acks, deliveries: &AtomicU64) {
    match client.post_usage_debit(debit).await {
        Ok(posted) => {
            deliveries.fetch_add(u64::from(posted.attempts), Ordering::Relaxed);
            acks.record(&debit.usage_record_id, &posted.body)
        }
        Err(e) => panic!("{} never acknowledged: {e}", debit.usage_record_id),
    }
}

/// A worker: delivers its requests one after another through `client`,
/// pausing `pace` between them.
fn spawn_worker(
    client: Client,
    mine: Vec<UsageDebit>,
    acks: &Acks,
    deliveries: &Arc<AtomicU64>,
    pace: Duration,
) -> tokio::task::JoinHandle<()> {
    let (acks, deliveries) = (acks.clone(), deliveries.clone());
    tokio::spawn(async move {
        for d in &mine {
            deliver(&client, d, &acks, &deliveries).await;
            if !pace.is_zero() {
                // The client's pace is part of the load under test.
                tokio::time::sleep(pace).await;
            }
        }
    })
}

/// Load that lasts as long as a fault phase does: worker `w` of `workers`
/// keeps delivering new requests (recorded in `sent`) until `stop` is set.
#[allow(clippy::too_many_arguments)]
fn spawn_open_worker(
    client: Client,
    scenario: &'static str,
    w: usize,
    workers: usize,
    acks: &Acks,
    deliveries: &Arc<AtomicU64>,
    sent: &Arc<Mutex<Vec<UsageDebit>>>,
    stop: &Arc<AtomicBool>,
    pace: Duration,
) -> tokio::task::JoinHandle<()> {
    let (acks, deliveries, sent, stop) =
        (acks.clone(), deliveries.clone(), sent.clone(), stop.clone());
    tokio::spawn(async move {
        let mut k = 0;
        while !stop.load(Ordering::Relaxed) {
            let d = request(scenario, k * workers + w);
            sent.lock().unwrap().push(d.clone());
            deliver(&client, &d, &acks, &deliveries).await;
            k += 1;
            // The client's pace is part of the load under test.
            tokio::time::sleep(pace).await;
        }
    })
}

/// The invariant, checked from the outside: exactly one posted entry per
/// request, every acknowledgement present and identical after a restart,
/// balances equal to the fold of the log (`tally verify`).
async fn check(
    scenario: &'static str,
    ledger: &Ledger,
    key: &str,
    requests: &[UsageDebit],
    acks: &Acks,
    deliveries: u64,
    faults: u64,
) -> Report {
    let server = ledger.server().await;
    let entries = server.all_entries(key).await;
    let mut per_key: HashMap<String, Vec<serde_json::Value>> = HashMap::new();
    for e in entries {
        per_key
            .entry(e["upstream_id"].as_str().unwrap().to_owned())
            .or_default()
            .push(e);
    }
    let duplicates = per_key.values().map(|v| v.len().saturating_sub(1)).sum();
    let posted = requests
        .iter()
        .filter(|i| per_key.contains_key(&i.usage_record_id))
        .count();
    let acks = acks.0.lock().unwrap().clone();
    let lost_acks = acks
        .iter()
        .filter(|(id, body)| {
            let acked: serde_json::Value = serde_json::from_slice(body).unwrap();
            per_key
                .get(*id)
                .map(|found| found.len() != 1 || found[0] != acked)
                .unwrap_or(true)
        })
        .count();
    // Late replay: every request again, to a freshly started server.
    let client = Client::new(&server.base, key, policy()).unwrap();
    let mut identical = true;
    for i in requests {
        let again = client.post_usage_debit(i).await.unwrap();
        identical &= again.replayed && acks.get(&i.usage_record_id) == Some(&again.body);
    }
    let (verify, out, _) = ledger.tally(&["verify"]).await;
    assert!(verify, "{scenario}: verify failed: {out}");
    Report {
        scenario,
        requests: requests.len(),
        deliveries,
        faults,
        posted,
        duplicates,
        lost_acks,
        late_replay_identical: identical,
        verify,
    }
}

async fn fresh(engine: &Engine) -> (Ledger, String) {
    let ledger = Ledger::new(engine.clone()).await;
    let key = ledger.key("acme", "post,read").await;
    (ledger, key)
}

/// Scenario 1: The server commits, the answer is lost (dropped, or delayed past the
/// client's timeout); the client retries and gets the replay.
async fn timeout_after_success(engine: &Engine, fault: Fault, name: &'static str) -> Report {
    let (ledger, key) = fresh(engine).await;
    let server = ledger.server().await;
    let proxy = Proxy::start(server.addr()).await;
    proxy.set_fault(fault);
    let requests: Vec<UsageDebit> = (0..40 * soak()).map(|i| request(name, i)).collect();
    let acks = Acks::default();
    let deliveries = Arc::new(AtomicU64::new(0));
    let workers = 8 * soak();
    let mut tasks = Vec::new();
    for w in 0..workers {
        let client = Client::new(proxy.url(), &key, policy()).unwrap();
        let mine: Vec<UsageDebit> = requests.iter().skip(w).step_by(workers).cloned().collect();
        tasks.push(spawn_worker(
            client,
            mine,
            &acks,
            &deliveries,
            Duration::ZERO,
        ));
    }
    for t in tasks {
        t.await.unwrap();
    }
    let faults = proxy.injected();
    assert!(faults > 0, "{name}: no fault was injected");
    drop(server);
    check(
        name,
        &ledger,
        &key,
        &requests,
        &acks,
        deliveries.load(Ordering::Relaxed),
        faults,
    )
    .await
}

/// Scenario 2: The same request delivered 2–5 times: in order, out of order, at once.
async fn duplicate_delivery(engine: &Engine) -> Report {
    let (ledger, key) = fresh(engine).await;
    let server = ledger.server().await;
    let client = Client::new(&server.base, &key, policy()).unwrap();
    let requests: Vec<UsageDebit> = (0..45 * soak()).map(|i| request("dup", i)).collect();
    let acks = Acks::default();
    let deliveries = AtomicU64::new(0);
    let times = |i: usize| 2 + i % 4;
    // In order: each request k times in a row.
    for (i, d) in requests.iter().enumerate().filter(|(i, _)| i % 3 == 0) {
        for _ in 0..times(i) {
            deliver(&client, d, &acks, &deliveries).await;
        }
    }
    // Out of order: rounds over the requests in reverse, then forward.
    let out_of_order: Vec<(usize, &UsageDebit)> = requests
        .iter()
        .enumerate()
        .filter(|(i, _)| i % 3 == 1)
        .collect();
    for round in 0..5 {
        let order: Vec<&(usize, &UsageDebit)> = if round % 2 == 0 {
            out_of_order.iter().rev().collect()
        } else {
            out_of_order.iter().collect()
        };
        for (i, d) in order {
            if round < times(*i) {
                deliver(&client, d, &acks, &deliveries).await;
            }
        }
    }
    // Simultaneously: all k deliveries of a request at once.
    let mut all = Vec::new();
    for (i, d) in requests.iter().enumerate().filter(|(i, _)| i % 3 == 2) {
        for _ in 0..times(i) {
            all.push(deliver(&client, d, &acks, &deliveries));
        }
    }
    futures::future::join_all(all).await;
    let n = deliveries.load(Ordering::Relaxed);
    let faults = n - requests.len() as u64; // every extra delivery is a duplicate
    drop(server);
    check(
        "duplicate delivery",
        &ledger,
        &key,
        &requests,
        &acks,
        n,
        faults,
    )
    .await
}

/// Scenario 3: Several `tally serve` processes on one database, workers spread over
/// them with overlapping key sets.
async fn concurrent_workers(engine: &Engine) -> Report {
    let (ledger, key) = fresh(engine).await;
    let servers: Vec<Server> = futures::future::join_all((0..3).map(|_| ledger.server())).await;
    let requests: Vec<UsageDebit> = (0..60 * soak()).map(|i| request("multi", i)).collect();
    let acks = Acks::default();
    let deliveries = Arc::new(AtomicU64::new(0));
    let workers = 9;
    let mut tasks = Vec::new();
    for w in 0..workers {
        let client = Client::new(&servers[w % 3].base, &key, policy()).unwrap();
        // Each request is owned by two workers on two different servers.
        let mine: Vec<UsageDebit> = requests
            .iter()
            .enumerate()
            .filter(|(i, _)| i % workers == w || (i + 4) % workers == w)
            .map(|(_, d)| d.clone())
            .collect();
        tasks.push(spawn_worker(
            client,
            mine,
            &acks,
            &deliveries,
            Duration::ZERO,
        ));
    }
    for t in tasks {
        t.await.unwrap();
    }
    let n = deliveries.load(Ordering::Relaxed);
    drop(servers);
    check(
        "concurrent workers, 3 servers",
        &ledger,
        &key,
        &requests,
        &acks,
        n,
        n - requests.len() as u64,
    )
    .await
}

/// Scenario 4: `kill -9` of one of two servers, repeatedly, while load runs; clients
/// keep retrying through a stable front address until done.
async fn restart_mid_step(engine: &Engine) -> Report {
    let (ledger, key) = fresh(engine).await;
    let a = ledger.server().await;
    let b = ledger.server().await;
    let front_a = Proxy::start(a.addr()).await;
    let front_b = Proxy::start(b.addr()).await;
    let sent = Arc::new(Mutex::new(Vec::new()));
    let stop = Arc::new(AtomicBool::new(false));
    let acks = Acks::default();
    let deliveries = Arc::new(AtomicU64::new(0));
    let workers = 8 * soak();
    let mut tasks = Vec::new();
    for w in 0..workers {
        let front = if w % 2 == 0 {
            front_a.url()
        } else {
            front_b.url()
        };
        let client = Client::new(front, &key, policy()).unwrap();
        // Load runs until every kill and restart below is done.
        tasks.push(spawn_open_worker(
            client,
            "restart",
            w,
            workers,
            &acks,
            &deliveries,
            &sent,
            &stop,
            Duration::from_millis(20),
        ));
    }
    let mut kills = 0u64;
    let mut a = Some(a);
    let mut b = Some(b);
    // The sleeps below shape the faults under test: load runs 150 ms
    // between kills, each process stays down 100 ms, and load goes on
    // 200 ms after the last restart.
    for round in 0..4 * soak() {
        tokio::time::sleep(Duration::from_millis(150)).await;
        // Mostly one of several, once the other too.
        let (slot, front) = if round % 4 == 2 {
            (&mut b, &front_b)
        } else {
            (&mut a, &front_a)
        };
        slot.take().unwrap().kill9().await;
        kills += 1;
        tokio::time::sleep(Duration::from_millis(100)).await;
        let restarted = ledger.server().await;
        front.set_target(restarted.addr());
        *slot = Some(restarted);
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    stop.store(true, Ordering::Relaxed);
    for t in tasks {
        t.await.unwrap();
    }
    let requests = sent.lock().unwrap().clone();
    let n = deliveries.load(Ordering::Relaxed);
    assert!(
        n > requests.len() as u64,
        "no delivery had to be retried: the kills missed the load"
    );
    drop((a, b));
    check(
        "kill -9 mid-load, restart",
        &ledger,
        &key,
        &requests,
        &acks,
        n,
        kills,
    )
    .await
}

/// Scenario 5: Database faults. PostgreSQL: connections terminated and the
/// database unreachable for a moment. SQLite: another process holds the
/// database's write lock for a moment, longer than the request timeout.
/// tally answers 503 (both are transient: a retry succeeds), commits
/// nothing partial, and recovers without a restart.
async fn database_faults(engine: &Engine) -> Report {
    let (ledger, key) = fresh(engine).await;
    // PostgreSQL is reached through a proxy that can cut it off.
    let db_proxy = if engine.is_postgres() {
        let (_, port) = common::server_of(&ledger.database_url);
        let pg = std::net::SocketAddr::from(([127, 0, 0, 1], port));
        Some(Proxy::start(pg).await)
    } else {
        None
    };
    let server = match &db_proxy {
        Some(p) => {
            let via_proxy = ledger.database_url.replacen(
                &common::server_of(&ledger.database_url).0,
                &p.addr.to_string(),
                1,
            );
            Server::start(&via_proxy, &["--pool-size", "4"]).await
        }
        // The writer waits for a lock held by another process (SQLite's
        // busy timeout); its callers' requests time out meanwhile.
        None => ledger.server_with(&["--request-timeout-ms", "250"]).await,
    };
    let sent = Arc::new(Mutex::new(Vec::new()));
    let stop = Arc::new(AtomicBool::new(false));
    let acks = Acks::default();
    let deliveries = Arc::new(AtomicU64::new(0));
    let unavailable = Arc::new(AtomicU64::new(0));
    let workers = 8 * soak();
    let mut tasks = Vec::new();
    for w in 0..workers {
        let client = Client::new(&server.base, &key, policy()).unwrap();
        // Load runs until the outages below are over.
        tasks.push(spawn_open_worker(
            client,
            "dbfault",
            w,
            workers,
            &acks,
            &deliveries,
            &sent,
            &stop,
            Duration::from_millis(20),
        ));
    }
    // A probe without retries sees the 503s the workers' client hides.
    let probe = {
        let base = server.base.clone();
        let key = key.clone();
        let unavailable = unavailable.clone();
        tokio::spawn(async move {
            let once = RetryPolicy {
                max_attempts: 1,
                ..policy()
            };
            let client = Client::new(base, key, once).unwrap();
            for i in 0..60 {
                match client.post_usage_debit(&request("probe", i)).await {
                    Err(ClientError::Exhausted { last, .. }) if last.status() == Some(503) => {
                        unavailable.fetch_add(1, Ordering::Relaxed);
                    }
                    _ => {}
                }
                // The probe's pace: it samples the outage over time.
                tokio::time::sleep(Duration::from_millis(25)).await;
            }
        })
    };
    // The sleeps below shape the faults under test (when they strike and
    // how long each lasts), with load running throughout and for 200 ms
    // after the last one.
    let mut faults = 0;
    match &db_proxy {
        Some(db_proxy) => {
            let db_name = ledger.database_url.rsplit('/').next().unwrap().to_owned();
            for _ in 0..3 {
                tokio::time::sleep(Duration::from_millis(120)).await;
                ledger
                    .sql(&[&format!(
                        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity \
                         WHERE datname = '{db_name}' AND pid <> pg_backend_pid()"
                    )])
                    .await;
                faults += 1;
            }
            db_proxy.down();
            tokio::time::sleep(Duration::from_millis(800)).await;
            db_proxy.set_fault(Fault::None);
            faults += 1;
        }
        None => {
            // SQLite is embedded: there is no connection to lose. Its
            // transient fault is a write lock another process holds for a
            // while. (A trigger that aborts the write is a failure a retry
            // cannot cure, answered 500: tests/contract.rs.)
            let mut other =
                <sqlx::SqliteConnection as sqlx::Connection>::connect(&ledger.database_url)
                    .await
                    .unwrap();
            for _ in 0..2 {
                tokio::time::sleep(Duration::from_millis(150)).await;
                sqlx::raw_sql("BEGIN IMMEDIATE")
                    .execute(&mut other)
                    .await
                    .unwrap();
                tokio::time::sleep(Duration::from_millis(500)).await;
                sqlx::raw_sql("ROLLBACK").execute(&mut other).await.unwrap();
                faults += 1;
            }
        }
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    stop.store(true, Ordering::Relaxed);
    for t in tasks {
        t.await.unwrap();
    }
    let requests = sent.lock().unwrap().clone();
    probe.await.unwrap();
    // Recovered without a restart: the same server takes new work.
    let client = Client::new(&server.base, &key, policy()).unwrap();
    let after = client.post_usage_debit(&request("after", 0)).await.unwrap();
    assert!(after.created);
    assert!(
        unavailable.load(Ordering::Relaxed) > 0,
        "the database outage was never answered with 503"
    );
    let n = deliveries.load(Ordering::Relaxed);
    assert!(
        n > requests.len() as u64,
        "no delivery had to be retried: the outage missed the load"
    );
    drop(server);
    let mut all = requests.clone();
    all.push(request("after", 0));
    acks.record("after-0", &after.body);
    // Probe requests that got an answer are in the ledger too; count only ours.
    check(
        "database faults (503, recover)",
        &ledger,
        &key,
        &all,
        &acks,
        n + 1,
        faults,
    )
    .await
}

/// Scenario 7: A buggy caller reuses keys with other amounts: 409 every time, never
/// retried, and the ledger is unchanged.
async fn conflicting_retries(engine: &Engine) -> Report {
    let (ledger, key) = fresh(engine).await;
    let server = ledger.server().await;
    let client = Client::new(&server.base, &key, policy()).unwrap();
    let requests: Vec<UsageDebit> = (0..20 * soak()).map(|i| request("conflict", i)).collect();
    let acks = Acks::default();
    let deliveries = AtomicU64::new(0);
    for d in &requests {
        deliver(&client, d, &acks, &deliveries).await;
    }
    let before = server.all_entries(&key).await;
    let mut conflicts = 0;
    for d in &requests {
        for extra in 1..=3 {
            let mut wrong = d.clone();
            wrong.amount += Decimal::from(extra);
            deliveries.fetch_add(1, Ordering::Relaxed);
            match client.post_usage_debit(&wrong).await {
                Err(ClientError::IdempotencyConflict {
                    differing_fields, ..
                }) if differing_fields == ["amount"] => conflicts += 1,
                other => panic!("expected a final 409, got {other:?}"),
            }
        }
    }
    assert_eq!(
        server.all_entries(&key).await,
        before,
        "conflicts change nothing"
    );
    let n = deliveries.load(Ordering::Relaxed);
    drop(server);
    check(
        "conflicting retries (409)",
        &ledger,
        &key,
        &requests,
        &acks,
        n,
        conflicts,
    )
    .await
}

async fn every_request_takes_effect_exactly_once_under_faults(engine: Engine) {
    let name = if engine.is_postgres() {
        "postgres"
    } else {
        "sqlite"
    };
    let mut reports = vec![
        timeout_after_success(
            &engine,
            Fault::DropResponse(3),
            "response lost after commit",
        )
        .await,
        timeout_after_success(
            &engine,
            Fault::Delay(4, 2_000),
            "response delayed past timeout",
        )
        .await,
        duplicate_delivery(&engine).await,
        concurrent_workers(&engine).await,
        restart_mid_step(&engine).await,
    ];
    reports.push(database_faults(&engine).await);
    reports.push(conflicting_retries(&engine).await);

    let mut table = format!(
        "\nfault suite, {name}\n| scenario | engine | requests | deliveries | faults injected | entries posted | duplicates | lost acks | late replay identical | verify |\n|---|---|---:|---:|---:|---:|---:|---:|---|---|\n"
    );
    for r in &reports {
        table.push_str(&format!(
            "| {} | {name} | {} | {} | {} | {} | {} | {} | {} | {} |\n",
            r.scenario,
            r.requests,
            r.deliveries,
            r.faults,
            r.posted,
            r.duplicates,
            r.lost_acks,
            if r.late_replay_identical { "yes" } else { "NO" },
            if r.verify { "ok" } else { "FAILED" }
        ));
    }
    // Straight to stderr, past the test harness's capture: the table is the report.
    let _ = std::io::stderr().write_all(table.as_bytes());
    for r in &reports {
        assert_eq!(r.posted, r.requests, "{}: a request is missing", r.scenario);
        assert_eq!(r.duplicates, 0, "{}: double-posted", r.scenario);
        assert_eq!(
            r.lost_acks, 0,
            "{}: an acknowledged entry was lost",
            r.scenario
        );
        assert!(
            r.late_replay_identical,
            "{}: a late replay differed",
            r.scenario
        );
        assert!(r.verify, "{}", r.scenario);
    }
}
