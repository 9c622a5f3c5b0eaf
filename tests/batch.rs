//! `POST /v1/batch`: independent items, in order, one decision path with the
//! single endpoints.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::collections::HashMap;
use std::sync::Arc;

use common::{debit, Engine, Ledger};
use serde_json::{json, Value};

engine_tests!(
    mixed_items_are_answered_independently_in_order,
    the_same_key_twice_in_a_batch_is_a_replay_or_a_conflict,
    a_batch_item_answers_exactly_what_the_single_endpoint_answers,
    oversized_and_malformed_batches_write_nothing,
    batches_and_single_requests_racing_on_the_same_keys_post_each_once,
    replays_after_a_long_run_of_new_keys_are_still_replays,
);

fn op(kind: &str, mut body: Value) -> Value {
    body["type"] = json!(kind);
    body
}

/// Posts a batch that must be taken (200): its results and their statuses,
/// in request order.
async fn post_batch(server: &common::Server, key: &str, ops: &Value) -> (Vec<Value>, Vec<i64>) {
    let r = server.post("/v1/batch", key, ops).await;
    assert_eq!(r.status, 200, "{r:?}");
    let results = r.json()["results"].as_array().unwrap().clone();
    let statuses = results
        .iter()
        .map(|x| x["status"].as_i64().unwrap())
        .collect();
    (results, statuses)
}

async fn mixed_items_are_answered_independently_in_order(engine: Engine) {
    let ledger = Ledger::new(engine).await;
    let key = ledger.key("acme", "post,read").await;
    let server = ledger.server().await;
    let ops = json!({"operations": [
        op("usage_debit", debit("u1", "cust", "1.5")),
        op("payment", json!({"payment_id": "p1", "account": "cust", "amount": "10", "unit": "USD"})),
        op("usage_debit", debit("u2", "cust", "0")),
        op("refund_maybe", debit("u3", "cust", "1")),
        "not an object",
        op("usage_debit", debit("u4", "@revenue", "1")),
        op("usage_debit", debit("u5", "cust", "2")),
    ]});
    let (results, statuses) = post_batch(&server, &key, &ops).await;
    assert_eq!(statuses, vec![201, 201, 422, 422, 422, 422, 201]);
    assert_eq!(results[0]["entry"]["seq"], 1);
    assert_eq!(results[1]["entry"]["seq"], 2);
    assert_eq!(results[6]["entry"]["seq"], 3);
    assert_eq!(results[6]["entry"]["balance_after"], "6.5");
    assert_eq!(results[2]["problem"]["code"], "invalid_request");
    assert_eq!(results[2]["problem"]["errors"][0]["field"], "amount");
    assert_eq!(results[3]["problem"]["errors"][0]["field"], "type");
    assert_eq!(results[5]["problem"]["errors"][0]["field"], "account");
    assert!(results.iter().all(|x| x["replayed"] == false));
    assert_eq!(ledger.count("entries").await, 3);
}

async fn the_same_key_twice_in_a_batch_is_a_replay_or_a_conflict(engine: Engine) {
    let ledger = Ledger::new(engine).await;
    let key = ledger.key("acme", "post,read").await;
    let server = ledger.server().await;
    let ops = json!({"operations": [
        op("usage_debit", debit("u1", "cust", "1.50")),
        op("usage_debit", debit("u1", "cust", "1.5")),
        op("usage_debit", debit("u1", "cust", "3")),
        op("usage_debit", debit("u2", "cust", "1")),
        op("payment", json!({"payment_id": "u1", "account": "cust", "amount": "1", "unit": "USD"})),
    ]});
    let (results, statuses) = post_batch(&server, &key, &ops).await;
    assert_eq!(statuses, vec![201, 200, 409, 201, 201]);
    assert_eq!(results[1]["replayed"], true);
    assert_eq!(results[1]["entry"], results[0]["entry"]);
    assert_eq!(results[2]["problem"]["code"], "idempotency_conflict");
    assert_eq!(results[2]["problem"]["entry_id"], results[0]["entry"]["id"]);
    assert_eq!(results[2]["problem"]["differing_fields"], json!(["amount"]));
    assert_eq!(ledger.count("entries").await, 3);
    // The whole batch again: every item a replay of the same entries.
    let again = server.post("/v1/batch", &key, &ops).await.json();
    let again = again["results"].as_array().unwrap();
    assert_eq!(again[0]["status"], 200);
    assert_eq!(again[0]["entry"], results[0]["entry"]);
    assert_eq!(again[3]["entry"], results[3]["entry"]);
    assert_eq!(again[2]["status"], 409);
    assert_eq!(ledger.count("entries").await, 3);
    let (ok, out, _) = ledger.tally(&["verify"]).await;
    assert!(ok, "{out}");
}

