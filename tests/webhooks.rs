//! Webhooks end to end (docs/events.md), on both engines: a real receiver
//! that verifies every signature, behind a proxy that drops connections
//! and goes down; `kill -9` of the delivering process; two processes on
//! one database; `balance.low` under concurrent debits; the SSRF guard.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
#[path = "webhooks/receiver.rs"]
mod receiver;

use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use axum::http::StatusCode;
use common::proxy::{Fault, Proxy};
use common::{debit, Engine, Ledger, Server};
use receiver::{Received, Receiver};
use serde_json::{json, Value};

engine_tests!(
    every_event_arrives_signed_through_errors_drops_and_an_outage,
    a_killed_process_leaves_nothing_undelivered,
    two_processes_never_send_one_event_at_once,
    balance_low_fires_once_per_crossing_under_concurrent_debits,
    endpoints_are_managed_and_private_addresses_refused,
    a_rotated_secret_signs_beside_the_new_one_and_410_disables,
    retry_after_is_a_floor_and_a_delivery_is_given_up_at_its_maximum_age,
);

/// A server whose schedule runs in milliseconds, receivers on loopback.
const FAST: &[(&str, &str)] = &[
    ("TALLY_WEBHOOK_ALLOW_INSECURE", "true"),
    ("TALLY_WEBHOOK_TIMEOUT_MS", "2000"),
    ("TALLY_WEBHOOK_RETRY_BASE_MS", "50"),
    ("TALLY_WEBHOOK_RETRY_MAX_MS", "400"),
    ("TALLY_WEBHOOK_POLL_MS", "50"),
];

async fn fast_server(ledger: &Ledger) -> Server {
    Server::start_with_env(&ledger.database_url, &[], FAST).await
}

/// Creates an endpoint; its secret is trusted by `receiver`.
async fn endpoint(
    server: &Server,
    key: &str,
    url: &str,
    types: &[&str],
    receiver: &Receiver,
) -> Value {
    let r = server
        .post(
            "/v1/webhook-endpoints",
            key,
            &json!({"url": url, "event_types": types}),
        )
        .await;
    assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.body));
    let created = r.json();
    receiver.trust(created["secret"].as_str().unwrap());
    created
}

/// Posts `n` debits in batches of 100; their entry ids.
async fn post_debits(server: &Server, key: &str, prefix: &str, n: usize) -> Vec<String> {
    let mut ids = Vec::new();
    for chunk in (0..n).collect::<Vec<_>>().chunks(100) {
        let operations: Vec<Value> = chunk
            .iter()
            .map(|i| {
                let mut d = debit(&format!("{prefix}{i}"), &format!("cust_{}", i % 7), "0.01");
                d["type"] = json!("usage_debit");
                d
            })
            .collect();
        let r = server
            .post("/v1/batch", key, &json!({"operations": operations}))
            .await;
        assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
        for result in r.json()["results"].as_array().unwrap() {
            assert_eq!(result["status"], 201);
            ids.push(result["entry"]["id"].as_str().unwrap().to_owned());
        }
    }
    ids
}

/// The entry ids of the `entry.posted` events received with a valid
/// signature; panics if one was not, or if one webhook-id came with two
/// different bodies.
fn delivered_entries(received: &[Received]) -> BTreeSet<String> {
    let mut bodies: HashMap<&str, &str> = HashMap::new();
    let mut out = BTreeSet::new();
    for r in received {
        assert!(r.verified, "a signature did not verify: {r:?}");
        let first = bodies.entry(&r.id).or_insert(&r.body);
        assert_eq!(*first, r.body, "one webhook-id, two bodies");
        assert_eq!(r.event["id"], r.id, "the body's id is the webhook-id");
        if r.event["type"] == "entry.posted" {
            out.insert(r.event["data"]["entry"]["id"].as_str().unwrap().to_owned());
        }
    }
    out
}

