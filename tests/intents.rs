//! Intents against the real server on every engine (docs/intents.md):
//! one live lease among concurrent claims over two processes, fencing of a
//! worker that stalled past its lease, a completion whose answer was lost,
//! retryable failures up to `max_attempts`, replays a day later, and the
//! log that `tally verify` checks after all of it.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::proxy::{Fault, Proxy};
use common::{Engine, Ledger, Resp, Server};
use serde_json::{json, Value};

engine_tests!(
    a_claim_holds_one_lease_and_its_outcome_is_replayed_for_ever,
    fifty_concurrent_claims_over_two_servers_get_exactly_one_lease,
    a_killed_worker_is_fenced_out_by_the_next_claim,
    a_lost_completion_answer_is_retried_and_its_entries_exist_once,
    retryable_failures_end_in_failed_at_max_attempts_and_replay_a_day_later,
    refused_operations_change_nothing,
);

fn claim(intent_id: &str, lease_seconds: i64) -> Value {
    json!({
        "intent_id": intent_id, "action": "invoice.charge",
        "params": {"invoice": "in_1", "amount": "19.99"},
        "lease_seconds": lease_seconds, "max_attempts": 3
    })
}

fn token(r: &Resp) -> String {
    assert_eq!(r.status, 201, "{r:?}");
    r.json()["lease"]["token"].as_str().unwrap().to_owned()
}

async fn verify(ledger: &Ledger) {
    let (ok, out, err) = ledger.tally(&["verify"]).await;
    assert!(ok, "tally verify: {out} {err}");
}