async fn a_batch_item_answers_exactly_what_the_single_endpoint_answers(engine: Engine) {
    let ledger = Ledger::new(engine).await;
    let key = ledger.key("acme", "post,read").await;
    let server = ledger.server().await;
    let a = debit("u1", "cust", "2");
    let batch = server
        .post(
            "/v1/batch",
            &key,
            &json!({"operations": [op("usage_debit", a.clone())]}),
        )
        .await
        .json();
    let item = &batch["results"][0];
    let single = server.post("/v1/usage-debits", &key, &a).await;
    assert_eq!(single.status, 200);
    assert!(single.replayed());
    assert_eq!(single.json(), item["entry"]);

    let mut conflicting = a.clone();
    conflicting["amount"] = json!("3");
    let single = server.post("/v1/usage-debits", &key, &conflicting).await;
    let batch = server
        .post(
            "/v1/batch",
            &key,
            &json!({"operations": [op("usage_debit", conflicting)]}),
        )
        .await
        .json();
    assert_eq!(single.status, 409);
    assert_eq!(batch["results"][0]["status"], 409);
    assert_eq!(single.json(), batch["results"][0]["problem"]);
}

async fn oversized_and_malformed_batches_write_nothing(engine: Engine) {
    let ledger = Ledger::new(engine).await;
    let key = ledger.key("acme", "post,read").await;
    let reader = ledger.key("acme", "read").await;
    let server = ledger.server().await;
    let ops: Vec<Value> = (0..1001)
        .map(|i| op("usage_debit", debit(&format!("u{i}"), "cust", "1")))
        .collect();
    let r = server
        .post("/v1/batch", &key, &json!({"operations": ops}))
        .await;
    assert_eq!((r.status, r.code().as_str()), (422, "invalid_request"));
    assert_eq!(r.json()["errors"][0]["field"], "operations");
    for bad in [
        json!({"operations": []}),
        json!({"operations": {}}),
        json!({}),
        json!({"operations": [], "extra": 1}),
    ] {
        let r = server.post("/v1/batch", &key, &bad).await;
        assert_eq!(
            (r.status, r.code().as_str()),
            (422, "invalid_request"),
            "{bad}"
        );
    }
    let r = server
        .post(
            "/v1/batch",
            &reader,
            &json!({"operations": [op("usage_debit", debit("u", "c", "1"))]}),
        )
        .await;
    assert_eq!(r.status, 403);
    assert_eq!(ledger.count("entries").await, 0);
    // Exactly 1,000 is fine.
    let ops: Vec<Value> = (0..1000)
        .map(|i| {
            op(
                "usage_debit",
                debit(&format!("u{i}"), &format!("c{}", i % 10), "0.01"),
            )
        })
        .collect();
    let r = server
        .post("/v1/batch", &key, &json!({"operations": ops}))
        .await;
    assert_eq!(r.status, 200);
    assert!(r.json()["results"]
        .as_array()
        .unwrap()
        .iter()
        .all(|x| x["status"] == 201));
    assert_eq!(ledger.count("entries").await, 1000);
}

