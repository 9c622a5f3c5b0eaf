//! Metrics (`GET /metrics`, Prometheus text format) and logs (request IDs,
//! JSON lines, no secrets), over HTTP against real `tally serve` processes,
//! on both engines.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::collections::HashMap;
use std::time::Duration;

use common::metrics::{scrape, scrape_with_lag};
use common::{debit, Engine, Ledger, Server};
use serde_json::{json, Value};

engine_tests!(
    metrics_count_answers_by_route_status_and_code,
    metrics_report_expired_holds_and_projection_lag,
    json_logs_carry_request_ids_and_no_secrets,
    text_logs_carry_request_ids,
    idle_tenant_writers_stop_and_come_back,
    metrics_carry_no_tenant_data,
    the_keys_commands_log_no_key_even_at_trace,
);

async fn metrics_count_answers_by_route_status_and_code(engine: Engine) {
    let ledger = Ledger::new(engine).await;
    let key = ledger.key("acme", "post,read,admin").await;
    let server = ledger
        .server_with(&[
            "--usage-interval-ms",
            "3600000",
            "--hold-sweep-ms",
            "3600000",
        ])
        .await;

    let r = server
        .put(
            "/v1/accounts/cust_1",
            &key,
            &json!({"unit": "USD", "overdraft": "forbid"}),
        )
        .await;
    assert_eq!(r.status, 200, "{r:?}");
    let pay = json!({"payment_id": "pay_1", "account": "cust_1", "amount": "10", "unit": "USD"});
    assert_eq!(server.post("/v1/payments", &key, &pay).await.status, 201);
    let d1 = server
        .post("/v1/usage-debits", &key, &debit("d1", "cust_1", "3"))
        .await;
    assert_eq!(d1.status, 201, "{d1:?}");
    let replay = server
        .post("/v1/usage-debits", &key, &debit("d1", "cust_1", "3"))
        .await;
    assert_eq!((replay.status, replay.replayed()), (200, true));
    let conflict = server
        .post("/v1/usage-debits", &key, &debit("d1", "cust_1", "4"))
        .await;
    assert_eq!(conflict.status, 409, "{conflict:?}");
    let rejected = server
        .post("/v1/usage-debits", &key, &debit("d2", "cust_1", "100"))
        .await;
    assert_eq!(rejected.status, 422, "{rejected:?}");
    assert_eq!(rejected.code(), "insufficient_funds");
    let refused = server
        .post(
            "/v1/usage-debits",
            &key,
            &json!({"usage_record_id": "d3", "account": "cust_1", "amount": "1", "unit": "EUR"}),
        )
        .await;
    assert_eq!(refused.code(), "unit_mismatch");
    // A route with a parameter is counted by its template, not its path;
    // an unknown path by no path at all.
    assert_eq!(server.get("/v1/holds/h_missing", &key).await.status, 404);
    assert_eq!(server.get("/no/such/thing", &key).await.status, 404);
    // No key: 401, counted too.
    let anonymous = server
        .send(server.client.get(format!("{}/v1/entries", server.base)))
        .await;
    assert_eq!(anonymous.status, 401);

    let m = scrape(&server).await;
    let http = |method: &str, route: &str, status: &str| {
        m.get(
            "tally_http_requests_total",
            &[("method", method), ("route", route), ("status", status)],
        )
    };
    assert_eq!(http("PUT", "/v1/accounts/{account}", "200"), 1.0);
    assert_eq!(http("POST", "/v1/payments", "201"), 1.0);
    assert_eq!(http("POST", "/v1/usage-debits", "201"), 1.0);
    assert_eq!(http("POST", "/v1/usage-debits", "200"), 1.0);
    assert_eq!(http("POST", "/v1/usage-debits", "409"), 1.0);
    assert_eq!(http("POST", "/v1/usage-debits", "422"), 2.0);
    assert_eq!(http("GET", "/v1/holds/{hold_id}", "404"), 1.0);
    assert_eq!(http("GET", "unmatched", "404"), 1.0);
    assert_eq!(http("GET", "/v1/entries", "401"), 1.0);
    assert!(
        !m.samples.iter().any(|s| s
            .labels
            .get("route")
            .is_some_and(|r| r.contains("h_missing") || r.contains("no/such"))),
        "raw paths never become labels"
    );
    assert_eq!(
        m.get(
            "tally_http_request_duration_seconds_count",
            &[("method", "POST"), ("route", "/v1/usage-debits")]
        ),
        5.0
    );

    assert_eq!(m.get("tally_replays_total", &[]), 1.0);
    assert_eq!(m.get("tally_idempotency_conflicts_total", &[]), 1.0);
    assert_eq!(
        m.get("tally_rejections_total", &[("code", "insufficient_funds")]),
        1.0
    );
    assert_eq!(
        m.get("tally_refusals_total", &[("code", "unit_mismatch")]),
        1.0
    );

    // Seven entry requests, one HTTP request at a time: the replay and the conflict of
    // d1, which this server had committed a moment before, were answered
    // from its recent entries; the five others each went into a group.
    assert_eq!(m.get("tally_writer_answered_from_recent_total", &[]), 2.0);
    assert_eq!(m.get("tally_writer_answered_before_group_total", &[]), 0.0);
    // Each keyed entry request (not the account's settings) was looked up before
    // the writer: one request, so one query, at a time.
    assert_eq!(m.get("tally_writer_look_up_queries_total", &[]), 4.0);
    assert_eq!(m.get("tally_writer_keys_looked_up_total", &[]), 4.0);
    assert_eq!(m.get("tally_writer_group_size_sum", &[]), 5.0);
    let groups = m.get("tally_writer_group_size_count", &[]);
    assert!((1.0..=5.0).contains(&groups), "{groups}");
    // d1, the payment and the rejected d2 are held (the refusal is no entry,
    // account settings are not answered by key).
    assert_eq!(m.get("tally_recent_entries", &[]), 3.0);
    assert!(m.get("tally_recent_entries_bytes", &[]) > 0.0);
    assert_eq!(
        m.get("tally_writer_commit_duration_seconds_count", &[]),
        groups
    );
    assert!(m.get("tally_writer_commit_duration_seconds_sum", &[]) > 0.0);
    assert_eq!(m.get("tally_writer_failed_groups_total", &[]), 0.0);
    assert_eq!(m.get("tally_writer_queued_requests", &[]), 0.0);
    assert_eq!(m.get("tally_writer_queued_requests_max", &[]), 0.0);
    assert_eq!(m.get("tally_writer_queue_capacity", &[]), 10_000.0);
    assert_eq!(m.get("tally_writer_tenants", &[]), 1.0);

    let open = m.get("tally_db_pool_connections", &[]);
    assert!(open >= 1.0, "{open}");
    assert_eq!(
        m.get("tally_db_pool_idle_connections", &[])
            + m.get("tally_db_pool_in_use_connections", &[]),
        open
    );
    assert_eq!(m.get("tally_db_pool_max_connections", &[]), 16.0);
    assert_eq!(m.get("tally_expired_holds_released_total", &[]), 0.0);
    for family in [
        "tally_http_requests_total",
        "tally_http_request_duration_seconds",
        "tally_writer_group_size",
        "tally_writer_commit_duration_seconds",
        "tally_usage_projection_lag_entries",
    ] {
        assert!(m.kind.contains_key(family), "{family}");
    }
    assert_eq!(m.kind["tally_writer_group_size"], "histogram");
    assert_eq!(m.kind["tally_writer_queued_requests"], "gauge");

    // A scrape is counted like any request, and needs no key.
    let again = scrape(&server).await;
    assert_eq!(
        again.get(
            "tally_http_requests_total",
            &[("method", "GET"), ("route", "/metrics"), ("status", "200")]
        ),
        1.0
    );
}

