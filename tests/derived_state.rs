//! Derived state and background jobs: one broken tenant stops no job of the
//! others (the hold-expiry sweep, the usage projector, `tally verify`,
//! `tally projections rebuild`), and `tally verify` checks every piece of
//! derived state the writer trusts — rule state included — against the log,
//! while the rebuild restores it.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::{Duration, Instant};

use common::{debit, Engine, Ledger, Server, TALLY};
use serde_json::{json, Value};

engine_tests!(
    one_broken_tenant_stops_no_background_job_of_the_others,
    verify_names_every_difference_of_rule_state_and_rebuild_restores_it,
);

const ALL: &str = "post,read,admin,audit";

/// Runs `tally <args> --database-url …`: (exit code, stdout, stderr).
async fn tally(ledger: &Ledger, args: &[&str]) -> (Option<i32>, String, String) {
    let out = tokio::process::Command::new(TALLY)
        .args(args)
        .args(["--database-url", &ledger.database_url])
        .env("TALLY_LOG", "warn")
        .output()
        .await
        .unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn hold(id: &str, account: &str, amount: &str, ttl: i64) -> Value {
    json!({"hold_id": id, "account": account, "amount": amount, "unit": "USD", "ttl_seconds": ttl})
}

async fn metric(server: &Server, name: &str, labels: &[(&str, &str)]) -> f64 {
    common::metrics::scrape(server).await.get(name, labels)
}

/// Tenant `a-broken` (first in every tenant order) has a head that does
/// not read; `b-fine` and `c-fine` must be served by every job all the same.
async fn one_broken_tenant_stops_no_background_job_of_the_others(engine: Engine) {
    let ledger = Ledger::new(engine).await;
    let tenants = ["a-broken", "b-fine", "c-fine"];
    let mut keys = Vec::new();
    for t in tenants {
        keys.push(ledger.key(t, ALL).await);
    }
    let server = ledger
        .server_with(&["--hold-sweep-ms", "50", "--usage-interval-ms", "50"])
        .await;
    for (i, key) in keys.iter().enumerate() {
        let ttl = if i == 0 { 1 } else { 2 };
        let r = server
            .post("/v1/holds", key, &hold("h1", "cust", "5", ttl))
            .await;
        assert_eq!(r.status, 201, "{r:?}");
    }
    let placed = Instant::now();
    ledger
        // Ahead of the usage checkpoint too, so the projector tries it.
        .sql(&[
            "UPDATE ledger_heads SET hash = 'not-a-hash', seq = seq + 1 \
             WHERE tenant_id = 'a-broken'",
        ])
        .await;
    for key in &keys[1..] {
        let mut body = debit("u1", "cust", "1");
        body["meter"] = json!("tokens");
        body["quantity"] = json!("7");
        let r = server.post("/v1/usage-debits", key, &body).await;
        assert_eq!(r.status, 201, "{r:?}");
    }

    // The sweep: b-fine's and c-fine's holds are released soon after they
    // expire (2 s), though a-broken's, expired first, cannot be.
    for key in &keys[1..] {
        loop {
            let status = server.get("/v1/holds/h1", key).await.json()["status"].clone();
            if status == "expired" {
                break;
            }
            assert!(
                placed.elapsed() < Duration::from_secs(6),
                "an expired hold of a sound tenant is still {status} 4 s after its expiry"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        assert_eq!(server.balance(key, "cust").await["held"], "0");
    }
    // The usage projector: the sound tenants' usage is current.
    for key in &keys[1..] {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let body = server.get("/v1/accounts/cust/usage", key).await.json();
            if body["current_as_of_seq"] == body["head_seq"] {
                assert_eq!(body["usage"][0]["quantity"], "7", "{body}");
                break;
            }
            assert!(Instant::now() < deadline, "usage not projected: {body}");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
    // Each job counts its failures, without naming the tenant.
    assert!(
        metric(
            &server,
            "tally_background_failures_total",
            &[("job", "expiry")]
        )
        .await
            >= 1.0
    );
    assert!(
        metric(
            &server,
            "tally_background_failures_total",
            &[("job", "usage")]
        )
        .await
            >= 1.0
    );
    server.terminate().await;

    // verify: every tenant is checked and every failure named.
    ledger
        .sql(&["DELETE FROM balances WHERE tenant_id = 'c-fine' AND account = 'cust'"])
        .await;
    let (code, out, err) = tally(&ledger, &["verify"]).await;
    assert_eq!(code, Some(1), "{out}\n{err}");
    assert!(out.contains("BROKEN tenant a-broken: "), "{out}");
    assert!(out.contains("tenant b-fine: 3 entries"), "{out}");
    assert!(
        out.contains("BROKEN tenant c-fine: no stored balance for cust (USD)"),
        "{out}"
    );
    assert!(
        out.contains("2 of 3 tenant(s) broken: a-broken, c-fine"),
        "{out}"
    );

    // rebuild: every tenant it can, the others named.
    let (code, out, err) = tally(&ledger, &["projections", "rebuild"]).await;
    assert_eq!(code, Some(1), "{out}\n{err}");
    assert!(out.contains("FAILED tenant a-broken: balances"), "{out}");
    assert!(
        out.lines()
            .any(|l| l.starts_with("tenant c-fine: ") && l.contains("balances rebuilt")),
        "{out}"
    );
    assert!(
        out.contains("rebuild FAILED for 1 of 3 tenant(s): a-broken"),
        "{out}"
    );
    let (code, out, err) = tally(&ledger, &["verify"]).await;
    assert_eq!(code, Some(1), "{out}\n{err}");
    assert!(out.contains("tenant c-fine: 3 entries"), "{out}");
    assert!(out.contains("1 of 3 tenant(s) broken: a-broken"), "{out}");
}

async fn post(server: &Server, key: &str, path: &str, body: Value) -> Value {
    let r = server.post(path, key, &body).await;
    assert_eq!(r.status, 201, "{path} {body}: {r:?}");
    r.json()
}

async fn verify_names_every_difference_of_rule_state_and_rebuild_restores_it(engine: Engine) {
    let ledger = Ledger::new(engine).await;
    let key = ledger.key("acme", ALL).await;
    // Writers stop at once when idle, so each group reads the stored rule
    // state rather than what a writer remembers.
    let server = ledger.server_with(&["--writer-idle-ms", "1"]).await;
    let r = server
        .put(
            "/v1/accounts/cust",
            &key,
            &json!({"unit": "USD", "overdraft": {"limit": "100"}}),
        )
        .await;
    assert_eq!(r.status, 200, "{r:?}");
    post(
        &server,
        &key,
        "/v1/payments",
        json!({"payment_id": "p1", "account": "cust", "amount": "10", "unit": "USD"}),
    )
    .await;
    post(
        &server,
        &key,
        "/v1/refunds",
        json!({"refund_id": "r1", "payment_id": "p1", "amount": "4"}),
    )
    .await;
    let d = post(&server, &key, "/v1/usage-debits", debit("u1", "cust", "3")).await;
    let d_id = d["id"].as_str().unwrap().to_owned();
    post(
        &server,
        &key,
        "/v1/reversals",
        json!({"reversal_id": "rv1", "entry_id": d_id, "reason": "duplicate"}),
    )
    .await;
    post(&server, &key, "/v1/holds", hold("h1", "cust", "2", 600)).await;
    let (code, out, _) = tally(&ledger, &["verify"]).await;
    assert_eq!(code, Some(0), "{out}");
    assert!(out.contains("4 rule-state records"), "{out}");

    // Deleted rows, altered rows and a row the log never made.
    ledger
        .sql(&[
            "DELETE FROM rule_state WHERE kind IN ('refunded', 'reversal')",
            "UPDATE rule_state SET value = replace(value, '\"amount\":\"2\"', '\"amount\":\"1\"') \
             WHERE kind = 'hold' AND key = 'h1'",
            "UPDATE rule_state SET value = replace(value, '\"version\":1', '\"version\":7') \
             WHERE kind = 'account' AND key = 'cust'",
            "INSERT INTO rule_state (tenant_id, kind, key, value) \
             VALUES ('acme', 'reversal', 'ent_none', '\"ent_other\"')",
        ])
        .await;
    let (code, out, err) = tally(&ledger, &["verify"]).await;
    assert_eq!(code, Some(1), "{out}\n{err}");
    for expected in [
        "BROKEN tenant acme: rule state refunded \"p1\": missing; the log folds to \"4\""
            .to_owned(),
        format!("BROKEN tenant acme: rule state reversal \"{d_id}\": missing"),
        "BROKEN tenant acme: rule state hold \"h1\": different; stored {".to_owned(),
        "BROKEN tenant acme: rule state account \"cust\": different; stored {".to_owned(),
        "BROKEN tenant acme: rule state reversal \"ent_none\": extra".to_owned(),
    ] {
        assert!(out.contains(&expected), "{expected:?} not in:\n{out}");
    }
    assert!(out.contains("\"version\":7"), "stored value shown: {out}");

    let (code, out, err) = tally(&ledger, &["projections", "rebuild"]).await;
    assert_eq!(code, Some(0), "{out}\n{err}");
    assert!(
        out.contains("4 rule-state records rebuilt from 4 entries"),
        "{out}"
    );
    let (code, out, _) = tally(&ledger, &["verify"]).await;
    assert_eq!(code, Some(0), "{out}");

    // The writer decides by the restored state again.
    let r = server
        .post(
            "/v1/reversals",
            &key,
            &json!({"reversal_id": "rv2", "entry_id": d_id, "reason": "again"}),
        )
        .await;
    assert_eq!(r.status, 422, "{r:?}");
    assert_eq!(r.json()["code"], "already_reversed");
    let r = server
        .post(
            "/v1/refunds",
            &key,
            &json!({"refund_id": "r2", "payment_id": "p1", "amount": "7"}),
        )
        .await;
    assert_eq!(r.status, 422, "{r:?}");
    assert_eq!(r.json()["code"], "refund_exceeds_payment");
    let r = server
        .post(
            "/v1/holds/h1/capture",
            &key,
            &json!({"capture_id": "c1", "amount": "2"}),
        )
        .await;
    assert_eq!(r.status, 201, "the hold's own amount is back: {r:?}");
    let (code, out, _) = tally(&ledger, &["verify"]).await;
    assert_eq!(code, Some(0), "{out}");
}