async fn batches_and_single_requests_racing_on_the_same_keys_post_each_once(engine: Engine) {
    let ledger = Ledger::new(engine).await;
    let key = ledger.key("acme", "post,read").await;
    let server = Arc::new(ledger.server().await);
    // 300 keys; 6 batches of 100 overlapping keys each and 300 single posts.
    let body = |i: usize| debit(&format!("k{i}"), &format!("cust_{}", i % 7), "0.5");
    let mut tasks = Vec::new();
    for b in 0..6 {
        let server = server.clone();
        let key = key.clone();
        let ops: Vec<Value> = (0..100)
            .map(|j| op("usage_debit", body((b * 50 + j) % 300)))
            .collect();
        tasks.push(tokio::spawn(async move {
            let r = server
                .post("/v1/batch", &key, &json!({"operations": ops}))
                .await;
            assert_eq!(r.status, 200, "{r:?}");
            r.json()["results"].as_array().unwrap().clone()
        }));
    }
    for i in 0..300 {
        let server = server.clone();
        let key = key.clone();
        let b = body(i);
        tasks.push(tokio::spawn(async move {
            let r = server.post("/v1/usage-debits", &key, &b).await;
            vec![json!({"status": r.status, "entry": r.json()})]
        }));
    }
    let mut created: HashMap<String, usize> = HashMap::new();
    let mut ids: HashMap<String, Value> = HashMap::new();
    for t in tasks {
        for item in t.await.unwrap() {
            let status = item["status"].as_i64().unwrap();
            assert!(status == 201 || status == 200, "{item}");
            let upstream = item["entry"]["upstream_id"].as_str().unwrap().to_owned();
            if status == 201 {
                *created.entry(upstream.clone()).or_default() += 1;
            }
            let id = item["entry"]["id"].clone();
            assert_eq!(
                ids.entry(upstream).or_insert(id.clone()),
                &id,
                "one entry per key"
            );
        }
    }
    assert_eq!(created.len(), 300);
    assert!(created.values().all(|n| *n == 1), "exactly one 201 per key");
    assert_eq!(ledger.count("entries").await, 300);
    let (ok, out, _) = ledger.tally(&["verify"]).await;
    assert!(ok, "{out}");
}

/// The value of an unlabelled counter in the server's `/metrics`.
async fn counter(server: &common::Server, name: &str) -> u64 {
    common::metrics::scrape(server).await.get(name, &[]) as u64
}

async fn post_new_keys(server: &common::Server, key: &str, prefix: &str, n: usize) -> Vec<Value> {
    let ops: Vec<Value> = (0..n)
        .map(|i| op("usage_debit", debit(&format!("{prefix}{i}"), "cust", "1")))
        .collect();
    let (results, statuses) = post_batch(server, key, &json!({ "operations": ops })).await;
    assert!(statuses.iter().all(|s| *s == 201), "{results:?}");
    results
}

/// After a long run of new keys the server stops looking keys up before
/// its writer (the UNIQUE constraint decides): a replay or a conflict sent
/// then is still answered with the committed entry, and posts nothing.
async fn replays_after_a_long_run_of_new_keys_are_still_replays(engine: Engine) {
    let ledger = Ledger::new(engine).await;
    let key = ledger.key("acme", "post,read").await;
    // Nothing answered from recent entries: the keys must reach the writer.
    let server = ledger.server_with(&["--recent-entries-mib", "0"]).await;
    let first = post_new_keys(&server, &key, "a", 1_000).await;
    post_new_keys(&server, &key, "b", 1_000).await;
    let unlooked = counter(&server, "tally_writer_requests_not_looked_up_total").await;
    assert!(
        unlooked >= 1_000,
        "the second batch went unlooked: {unlooked}"
    );

    let r = server
        .post("/v1/usage-debits", &key, &debit("a7", "cust", "1"))
        .await;
    assert_eq!(r.status, 200, "{r:?}");
    assert!(r.replayed());
    assert_eq!(r.json(), first[7]["entry"]);
    assert_eq!(
        counter(&server, "tally_writer_groups_key_taken_total").await,
        1
    );

    // Unlooked again after another run; then a batch of a new key, a
    // replay, a conflict and the new key again.
    post_new_keys(&server, &key, "c", 1_000).await;
    let before = counter(&server, "tally_writer_requests_not_looked_up_total").await;
    let ops = json!({"operations": [
        op("usage_debit", debit("d0", "cust", "1")),
        op("usage_debit", debit("a8", "cust", "1")),
        op("usage_debit", debit("a9", "cust", "2")),
        op("usage_debit", debit("d0", "cust", "1")),
    ]});
    let (results, statuses) = post_batch(&server, &key, &ops).await;
    assert_eq!(statuses, vec![201, 200, 409, 200], "{results:?}");
    assert_eq!(
        counter(&server, "tally_writer_requests_not_looked_up_total").await,
        before + 4,
        "the mixed batch went unlooked"
    );
    assert_eq!(results[1]["entry"], first[8]["entry"]);
    assert_eq!(results[2]["problem"]["code"], "idempotency_conflict");
    assert_eq!(results[3]["entry"], results[0]["entry"]);
    assert_eq!(
        counter(&server, "tally_writer_groups_key_taken_total").await,
        2
    );
    assert_eq!(ledger.count("entries").await, 3_001);
    assert_eq!(server.balance(&key, "cust").await["debits"], "3001");
}
