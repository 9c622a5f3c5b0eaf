//! The amount domain of totals (docs/ledger-rules.md, "Limits"): every total
//! the ledger stores for an account or a payment stays within what one
//! amount may be (28 significant digits, 18 fractional), so every stored
//! value reads back; a request whose effect would leave it is the stored
//! rejection `total_out_of_range`. Aggregates the writer does not decide
//! (usage summaries, a statement's movements) are exact however large.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::{Duration, Instant};

use common::{debit, Engine, Ledger, Server};
use serde_json::{json, Value};

engine_tests!(
    a_debit_past_the_total_domain_is_a_stored_rejection_and_every_read_answers,
    a_payment_whose_balance_needs_more_digits_is_rejected_not_rounded,
    usage_sums_past_28_digits_are_served_exactly,
    refunded_totals_are_added_exactly,
    a_full_revenue_account_rejects_debits_after_a_restart,
    statement_movements_past_28_digits_are_exact,
    a_rebuild_in_parts_adds_partial_sums_past_28_digits_exactly,
    a_total_stored_before_the_domain_reads_back_and_rejects_writes,
);

const NINES: &str = "9999999999999999999999999999";
const ALL: &str = "post,read,admin,audit";

fn usage(id: &str, account: &str, amount: &str, quantity: &str, at: &str) -> Value {
    json!({"usage_record_id": id, "account": account, "amount": amount, "unit": "USD",
           "meter": "m", "quantity": quantity, "occurred_at": at})
}

fn payment(id: &str, account: &str, amount: &str) -> Value {
    json!({"payment_id": id, "account": account, "amount": amount, "unit": "USD"})
}

async fn posted(server: &Server, path: &str, key: &str, body: &Value) -> Value {
    let r = server.post(path, key, body).await;
    assert_eq!(r.status, 201, "{path} {body}: {r:?}");
    r.json()
}

/// Posts `body`, expects the stored rejection `code`, and checks that a
/// replay answers the very same body, marked as a replay.
async fn rejected(server: &Server, path: &str, key: &str, body: &Value, code: &str) -> Value {
    let r = server.post(path, key, body).await;
    assert_eq!(
        (r.status, r.code()),
        (422, code.to_owned()),
        "{body}: {r:?}"
    );
    let first = r.json();
    assert_eq!(first["entry"]["status"], "rejected", "{first}");
    assert_eq!(first["entry"]["rejection"]["code"], code, "{first}");
    let again = server.post(path, key, body).await;
    assert_eq!(again.status, 422, "{again:?}");
    assert!(again.replayed(), "{again:?}");
    assert_eq!(again.json(), first);
    first
}

/// Polls the usage endpoint until the summaries are current to the head.
async fn caught_up(server: &Server, key: &str, path: &str) -> Value {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let r = server.get(path, key).await;
        assert_eq!(r.status, 200, "{path}: {r:?}");
        let body = r.json();
        if body["current_as_of_seq"] == body["head_seq"] {
            return body;
        }
        assert!(Instant::now() < deadline, "usage did not catch up: {body}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Every read of `account` answers 200, the export is complete and
/// verifies offline, and `tally verify` passes.
async fn every_read_answers(ledger: &Ledger, server: &Server, key: &str, account: &str) {
    for path in [
        format!("/v1/accounts/{account}/balance?unit=USD"),
        format!("/v1/accounts/{account}"),
        format!("/v1/entries?account={account}"),
        format!(
            "/v1/accounts/{account}/statement?unit=USD&from=2000-01-01T00%3A00%3A00Z&to={}",
            chrono::Utc::now()
                .format("%Y-%m-%dT%H:%M:%S.%6fZ")
                .to_string()
                .replace(':', "%3A")
        ),
        "/v1/entries".to_owned(),
    ] {
        let r = server.get(&path, key).await;
        assert_eq!(r.status, 200, "{path}: {r:?}");
    }
    if !account.starts_with('@') {
        caught_up(server, key, &format!("/v1/accounts/{account}/usage")).await;
        caught_up(
            server,
            key,
            &format!("/v1/accounts/{account}/usage?granularity=month"),
        )
        .await;
    }
    let head = server.get("/v1/audit/head", key).await.json();
    let n = head["seq"].as_i64().unwrap() as usize;
    let r = server.get("/v1/audit/export", key).await;
    assert_eq!(r.status, 200, "{r:?}");
    let text = String::from_utf8(r.body).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), n + 2, "header, {n} entries, trailer:\n{text}");
    let trailer: Value = serde_json::from_str(lines[n + 1]).unwrap();
    assert_eq!(trailer["record"], "trailer", "{trailer}");
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("export.jsonl");
    std::fs::write(&file, &text).unwrap();
    let out = std::process::Command::new(common::TALLY)
        .arg("verify")
        .arg("--export")
        .arg(&file)
        .env_remove("TALLY_DATABASE_URL")
        .env("TALLY_LOG", "warn")
        .output()
        .unwrap();
    assert!(out.status.success(), "verify --export: {out:?}");
    let (ok, out, err) = ledger.tally(&["verify"]).await;
    assert!(ok, "tally verify failed:\n{out}\n{err}");
}

