//! Totals have no ceiling (docs/ledger-rules.md, "Limits"): one amount has
//! at most 28 significant digits, 18 of them fractional, but every total
//! the ledger stores or derives (an account's `debits`, `credits`, `held`,
//! `posted`, `available`, every `balance_after`, a payment's refunded total,
//! usage summaries, a statement's movements) is exact at any size, so an
//! account that grew past 28 digits still takes every entry and every read,
//! export and verification answers exactly.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::{Duration, Instant};

use common::{debit, Engine, Ledger, Server};
use serde_json::{json, Value};

engine_tests!(
    two_debits_of_28_nines_leave_the_account_open_and_every_read_exact,
    a_payment_whose_balance_needs_more_digits_posts_exactly,
    refunded_totals_past_28_digits_are_exact,
    a_revenue_account_past_28_digits_takes_debits_after_a_restart,
    usage_sums_past_28_digits_are_served_exactly,
    statement_movements_past_28_digits_are_exact,
    a_rebuild_in_parts_adds_partial_sums_past_28_digits_exactly,
    a_29_digit_total_stored_by_an_earlier_version_reads_and_takes_writes,
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
/// verifies offline, and `tally verify` (and the server's own verification)
/// passes.
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
    let r = server.post("/v1/audit/verify", key, &json!({})).await;
    assert_eq!(r.status, 200, "{r:?}");
    assert_eq!(r.json()["status"], "verified", "{r:?}");
}

/// The URL-encoded present, for `to=` and `as_of=`.
fn now() -> String {
    chrono::Utc::now()
        .format("%Y-%m-%dT%H:%M:%S.%6fZ")
        .to_string()
        .replace(':', "%3A")
}

