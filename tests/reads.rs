//! Reading the ledger: entries, pagination, filters, balances as of a seq.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::str::FromStr;

use common::{debit, Engine, Ledger};
use rust_decimal::Decimal;
use serde_json::json;

engine_tests!(
    entries_are_filtered_and_paginated_in_seq_order,
    a_balance_as_of_any_seq_equals_the_fold_to_that_seq,
    health_answers_when_the_database_does,
);

async fn entries_are_filtered_and_paginated_in_seq_order(engine: Engine) {
    let ledger = Ledger::new(engine).await;
    let key = ledger.key("acme", "post,read").await;
    let server = ledger.server().await;
    for i in 0..25 {
        let account = if i % 2 == 0 { "even" } else { "odd" };
        assert_eq!(
            server
                .post(
                    "/v1/usage-debits",
                    &key,
                    &debit(&format!("u{i}"), account, "1")
                )
                .await
                .status,
            201
        );
    }
    let pay = json!({"payment_id": "p1", "account": "odd", "amount": "3", "unit": "USD"});
    assert_eq!(server.post("/v1/payments", &key, &pay).await.status, 201);

    let mut seen = Vec::new();
    let mut after = 0;
    loop {
        let page = server
            .get(&format!("/v1/entries?limit=10&after_seq={after}"), &key)
            .await
            .json();
        let entries = page["entries"].as_array().unwrap();
        seen.extend(entries.iter().map(|e| e["seq"].as_i64().unwrap()));
        match page["next_after_seq"].as_i64() {
            Some(n) => {
                assert_eq!(entries.len(), 10);
                after = n
            }
            None => break,
        }
    }
    assert_eq!(seen, (1..=26).collect::<Vec<i64>>());

    let odd = server.get("/v1/entries?account=odd", &key).await.json();
    assert_eq!(odd["entries"].as_array().unwrap().len(), 13);
    let payments = server.get("/v1/entries?kind=payment", &key).await.json();
    assert_eq!(payments["entries"].as_array().unwrap().len(), 1);
    assert_eq!(payments["entries"][0]["upstream_id"], "p1");
    let revenue = server
        .get("/v1/entries?account=@revenue&limit=1000", &key)
        .await
        .json();
    assert_eq!(revenue["entries"].as_array().unwrap().len(), 25);
    let future = server
        .get("/v1/entries?from=2999-01-01T00:00:00Z", &key)
        .await
        .json();
    assert_eq!(future["entries"].as_array().unwrap().len(), 0);
    let past = server
        .get("/v1/entries?to=2000-01-01T00:00:00Z", &key)
        .await
        .json();
    assert_eq!(past["entries"].as_array().unwrap().len(), 0);
    let window = server
        .get(
            "/v1/entries?from=2000-01-01T00:00:00Z&to=2999-01-01T00:00:00Z&limit=5",
            &key,
        )
        .await
        .json();
    assert_eq!(window["entries"].as_array().unwrap().len(), 5);

    for bad in [
        "limit=0",
        "limit=1001",
        "kind=refund_maybe",
        "after_seq=-1",
        "colour=red",
        "from=yesterday",
        "limit=5&limit=6",
    ] {
        let r = server.get(&format!("/v1/entries?{bad}"), &key).await;
        assert_eq!(
            (r.status, r.code().as_str()),
            (422, "invalid_request"),
            "{bad}"
        );
    }
    let r = server.get("/v1/entries/ent_nope", &key).await;
    assert_eq!((r.status, r.code().as_str()), (404, "not_found"));
}

async fn a_balance_as_of_any_seq_equals_the_fold_to_that_seq(engine: Engine) {
    let ledger = Ledger::new(engine).await;
    let key = ledger.key("acme", "post,read").await;
    let server = ledger.server().await;
    let mut expected = Vec::new();
    let mut posted = Decimal::ZERO;
    for i in 0..12 {
        let r = if i % 4 == 3 {
            posted += Decimal::from_str("5.5").unwrap();
            server
                .post(
                    "/v1/payments",
                    &key,
                    &json!({"payment_id": format!("p{i}"), "account": "cust", "amount": "5.5", "unit": "USD"}),
                )
                .await
        } else if i % 4 == 1 {
            // Someone else's entry: cust's balance does not move.
            server
                .post(
                    "/v1/usage-debits",
                    &key,
                    &debit(&format!("o{i}"), "other", "9"),
                )
                .await
        } else {
            posted -= Decimal::from_str("1.25").unwrap();
            server
                .post(
                    "/v1/usage-debits",
                    &key,
                    &debit(&format!("u{i}"), "cust", "1.25"),
                )
                .await
        };
        assert_eq!(r.status, 201);
        expected.push(posted);
    }
    for (i, want) in expected.iter().enumerate() {
        let seq = i + 1;
        let b = server
            .get(&format!("/v1/accounts/cust/balance?as_of_seq={seq}"), &key)
            .await
            .json();
        assert_eq!(b["as_of_seq"], seq as i64);
        assert_eq!(
            Decimal::from_str(b["posted"].as_str().unwrap()).unwrap(),
            *want,
            "seq {seq}"
        );
    }
    let now = server.balance(&key, "cust").await;
    assert_eq!(now["as_of_seq"], 12);
    assert_eq!(
        server
            .get("/v1/accounts/cust/balance?as_of_seq=12", &key)
            .await
            .json(),
        now
    );
    assert_eq!(now["available"], now["posted"]);
    assert_eq!(now["held"], "0");
    let zero = server
        .get("/v1/accounts/cust/balance?as_of_seq=0", &key)
        .await
        .json();
    assert_eq!(zero["posted"], "0");
    let r = server
        .get("/v1/accounts/cust/balance?as_of_seq=13", &key)
        .await;
    assert_eq!((r.status, r.code().as_str()), (422, "invalid_request"));
    let r = server.get("/v1/accounts/nobody/balance", &key).await;
    assert_eq!((r.status, r.code().as_str()), (404, "not_found"));
}

async fn health_answers_when_the_database_does(engine: Engine) {
    let ledger = Ledger::new(engine).await;
    let server = ledger.server().await;
    let r = server
        .send(server.client.get(format!("{}/healthz", server.base)))
        .await;
    assert_eq!(r.status, 200);
    assert_eq!(r.json()["status"], "ok");
}