async fn a_debit_past_the_total_domain_is_a_stored_rejection_and_every_read_answers(
    engine: Engine,
) {
    let ledger = Ledger::new(engine).await;
    let key = ledger.key("acme", ALL).await;
    let server = ledger.server().await;
    posted(
        &server,
        "/v1/usage-debits",
        &key,
        &debit("u1", "cust", NINES),
    )
    .await;
    let body = rejected(
        &server,
        "/v1/usage-debits",
        &key,
        &debit("u2", "cust", NINES),
        "total_out_of_range",
    )
    .await;
    let message = body["entry"]["rejection"]["message"].as_str().unwrap();
    assert!(message.contains("cust"), "{message}");
    assert_eq!(body["entry"]["balance_after"], format!("-{NINES}"));
    let balance = server.balance(&key, "cust").await;
    assert_eq!(
        (&balance["debits"], &balance["posted"]),
        (&json!(NINES), &json!(format!("-{NINES}")))
    );
    // What is left below the edge still posts.
    posted(&server, "/v1/payments", &key, &payment("p1", "cust", "1")).await;
    every_read_answers(&ledger, &server, &key, "cust").await;
    every_read_answers(&ledger, &server, &key, "@revenue").await;
}

async fn a_payment_whose_balance_needs_more_digits_is_rejected_not_rounded(engine: Engine) {
    let ledger = Ledger::new(engine).await;
    let key = ledger.key("acme", ALL).await;
    let server = ledger.server().await;
    posted(
        &server,
        "/v1/usage-debits",
        &key,
        &debit("u1", "cust", NINES),
    )
    .await;
    // credits − debits would be −9999999999999999999999999998.999999999999999999:
    // 46 significant digits.
    let tiny = "0.000000000000000001";
    let body = rejected(
        &server,
        "/v1/payments",
        &key,
        &payment("p1", "cust", tiny),
        "total_out_of_range",
    )
    .await;
    assert_eq!(body["entry"]["balance_after"], format!("-{NINES}"));
    let balance = server.balance(&key, "cust").await;
    assert_eq!(
        (&balance["credits"], &balance["posted"]),
        (&json!("0"), &json!(format!("-{NINES}")))
    );
    // The same amount on an account whose totals can hold it posts exactly.
    let ok = posted(&server, "/v1/payments", &key, &payment("p2", "other", tiny)).await;
    assert_eq!(ok["balance_after"], tiny);
    every_read_answers(&ledger, &server, &key, "cust").await;
}

async fn usage_sums_past_28_digits_are_served_exactly(engine: Engine) {
    let ledger = Ledger::new(engine).await;
    let key = ledger.key("acme", ALL).await;
    let server = ledger.server().await;
    let day = "2026-11-29T10:00:00Z";
    for (id, quantity, at) in [
        ("u1", NINES, day),
        ("u2", NINES, day),
        ("u3", "0.000000000000000001", day),
        ("u4", NINES, "2026-11-30T10:00:00Z"),
    ] {
        posted(
            &server,
            "/v1/usage-debits",
            &key,
            &usage(id, "cust", "1", quantity, at),
        )
        .await;
    }
    let days = caught_up(&server, &key, "/v1/accounts/cust/usage").await;
    assert_eq!(
        days["usage"],
        json!([
            {"period": "2026-11-29", "meter": "m", "unit": "USD",
             "quantity": "19999999999999999999999999998.000000000000000001",
             "amount": "3", "entries": 3},
            {"period": "2026-11-30", "meter": "m", "unit": "USD",
             "quantity": NINES, "amount": "1", "entries": 1},
        ])
    );
    let months = caught_up(&server, &key, "/v1/accounts/cust/usage?granularity=month").await;
    assert_eq!(
        months["usage"],
        json!([{"period": "2026-11", "meter": "m", "unit": "USD",
                "quantity": "29999999999999999999999999997.000000000000000001",
                "amount": "4", "entries": 4}])
    );
    // The projector kept going: a later debit is summarised too.
    posted(
        &server,
        "/v1/usage-debits",
        &key,
        &usage("u5", "cust", "1", "1", "2026-12-01T10:00:00Z"),
    )
    .await;
    let days = caught_up(&server, &key, "/v1/accounts/cust/usage").await;
    assert_eq!(days["usage"].as_array().unwrap().len(), 3, "{days}");
    // A rebuild folds the same exact sums.
    let before = server.get("/v1/accounts/cust/usage", &key).await.body;
    let (ok, out, err) = ledger.tally(&["projections", "rebuild"]).await;
    assert!(ok, "rebuild failed:\n{out}\n{err}");
    let after = server.get("/v1/accounts/cust/usage", &key).await.body;
    assert_eq!(
        String::from_utf8_lossy(&after),
        String::from_utf8_lossy(&before)
    );
    every_read_answers(&ledger, &server, &key, "cust").await;
}