async fn a_claim_holds_one_lease_and_its_outcome_is_replayed_for_ever(engine: Engine) {
    let ledger = Ledger::new(engine).await;
    let key = ledger.key("acme", "post,read").await;
    let server = ledger.server().await;

    let first = server.post("/v1/intents", &key, &claim("inv_1", 60)).await;
    let body = first.json();
    assert_eq!(body["status"], "claimed");
    assert_eq!(
        (body["attempt"].as_i64(), body["fence"].as_i64()),
        (Some(1), Some(1))
    );
    assert_eq!(body["lease"]["fence"], 1);
    let token = token(&first);

    let busy = server.post("/v1/intents", &key, &claim("inv_1", 60)).await;
    assert_eq!(
        (busy.status, busy.code()),
        (409, "intent_in_progress".to_owned())
    );
    let retry_after: i64 = busy.headers["retry-after"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!((1..=60).contains(&retry_after), "{retry_after}");

    let other = json!({
        "intent_id": "inv_1", "action": "invoice.charge",
        "params": {"invoice": "in_1", "amount": "20.00"}
    });
    let conflict = server.post("/v1/intents", &key, &other).await;
    assert_eq!(
        (conflict.status, conflict.code()),
        (409, "idempotency_conflict".to_owned())
    );
    assert_eq!(
        conflict.json()["differing_fields"],
        json!(["params.amount"])
    );

    let beat = server
        .post(
            "/v1/intents/inv_1/heartbeat",
            &key,
            &json!({"token": token, "lease_seconds": 120}),
        )
        .await;
    assert_eq!(beat.status, 200, "{beat:?}");

    let done = json!({"token": token, "result": {"charge": "ch_1"}});
    let completed = server.post("/v1/intents/inv_1/complete", &key, &done).await;
    assert_eq!(completed.status, 200, "{completed:?}");
    assert_eq!(completed.json()["status"], "succeeded");
    assert_eq!(completed.json()["result"], json!({"charge": "ch_1"}));
    assert!(!completed.replayed());

    let again = server.post("/v1/intents/inv_1/complete", &key, &done).await;
    assert!(again.replayed() && again.status == 200, "{again:?}");
    assert_eq!(
        again.json(),
        completed.json(),
        "a replay answers identically"
    );
    let replay = server.post("/v1/intents", &key, &claim("inv_1", 60)).await;
    assert!(replay.status == 200 && replay.replayed(), "{replay:?}");
    assert_eq!(replay.json()["result"], json!({"charge": "ch_1"}));

    let read = server.get("/v1/intents/inv_1", &key).await.json();
    let history: Vec<&str> = read["history"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["type"].as_str().unwrap())
        .collect();
    assert_eq!(history, ["claimed", "succeeded"]);
    assert!(read.get("lease").is_none() && read["lease_expires_at"].is_null());
    let listed = server
        .get("/v1/intents?status=succeeded", &key)
        .await
        .json();
    assert_eq!(listed["intents"].as_array().unwrap().len(), 1);
    let outcomes = server
        .get("/v1/entries?kind=intent_succeeded", &key)
        .await
        .json();
    assert_eq!(
        outcomes["entries"].as_array().unwrap().len(),
        1,
        "{outcomes}"
    );
    drop(server);
    verify(&ledger).await;

    // A year later the outcome is still the answer.
    let later = Server::start_with_env(
        &ledger.database_url,
        &[],
        &[("TALLY_CLOCK_OFFSET_SECONDS", "31536000")],
    )
    .await;
    let replay = later.post("/v1/intents", &key, &claim("inv_1", 60)).await;
    assert!(replay.status == 200 && replay.replayed(), "{replay:?}");
    assert_eq!(replay.json()["status"], "succeeded");
}

async fn fifty_concurrent_claims_over_two_servers_get_exactly_one_lease(engine: Engine) {
    let ledger = Ledger::new(engine).await;
    let key = ledger.key("acme", "post,read").await;
    let servers = [
        Arc::new(ledger.server().await),
        Arc::new(ledger.server().await),
    ];
    let barrier = Arc::new(tokio::sync::Barrier::new(50));
    let tasks: Vec<_> = (0..50)
        .map(|i| {
            let (server, key, barrier) = (servers[i % 2].clone(), key.clone(), barrier.clone());
            tokio::spawn(async move {
                barrier.wait().await;
                server
                    .post("/v1/intents", &key, &claim("inv_race", 60))
                    .await
            })
        })
        .collect();
    let mut answers = Vec::new();
    for t in tasks {
        answers.push(t.await.unwrap());
    }
    let claimed = answers.iter().filter(|r| r.status == 201).count();
    assert_eq!(claimed, 1, "exactly one 201: {answers:?}");
    for r in answers.iter().filter(|r| r.status != 201) {
        assert_eq!((r.status, r.code()), (409, "intent_in_progress".to_owned()));
        assert!(r.headers.contains_key("retry-after"), "{r:?}");
    }
    let entries = servers[0].all_entries(&key).await;
    assert_eq!(entries.len(), 1, "one claim in the log");
    verify(&ledger).await;
}

async fn a_killed_worker_is_fenced_out_by_the_next_claim(engine: Engine) {
    let ledger = Ledger::new(engine).await;
    let key = ledger.key("acme", "post,read").await;
    let server = ledger.server().await;
    // The worker: a process that claims, writes its answer down, and is
    // killed while it "works".
    let dir = tempfile::tempdir().unwrap();
    let answer_file = dir.path().join("claim.json");
    let script = format!(
        "curl -s -X POST {base}/v1/intents -H 'authorization: Bearer {key}' \
         -H 'content-type: application/json' -d '{body}' > {file}; sleep 600",
        base = server.base,
        body = claim("inv_kill", 1),
        file = answer_file.display(),
    );
    let mut worker = tokio::process::Command::new("sh")
        .args(["-c", &script])
        .spawn()
        .unwrap();
    common::wait::until("the worker's claim", Duration::from_secs(10), || {
        let f = answer_file.clone();
        async move { std::fs::read_to_string(f).is_ok_and(|t| t.contains("token")) }
    })
    .await;
    worker.start_kill().unwrap(); // SIGKILL
    worker.wait().await.unwrap();
    let first: Value =
        serde_json::from_str(&std::fs::read_to_string(&answer_file).unwrap()).unwrap();
    let stale = first["lease"]["token"].as_str().unwrap().to_owned();

    tokio::time::sleep(Duration::from_millis(1200)).await;
    let second = server
        .post("/v1/intents", &key, &claim("inv_kill", 60))
        .await;
    assert_eq!(second.json()["lease"]["fence"], 2, "{second:?}");
    assert_eq!(second.json()["attempt"], 2);
    let fresh = token(&second);

    let late = json!({"token": stale, "result": {"by": "first"}});
    let lost = server
        .post("/v1/intents/inv_kill/complete", &key, &late)
        .await;
    assert_eq!((lost.status, lost.code()), (409, "lease_lost".to_owned()));
    let beat = server
        .post(
            "/v1/intents/inv_kill/heartbeat",
            &key,
            &json!({"token": stale}),
        )
        .await;
    assert_eq!((beat.status, beat.code()), (409, "lease_lost".to_owned()));
    let done = json!({"token": fresh, "result": {"by": "second"}});
    let ok = server
        .post("/v1/intents/inv_kill/complete", &key, &done)
        .await;
    assert_eq!(ok.status, 200, "{ok:?}");
    let lost = server
        .post("/v1/intents/inv_kill/complete", &key, &late)
        .await;
    assert_eq!((lost.status, lost.code()), (409, "lease_lost".to_owned()));
    let read = server.get("/v1/intents/inv_kill", &key).await.json();
    assert_eq!(
        read["result"],
        json!({"by": "second"}),
        "the second worker's outcome"
    );
    assert_eq!(read["history"].as_array().unwrap().len(), 3, "{read}");
    verify(&ledger).await;
}

async fn a_lost_completion_answer_is_retried_and_its_entries_exist_once(engine: Engine) {
    let ledger = Ledger::new(engine).await;
    let key = ledger.key("acme", "post,read").await;
    let server = ledger.server().await;
    let proxy = Proxy::start(server.addr()).await;
    let token = token(
        &server
            .post("/v1/intents", &key, &claim("inv_pay", 60))
            .await,
    );
    let done = json!({
        "token": token, "result": {"charge": "ch_9"},
        "entries": [
            {"type": "payment", "payment_id": "ch_9", "account": "cust", "amount": "19.99",
             "unit": "USD", "processor": "stripe"},
            {"type": "usage_debit", "usage_record_id": "fee_ch_9", "account": "cust",
             "amount": "0.30", "unit": "USD"}
        ]
    });
    proxy.set_fault(Fault::DropOnce);
    let through = reqwest::Client::new()
        .post(format!("{}/v1/intents/inv_pay/complete", proxy.url()))
        .bearer_auth(&key)
        .json(&done)
        .send()
        .await;
    assert!(
        through.is_err() || through.unwrap().bytes().await.is_err(),
        "the answer is lost"
    );
    assert_eq!(proxy.injected(), 1);

    let retried = server
        .post("/v1/intents/inv_pay/complete", &key, &done)
        .await;
    assert!(retried.status == 200 && retried.replayed(), "{retried:?}");
    let body = retried.json();
    let statuses: Vec<i64> = body["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["status"].as_i64().unwrap())
        .collect();
    assert_eq!(
        statuses,
        [201, 201],
        "answered as the first call was: {body}"
    );
    let balance = server.balance(&key, "cust").await;
    assert_eq!(balance["posted"], "19.69", "{balance}");
    let entries = server.all_entries(&key).await;
    let kinds: Vec<&str> = entries
        .iter()
        .map(|e| e["kind"].as_str().unwrap())
        .collect();
    assert_eq!(
        kinds,
        [
            "intent_claimed",
            "intent_succeeded",
            "payment",
            "usage_debit"
        ],
        "the outcome and its entries once, in one group"
    );
    verify(&ledger).await;
}

async fn retryable_failures_end_in_failed_at_max_attempts_and_replay_a_day_later(engine: Engine) {
    let ledger = Ledger::new(engine).await;
    let key = ledger.key("acme", "post,read").await;
    let server = ledger.server().await;
    let error = json!({"code": "timeout", "message": "the provider timed out"});
    for attempt in 1..=3 {
        let claimed = server
            .post("/v1/intents", &key, &claim("inv_flaky", 60))
            .await;
        assert_eq!(claimed.json()["attempt"], attempt, "{claimed:?}");
        let fail = json!({"token": token(&claimed), "error": error, "retryable": true});
        let failed = server.post("/v1/intents/inv_flaky/fail", &key, &fail).await;
        assert_eq!(failed.status, 200, "{failed:?}");
        let expected = if attempt < 3 { "released" } else { "failed" };
        assert_eq!(failed.json()["status"], expected);
        let replayed = server.post("/v1/intents/inv_flaky/fail", &key, &fail).await;
        assert!(
            replayed.status == 200 && replayed.replayed(),
            "{replayed:?}"
        );
    }
    let replay = server
        .post("/v1/intents", &key, &claim("inv_flaky", 60))
        .await;
    assert!(replay.status == 200 && replay.replayed(), "{replay:?}");
    assert_eq!(replay.json()["error"], error);
    let released = server.get("/v1/intents?status=failed", &key).await.json();
    assert_eq!(released["intents"].as_array().unwrap().len(), 1);

    // The last allowed lease running out is a failure too.
    let once = json!({"intent_id": "inv_once", "action": "email.send", "lease_seconds": 1,
                      "max_attempts": 1});
    assert_eq!(server.post("/v1/intents", &key, &once).await.status, 201);
    drop(server);
    let day_later = Server::start_with_env(
        &ledger.database_url,
        &[],
        &[("TALLY_CLOCK_OFFSET_SECONDS", "86400")],
    )
    .await;
    let replay = day_later
        .post("/v1/intents", &key, &claim("inv_flaky", 60))
        .await;
    assert!(replay.status == 200 && replay.replayed(), "{replay:?}");
    let read = day_later.get("/v1/intents/inv_once", &key).await.json();
    assert_eq!(
        (read["status"].as_str(), read["error"]["code"].as_str()),
        (Some("failed"), Some("lease_expired"))
    );
    let stored = day_later.post("/v1/intents", &key, &once).await;
    assert!(stored.status == 200 && stored.replayed(), "{stored:?}");
    assert_eq!(stored.json()["error"]["code"], "lease_expired");
    drop(day_later);
    verify(&ledger).await;
}

async fn refused_operations_change_nothing(engine: Engine) {
    let ledger = Ledger::new(engine).await;
    let key = ledger.key("acme", "post,read").await;
    let read_only = ledger.key("acme", "read").await;
    let server = ledger.server().await;
    let bad = [
        json!({"action": "a"}),
        json!({"intent_id": "", "action": "a"}),
        json!({"intent_id": "x".repeat(256), "action": "a"}),
        json!({"intent_id": "i", "action": "a", "params": [1]}),
        json!({"intent_id": "i", "action": "a", "lease_seconds": 0}),
        json!({"intent_id": "i", "action": "a", "lease_seconds": 3601}),
        json!({"intent_id": "i", "action": "a", "max_attempts": 101}),
        json!({"intent_id": "i", "action": "a", "surprise": true}),
    ];
    for body in &bad {
        let r = server.post("/v1/intents", &key, body).await;
        assert_eq!(
            (r.status, r.code()),
            (422, "invalid_request".to_owned()),
            "{body}"
        );
    }
    let r = server
        .post("/v1/intents", &read_only, &claim("i", 60))
        .await;
    assert_eq!(r.status, 403);
    let missing = server
        .post(
            "/v1/intents/nope/complete",
            &key,
            &json!({"token": "lease_x"}),
        )
        .await;
    assert_eq!(
        (missing.status, missing.code()),
        (404, "not_found".to_owned())
    );

    let token = token(
        &server
            .post("/v1/intents", &key, &claim("inv_bad", 60))
            .await,
    );
    let invalid_entry = json!({"token": token, "entries": [
        {"type": "payment", "payment_id": "p1", "account": "cust", "amount": "-1", "unit": "USD"}
    ]});
    let r = server
        .post("/v1/intents/inv_bad/complete", &key, &invalid_entry)
        .await;
    assert_eq!(
        (r.status, r.code()),
        (422, "invalid_request".to_owned()),
        "{r:?}"
    );
    assert_eq!(r.json()["errors"][0]["field"], "entries[0].amount");
    let wrong = server
        .post(
            "/v1/intents/inv_bad/complete",
            &key,
            &json!({"token": "lease_wrong"}),
        )
        .await;
    assert_eq!((wrong.status, wrong.code()), (409, "lease_lost".to_owned()));
    let entries = server.all_entries(&key).await;
    assert_eq!(entries.len(), 1, "only the claim: {entries:?}");
    let read = server.get("/v1/intents/inv_bad", &key).await.json();
    assert_eq!(read["status"], "claimed");
    assert!(read["lease_expires_at"].is_string());
    verify(&ledger).await;
}