async fn metrics_report_expired_holds_and_projection_lag(engine: Engine) {
    let ledger = Ledger::new(engine).await;
    let key = ledger.key("acme", "post,read").await;
    // The projector never runs in this test: the lag is the whole log.
    let server = ledger
        .server_with(&["--usage-interval-ms", "3600000", "--hold-sweep-ms", "50"])
        .await;
    let m = scrape_with_lag(&server).await;
    assert_eq!(m.get("tally_usage_projection_lag_entries", &[]), 0.0);
    assert_eq!(m.get("tally_usage_projection_lagging_tenants", &[]), 0.0);

    for i in 0..3 {
        let r = server
            .post(
                "/v1/usage-debits",
                &key,
                &debit(&format!("u{i}"), "cust", "1"),
            )
            .await;
        assert_eq!(r.status, 201, "{r:?}");
    }
    let hold =
        json!({"hold_id": "h1", "account": "cust", "amount": "1", "unit": "USD", "ttl_seconds": 1});
    assert_eq!(server.post("/v1/holds", &key, &hold).await.status, 201);

    // The sweeper releases the hold once it expires.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        let m = scrape(&server).await;
        if m.get("tally_expired_holds_released_total", &[]) >= 1.0 {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the hold was not released"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // A scrape reads the lag from the database before it renders the
    // counters: the release may commit in between, so the scrape that first
    // shows it counted can still show the lag without it. The next one
    // cannot (the counter moves only after the commit).
    let m = scrape_with_lag(&server).await;
    assert_eq!(m.get("tally_expired_holds_released_total", &[]), 1.0);
    let hold = server.get("/v1/holds/h1", &key).await.json();
    assert_eq!(hold["status"], "expired", "{hold}");
    // Three debits, the hold, its release: five entries not yet projected.
    assert_eq!(m.get("tally_usage_projection_lag_entries", &[]), 5.0);
    assert_eq!(m.get("tally_usage_projection_lagging_tenants", &[]), 1.0);
    assert_eq!(m.get("tally_usage_projector_rounds_total", &[]), 0.0);
    drop(server);

    // A server whose projector runs catches up, and says so.
    let server = ledger.server_with(&["--usage-interval-ms", "20"]).await;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        let m = scrape(&server).await;
        // The lag is absent from a scrape whose database read did not
        // finish in time (docs/operations.md): a loaded machine, not yet.
        if m.value("tally_usage_projection_lag_entries", &[]) == Some(0.0) {
            // Read again: the round that caught up may count itself only
            // after this scrape read the lag (see the release above).
            let m = scrape(&server).await;
            assert!(m.get("tally_usage_projector_rounds_total", &[]) >= 1.0);
            assert_eq!(m.get("tally_usage_projector_failures_total", &[]), 0.0);
            if let Some(lagging) = m.value("tally_usage_projection_lagging_tenants", &[]) {
                assert_eq!(lagging, 0.0);
            }
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the projection did not catch up"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// A tenant's writer idle for `--writer-idle-ms` stops (the gauge of
/// tenants with a writer falls, the counter of stopped writers rises); the
/// tenant's next requests start another, which replays and posts as before.
async fn idle_tenant_writers_stop_and_come_back(engine: Engine) {
    let ledger = Ledger::new(engine).await;
    let acme = ledger.key("acme", "post,read").await;
    let globex = ledger.key("globex", "post,read").await;
    // Long enough that the scrape after the last post (slower on Citus,
    // whose gauges read every shard) comes before the writer retires.
    let server = ledger.server_with(&["--writer-idle-ms", "1500"]).await;
    for key in [&acme, &globex] {
        let r = server
            .post("/v1/usage-debits", key, &debit("u1", "cust", "1"))
            .await;
        assert_eq!(r.status, 201, "{r:?}");
    }
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    let m = loop {
        let m = scrape(&server).await;
        if m.get("tally_writer_tenants", &[]) == 0.0 {
            break m;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "idle writers did not stop"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(m.get("tally_writer_idle_stopped_total", &[]), 2.0);

    let replay = server
        .post("/v1/usage-debits", &acme, &debit("u1", "cust", "1"))
        .await;
    assert_eq!(replay.status, 200, "{replay:?}");
    let second = server
        .post("/v1/usage-debits", &acme, &debit("u2", "cust", "1"))
        .await;
    assert_eq!(second.status, 201, "{second:?}");
    assert_eq!(second.json()["seq"], 2, "{:?}", second.json());
    assert_eq!(scrape(&server).await.get("tally_writer_tenants", &[]), 1.0);
}

/// A signing key seed only this test knows (any 32 bytes are a seed).
const SEED_HEX: &str = "5eed5eed5eed5eed5eed5eed5eed5eed5eed5eed5eed5eed5eed5eed5eed5eed";

fn request_id(r: &common::Resp) -> String {
    r.headers
        .get("x-request-id")
        .unwrap_or_else(|| panic!("no X-Request-Id in {r:?}"))
        .to_str()
        .unwrap()
        .to_owned()
}

async fn json_logs_carry_request_ids_and_no_secrets(engine: Engine) {
    let ledger = Ledger::new(engine).await;
    let key = ledger.key("acme", "post,read").await;
    let wrong_key = format!("tally_{}", "0badc0de".repeat(8));
    let (server, log) = Server::start_capturing_log(
        &ledger.database_url,
        &["--log-format", "json"],
        &[("TALLY_LOG", "trace"), ("TALLY_SIGNING_KEY", SEED_HEX)],
    )
    .await;

    // A generated ID on a success, echoed on every answer.
    let created = server
        .post("/v1/usage-debits", &key, &debit("u1", "cust", "1"))
        .await;
    assert_eq!(created.status, 201, "{created:?}");
    let generated = request_id(&created);
    assert_eq!(generated.len(), 36, "a UUID: {generated}");
    assert!(uuid::Uuid::parse_str(&generated).is_ok(), "{generated}");

    // The client's own ID is kept, on an error answer too.
    let unauthenticated = server
        .send(
            server
                .client
                .get(format!("{}/v1/entries", server.base))
                .bearer_auth(&wrong_key)
                .header("x-request-id", "client-req-42"),
        )
        .await;
    assert_eq!(unauthenticated.status, 401);
    assert_eq!(request_id(&unauthenticated), "client-req-42");

    // An ID that is not 1–128 visible ASCII characters is replaced.
    for bad in ["has space", &"x".repeat(129), ""] {
        let r = server
            .send(
                server
                    .client
                    .get(format!("{}/v1/accounts/cust/balance", server.base))
                    .bearer_auth(&key)
                    .header("x-request-id", bad),
            )
            .await;
        assert_eq!(r.status, 200, "{r:?}");
        let id = request_id(&r);
        assert_ne!(id, bad);
        assert!(uuid::Uuid::parse_str(&id).is_ok(), "{id}");
    }
    let longest = "y".repeat(128);
    let r = server
        .send(
            server
                .client
                .get(format!("{}/healthz", server.base))
                .header("x-request-id", &longest),
        )
        .await;
    assert_eq!(request_id(&r), longest);

    // A 404, a 405 and a malformed body carry one as well.
    let not_found = server.get("/nowhere", &key).await;
    assert_eq!(not_found.status, 404);
    request_id(&not_found);
    let wrong_method = server
        .send(
            server
                .client
                .delete(format!("{}/v1/usage-debits", server.base))
                .bearer_auth(&key),
        )
        .await;
    assert_eq!(wrong_method.status, 405);
    request_id(&wrong_method);
    let malformed = server
        .post_raw("/v1/usage-debits", &key, "application/json", b"{".to_vec())
        .await;
    assert_eq!(malformed.status, 400);
    request_id(&malformed);

    // The key in other places a careless logger might print.
    let r = server
        .send(
            server
                .client
                .get(format!("{}/v1/entries", server.base))
                .header("authorization", format!("Basic {wrong_key}")),
        )
        .await;
    assert_eq!(r.status, 401);

    assert_eq!(server.terminate().await, Some(0));
    let lines = log.lines();
    assert!(lines.len() > 10, "trace logging logs: {lines:?}");

    let secrets = [
        key.clone(),
        wrong_key.clone(),
        key.trim_start_matches("tally_").to_owned(),
        wrong_key.trim_start_matches("tally_").to_owned(),
        tally_ledger::keys::hash_secret(&key),
        tally_ledger::keys::hash_secret(&wrong_key),
        SEED_HEX.to_owned(),
    ];
    let mut by_request: HashMap<String, Vec<Value>> = HashMap::new();
    for line in &lines {
        for secret in &secrets {
            assert!(
                !line.contains(secret.as_str()),
                "a secret in the log: {line}"
            );
        }
        assert!(
            !line.to_ascii_lowercase().contains("authorization"),
            "a header in the log: {line}"
        );
        let v: Value =
            serde_json::from_str(line).unwrap_or_else(|e| panic!("not JSON ({e}): {line}"));
        assert!(
            v["timestamp"].is_string() && v["level"].is_string(),
            "{line}"
        );
        // Every line inside a request names it.
        if let Some(spans) = v["spans"].as_array() {
            if let Some(request) = spans.iter().find(|s| s["name"] == "request") {
                let id = request["request_id"]
                    .as_str()
                    .unwrap_or_else(|| panic!("a request span without request_id: {line}"));
                assert_eq!(v["span"]["request_id"], id, "{line}");
                by_request.entry(id.to_owned()).or_default().push(v.clone());
            }
        }
    }
    // A request's lines carry the ID its answer had: the start, what
    // happened inside (the key lookup's SQL, …) and the end.
    for id in [generated.as_str(), "client-req-42"] {
        let mine = by_request
            .get(id)
            .unwrap_or_else(|| panic!("no log line of request {id}"));
        let messages: Vec<&str> = mine
            .iter()
            .filter_map(|v| v["fields"]["message"].as_str())
            .collect();
        assert!(messages.contains(&"request started"), "{messages:?}");
        assert!(messages.contains(&"request finished"), "{messages:?}");
        assert!(mine.len() > 2, "{mine:?}");
    }
    let finished = by_request[&generated]
        .iter()
        .find(|v| v["fields"]["message"] == "request finished")
        .unwrap();
    assert_eq!(finished["fields"]["status"], 201);
    assert_eq!(finished["span"]["route"], "/v1/usage-debits");
    assert_eq!(finished["span"]["method"], "POST");
    // The public key may be logged; it is what operators publish.
    assert!(lines.iter().any(|l| l.contains("public_key")));
}

async fn text_logs_carry_request_ids(engine: Engine) {
    let ledger = Ledger::new(engine).await;
    let key = ledger.key("acme", "post,read").await;
    let (server, log) =
        Server::start_capturing_log(&ledger.database_url, &[], &[("TALLY_LOG", "debug")]).await;
    let r = server
        .post("/v1/usage-debits", &key, &debit("u1", "cust", "1"))
        .await;
    assert_eq!(r.status, 201);
    let id = request_id(&r);
    assert_eq!(server.terminate().await, Some(0));
    let lines = log.lines();
    let mine: Vec<&String> = lines
        .iter()
        .filter(|l| l.contains(&format!("request_id={id}")))
        .collect();
    assert!(
        mine.iter().any(|l| l.contains("request finished")),
        "{lines:#?}"
    );
    assert!(
        lines.iter().all(|l| !l.trim_start().starts_with('{')),
        "text, not JSON, by default"
    );
    assert!(lines.iter().all(|l| !l.contains(&key)));
}

/// `GET /metrics` needs no key, so it names no tenant, account, upstream
/// ID, meter, metadata, path parameter or key, whatever the requests were:
/// routes are labelled by their template.
async fn metrics_carry_no_tenant_data(engine: Engine) {
    let ledger = Ledger::new(engine).await;
    let key = ledger.key("tenant-q7x", "post,read").await;
    let server = ledger.server().await;
    let body = json!({
        "usage_record_id": "upstream-q7x", "account": "account-q7x", "amount": "1",
        "unit": "unit-q7x", "meter": "meter-q7x", "metadata": {"meta-q7x": "value-q7x"}
    });
    assert_eq!(
        server.post("/v1/usage-debits", &key, &body).await.status,
        201
    );
    let mut refused = body.clone();
    refused["amount"] = json!("-1");
    assert_eq!(
        server.post("/v1/usage-debits", &key, &refused).await.status,
        422
    );
    for path in [
        "/v1/accounts/account-q7x/balance",
        "/v1/accounts/missing-q7x/balance",
        "/v1/entries/ent_q7x",
        "/v1/holds/hold-q7x",
        "/nowhere-q7x",
    ] {
        server.get(path, &key).await;
    }
    server.get("/v1/entries", "tally_wrongkey-q7x").await;
    let text = server
        .send(server.client.get(format!("{}/metrics", server.base)))
        .await;
    let text = String::from_utf8_lossy(&text.body).into_owned();
    // The requests were counted: the scrape is about them.
    assert!(
        text.contains("/v1/accounts/{account}/balance"),
        "routes by template: {text}"
    );
    for line in text.lines() {
        assert!(!line.contains("q7x"), "tenant data in /metrics: {line}");
        assert!(!line.contains(&key[6..]), "a key in /metrics: {line}");
    }
}

/// `tally keys create`, `list` and `revoke --key-stdin`, logging at
/// `trace`, never write the key (nor its sha256) to their log: the key
/// goes to standard output once, and nowhere else.
async fn the_keys_commands_log_no_key_even_at_trace(engine: Engine) {
    use tokio::io::AsyncWriteExt;
    let ledger = Ledger::new(engine).await;
    let run = |args: &'static [&'static str], input: String| {
        let url = ledger.database_url.clone();
        async move {
            let mut child = tokio::process::Command::new(common::TALLY)
                .arg("keys")
                .args(args)
                .args(["--database-url", &url])
                .env("TALLY_LOG", "trace")
                .stdin(std::process::Stdio::piped())
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap();
            let mut stdin = child.stdin.take().unwrap();
            stdin.write_all(input.as_bytes()).await.unwrap();
            drop(stdin);
            let out = child.wait_with_output().await.unwrap();
            assert!(out.status.success(), "keys {args:?}: {out:?}");
            (
                String::from_utf8(out.stdout).unwrap(),
                String::from_utf8_lossy(&out.stderr).into_owned(),
            )
        }
    };
    let (key, created_log) = run(
        &["create", "--tenant", "acme", "--scopes", "read"],
        String::new(),
    )
    .await;
    let key = key.trim().to_owned();
    assert!(key.starts_with("tally_"), "{key}");
    let (_, list_log) = run(&["list"], String::new()).await;
    let (_, revoke_log) = run(
        &["revoke", "--tenant", "acme", "--key-stdin"],
        format!("{key}\n"),
    )
    .await;
    assert_eq!(ledger.count("api_keys").await, 0, "revoked");
    let secrets = [key[6..].to_owned(), tally_ledger::keys::hash_secret(&key)];
    for (command, log) in [
        ("create", &created_log),
        ("list", &list_log),
        ("revoke", &revoke_log),
    ] {
        assert!(log.lines().count() > 0, "{command} logged nothing at trace");
        for secret in &secrets {
            assert!(
                !log.contains(secret.as_str()),
                "{command} logged a secret: {log}"
            );
        }
    }
}