async fn refunded_totals_are_added_exactly(engine: Engine) {
    let ledger = Ledger::new(engine).await;
    let key = ledger.key("acme", ALL).await;
    let server = ledger.server().await;
    posted(&server, "/v1/payments", &key, &payment("p", "cust", NINES)).await;
    let refund =
        |id: &str, amount: &str| json!({"refund_id": id, "payment_id": "p", "amount": amount});
    // cust's posted would be 9999999999999999999999999998.999999999999999999:
    // rejected, not booked with a rounded balance_after.
    let body = rejected(
        &server,
        "/v1/refunds",
        &key,
        &refund("r1", "0.000000000000000001"),
        "total_out_of_range",
    )
    .await;
    let message = body["entry"]["rejection"]["message"].as_str().unwrap();
    assert!(message.contains("posted of cust"), "{message}");
    assert_eq!(body["entry"]["balance_after"], NINES);
    // The rejected refund refunded nothing: the whole payment still can be.
    let whole = posted(&server, "/v1/refunds", &key, &refund("r2", NINES)).await;
    assert_eq!(whole["balance_after"], "0");
    rejected(
        &server,
        "/v1/refunds",
        &key,
        &refund("r3", "0.000000000000000001"),
        "refund_exceeds_payment",
    )
    .await;
    let balance = server.balance(&key, "cust").await;
    assert_eq!(
        (&balance["debits"], &balance["credits"]),
        (&json!(NINES), &json!(NINES))
    );
    every_read_answers(&ledger, &server, &key, "cust").await;
}

async fn a_full_revenue_account_rejects_debits_after_a_restart(engine: Engine) {
    let ledger = Ledger::new(engine).await;
    let key = ledger.key("acme", ALL).await;
    let server = ledger.server().await;
    posted(&server, "/v1/usage-debits", &key, &debit("u1", "a", NINES)).await;
    let body = rejected(
        &server,
        "/v1/usage-debits",
        &key,
        &debit("u2", "b", "1"),
        "total_out_of_range",
    )
    .await;
    let message = body["entry"]["rejection"]["message"].as_str().unwrap();
    assert!(message.contains("@revenue"), "{message}");
    server.terminate().await;

    // A new process loads @revenue's stored totals from the database.
    let server = ledger.server().await;
    rejected(
        &server,
        "/v1/usage-debits",
        &key,
        &debit("u3", "c", "0.5"),
        "total_out_of_range",
    )
    .await;
    posted(&server, "/v1/payments", &key, &payment("p1", "c", "2")).await;
    let revenue = server
        .get("/v1/accounts/@revenue/balance?unit=USD", &key)
        .await;
    assert_eq!(revenue.status, 200, "{revenue:?}");
    assert_eq!(revenue.json()["credits"], NINES);
    every_read_answers(&ledger, &server, &key, "@revenue").await;
    every_read_answers(&ledger, &server, &key, "a").await;
}

