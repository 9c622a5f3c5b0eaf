//! Many real concurrent clients, one or several real server processes.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::collections::BTreeMap;
use std::str::FromStr;
use std::sync::Arc;

use common::{debit, Engine, Ledger, Resp, Server};
use serde_json::{json, Value};

engine_tests!(
    fifty_concurrent_identical_requests_make_one_entry,
    two_servers_on_one_database_make_one_entry_per_upstream_id,
    two_hundred_concurrent_distinct_debits_stay_exact,
    servers_taking_turns_on_one_account_never_decide_on_a_stale_balance,
    a_rebuild_makes_a_running_writer_read_balances_again,
    a_full_writer_queue_answers_429_with_retry_after,
);

/// Sends every (server, path, body) at once from its own task.
async fn all_at_once(calls: Vec<(Arc<Server>, &'static str, Value)>, key: &str) -> Vec<Resp> {
    let barrier = Arc::new(tokio::sync::Barrier::new(calls.len()));
    let tasks: Vec<_> = calls
        .into_iter()
        .map(|(server, path, body)| {
            let key = key.to_owned();
            let barrier = barrier.clone();
            tokio::spawn(async move {
                barrier.wait().await;
                server.post(path, &key, &body).await
            })
        })
        .collect();
    let mut out = Vec::new();
    for t in tasks {
        out.push(t.await.unwrap());
    }
    out
}

fn assert_one_created_rest_replayed(answers: &[Resp]) {
    let created: Vec<&Resp> = answers.iter().filter(|r| r.status == 201).collect();
    assert_eq!(created.len(), 1, "exactly one 201");
    for r in answers {
        assert!(
            r.status == 201 || (r.status == 200 && r.replayed()),
            "{r:?}"
        );
        assert_eq!(
            r.body, created[0].body,
            "every caller receives the one entry"
        );
    }
}

async fn fifty_concurrent_identical_requests_make_one_entry(engine: Engine) {
    let ledger = Ledger::new(engine).await;
    let key = ledger.key("acme", "post,read").await;
    let server = Arc::new(ledger.server().await);
    let body = debit("ur_same", "cust", "0.25");
    let calls = (0..50)
        .map(|_| (server.clone(), "/v1/usage-debits", body.clone()))
        .collect();
    let answers = all_at_once(calls, &key).await;
    assert_one_created_rest_replayed(&answers);
    assert_eq!(ledger.count("entries").await, 1);
    assert_eq!(server.balance(&key, "cust").await["posted"], "-0.25");
}

async fn two_servers_on_one_database_make_one_entry_per_upstream_id(engine: Engine) {
    let ledger = Ledger::new(engine).await;
    let key = ledger.key("acme", "post,read").await;
    let a = Arc::new(ledger.server().await);
    let b = Arc::new(ledger.server().await);
    let same = debit("ur_same", "cust", "1");
    let mut calls: Vec<(Arc<Server>, &'static str, Value)> = (0..50)
        .map(|i| {
            (
                if i % 2 == 0 { a.clone() } else { b.clone() },
                "/v1/usage-debits",
                same.clone(),
            )
        })
        .collect();
    // Plus 40 distinct requests, each sent to both servers at once.
    for i in 0..40 {
        let body = debit(&format!("ur_{i}"), &format!("cust_{}", i % 4), "0.5");
        calls.push((a.clone(), "/v1/usage-debits", body.clone()));
        calls.push((b.clone(), "/v1/usage-debits", body));
    }
    let answers = all_at_once(calls, &key).await;
    assert_one_created_rest_replayed(&answers[..50]);
    for pair in answers[50..].chunks(2) {
        let statuses = [pair[0].status, pair[1].status];
        assert!(
            statuses.contains(&201) && statuses.iter().all(|s| *s == 201 || *s == 200),
            "{pair:?}"
        );
        assert_eq!(pair[0].body, pair[1].body);
    }
    let entries = a.all_entries(&key).await;
    assert_eq!(entries.len(), 41);
    for (i, e) in entries.iter().enumerate() {
        assert_eq!(e["seq"], (i + 1) as i64, "gap-free across processes");
    }
    assert_eq!(b.balance(&key, "cust_0").await["posted"], "-5");
    let (ok, out, _) = ledger.tally(&["verify"]).await;
    assert!(ok, "{out}");
}

/// Each writer remembers the balances it wrote (ledger/src/group/memory.rs);
/// another process writing in between must make it read them again.
async fn servers_taking_turns_on_one_account_never_decide_on_a_stale_balance(engine: Engine) {
    let ledger = Ledger::new(engine).await;
    let key = ledger.key("acme", "post,read,admin").await;
    let a = ledger.server().await;
    let b = ledger.server().await;
    // cust may go 10 below zero: the 11th unit debit must be refused, and
    // only a writer that sees the other's debits can tell which one that is.
    let settings = a
        .put(
            "/v1/accounts/cust",
            &key,
            &json!({"unit": "USD", "overdraft": {"limit": "10"}}),
        )
        .await;
    assert_eq!(settings.status, 200, "{settings:?}");
    for i in 0..12 {
        let server = if i % 2 == 0 { &a } else { &b };
        let r = server
            .post(
                "/v1/usage-debits",
                &key,
                &debit(&format!("turn_{i}"), "cust", "1"),
            )
            .await;
        if i < 10 {
            assert_eq!(r.status, 201, "debit {i}: {r:?}");
        } else {
            assert_eq!(
                (r.status, r.code().as_str()),
                (422, "insufficient_funds"),
                "debit {i}: {r:?}"
            );
        }
    }
    assert_eq!(a.balance(&key, "cust").await["posted"], "-10");
    assert_eq!(b.balance(&key, "cust").await["posted"], "-10");
    let (ok, out, _) = ledger.tally(&["verify"]).await;
    assert!(ok, "{out}");
}

/// A writer that remembered a wrong stored balance must not write it back
/// after `tally projections rebuild` repaired it.
async fn a_rebuild_makes_a_running_writer_read_balances_again(engine: Engine) {
    let ledger = Ledger::new(engine).await;
    let key = ledger.key("acme", "post,read").await;
    let server = ledger.server().await;
    let other = ledger.server().await;
    let first = debit("before", "cust", "1");
    assert_eq!(
        other.post("/v1/usage-debits", &key, &first).await.status,
        201
    );
    // Damage the projection behind the servers' backs, let a writer read
    // the damage, then repair it.
    ledger
        .sql(&["UPDATE balances SET debits = 500 WHERE account = 'cust'"])
        .await;
    assert_eq!(
        server
            .post("/v1/usage-debits", &key, &debit("damaged", "cust", "2"))
            .await
            .status,
        201
    );
    let (ok, out, err) = ledger.tally(&["projections", "rebuild"]).await;
    assert!(ok, "{out}{err}");
    assert_eq!(server.balance(&key, "cust").await["posted"], "-3");
    assert_eq!(
        server
            .post("/v1/usage-debits", &key, &debit("after", "cust", "4"))
            .await
            .status,
        201
    );
    assert_eq!(server.balance(&key, "cust").await["posted"], "-7");
    // The entry decided on the damaged balance recorded it in its
    // balance_after, which is immutable: verify names exactly that one.
    let (ok, out, _) = ledger.tally(&["verify"]).await;
    assert!(!ok, "{out}");
    assert!(
        out.contains("seq 2: balance_after is -502 but the log folds to -3"),
        "{out}"
    );
}

async fn two_hundred_concurrent_distinct_debits_stay_exact(engine: Engine) {
    let ledger = Ledger::new(engine).await;
    let key = ledger.key("acme", "post,read").await;
    let server = Arc::new(ledger.server().await);
    // Fix cust_9's unit to credits first, so USD debits to it must be refused.
    let mut credits = debit("setup", "cust_9", "1");
    credits["unit"] = json!("credits");
    assert_eq!(
        server.post("/v1/usage-debits", &key, &credits).await.status,
        201
    );

    let mut expected: BTreeMap<String, rust_decimal::Decimal> = BTreeMap::new();
    let mut calls = Vec::new();
    for i in 0..200 {
        let account = format!("cust_{}", i % 9);
        let amount = format!("{}.{:03}", i % 7 + 1, (i * 37) % 1000);
        *expected.entry(account.clone()).or_default() -=
            rust_decimal::Decimal::from_str(&amount).unwrap();
        calls.push((
            server.clone(),
            "/v1/usage-debits",
            debit(&format!("ur_{i}"), &account, &amount),
        ));
    }
    // Refusals and conflicts mixed into the same groups must not abort the others.
    for i in 0..20 {
        calls.push((
            server.clone(),
            "/v1/usage-debits",
            debit(&format!("bad_{i}"), "cust_9", "1"),
        ));
    }
    calls.push((
        server.clone(),
        "/v1/usage-debits",
        debit("setup", "cust_9", "99"),
    ));
    let answers = all_at_once(calls, &key).await;
    for r in &answers[..200] {
        assert_eq!(r.status, 201, "{r:?}");
    }
    for r in &answers[200..220] {
        assert_eq!((r.status, r.code().as_str()), (422, "unit_mismatch"));
    }
    assert_eq!(answers[220].status, 409);

    let entries = server.all_entries(&key).await;
    assert_eq!(entries.len(), 201);
    for (i, e) in entries.iter().enumerate() {
        assert_eq!(e["seq"], (i + 1) as i64, "gap-free seq");
    }
    let mut usd_total = rust_decimal::Decimal::ZERO;
    for (account, want) in &expected {
        let b = server.balance(&key, account).await;
        let posted = rust_decimal::Decimal::from_str(b["posted"].as_str().unwrap()).unwrap();
        assert_eq!(posted, *want, "{account}");
        usd_total += posted;
    }
    let revenue = server
        .get("/v1/accounts/@revenue/balance?unit=USD", &key)
        .await
        .json();
    usd_total += rust_decimal::Decimal::from_str(revenue["posted"].as_str().unwrap()).unwrap();
    assert_eq!(
        usd_total,
        rust_decimal::Decimal::ZERO,
        "double entry: a unit sums to zero"
    );
    let (ok, out, _) = ledger.tally(&["verify"]).await;
    assert!(ok, "{out}");
}

async fn a_full_writer_queue_answers_429_with_retry_after(engine: Engine) {
    let ledger = Ledger::new(engine).await;
    let key = ledger.key("acme", "post,read").await;
    // Ten requests fill the queue; the writer lingers so they stay queued.
    let server = Arc::new(
        ledger
            .server_with(&["--queue-capacity", "10", "--linger-ms", "800"])
            .await,
    );
    let ops: Vec<Value> = (0..10)
        .map(|i| {
            let mut b = debit(&format!("b{i}"), "cust", "1");
            b["type"] = json!("usage_debit");
            b
        })
        .collect();
    let batch = {
        let server = server.clone();
        let key = key.clone();
        tokio::spawn(async move {
            server
                .post("/v1/batch", &key, &json!({"operations": ops}))
                .await
        })
    };
    common::wait::until_queued(&server, 10.0).await;
    let r = server
        .post("/v1/usage-debits", &key, &debit("late", "cust", "1"))
        .await;
    assert_eq!(
        (r.status, r.code().as_str()),
        (429, "rate_limited"),
        "{r:?}"
    );
    assert_eq!(r.headers.get("retry-after").unwrap(), "1");
    assert_eq!(batch.await.unwrap().status, 200);
    // Refused at the door means not queued: the retry is the first post.
    let retry = server
        .post("/v1/usage-debits", &key, &debit("late", "cust", "1"))
        .await;
    assert_eq!(retry.status, 201, "{retry:?}");
    assert_eq!(ledger.count("entries").await, 11);
}
