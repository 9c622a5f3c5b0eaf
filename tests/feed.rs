//! The long-polling entry feed (`GET /v1/entries?after_seq=N&wait_ms=M`)
//! and `alerts.low_balance` of account settings, on both engines.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::{Duration, Instant};

use common::{debit, Engine, Ledger, Server};
use serde_json::json;

engine_tests!(
    a_long_poll_answers_as_soon_as_an_entry_is_committed,
    a_long_poll_answers_empty_after_its_wait_and_refuses_a_longer_one,
    a_long_poll_sees_another_process_commit,
    low_balance_alerts_are_account_settings,
);

fn seqs(page: &serde_json::Value) -> Vec<i64> {
    page["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["seq"].as_i64().unwrap())
        .collect()
}

async fn a_long_poll_answers_as_soon_as_an_entry_is_committed(engine: Engine) {
    let ledger = Ledger::new(engine).await;
    let key = ledger.key("acme", "post,read").await;
    let server = std::sync::Arc::new(ledger.server().await);
    assert_eq!(
        server
            .post("/v1/usage-debits", &key, &debit("u1", "a", "1"))
            .await
            .status,
        201
    );

    // Waiting for the entry after seq 1, filtered on account "b": an entry
    // of another account does not end the wait, one of "b" does.
    let waiter = {
        let (server, key) = (server.clone(), key.clone());
        tokio::spawn(async move {
            let started = Instant::now();
            let page = server
                .get("/v1/entries?after_seq=1&account=b&wait_ms=20000", &key)
                .await;
            (page.status, page.json(), started.elapsed())
        })
    };
    tokio::time::sleep(Duration::from_millis(400)).await;
    assert!(!waiter.is_finished(), "answered before any entry existed");
    assert_eq!(
        server
            .post("/v1/usage-debits", &key, &debit("u2", "a", "1"))
            .await
            .status,
        201
    );
    tokio::time::sleep(Duration::from_millis(400)).await;
    assert!(
        !waiter.is_finished(),
        "an entry of another account ended the wait"
    );
    let posted = Instant::now();
    assert_eq!(
        server
            .post("/v1/usage-debits", &key, &debit("u3", "b", "1"))
            .await
            .status,
        201
    );
    let (status, page, waited) = waiter.await.unwrap();
    assert_eq!(status, 200);
    assert_eq!(seqs(&page), vec![3]);
    assert!(
        posted.elapsed() < Duration::from_secs(2),
        "answered {:?} after the commit",
        posted.elapsed()
    );
    assert!(waited < Duration::from_secs(10));

    // An entry already there answers at once, whatever the wait.
    let started = Instant::now();
    let page = server
        .get("/v1/entries?after_seq=0&wait_ms=30000", &key)
        .await;
    assert_eq!(seqs(&page.json()), vec![1, 2, 3]);
    assert!(started.elapsed() < Duration::from_secs(2));
}

async fn a_long_poll_answers_empty_after_its_wait_and_refuses_a_longer_one(engine: Engine) {
    let ledger = Ledger::new(engine).await;
    let key = ledger.key("acme", "post,read").await;
    let server = ledger.server().await;
    let started = Instant::now();
    let page = server
        .get("/v1/entries?after_seq=0&wait_ms=700", &key)
        .await;
    let waited = started.elapsed();
    assert_eq!(page.status, 200);
    assert_eq!(page.json(), json!({"entries": [], "next_after_seq": null}));
    assert!(
        waited >= Duration::from_millis(650),
        "waited only {waited:?}"
    );
    assert!(waited < Duration::from_secs(5), "waited {waited:?}");

    for bad in ["wait_ms=30001", "wait_ms=-1", "wait_ms=soon"] {
        let r = server.get(&format!("/v1/entries?{bad}"), &key).await;
        assert_eq!(r.status, 422, "{bad}");
        assert_eq!(r.json()["errors"][0]["field"], "wait_ms", "{bad}");
    }

    // Another tenant's entry never wakes this tenant's waiter with data.
    let other = ledger.key("other", "post,read").await;
    let server = std::sync::Arc::new(server);
    let waiter = {
        let (server, key) = (server.clone(), key.clone());
        tokio::spawn(async move { server.get("/v1/entries?wait_ms=1500", &key).await.json() })
    };
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(
        server
            .post("/v1/usage-debits", &other, &debit("x", "a", "1"))
            .await
            .status,
        201
    );
    assert_eq!(waiter.await.unwrap()["entries"], json!([]));
}

/// Several `tally serve` on one database (PostgreSQL in production; two
/// processes on one SQLite file behave alike).
async fn a_long_poll_sees_another_process_commit(engine: Engine) {
    let ledger = Ledger::new(engine).await;
    let key = ledger.key("acme", "post,read").await;
    let reader = std::sync::Arc::new(ledger.server().await);
    let writer: Server = ledger.server().await;
    let waiter = {
        let (reader, key) = (reader.clone(), key.clone());
        tokio::spawn(async move {
            reader
                .get("/v1/entries?after_seq=0&wait_ms=15000", &key)
                .await
                .json()
        })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    let posted = Instant::now();
    assert_eq!(
        writer
            .post("/v1/usage-debits", &key, &debit("u1", "a", "1"))
            .await
            .status,
        201
    );
    let page = waiter.await.unwrap();
    assert_eq!(seqs(&page), vec![1]);
    assert!(
        posted.elapsed() < Duration::from_secs(3),
        "{:?}",
        posted.elapsed()
    );
}

async fn low_balance_alerts_are_account_settings(engine: Engine) {
    let ledger = Ledger::new(engine).await;
    let key = ledger.key("acme", "post,read,admin").await;
    let server = ledger.server().await;
    let set = json!({"unit": "USD", "alerts": {"low_balance": "10.50"}});
    let r = server.put("/v1/accounts/cust_1", &key, &set).await;
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    assert_eq!(r.json()["alerts"], json!({"low_balance": "10.5"}));
    assert_eq!(r.json()["settings_version"], 1);
    // The same settings write nothing; a number converts exactly.
    let same = json!({"unit": "USD", "alerts": {"low_balance": 10.5}});
    assert_eq!(
        server.put("/v1/accounts/cust_1", &key, &same).await.json()["settings_version"],
        1
    );
    // A negative threshold is allowed (postpaid accounts).
    let negative = json!({"unit": "USD", "alerts": {"low_balance": "-100"}});
    assert_eq!(
        server
            .put("/v1/accounts/cust_1", &key, &negative)
            .await
            .json()["settings_version"],
        2
    );
    // Removing the alert is a change too; the entry shows what was set.
    let none = json!({"unit": "USD", "alerts": {}});
    let r = server.put("/v1/accounts/cust_1", &key, &none).await.json();
    assert_eq!(r["settings_version"], 3);
    assert_eq!(r["alerts"], json!({}));
    let entries = server
        .get("/v1/entries?kind=account_settings", &key)
        .await
        .json();
    let alerts: Vec<_> = entries["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["alerts"].clone())
        .collect();
    assert_eq!(
        alerts,
        vec![
            json!({"low_balance": "10.5"}),
            json!({"low_balance": "-100"}),
            serde_json::Value::Null
        ]
    );

    for bad in [
        json!({"unit": "USD", "alerts": {"low_balance": "ten"}}),
        json!({"unit": "USD", "alerts": {"high_balance": "1"}}),
        json!({"unit": "USD", "alerts": "10"}),
        json!({"unit": "USD", "alerts": {"low_balance": "1.0000000000000000001"}}),
    ] {
        let r = server.put("/v1/accounts/cust_2", &key, &bad).await;
        assert_eq!(r.status, 422, "{bad}");
        assert_eq!(r.json()["errors"][0]["field"], "alerts", "{bad}");
    }
    assert_eq!(
        server.get("/v1/accounts/cust_2", &key).await.status,
        404,
        "nothing written"
    );
    drop(server);
    let (ok, out, err) = ledger.tally(&["verify"]).await;
    assert!(ok, "tally verify: {out}{err}");
}