/// The acceptance of issue #44, part 5: a tenant whose amounts add up past
/// 28 digits on an account (and so on `@revenue`) keeps booking, and
/// every read answers exact values.
async fn two_debits_of_28_nines_leave_the_account_open_and_every_read_exact(engine: Engine) {
    let ledger = Ledger::new(engine).await;
    let key = ledger.key("acme", ALL).await;
    let server = ledger.server().await;
    let day = "2026-11-29T10:00:00Z";
    posted(
        &server,
        "/v1/usage-debits",
        &key,
        &usage("u1", "cust", NINES, "1", day),
    )
    .await;
    let second = posted(
        &server,
        "/v1/usage-debits",
        &key,
        &usage("u2", "cust", NINES, "1", day),
    )
    .await;
    let two_nines = "19999999999999999999999999998";
    assert_eq!(second["balance_after"], format!("-{two_nines}"));
    // The ordinary debit that used to be `total_out_of_range`.
    let third = posted(
        &server,
        "/v1/usage-debits",
        &key,
        &usage("u3", "cust", "1.25", "1", day),
    )
    .await;
    let after_third = "-19999999999999999999999999999.25";
    assert_eq!(third["balance_after"], after_third);
    let revenue = server
        .get("/v1/accounts/@revenue/balance?unit=USD", &key)
        .await
        .json();
    assert_eq!(
        (&revenue["credits"], &revenue["posted"], &revenue["debits"]),
        (
            &json!("19999999999999999999999999999.25"),
            &json!("19999999999999999999999999999.25"),
            &json!("0")
        ),
        "{revenue}"
    );
    // Another tenant-sized debit on a different customer still credits
    // @revenue exactly.
    posted(
        &server,
        "/v1/usage-debits",
        &key,
        &usage("u4", "other", NINES, "1", day),
    )
    .await;
    let revenue = server
        .get("/v1/accounts/@revenue/balance?unit=USD", &key)
        .await
        .json();
    assert_eq!(revenue["credits"], "29999999999999999999999999998.25");

    // Holds past 28 digits: `held` and `available` are exact too.
    for id in ["h1", "h2"] {
        posted(
            &server,
            "/v1/holds",
            &key,
            &json!({"hold_id": id, "account": "cust", "amount": NINES, "unit": "USD",
                    "ttl_seconds": 600}),
        )
        .await;
    }
    let b = server.balance(&key, "cust").await;
    assert_eq!(
        (
            &b["debits"],
            &b["credits"],
            &b["posted"],
            &b["held"],
            &b["available"]
        ),
        (
            &json!("19999999999999999999999999999.25"),
            &json!("0"),
            &json!(after_third),
            &json!(two_nines),
            &json!("-39999999999999999999999999997.25"),
        ),
        "{b}"
    );
    let capture = posted(
        &server,
        "/v1/holds/h1/capture",
        &key,
        &json!({"capture_id": "c1", "amount": NINES}),
    )
    .await;
    assert_eq!(
        capture["balance_after"],
        "-29999999999999999999999999998.25"
    );
    posted(
        &server,
        "/v1/holds/h2/release",
        &key,
        &json!({"release_id": "r1"}),
    )
    .await;
    // A reversal and a payment of the smallest amount: exact, not rounded.
    let reversal = posted(
        &server,
        "/v1/reversals",
        &key,
        &json!({"reversal_id": "rv1", "entry_id": third["id"], "reason": "test"}),
    )
    .await;
    assert_eq!(reversal["balance_after"], "-29999999999999999999999999997");
    let tiny = posted(
        &server,
        "/v1/payments",
        &key,
        &payment("p1", "cust", "0.000000000000000001"),
    )
    .await;
    let closing = "-29999999999999999999999999996.999999999999999999";
    assert_eq!(tiny["balance_after"], closing);
    let b = server.balance(&key, "cust").await;
    assert_eq!(
        (
            &b["debits"],
            &b["credits"],
            &b["posted"],
            &b["held"],
            &b["available"]
        ),
        (
            &json!("29999999999999999999999999998.25"),
            &json!("1.250000000000000001"),
            &json!(closing),
            &json!("0"),
            &json!(closing),
        ),
        "{b}"
    );

    // Balances at a seq and at a time.
    let at_second = server
        .get(
            &format!(
                "/v1/accounts/cust/balance?unit=USD&as_of_seq={}",
                second["seq"]
            ),
            &key,
        )
        .await;
    assert_eq!(at_second.status, 200, "{at_second:?}");
    assert_eq!(at_second.json()["posted"], format!("-{two_nines}"));
    let at_now = server
        .get(
            &format!("/v1/accounts/cust/balance?unit=USD&as_of={}", now()),
            &key,
        )
        .await;
    assert_eq!(at_now.status, 200, "{at_now:?}");
    for field in ["debits", "credits", "posted", "held", "available"] {
        assert_eq!(at_now.json()[field], b[field], "{field}");
    }
    // The statement adds up exactly.
    let r = server
        .get(
            &format!(
                "/v1/accounts/cust/statement?unit=USD&from=2000-01-01T00%3A00%3A00Z&to={}",
                now()
            ),
            &key,
        )
        .await;
    assert_eq!(r.status, 200, "{r:?}");
    let s = r.json();
    assert_eq!(s["closing_balance"]["posted"], closing, "{s}");
    assert_eq!(s["movements"]["net"], closing, "{s}");
    assert_eq!(
        s["movements"]["debits"], "29999999999999999999999999998.25",
        "{s}"
    );
    // Entries carry their exact balance_after.
    let r = server.get("/v1/entries?account=cust", &key).await;
    assert_eq!(r.status, 200, "{r:?}");
    let afters: Vec<Value> = r.json()["entries"]
        .as_array()
        .map(|es| es.iter().map(|e| e["balance_after"].clone()).collect())
        .unwrap_or_default();
    assert!(afters.contains(&json!(after_third)), "{afters:?}");
    assert!(afters.contains(&json!(closing)), "{afters:?}");
    let r = server.get("/v1/accounts", &key).await;
    assert_eq!(r.status, 200, "{r:?}");
    assert!(String::from_utf8_lossy(&r.body).contains(closing), "{r:?}");
    // Usage summaries add up the amounts exactly (the reversed debit is
    // taken out again).
    let days = caught_up(&server, &key, "/v1/accounts/cust/usage").await;
    assert_eq!(
        days["usage"],
        json!([{"period": "2026-11-29", "meter": "m", "unit": "USD", "quantity": "2",
                "amount": "19999999999999999999999999998", "entries": 2}])
    );
    every_read_answers(&ledger, &server, &key, "cust").await;
    every_read_answers(&ledger, &server, &key, "@revenue").await;

    // A new process loads the wide totals from the database and books on.
    server.terminate().await;
    let server = ledger.server().await;
    let r = posted(
        &server,
        "/v1/usage-debits",
        &key,
        &usage("u5", "cust", "0.75", "1", day),
    )
    .await;
    assert_eq!(
        r["balance_after"],
        "-29999999999999999999999999997.749999999999999999"
    );
    // A rebuild folds the log to the very same balances.
    let before = server.balance(&key, "cust").await;
    let (ok, out, err) = ledger.tally(&["projections", "rebuild"]).await;
    assert!(ok, "rebuild failed:\n{out}\n{err}");
    assert_eq!(server.balance(&key, "cust").await, before);
    every_read_answers(&ledger, &server, &key, "cust").await;
    every_read_answers(&ledger, &server, &key, "@revenue").await;
}