async fn every_event_arrives_signed_through_errors_drops_and_an_outage(engine: Engine) {
    let ledger = Ledger::new(engine).await;
    let key = ledger.key("acme", "post,read,admin").await;
    let receiver = Receiver::start().await;
    // The first two attempts of every event get 500.
    receiver.answer(|_, attempt| {
        if attempt <= 2 {
            (StatusCode::INTERNAL_SERVER_ERROR, None)
        } else {
            (StatusCode::OK, None)
        }
    });
    // A tenth of the answers never reach tally: the connection is cut.
    let proxy = Proxy::start(receiver.addr).await;
    proxy.set_fault(Fault::DropResponse(10));
    let server = fast_server(&ledger).await;
    let url = format!("{}/hook", proxy.url());
    let created = endpoint(&server, &key, &url, &["entry.posted"], &receiver).await;
    let endpoint_id = created["id"].as_str().unwrap().to_owned();

    let mut posted: BTreeSet<String> = post_debits(&server, &key, "a", 500)
        .await
        .into_iter()
        .collect();
    // Down for ten seconds in the middle.
    receiver
        .wait_for(Duration::from_secs(60), "a first part delivered", |r| {
            delivered_entries(r).len() >= 100
        })
        .await;
    proxy.down();
    posted.extend(post_debits(&server, &key, "b", 500).await);
    tokio::time::sleep(Duration::from_secs(10)).await;
    proxy.set_fault(Fault::DropResponse(10));
    assert_eq!(posted.len(), 1000);

    let expected = posted.clone();
    receiver
        .wait_for(
            Duration::from_secs(180),
            "every event delivered",
            move |r| delivered_entries(r).is_superset(&expected),
        )
        .await;
    let received = receiver.received();
    assert_eq!(
        delivered_entries(&received),
        posted,
        "nothing else was sent"
    );
    assert!(proxy.injected() > 0, "the proxy cut connections");

    // Every delivery is recorded delivered (the last answers may still be
    // on their way when the receiver has them all).
    let mut pending = usize::MAX;
    for _ in 0..100 {
        let p = server
            .get(
                &format!("/v1/webhook-endpoints/{endpoint_id}/deliveries?status=pending&limit=100"),
                &key,
            )
            .await
            .json();
        pending = p["deliveries"].as_array().unwrap().len();
        if pending == 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert_eq!(pending, 0, "deliveries still pending");
    // The deliveries list shows the failed attempts with their outcome.
    let page = server
        .get(
            &format!("/v1/webhook-endpoints/{endpoint_id}/deliveries?limit=100"),
            &key,
        )
        .await
        .json();
    let deliveries = page["deliveries"].as_array().unwrap();
    assert_eq!(deliveries.len(), 100);
    let outcomes: HashSet<&str> = deliveries
        .iter()
        .flat_map(|d| d["attempts"].as_array().unwrap())
        .map(|a| a["outcome"].as_str().unwrap())
        .collect();
    assert!(outcomes.contains("http_status"), "{outcomes:?}");
    assert!(outcomes.contains("delivered"), "{outcomes:?}");
    for d in deliveries {
        assert_eq!(d["status"], "delivered");
        let attempts = d["attempts"].as_array().unwrap();
        // The receiver answered 500 twice before its 200, each recorded.
        let errors = attempts.iter().filter(|a| a["http_status"] == 500).count();
        assert!(
            errors >= 2 || attempts.iter().any(|a| a["outcome"] == "connection"),
            "{d}"
        );
        assert_eq!(attempts.last().unwrap()["outcome"], "delivered", "{d}");
    }
    let metrics = server.get("/metrics", "").await;
    let text = String::from_utf8_lossy(&metrics.body);
    assert!(
        text.contains("tally_webhook_attempts_total{outcome=\"delivered\"}"),
        "{text}"
    );
    drop(server);
    let (ok, out, err) = ledger.tally(&["verify"]).await;
    assert!(ok, "{out}{err}");
}

async fn a_killed_process_leaves_nothing_undelivered(engine: Engine) {
    let ledger = Ledger::new(engine).await;
    let key = ledger.key("acme", "post,read,admin").await;
    let receiver = Receiver::start().await;
    receiver.delay(Duration::from_millis(20));
    let first = fast_server(&ledger).await;
    endpoint(&first, &key, &receiver.url(), &["entry.posted"], &receiver).await;
    let posted: BTreeSet<String> = post_debits(&first, &key, "k", 300)
        .await
        .into_iter()
        .collect();
    receiver
        .wait_for(Duration::from_secs(60), "deliveries under way", |r| {
            r.len() >= 30
        })
        .await;
    first.kill9().await;
    let got = delivered_entries(&receiver.received()).len();
    assert!(
        got < 300,
        "everything was delivered before the kill ({got})"
    );
    let _second = fast_server(&ledger).await;
    let expected = posted.clone();
    receiver
        .wait_for(
            Duration::from_secs(120),
            "every event after the restart",
            move |r| delivered_entries(r).is_superset(&expected),
        )
        .await;
    assert_eq!(delivered_entries(&receiver.received()), posted);
}

async fn two_processes_never_send_one_event_at_once(engine: Engine) {
    let ledger = Ledger::new(engine).await;
    let key = ledger.key("acme", "post,read,admin").await;
    let receiver = Receiver::start().await;
    // Slow answers: two senders of one event would overlap.
    receiver.delay(Duration::from_millis(30));
    let a = fast_server(&ledger).await;
    let b = fast_server(&ledger).await;
    endpoint(&a, &key, &receiver.url(), &["entry.posted"], &receiver).await;
    let mut posted = BTreeSet::new();
    for (i, server) in [&a, &b].into_iter().enumerate() {
        posted.extend(post_debits(server, &key, &format!("p{i}_"), 200).await);
    }
    let expected = posted.clone();
    receiver
        .wait_for(Duration::from_secs(120), "every event", move |r| {
            delivered_entries(r).is_superset(&expected)
        })
        .await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let received = receiver.received();
    assert_eq!(delivered_entries(&received), posted);
    assert_eq!(
        receiver.most_at_once(),
        1,
        "one event was being sent twice at once"
    );
    // Every event once: the receiver answered 2xx, so nothing was retried.
    assert_eq!(received.len(), posted.len(), "an event was sent twice");
}

async fn balance_low_fires_once_per_crossing_under_concurrent_debits(engine: Engine) {
    let ledger = Ledger::new(engine).await;
    let key = ledger.key("acme", "post,read,admin").await;
    let receiver = Receiver::start().await;
    let server = Arc::new(fast_server(&ledger).await);
    endpoint(&server, &key, &receiver.url(), &["balance.low"], &receiver).await;
    let pay =
        |id: &str| json!({"payment_id": id, "account": "cust_low", "amount": "100", "unit": "USD"});
    let settings = json!({"unit": "USD", "alerts": {"low_balance": "50"}});

    // Two rounds: 100 paid, 64 concurrent debits (crossing 50 once); then
    // 100 more (re-armed above 50) and 64 concurrent debits of 2 again.
    for (round, amount) in [(1, "1"), (2, "2")] {
        assert_eq!(
            server
                .post("/v1/payments", &key, &pay(&format!("pay{round}")))
                .await
                .status,
            201
        );
        if round == 1 {
            // Set at 100, above the threshold: no event (set on an empty
            // account it would fire at once: docs/events.md).
            assert_eq!(
                server
                    .put("/v1/accounts/cust_low", &key, &settings)
                    .await
                    .status,
                200
            );
        }
        let mut tasks = Vec::new();
        for i in 0..64 {
            let (server, key) = (server.clone(), key.clone());
            let body = debit(&format!("low{round}_{i}"), "cust_low", amount);
            tasks.push(tokio::spawn(async move {
                server.post("/v1/usage-debits", &key, &body).await.status
            }));
        }
        for t in tasks {
            assert_eq!(t.await.unwrap(), 201);
        }
    }
    receiver
        .wait_for(Duration::from_secs(60), "two balance.low events", |r| {
            r.iter().map(|x| &x.id).collect::<HashSet<_>>().len() >= 2
        })
        .await;
    // Nothing more comes.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let events: HashMap<String, Value> = receiver
        .received()
        .into_iter()
        .inspect(|r| assert!(r.verified))
        .map(|r| (r.id.clone(), r.event))
        .collect();
    assert_eq!(events.len(), 2, "{events:?}");
    // Each at the very entry that crossed: below after it, at or above before.
    let entries = server.all_entries(&key).await;
    let posted_after = |seq: i64| -> f64 {
        entries
            .iter()
            .rev()
            .find(|e| e["seq"].as_i64().unwrap() <= seq && e["kind"] != "account_settings")
            .map(|e| e["balance_after"].as_str().unwrap().parse().unwrap())
            .unwrap_or(0.0)
    };
    for event in events.values() {
        assert_eq!(event["type"], "balance.low");
        let seq = event["seq"].as_i64().unwrap();
        assert_eq!(event["data"]["account"], "cust_low");
        assert_eq!(event["data"]["low_balance"], "50");
        let available: f64 = event["data"]["balance"]["available"]
            .as_str()
            .unwrap()
            .parse()
            .unwrap();
        assert!(available < 50.0, "{event}");
        assert_eq!(available, posted_after(seq));
        assert!(
            posted_after(seq - 1) >= 50.0,
            "{event}: not the crossing entry"
        );
    }
}

async fn endpoints_are_managed_and_private_addresses_refused(engine: Engine) {
    let ledger = Ledger::new(engine).await;
    let key = ledger.key("acme", "post,read,admin").await;
    let reader = ledger.key("acme", "post,read").await;
    // The default server: https:// to public addresses only.
    let server = ledger.server().await;
    for url in [
        "https://127.0.0.1/hook",
        "https://10.1.2.3/hook",
        "https://192.168.0.7:8443/hook",
        "https://169.254.169.254/latest/meta-data",
        "https://[::1]/hook",
        "https://localhost/hook",
        "http://hooks.example.com/hook",
        "ftp://hooks.example.com/",
    ] {
        let r = server
            .post(
                "/v1/webhook-endpoints",
                &key,
                &json!({"url": url, "event_types": ["entry.posted"]}),
            )
            .await;
        assert_eq!(r.status, 422, "{url}");
        assert_eq!(r.json()["errors"][0]["field"], "url", "{url}");
    }
    let bad_types = server
        .post(
            "/v1/webhook-endpoints",
            &key,
            &json!({"url": "https://hooks.example.com/x", "event_types": ["entry.*"]}),
        )
        .await;
    assert_eq!(bad_types.status, 422);
    assert_eq!(
        server.get("/v1/webhook-endpoints", &key).await.json()["endpoints"],
        json!([])
    );
    // Admin only.
    let r = server.get("/v1/webhook-endpoints", &reader).await;
    assert_eq!(r.status, 403);

    let created = server
        .post(
            "/v1/webhook-endpoints",
            &key,
            &json!({"url": "https://hooks.example.com/tally", "event_types": ["entry.posted", "balance.low"], "description": "billing"}),
        )
        .await;
    assert_eq!(created.status, 201);
    let created = created.json();
    let id = created["id"].as_str().unwrap();
    assert!(id.starts_with("we_"));
    let secret = created["secret"].as_str().unwrap();
    assert!(secret.starts_with("whsec_"));
    let got = server
        .get(&format!("/v1/webhook-endpoints/{id}"), &key)
        .await
        .json();
    assert!(got.get("secret").is_none(), "the secret is shown once");
    assert_eq!(got["event_types"], json!(["entry.posted", "balance.low"]));
    // A PATCH to a private address is refused too; a valid one applies.
    let path = format!("/v1/webhook-endpoints/{id}");
    let patch = |body: Value| {
        let (server, key, path) = (&server, &key, path.clone());
        async move {
            server
                .send(
                    server
                        .client
                        .patch(format!("{}{path}", server.base))
                        .bearer_auth(key)
                        .json(&body),
                )
                .await
        }
    };
    assert_eq!(
        patch(json!({"url": "https://10.0.0.1/x"})).await.status,
        422
    );
    assert_eq!(patch(json!({})).await.status, 422);
    let changed = patch(json!({"enabled": false, "description": null})).await;
    assert_eq!(changed.status, 200);
    assert_eq!(changed.json()["enabled"], false);
    assert_eq!(changed.json()["disabled_reason"], "disabled");
    assert_eq!(changed.json()["description"], Value::Null);
    // Another tenant sees nothing.
    let other = ledger.key("other", "admin").await;
    assert_eq!(server.get(&path, &other).await.status, 404);
    let deleted = server
        .send(
            server
                .client
                .delete(format!("{}{path}", server.base))
                .bearer_auth(&key),
        )
        .await;
    assert_eq!(deleted.status, 204);
    assert_eq!(server.get(&path, &key).await.status, 404);

    // With the insecure setting, loopback receivers are allowed.
    drop(server);
    let insecure = fast_server(&ledger).await;
    let r = insecure
        .post(
            "/v1/webhook-endpoints",
            &key,
            &json!({"url": "http://127.0.0.1:9/hook", "event_types": ["entry.posted"]}),
        )
        .await;
    assert_eq!(r.status, 201);
}

async fn a_rotated_secret_signs_beside_the_new_one_and_410_disables(engine: Engine) {
    let ledger = Ledger::new(engine).await;
    let key = ledger.key("acme", "post,read,admin").await;
    let receiver = Receiver::start().await;
    let server = fast_server(&ledger).await;
    let created = endpoint(&server, &key, &receiver.url(), &["entry.posted"], &receiver).await;
    let id = created["id"].as_str().unwrap().to_owned();
    let old = created["secret"].as_str().unwrap().to_owned();
    let rotated = server
        .post(
            &format!("/v1/webhook-endpoints/{id}/rotate-secret"),
            &key,
            &json!({}),
        )
        .await;
    assert_eq!(
        rotated.status,
        200,
        "{}",
        String::from_utf8_lossy(&rotated.body)
    );
    let new = rotated.json()["secret"].as_str().unwrap().to_owned();
    assert_ne!(new, old);
    assert!(rotated.json()["previous_secret_expires_at"].is_string());
    assert_eq!(
        server
            .post("/v1/usage-debits", &key, &debit("r1", "c", "1"))
            .await
            .status,
        201
    );
    receiver
        .wait_for(Duration::from_secs(30), "the event", |r| !r.is_empty())
        .await;
    let got = &receiver.received()[0];
    assert_eq!(
        got.signatures.len(),
        2,
        "both secrets sign during the grace period"
    );
    for secret in [&old, &new] {
        assert!(
            got.signatures.contains(&receiver::signature(
                secret,
                &got.id,
                got.timestamp,
                &got.body
            )),
            "no signature by {secret}"
        );
    }

    // 410 Gone: the endpoint is disabled, the delivery failed.
    receiver.answer(|_, _| (StatusCode::GONE, None));
    assert_eq!(
        server
            .post("/v1/usage-debits", &key, &debit("r2", "c", "1"))
            .await
            .status,
        201
    );
    let path = format!("/v1/webhook-endpoints/{id}");
    let mut endpoint = Value::Null;
    for _ in 0..100 {
        endpoint = server.get(&path, &key).await.json();
        if endpoint["enabled"] == false {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(endpoint["enabled"], false);
    assert_eq!(endpoint["disabled_reason"], "gone");
    let failed = server
        .get(&format!("{path}/deliveries?status=failed"), &key)
        .await
        .json();
    let failed = failed["deliveries"].as_array().unwrap();
    assert_eq!(failed.len(), 1);
    assert_eq!(failed[0]["attempts"][0]["outcome"], "gone");

    // Sent again by hand once the endpoint is enabled: the same event id.
    receiver.answer(|_, _| (StatusCode::OK, None));
    let enabled = server
        .send(
            server
                .client
                .patch(format!("{}{path}", server.base))
                .bearer_auth(&key)
                .json(&json!({"enabled": true})),
        )
        .await;
    assert_eq!(enabled.json()["disabled_reason"], Value::Null);
    let delivery = failed[0]["id"].as_str().unwrap();
    let retried = server
        .post(
            &format!("/v1/webhook-deliveries/{delivery}/retry"),
            &key,
            &json!({}),
        )
        .await;
    assert_eq!(retried.status, 202);
    let event_id = failed[0]["event_id"].as_str().unwrap().to_owned();
    receiver
        .wait_for(Duration::from_secs(30), "the retried event", move |r| {
            r.iter().filter(|x| x.id == event_id).count() >= 2
        })
        .await;
    // A replay from seq 1 sends both events again, with their ids.
    let replay = server
        .post(&format!("{path}/replay"), &key, &json!({"from_seq": 1}))
        .await;
    assert_eq!(replay.status, 202);
    assert_eq!(replay.json()["scheduled"], 2);
    assert_eq!(replay.json()["next_from_seq"], Value::Null);
    let ids: HashSet<String> = receiver.received().iter().map(|r| r.id.clone()).collect();
    receiver
        .wait_for(Duration::from_secs(30), "the replayed events", move |r| {
            ids.iter()
                .all(|id| r.iter().filter(|x| &x.id == id).count() >= 2)
                && r.len() >= 5
        })
        .await;
}

async fn retry_after_is_a_floor_and_a_delivery_is_given_up_at_its_maximum_age(engine: Engine) {
    let ledger = Ledger::new(engine).await;
    let key = ledger.key("acme", "post,read,admin").await;
    let receiver = Receiver::start().await;
    // 503 with Retry-After: 2 to the first attempt, then 200. The backoff
    // alone (50 ms base, 400 ms cap) would try again far sooner.
    receiver.answer(|_, attempt| {
        if attempt == 1 {
            (StatusCode::SERVICE_UNAVAILABLE, Some(2))
        } else {
            (StatusCode::OK, None)
        }
    });
    let mut env = FAST.to_vec();
    env.push(("TALLY_WEBHOOK_RETRY_MAX_MS", "5000"));
    env.push(("TALLY_WEBHOOK_MAX_AGE_S", "3"));
    let server = Server::start_with_env(&ledger.database_url, &[], &env).await;
    let created = endpoint(&server, &key, &receiver.url(), &["entry.posted"], &receiver).await;
    let id = created["id"].as_str().unwrap().to_owned();
    assert_eq!(
        server
            .post("/v1/usage-debits", &key, &debit("ra1", "c", "1"))
            .await
            .status,
        201
    );
    receiver
        .wait_for(Duration::from_secs(30), "the second attempt", |r| {
            r.len() >= 2
        })
        .await;
    let got = receiver.received();
    let waited = got[1].timestamp - got[0].timestamp;
    assert!(
        waited >= 2,
        "the retry came {waited} s after a Retry-After of 2 s"
    );

    // A receiver that always fails: given up once the maximum age (3 s)
    // has passed, status failed, counted.
    receiver.answer(|_, _| (StatusCode::INTERNAL_SERVER_ERROR, None));
    assert_eq!(
        server
            .post("/v1/usage-debits", &key, &debit("ra2", "c", "1"))
            .await
            .status,
        201
    );
    let path = format!("/v1/webhook-endpoints/{id}/deliveries?status=failed");
    let mut failed = Vec::new();
    for _ in 0..150 {
        failed = server.get(&path, &key).await.json()["deliveries"]
            .as_array()
            .unwrap()
            .clone();
        if !failed.is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(failed.len(), 1, "not given up");
    let attempts = failed[0]["attempts"].as_array().unwrap();
    assert!(attempts.len() >= 2, "{attempts:?}");
    assert!(attempts.iter().all(|a| a["http_status"] == 500));
    assert_eq!(failed[0]["next_attempt_at"], Value::Null);
    let metrics = server.get("/metrics", "").await;
    let text = String::from_utf8_lossy(&metrics.body).to_string();
    assert!(
        text.contains("tally_webhook_deliveries_given_up_total 1"),
        "{text}"
    );
}
