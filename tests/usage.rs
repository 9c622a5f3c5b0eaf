//! Usage summaries: the asynchronous projection behind
//! `GET /v1/accounts/{account}/usage` (docs/usage-summaries.md).

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::{Duration, Instant};

use common::{debit, Engine, Ledger, Server};
use serde_json::{json, Value};

engine_tests!(
    debits_are_summarised_per_utc_day_and_month_with_exact_decimals,
    the_projection_catches_up_after_a_restart,
    a_rebuild_yields_identical_rows,
    verify_compares_the_usage_rows_with_a_fresh_fold,
    two_servers_projecting_one_database_never_double_count,
    bad_query_parameters_are_refused,
    a_reversal_of_a_usage_debit_subtracts_it,
    rebuild_adds_usage_columns_and_params_alike,
);

fn usage_debit(id: &str, account: &str, amount: &str, extra: Value) -> Value {
    let mut body = debit(id, account, amount);
    for (k, v) in extra.as_object().unwrap() {
        body[k] = v.clone();
    }
    body
}

async fn post_debit(server: &Server, key: &str, body: &Value) -> Value {
    let r = server.post("/v1/usage-debits", key, body).await;
    assert_eq!(r.status, 201, "{r:?}");
    r.json()
}

/// Polls the usage endpoint until the summaries are current to the head.
async fn caught_up(server: &Server, key: &str, path: &str) -> Value {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let r = server.get(path, key).await;
        assert_eq!(r.status, 200, "{r:?}");
        let body = r.json();
        if body["current_as_of_seq"] == body["head_seq"] {
            return body;
        }
        assert!(
            Instant::now() < deadline,
            "usage did not catch up within 10 s: {body}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The bodies of `paths` once the summaries are current.
async fn usage_bodies(server: &Server, key: &str, paths: &[&str]) -> Vec<Vec<u8>> {
    caught_up(server, key, paths[0]).await;
    let mut bodies = Vec::new();
    for p in paths {
        bodies.push(server.get(p, key).await.body);
    }
    bodies
}

/// `paths` answer byte for byte what they answered before.
async fn assert_same_bodies(server: &Server, key: &str, paths: &[&str], before: &[Vec<u8>]) {
    for (p, want) in paths.iter().zip(before) {
        let got = server.get(p, key).await.body;
        assert_eq!(
            String::from_utf8_lossy(&got),
            String::from_utf8_lossy(want),
            "{p}"
        );
    }
}

fn period(p: &str, meter: Option<&str>, quantity: &str, amount: &str, entries: i64) -> Value {
    json!({"period": p, "meter": meter, "unit": "USD", "quantity": quantity,
           "amount": amount, "entries": entries})
}

/// Seven entries for `cust` and `other`; see the expected summaries below.
async fn post_sample(server: &Server, key: &str) {
    let tok = |q: &str, at: &str| json!({"meter": "llm-tokens", "quantity": q, "occurred_at": at});
    for body in [
        usage_debit("u1", "cust", "0.01", tok("1000", "2026-11-29T10:00:00Z")),
        // 23:30 at UTC−2 is 01:30 UTC on the 30th.
        usage_debit(
            "u2",
            "cust",
            "0.0025",
            tok("250", "2026-11-29T23:30:00-02:00"),
        ),
        usage_debit(
            "u3",
            "cust",
            "0.12",
            json!({"meter": "images", "quantity": "3", "occurred_at": "2026-11-29T12:00:00Z"}),
        ),
        usage_debit(
            "u4",
            "cust",
            "0.0000005",
            tok("0.5", "2026-11-29T00:00:00Z"),
        ),
        // No meter, no quantity.
        usage_debit(
            "u5",
            "cust",
            "1.10",
            json!({"occurred_at": "2026-12-01T00:00:00Z"}),
        ),
        usage_debit("u6", "other", "7", tok("7", "2026-11-29T10:00:00Z")),
    ] {
        post_debit(server, key, &body).await;
    }
    let pay = json!({"payment_id": "p1", "account": "cust", "amount": "5", "unit": "USD"});
    assert_eq!(server.post("/v1/payments", key, &pay).await.status, 201);
}

fn expected_days() -> Value {
    json!([
        period("2026-11-29", Some("images"), "3", "0.12", 1),
        period("2026-11-29", Some("llm-tokens"), "1000.5", "0.0100005", 2),
        period("2026-11-30", Some("llm-tokens"), "250", "0.0025", 1),
        period("2026-12-01", None, "0", "1.1", 1),
    ])
}

async fn debits_are_summarised_per_utc_day_and_month_with_exact_decimals(engine: Engine) {
    let ledger = Ledger::new(engine).await;
    let key = ledger.key("acme", "post,read").await;
    let server = ledger.server().await;
    post_sample(&server, &key).await;

    let days = caught_up(&server, &key, "/v1/accounts/cust/usage").await;
    assert_eq!(days["account"], "cust");
    assert_eq!(days["granularity"], "day");
    assert_eq!(days["current_as_of_seq"], 7);
    assert_eq!(days["head_seq"], 7);
    assert_eq!(days["usage"], expected_days());

    let months = server
        .get("/v1/accounts/cust/usage?granularity=month", &key)
        .await
        .json();
    assert_eq!(months["granularity"], "month");
    assert_eq!(
        months["usage"],
        json!([
            period("2026-11", Some("images"), "3", "0.12", 1),
            period("2026-11", Some("llm-tokens"), "1250.5", "0.0125005", 3),
            period("2026-12", None, "0", "1.1", 1),
        ])
    );

    let get = |q: &'static str| {
        let server = &server;
        let key = &key;
        async move {
            let r = server
                .get(&format!("/v1/accounts/cust/usage?{q}"), key)
                .await;
            assert_eq!(r.status, 200, "{q}: {r:?}");
            r.json()["usage"].clone()
        }
    };
    assert_eq!(
        get("meter=llm-tokens&from=2026-11-30").await,
        json!([period("2026-11-30", Some("llm-tokens"), "250", "0.0025", 1)])
    );
    assert_eq!(
        get("meter=llm-tokens&granularity=month").await,
        json!([period(
            "2026-11",
            Some("llm-tokens"),
            "1250.5",
            "0.0125005",
            3
        )])
    );
    // `to` is exclusive; a timestamp counts as its UTC date
    // (05:00 at UTC+9 on the 30th is the 29th in UTC).
    assert_eq!(
        get("to=2026-11-30T05:00:00%2B09:00").await,
        json!([]),
        "to = 2026-11-29 excludes the 29th"
    );
    assert_eq!(
        get("from=2026-11-29&to=2026-11-30")
            .await
            .as_array()
            .unwrap(),
        &expected_days().as_array().unwrap()[..2].to_vec()
    );
    assert_eq!(
        get("from=2026-11-30T00:00:00Z&to=2026-12-02")
            .await
            .as_array()
            .unwrap(),
        &expected_days().as_array().unwrap()[2..].to_vec()
    );
    assert_eq!(get("meter=nope").await, json!([]));

    let other = server.get("/v1/accounts/other/usage", &key).await.json();
    assert_eq!(
        other["usage"],
        json!([period("2026-11-29", Some("llm-tokens"), "7", "7", 1)])
    );
    // No usage is an empty list, not a 404.
    let nobody = server.get("/v1/accounts/nobody/usage", &key).await;
    assert_eq!(nobody.status, 200, "{nobody:?}");
    assert_eq!(nobody.json()["usage"], json!([]));
    assert_eq!(nobody.json()["current_as_of_seq"], 7);

    // Another tenant sees none of it.
    let key_b = ledger.key("globex", "post,read").await;
    let b = server.get("/v1/accounts/cust/usage", &key_b).await.json();
    assert_eq!(b["usage"], json!([]));
    assert_eq!(b["current_as_of_seq"], 0);
    assert_eq!(b["head_seq"], 0);

    // Reading needs the read scope.
    let post_only = ledger.key("acme", "post").await;
    let r = server.get("/v1/accounts/cust/usage", &post_only).await;
    assert_eq!((r.status, r.code().as_str()), (403, "forbidden"));
}

async fn the_projection_catches_up_after_a_restart(engine: Engine) {
    let ledger = Ledger::new(engine).await;
    let key = ledger.key("acme", "post,read").await;
    let day = |i: usize| format!("2026-11-{:02}T12:00:00Z", 1 + i % 3);
    let body = |i: usize| {
        usage_debit(
            &format!("u{i}"),
            "cust",
            "0.5",
            json!({"meter": "m", "quantity": "2", "occurred_at": day(i)}),
        )
    };

    let server = ledger.server().await;
    for i in 0..6 {
        post_debit(&server, &key, &body(i)).await;
    }
    let before = caught_up(&server, &key, "/v1/accounts/cust/usage").await;
    assert_eq!(before["current_as_of_seq"], 6);
    server.kill9().await;

    // A server whose projector never gets to run: the summaries stay at 6
    // while the log grows, and say so.
    let idle = ledger
        .server_with(&["--usage-interval-ms", "3600000"])
        .await;
    for i in 6..12 {
        post_debit(&idle, &key, &body(i)).await;
    }
    // Time passing without a projector run is the behaviour under test:
    // the summaries must still say they are behind afterwards.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let stale = idle.get("/v1/accounts/cust/usage", &key).await.json();
    assert_eq!(stale["current_as_of_seq"], 6, "{stale}");
    assert_eq!(stale["head_seq"], 12, "{stale}");
    assert_eq!(stale["usage"], before["usage"]);
    idle.kill9().await;

    let restarted = ledger.server().await;
    let after = caught_up(&restarted, &key, "/v1/accounts/cust/usage").await;
    assert_eq!(after["current_as_of_seq"], 12);
    assert_eq!(
        after["usage"],
        json!([
            period("2026-11-01", Some("m"), "8", "2", 4),
            period("2026-11-02", Some("m"), "8", "2", 4),
            period("2026-11-03", Some("m"), "8", "2", 4),
        ])
    );
    let (ok, out, _) = ledger.tally(&["verify"]).await;
    assert!(ok, "{out}");
}

async fn a_rebuild_yields_identical_rows(engine: Engine) {
    let ledger = Ledger::new(engine).await;
    let key = ledger.key("acme", "post,read").await;
    let server = ledger.server().await;
    post_sample(&server, &key).await;
    for i in 0..40 {
        let meter = ["a", "b"][i % 2];
        let body = usage_debit(
            &format!("x{i}"),
            ["cust", "other", "third"][i % 3],
            &format!("0.{:03}1", i),
            json!({"meter": meter, "quantity": format!("{i}.25"),
                   "occurred_at": format!("2026-10-{:02}T08:00:00Z", 1 + i % 28)}),
        );
        post_debit(&server, &key, &body).await;
    }
    let paths = [
        "/v1/accounts/cust/usage",
        "/v1/accounts/other/usage?granularity=month",
        "/v1/accounts/third/usage",
    ];
    let before = usage_bodies(&server, &key, &paths).await;
    let rows = ledger.count("usage_summaries").await;

    // Lose the projection entirely; the rebuild restores it exactly.
    ledger
        .sql(&[
            "DELETE FROM usage_summaries",
            "DELETE FROM projector_checkpoints",
        ])
        .await;
    let (ok, out, err) = ledger.tally(&["projections", "rebuild"]).await;
    assert!(ok, "{out} {err}");
    assert!(
        out.contains(&format!(
            "{rows} usage summary rows rebuilt from 47 entries"
        )),
        "{out}"
    );
    assert!(out.contains("entries/s"), "{out}");
    assert_eq!(ledger.count("usage_summaries").await, rows);
    assert_same_bodies(&server, &key, &paths, &before).await;
    // A rebuild over intact rows changes nothing either.
    let (ok, _, _) = ledger.tally(&["projections", "rebuild"]).await;
    assert!(ok);
    for (p, want) in paths.iter().zip(&before) {
        assert_eq!(&server.get(p, &key).await.body, want, "{p}");
    }
    // Rows changed, lost, and made up behind the ledger's back: the
    // rebuild rewrites the changed, restores the lost, drops the made up.
    let ghost = ["/v1/accounts/ghost/usage"];
    let ghost_before = usage_bodies(&server, &key, &ghost).await;
    ledger
        .sql(&[
            "UPDATE usage_summaries SET entries = entries + 1 WHERE account = 'cust'",
            "UPDATE usage_summaries SET quantity = '7' WHERE account = 'other'",
            "DELETE FROM usage_summaries WHERE account = 'third' AND meter = 'a'",
            "INSERT INTO usage_summaries \
               (tenant_id, account, meter, day, unit, quantity, amount, entries) \
             SELECT tenant_id, 'ghost', meter, day, unit, quantity, amount, entries \
             FROM usage_summaries WHERE account = 'cust'",
        ])
        .await;
    assert_ne!(ledger.count("usage_summaries").await, rows);
    let (ok, out, err) = ledger.tally(&["projections", "rebuild"]).await;
    assert!(ok, "{out} {err}");
    assert_eq!(ledger.count("usage_summaries").await, rows);
    assert_same_bodies(&server, &key, &paths, &before).await;
    assert_same_bodies(&server, &key, &ghost, &ghost_before).await;
    let (ok, out, _) = ledger.tally(&["verify"]).await;
    assert!(ok, "{out}");
}

async fn verify_compares_the_usage_rows_with_a_fresh_fold(engine: Engine) {
    let ledger = Ledger::new(engine).await;
    let key = ledger.key("acme", "post,read").await;
    let server = ledger.server().await;
    post_sample(&server, &key).await;
    caught_up(&server, &key, "/v1/accounts/cust/usage").await;
    server.terminate().await;

    let (ok, out, _) = ledger.tally(&["verify"]).await;
    assert!(ok, "{out}");
    assert!(
        out.contains("5 usage summary rows equal a fresh fold of the log up to seq 7"),
        "{out}"
    );

    ledger
        .sql(&["UPDATE usage_summaries SET amount = '0.02' WHERE account = 'cust' AND meter = 'images'"])
        .await;
    let (ok, out, err) = ledger.tally(&["verify"]).await;
    assert!(!ok, "verify must fail on a tampered usage row: {out}");
    assert!(
        out.contains(
            "BROKEN tenant acme: stored usage of cust (meter \"images\", 2026-11-29, USD)"
        ) && out.contains("amount 0.02")
            && out.contains("amount 0.12"),
        "{out}"
    );
    assert!(err.contains("FAILED"), "{err}");

    // A row the log does not explain is found too.
    let (ok, _, _) = ledger.tally(&["projections", "rebuild"]).await;
    assert!(ok);
    let (ok, out, _) = ledger.tally(&["verify"]).await;
    assert!(ok, "{out}");
    ledger
        .sql(&["INSERT INTO usage_summaries (tenant_id, account, meter, day, unit, quantity, amount, entries) \
                VALUES ('acme', 'ghost', '', '2026-01-01', 'USD', '0', '1', 1)"])
        .await;
    let (ok, out, _) = ledger.tally(&["verify"]).await;
    assert!(!ok, "{out}");
    assert!(out.contains("stored usage of ghost"), "{out}");
}

async fn two_servers_projecting_one_database_never_double_count(engine: Engine) {
    let ledger = Ledger::new(engine).await;
    let key = ledger.key("acme", "post,read").await;
    // Both projectors run as often as they can, so their rounds collide.
    let a = ledger.server_with(&["--usage-interval-ms", "1"]).await;
    let b = ledger.server_with(&["--usage-interval-ms", "1"]).await;
    let mut tasks = Vec::new();
    for (n, server) in [a, b].into_iter().enumerate() {
        let key = key.clone();
        tasks.push(tokio::spawn(async move {
            for i in 0..60 {
                let body = usage_debit(
                    &format!("s{n}-{i}"),
                    "cust",
                    "0.01",
                    json!({"meter": "m", "quantity": "1", "occurred_at": "2026-11-29T10:00:00Z"}),
                );
                post_debit(&server, &key, &body).await;
            }
            server
        }));
    }
    let mut servers = Vec::new();
    for t in tasks {
        servers.push(t.await.unwrap());
    }
    for server in &servers {
        let body = caught_up(server, &key, "/v1/accounts/cust/usage").await;
        assert_eq!(body["current_as_of_seq"], 120);
        assert_eq!(
            body["usage"],
            json!([period("2026-11-29", Some("m"), "120", "1.2", 120)])
        );
    }
    let (ok, out, _) = ledger.tally(&["verify"]).await;
    assert!(ok, "{out}");
}

async fn bad_query_parameters_are_refused(engine: Engine) {
    let ledger = Ledger::new(engine).await;
    let key = ledger.key("acme", "post,read").await;
    let server = ledger.server().await;
    for (query, field) in [
        ("colour=red", "colour"),
        ("granularity=week", "granularity"),
        ("granularity=", "granularity"),
        ("from=yesterday", "from"),
        ("to=2026-13-01", "to"),
        ("from=2026-11-3", "from"),
        ("from=2026-12-01&to=2026-11-01", "to"),
        ("from=2026-12-01&to=2026-12-01", "to"),
        ("meter=", "meter"),
        ("meter=a&meter=b", "meter"),
    ] {
        let r = server
            .get(&format!("/v1/accounts/cust/usage?{query}"), &key)
            .await;
        assert_eq!(
            (r.status, r.code().as_str()),
            (422, "invalid_request"),
            "{query}: {r:?}"
        );
        let errors = r.json()["errors"].clone();
        assert_eq!(errors[0]["field"], field, "{query}: {errors}");
        assert!(errors[0]["message"].is_string(), "{query}: {errors}");
    }
    let r = server
        .get(
            "/v1/accounts/cust/usage?from=2026-11-01&to=2026-12-01&granularity=month&meter=m",
            &key,
        )
        .await;
    assert_eq!(r.status, 200, "{r:?}");
}

async fn a_reversal_of_a_usage_debit_subtracts_it(engine: Engine) {
    let ledger = Ledger::new(engine).await;
    let key = ledger.key("acme", "post,read").await;
    let server = ledger.server().await;
    let at = json!({"meter": "m", "quantity": "10", "occurred_at": "2026-11-29T10:00:00Z"});
    post_debit(&server, &key, &usage_debit("u1", "cust", "1.5", at.clone())).await;
    let second = post_debit(
        &server,
        &key,
        &usage_debit("u2", "cust", "0.25", at.clone()),
    )
    .await;
    let on_the_30th = json!({"meter": "m", "quantity": "4", "occurred_at": "2026-11-30T10:00:00Z"});
    let third = post_debit(&server, &key, &usage_debit("u3", "cust", "2", on_the_30th)).await;
    let before = caught_up(&server, &key, "/v1/accounts/cust/usage").await;
    assert_eq!(
        before["usage"],
        json!([
            period("2026-11-29", Some("m"), "20", "1.75", 2),
            period("2026-11-30", Some("m"), "4", "2", 1),
        ])
    );

    // Reversals are recorded today but subtract from the original's day.
    for (id, original) in [("r1", &second), ("r2", &third)] {
        let r = server
            .post(
                "/v1/reversals",
                &key,
                &json!({"reversal_id": id, "entry_id": original["id"], "reason": "duplicate upstream record"}),
            )
            .await;
        assert_eq!(r.status, 201, "{r:?}");
    }
    let after = caught_up(&server, &key, "/v1/accounts/cust/usage").await;
    assert_eq!(after["current_as_of_seq"], 5);
    // The 30th nets to nothing and is left out.
    assert_eq!(
        after["usage"],
        json!([period("2026-11-29", Some("m"), "10", "1.5", 1)])
    );
    let month = server
        .get("/v1/accounts/cust/usage?granularity=month", &key)
        .await
        .json();
    assert_eq!(
        month["usage"],
        json!([period("2026-11", Some("m"), "10", "1.5", 1)])
    );
    let (ok, out, _) = ledger.tally(&["verify"]).await;
    assert!(ok, "{out}");
    let (ok, out, _) = ledger.tally(&["projections", "rebuild"]).await;
    assert!(ok, "{out}");
    assert_eq!(
        server.get("/v1/accounts/cust/usage", &key).await.json()["usage"],
        after["usage"]
    );
}

/// The writer stores each posted usage debit's usage key and quantity in
/// columns beside its params, and the rebuild adds those up (in SQL on
/// PostgreSQL, from short packed columns on SQLite); usage debits stored
/// without them (appended before migration 0005) are folded from params as
/// before. Both give the projector's rows exactly, and `tally verify`,
/// which folds params, catches a column that disagrees.
async fn rebuild_adds_usage_columns_and_params_alike(engine: Engine) {
    let ledger = Ledger::new(engine).await;
    let key = ledger.key("acme", "post,read").await;
    let server = ledger.server().await;
    post_sample(&server, &key).await;
    let at =
        json!({"meter": "llm-tokens", "quantity": "10", "occurred_at": "2026-11-29T10:00:00Z"});
    let reversed = post_debit(&server, &key, &usage_debit("u7", "cust", "3", at)).await;
    let r = server
        .post(
            "/v1/reversals",
            &key,
            &json!({"reversal_id": "r1", "entry_id": reversed["id"], "reason": "duplicate"}),
        )
        .await;
    assert_eq!(r.status, 201, "{r:?}");
    let paths = [
        "/v1/accounts/cust/usage",
        "/v1/accounts/other/usage?granularity=month",
    ];
    let before = usage_bodies(&server, &key, &paths).await;
    // Seven usage debits carry their columns; the payment and the reversal do not.
    assert_eq!(ledger.count("entries WHERE usage_day IS NOT NULL").await, 7);
    assert_eq!(
        ledger
            .count("entries WHERE usage_day = '2026-11-30' AND usage_meter = 'llm-tokens' AND usage_quantity = '250'")
            .await,
        1
    );
    assert_eq!(
        ledger
            .count("entries WHERE upstream_id = 'u5' AND usage_meter = '' AND usage_quantity = '0'")
            .await,
        1
    );

    let rebuilt_equal = || async {
        ledger.sql(&["DELETE FROM usage_summaries"]).await;
        let (ok, out, err) = ledger.tally(&["projections", "rebuild"]).await;
        assert!(ok, "{out} {err}");
        assert_same_bodies(&server, &key, &paths, &before).await;
    };
    rebuilt_equal().await;

    // Entries from before the columns existed: some of each day and meter,
    // and the reversed one.
    let behind_tallys_back = |update: &'static str| {
        let ledger = &ledger;
        async move {
            match ledger.engine {
                Engine::Sqlite => {
                    ledger
                        .sql(&["DROP TRIGGER IF EXISTS entries_append_only_update", update])
                        .await
                }
                Engine::Postgres { .. } => {
                    ledger
                        .sql(&[
                            "ALTER TABLE entries DISABLE TRIGGER entries_append_only",
                            update,
                            "ALTER TABLE entries ENABLE TRIGGER entries_append_only",
                        ])
                        .await
                }
            }
        }
    };
    behind_tallys_back(
        "UPDATE entries SET usage_meter = NULL, usage_day = NULL, usage_quantity = NULL \
         WHERE upstream_id IN ('u1', 'u3', 'u5', 'u7')",
    )
    .await;
    assert_eq!(ledger.count("entries WHERE usage_day IS NOT NULL").await, 3);
    rebuilt_equal().await;
    let (ok, out, _) = ledger.tally(&["verify"]).await;
    assert!(ok, "{out}");
    // The migration marks each tenant's head at that time: entries up to it
    // are folded from params, whether they carry columns or not, and none
    // is counted twice.
    ledger
        .sql(&["UPDATE ledger_heads SET usage_columns_from = 4"])
        .await;
    rebuilt_equal().await;

    // A column changed behind tally's back: the rebuild sums it, verify
    // (which reads params) says the summary is wrong.
    behind_tallys_back("UPDATE entries SET usage_quantity = '999' WHERE upstream_id = 'u6'").await;
    let (ok, out, err) = ledger.tally(&["projections", "rebuild"]).await;
    assert!(ok, "{out} {err}");
    let (ok, out, _) = ledger.tally(&["verify"]).await;
    assert!(
        !ok,
        "verify must catch a usage column that disagrees with params: {out}"
    );
    assert!(out.contains("stored usage of other"), "{out}");
}