async fn a_payment_whose_balance_needs_more_digits_posts_exactly(engine: Engine) {
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
    // credits − debits is −9999999999999999999999999998.999999999999999999:
    // 46 significant digits, which a `Decimal` would round.
    let tiny = "0.000000000000000001";
    let body = posted(&server, "/v1/payments", &key, &payment("p1", "cust", tiny)).await;
    let posted_text = "-9999999999999999999999999998.999999999999999999";
    assert_eq!(body["balance_after"], posted_text);
    let balance = server.balance(&key, "cust").await;
    assert_eq!(
        (&balance["credits"], &balance["posted"]),
        (&json!(tiny), &json!(posted_text))
    );
    every_read_answers(&ledger, &server, &key, "cust").await;
}

/// A refunded total is bounded by its payment in size, not in digits:
/// `0.000000000000000001` and then `9999999999999999999999999998` refunded
/// of a payment of 28 nines is 46 digits, and is within the payment.
async fn refunded_totals_past_28_digits_are_exact(engine: Engine) {
    let ledger = Ledger::new(engine).await;
    let key = ledger.key("acme", ALL).await;
    let server = ledger.server().await;
    posted(&server, "/v1/payments", &key, &payment("p", "cust", NINES)).await;
    let refund =
        |id: &str, amount: &str| json!({"refund_id": id, "payment_id": "p", "amount": amount});
    let r1 = posted(
        &server,
        "/v1/refunds",
        &key,
        &refund("r1", "0.000000000000000001"),
    )
    .await;
    assert_eq!(
        r1["balance_after"],
        "9999999999999999999999999998.999999999999999999"
    );
    let r2 = posted(
        &server,
        "/v1/refunds",
        &key,
        &refund("r2", "9999999999999999999999999998"),
    )
    .await;
    assert_eq!(r2["balance_after"], "0.999999999999999999");
    // One refund past the payment by the smallest amount is refused, exactly.
    let body = rejected(
        &server,
        "/v1/refunds",
        &key,
        &refund("r3", "1"),
        "refund_exceeds_payment",
    )
    .await;
    let message = body["entry"]["rejection"]["message"].as_str().unwrap();
    assert!(
        message.contains("9999999999999999999999999998.000000000000000001 already refunded"),
        "{message}"
    );
    let whole = posted(
        &server,
        "/v1/refunds",
        &key,
        &refund("r4", "0.999999999999999999"),
    )
    .await;
    assert_eq!(whole["balance_after"], "0");
    rejected(
        &server,
        "/v1/refunds",
        &key,
        &refund("r5", "0.000000000000000001"),
        "refund_exceeds_payment",
    )
    .await;
    let balance = server.balance(&key, "cust").await;
    assert_eq!(
        (&balance["debits"], &balance["credits"]),
        (&json!(NINES), &json!(NINES))
    );
    // A new process reads the refunded total back exactly.
    server.terminate().await;
    let server = ledger.server().await;
    rejected(
        &server,
        "/v1/refunds",
        &key,
        &refund("r6", "0.000000000000000001"),
        "refund_exceeds_payment",
    )
    .await;
    every_read_answers(&ledger, &server, &key, "cust").await;
}

async fn a_revenue_account_past_28_digits_takes_debits_after_a_restart(engine: Engine) {
    let ledger = Ledger::new(engine).await;
    let key = ledger.key("acme", ALL).await;
    let server = ledger.server().await;
    posted(&server, "/v1/usage-debits", &key, &debit("u1", "a", NINES)).await;
    posted(&server, "/v1/usage-debits", &key, &debit("u2", "b", NINES)).await;
    server.terminate().await;

    // A new process loads @revenue's stored totals from the database.
    let server = ledger.server().await;
    posted(&server, "/v1/usage-debits", &key, &debit("u3", "c", "0.5")).await;
    let revenue = server
        .get("/v1/accounts/@revenue/balance?unit=USD", &key)
        .await;
    assert_eq!(revenue.status, 200, "{revenue:?}");
    assert_eq!(revenue.json()["credits"], "19999999999999999999999999998.5");
    every_read_answers(&ledger, &server, &key, "@revenue").await;
    every_read_answers(&ledger, &server, &key, "a").await;
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

async fn statement_movements_past_28_digits_are_exact(engine: Engine) {
    let ledger = Ledger::new(engine).await;
    let key = ledger.key("acme", ALL).await;
    let server = ledger.server().await;
    // The last two entries together move 9799999999999999999999999999.5.
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
    // The last part's sum, 9799999999999999999999999998.5, is added to the
    // first's exactly.
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

/// A database written by an earlier version may hold a total of 29 digits
/// that its log does not fold to: it reads back, and the account takes
/// entries.
async fn a_29_digit_total_stored_by_an_earlier_version_reads_and_takes_writes(engine: Engine) {
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
    let r = posted(&server, "/v1/usage-debits", &key, &debit("u2", "cust", "1")).await;
    assert_eq!(r["balance_after"], "-19999999999999999999999999999");
}