async fn statement_movements_past_28_digits_are_exact(engine: Engine) {
    let ledger = Ledger::new(engine).await;
    let key = ledger.key("acme", ALL).await;
    let server = ledger.server().await;
    // Every total of cust stays inside the domain after each entry, but the
    // last two entries together move 9799999999999999999999999999.5.
    posted(
        &server,
        "/v1/usage-debits",
        &key,
        &debit("u1", "cust", "0.5"),
    )
    .await;
    tokio::time::sleep(Duration::from_millis(5)).await;
    let second = posted(
        &server,
        "/v1/usage-debits",
        &key,
        &debit("u2", "cust", "0.5"),
    )
    .await;
    posted(
        &server,
        "/v1/usage-debits",
        &key,
        &debit("u3", "cust", "9799999999999999999999999999"),
    )
    .await;
    let from = second["recorded_at"].as_str().unwrap().replace(':', "%3A");
    let to = chrono::Utc::now()
        .format("%Y-%m-%dT%H:%M:%S.%6fZ")
        .to_string()
        .replace(':', "%3A");
    let r = server
        .get(
            &format!("/v1/accounts/cust/statement?from={from}&to={to}"),
            &key,
        )
        .await;
    assert_eq!(r.status, 200, "{r:?}");
    let s = r.json();
    assert_eq!(s["opening_balance"]["debits"], "0.5", "{s}");
    assert_eq!(
        s["movements"]["debits"], "9799999999999999999999999999.5",
        "{s}"
    );
    assert_eq!(
        s["movements"]["net"], "-9799999999999999999999999999.5",
        "{s}"
    );
    assert_eq!(
        s["closing_balance"]["debits"], "9800000000000000000000000000",
        "{s}"
    );
    every_read_answers(&ledger, &server, &key, "cust").await;
}

async fn a_rebuild_in_parts_adds_partial_sums_past_28_digits_exactly(engine: Engine) {
    let ledger = Ledger::new(engine).await;
    let key = ledger.key("acme", ALL).await;
    let server = ledger.server().await;
    posted(
        &server,
        "/v1/usage-debits",
        &key,
        &debit("u1", "cust", "0.5"),
    )
    .await;
    // Enough entries for a rebuild to read the log in more than one part
    // (SQLite: seq ranges past 1,000 entries; PostgreSQL: past 64 heap
    // blocks); cust's last two entries land in the last part.
    for batch in 0..2 {
        let ops: Vec<Value> = (0..1000)
            .map(|i| {
                let mut body = debit(&format!("f{batch}-{i}"), "filler", "1");
                body["type"] = json!("usage_debit");
                body
            })
            .collect();
        let r = server
            .post("/v1/batch", &key, &json!({ "operations": ops }))
            .await;
        assert_eq!(r.status, 200, "{r:?}");
    }
    posted(
        &server,
        "/v1/usage-debits",
        &key,
        &debit("u2", "cust", "0.5"),
    )
    .await;
    // Every prefix of cust's debits fits (0.5, 1, 9799999999999999999999999999);
    // the last part's sum alone, 9799999999999999999999999998.5, does not.
    posted(
        &server,
        "/v1/usage-debits",
        &key,
        &debit("u3", "cust", "9799999999999999999999999998"),
    )
    .await;
    let before = server.balance(&key, "cust").await;
    assert_eq!(before["debits"], "9799999999999999999999999999");
    let (ok, out, err) = ledger.tally(&["projections", "rebuild"]).await;
    assert!(ok, "rebuild failed:\n{out}\n{err}");
    assert_eq!(server.balance(&key, "cust").await, before);
    let revenue = server
        .get("/v1/accounts/@revenue/balance?unit=USD", &key)
        .await;
    assert_eq!(
        revenue.json()["credits"],
        "9800000000000000000000001999",
        "{revenue:?}"
    );
    let (ok, out, err) = ledger.tally(&["verify"]).await;
    assert!(ok, "tally verify failed:\n{out}\n{err}");
}

/// A database written before totals were kept inside the domain may hold a
/// 29-digit total: its reads answer, and its writes are decided.
async fn a_total_stored_before_the_domain_reads_back_and_rejects_writes(engine: Engine) {
    let ledger = Ledger::new(engine).await;
    let key = ledger.key("acme", ALL).await;
    let server = ledger.server().await;
    posted(
        &server,
        "/v1/usage-debits",
        &key,
        &debit("u1", "cust", NINES),
    )
    .await;
    server.terminate().await;
    ledger
        .sql(&[
            "UPDATE balances SET debits = '19999999999999999999999999998' \
                WHERE account = 'cust'",
        ])
        .await;
    let server = ledger.server().await;
    let balance = server.balance(&key, "cust").await;
    assert_eq!(
        (&balance["debits"], &balance["posted"]),
        (
            &json!("19999999999999999999999999998"),
            &json!("-19999999999999999999999999998")
        )
    );
    for path in ["/v1/accounts/cust", "/v1/entries?account=cust"] {
        let r = server.get(path, &key).await;
        assert_eq!(r.status, 200, "{path}: {r:?}");
    }
    rejected(
        &server,
        "/v1/usage-debits",
        &key,
        &debit("u2", "cust", "1"),
        "total_out_of_range",
    )
    .await;
    // Other accounts are untouched by it.
    posted(&server, "/v1/payments", &key, &payment("p1", "other", "1")).await;
}
