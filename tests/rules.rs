//! Ledger rules over HTTP: account settings, stored rejections, holds,
//! refunds, reversals, adjustments — each under the retry-safe contract
//! (replay, conflict, nothing written on a refusal). Races are in
//! tests/rules_concurrency.rs.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::{debit, Engine, Ledger, Resp, Server};
use serde_json::{json, Value};

engine_tests!(
    account_settings_are_entries_and_a_put_is_idempotent,
    insufficient_funds_is_a_stored_rejection_that_replays_forever,
    holds_reserve_capture_and_release_once,
    a_hold_past_its_expiry_cannot_be_captured,
    refunds_never_exceed_their_payment,
    reversals_compensate_once,
    adjustments_need_admin_and_skip_the_floor,
    verify_and_rebuild_cover_holds_and_settings,
    a_batch_takes_holds_refunds_and_reversals_in_order,
);

const ALL: &str = "post,read,admin,audit";

async fn setup(engine: Engine) -> (Ledger, Server, String) {
    let ledger = Ledger::new(engine).await;
    let key = ledger.key("acme", ALL).await;
    let server = ledger.server().await;
    (ledger, server, key)
}

fn payment(id: &str, account: &str, amount: &str) -> Value {
    json!({"payment_id": id, "account": account, "amount": amount, "unit": "USD"})
}

fn hold(id: &str, account: &str, amount: &str, ttl: i64) -> Value {
    json!({"hold_id": id, "account": account, "amount": amount, "unit": "USD", "ttl_seconds": ttl})
}

async fn forbid(server: &Server, key: &str, account: &str) {
    let r = server
        .put(
            &format!("/v1/accounts/{account}"),
            key,
            &json!({"unit": "USD", "overdraft": "forbid"}),
        )
        .await;
    assert_eq!(r.status, 200, "{r:?}");
}

fn assert_stored_rejection(r: &Resp, code: &str) -> Value {
    assert_eq!(r.status, 422, "{r:?}");
    assert_eq!(r.content_type(), "application/problem+json");
    let body = r.json();
    assert_eq!(body["code"], code, "{body}");
    assert_eq!(body["entry"]["status"], "rejected", "{body}");
    assert_eq!(body["entry"]["rejection"]["code"], code, "{body}");
    assert!(body["entry"]["seq"].as_i64().unwrap() > 0);
    body
}

async fn account(server: &Server, key: &str, account: &str) -> Value {
    let r = server.get(&format!("/v1/accounts/{account}"), key).await;
    assert_eq!(r.status, 200, "{r:?}");
    r.json()
}

async fn account_settings_are_entries_and_a_put_is_idempotent(engine: Engine) {
    let (ledger, server, key) = setup(engine).await;
    let put = |body: Value| {
        let server = &server;
        let key = key.clone();
        async move { server.put("/v1/accounts/cust_1", &key, &body).await }
    };

    assert_eq!(server.get("/v1/accounts/cust_1", &key).await.status, 404);
    let r =
        put(json!({"unit": "USD", "overdraft": {"limit": "50.00"}, "metadata": {"plan": "pro"}}))
            .await;
    assert_eq!(r.status, 200, "{r:?}");
    let first = r.json();
    assert_eq!(first["overdraft"], json!({"limit": "50"}));
    assert_eq!(first["settings_version"], 1);
    assert_eq!(first["metadata"], json!({"plan": "pro"}));
    assert_eq!(first["balance"]["available"], "0");

    // Same settings again (50 == 50.00): nothing new in the log.
    let r = put(json!({"unit": "USD", "overdraft": {"limit": "50"}, "metadata": {"plan": "pro"}}))
        .await;
    assert_eq!(r.status, 200);
    assert_eq!(r.json()["settings_version"], 1);
    assert_eq!(ledger.count("entries").await, 1);

    // A change is a new account_settings entry that explains later decisions.
    let r = put(json!({"unit": "USD", "overdraft": "forbid"})).await;
    assert_eq!(r.status, 200);
    let second = r.json();
    assert_eq!(second["settings_version"], 2);
    assert_eq!(second["overdraft"], "forbid");
    assert_eq!(second["metadata"], Value::Null);
    let entries = server.all_entries(&key).await;
    let kinds: Vec<(&str, &str)> = entries
        .iter()
        .map(|e| {
            (
                e["kind"].as_str().unwrap(),
                e["upstream_id"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        kinds,
        vec![
            ("account_settings", "cust_1#1"),
            ("account_settings", "cust_1#2")
        ]
    );
    assert_eq!(entries[1]["overdraft"], "forbid");
    // Listed by account, each settings entry appears once (it names the
    // account on both sides).
    let by_account = server.get("/v1/entries?account=cust_1", &key).await.json();
    assert_eq!(by_account["entries"].as_array().unwrap().len(), 2);
    assert_eq!(entries[1]["id"], second["settings_entry_id"]);

    // Refusals write nothing.
    let before = ledger.count("entries").await;
    let r = put(json!({"unit": "EUR"})).await;
    assert_eq!(r.code(), "unit_mismatch", "{r:?}");
    let r = put(json!({"unit": "USD", "overdraft": "sometimes"})).await;
    assert_eq!(r.code(), "invalid_request");
    assert_eq!(r.json()["errors"][0]["field"], "overdraft");
    let r = put(json!({"unit": "USD", "overdraft": {"limit": "-1"}})).await;
    assert_eq!(r.code(), "invalid_request");
    let r = put(json!({"unit": "USD", "colour": "red"})).await;
    assert_eq!(r.code(), "invalid_request");
    let r = server
        .put("/v1/accounts/@revenue", &key, &json!({"unit": "USD"}))
        .await;
    assert_eq!(r.code(), "invalid_request");
    let poster = ledger.key("acme", "post,read").await;
    let r = server
        .put("/v1/accounts/cust_1", &poster, &json!({"unit": "USD"}))
        .await;
    assert_eq!(r.status, 403);
    assert_eq!(ledger.count("entries").await, before);

    // An account known only from its entries reads with default settings;
    // another tenant sees nothing.
    server
        .post("/v1/usage-debits", &key, &debit("u1", "cust_2", "1"))
        .await;
    let a = account(&server, &key, "cust_2").await;
    assert_eq!(
        (a["overdraft"].as_str(), a["settings_version"].as_i64()),
        (Some("allow"), Some(0))
    );
    assert_eq!(a["balance"]["posted"], "-1");
    let other = ledger.key("other", ALL).await;
    assert_eq!(server.get("/v1/accounts/cust_1", &other).await.status, 404);
}

async fn insufficient_funds_is_a_stored_rejection_that_replays_forever(engine: Engine) {
    let (ledger, server, key) = setup(engine).await;
    forbid(&server, &key, "cust").await;
    assert_eq!(
        server
            .post("/v1/payments", &key, &payment("p1", "cust", "5"))
            .await
            .status,
        201
    );
    let ok = server
        .post("/v1/usage-debits", &key, &debit("u1", "cust", "3"))
        .await;
    assert_eq!(ok.status, 201);

    let request = debit("u2", "cust", "2.01");
    let first = server.post("/v1/usage-debits", &key, &request).await;
    let body = assert_stored_rejection(&first, "insufficient_funds");
    assert_eq!(body["entry"]["balance_after"], "2");
    assert_eq!(body["entry"]["seq"], 4);
    assert!(!first.replayed());
    assert_eq!(
        account(&server, &key, "cust").await["balance"]["available"],
        "2"
    );

    // Topping up changes nothing for the rejected request: same body, forever.
    assert_eq!(
        server
            .post("/v1/payments", &key, &payment("p2", "cust", "100"))
            .await
            .status,
        201
    );
    let again = server.post("/v1/usage-debits", &key, &request).await;
    assert_eq!(again.status, 422);
    assert!(again.replayed());
    assert_eq!(again.body, first.body);
    // Same key, other amount: a conflict, not a new attempt.
    let r = server
        .post("/v1/usage-debits", &key, &debit("u2", "cust", "1"))
        .await;
    assert_eq!(r.status, 409);
    assert_eq!(r.json()["differing_fields"], json!(["amount"]));
    // A new ID is a new request.
    let r = server
        .post("/v1/usage-debits", &key, &debit("u3", "cust", "2.01"))
        .await;
    assert_eq!(r.status, 201);
    let balance = server.balance(&key, "cust").await;
    assert_eq!(balance["posted"], "99.99");
    // The rejection is in the log and in the chain; the ledger still verifies.
    let entries = server.all_entries(&key).await;
    assert_eq!(entries.len(), 6);
    assert_eq!(entries[3]["status"], "rejected");
    let (ok, out, _) = ledger.tally(&["verify"]).await;
    assert!(ok, "{out}");
}

async fn holds_reserve_capture_and_release_once(engine: Engine) {
    let (ledger, server, key) = setup(engine).await;
    forbid(&server, &key, "cust").await;
    server
        .post("/v1/payments", &key, &payment("p1", "cust", "10"))
        .await;

    let r = server
        .post("/v1/holds", &key, &hold("h1", "cust", "8", 600))
        .await;
    assert_eq!(r.status, 201, "{r:?}");
    let h = r.json();
    assert_eq!(
        (h["kind"].as_str(), h["credit_account"].as_str()),
        (Some("hold"), Some("@holds"))
    );
    assert!(h["expires_at"].as_str().unwrap().ends_with('Z'));
    let b = server.balance(&key, "cust").await;
    assert_eq!(
        (
            b["posted"].as_str(),
            b["held"].as_str(),
            b["available"].as_str()
        ),
        (Some("10"), Some("8"), Some("2"))
    );
    // A retried hold is the same hold (its expiry included); another amount is a conflict.
    let again = server
        .post("/v1/holds", &key, &hold("h1", "cust", "8.00", 600))
        .await;
    assert_eq!(
        (again.status, again.replayed(), again.body == r.body),
        (200, true, true)
    );
    let other = server
        .post("/v1/holds", &key, &hold("h1", "cust", "9", 600))
        .await;
    assert_eq!(other.status, 409);
    assert_eq!(other.json()["differing_fields"], json!(["amount"]));
    assert_eq!(server.balance(&key, "cust").await["held"], "8");
    // The floor counts what is held.
    let r = server
        .post("/v1/usage-debits", &key, &debit("u1", "cust", "3"))
        .await;
    assert_stored_rejection(&r, "insufficient_funds");
    let r = server
        .post("/v1/holds", &key, &hold("h_big", "cust", "3", 600))
        .await;
    assert_stored_rejection(&r, "insufficient_funds");

    // Refusals that write nothing.
    let before = ledger.count("entries").await;
    let r = server
        .post(
            "/v1/holds/h1/capture",
            &key,
            &json!({"capture_id": "c0", "amount": "8.01"}),
        )
        .await;
    assert_eq!(r.code(), "invalid_request", "{r:?}");
    let r = server
        .post(
            "/v1/holds/nope/capture",
            &key,
            &json!({"capture_id": "c0", "amount": "1"}),
        )
        .await;
    assert_eq!(r.status, 404);
    let r = server
        .post("/v1/holds", &key, &json!({"hold_id": "h2", "account": "cust", "amount": "1", "unit": "USD", "ttl_seconds": 5, "expires_at": "2030-01-01T00:00:00Z"}))
        .await;
    assert_eq!(r.code(), "invalid_request");
    let r = server
        .post("/v1/holds", &key, &json!({"hold_id": "h2", "account": "cust", "amount": "1", "unit": "USD", "expires_at": "2020-01-01T00:00:00Z"}))
        .await;
    assert_eq!(r.code(), "invalid_request");
    let r = server
        .post(
            "/v1/holds/h1/release",
            &key,
            &json!({"release_id": "@expired:h1"}),
        )
        .await;
    assert_eq!(
        r.code(),
        "invalid_request",
        "server-chosen keys are reserved"
    );
    assert_eq!(ledger.count("entries").await, before);

    // Capture part: the debit posts, the rest of the hold is released.
    let capture = json!({"capture_id": "c1", "amount": "6.5"});
    let r = server.post("/v1/holds/h1/capture", &key, &capture).await;
    assert_eq!(r.status, 201, "{r:?}");
    let c = r.json();
    assert_eq!(
        (
            c["kind"].as_str(),
            c["debit_account"].as_str(),
            c["credit_account"].as_str()
        ),
        (Some("hold_capture"), Some("cust"), Some("@revenue"))
    );
    assert_eq!(c["hold_id"], "h1");
    let b = server.balance(&key, "cust").await;
    assert_eq!(
        (
            b["posted"].as_str(),
            b["held"].as_str(),
            b["available"].as_str()
        ),
        (Some("3.5"), Some("0"), Some("3.5"))
    );
    // Replay: identical; a second, different capture or a release: stored rejections.
    let replay = server.post("/v1/holds/h1/capture", &key, &capture).await;
    assert_eq!((replay.status, replay.replayed()), (200, true));
    assert_eq!(replay.body, r.body);
    let r = server
        .post(
            "/v1/holds/h1/capture",
            &key,
            &json!({"capture_id": "c2", "amount": "1"}),
        )
        .await;
    assert_stored_rejection(&r, "hold_not_open");
    let r = server
        .post("/v1/holds/h1/release", &key, &json!({"release_id": "r1"}))
        .await;
    let rejected = assert_stored_rejection(&r, "hold_not_open");
    assert!(rejected["detail"].as_str().unwrap().contains("captured"));
    let got = server.get("/v1/holds/h1", &key).await.json();
    assert_eq!(got["status"], "captured");
    assert_eq!(got["closed_by"], c["id"]);

    // Release gives everything back, once.
    server
        .post("/v1/holds", &key, &hold("h3", "cust", "2", 600))
        .await;
    assert_eq!(server.balance(&key, "cust").await["available"], "1.5");
    let r = server
        .post("/v1/holds/h3/release", &key, &json!({"release_id": "r3"}))
        .await;
    assert_eq!(r.status, 201, "{r:?}");
    assert_eq!(r.json()["amount"], "2");
    let b = server.balance(&key, "cust").await;
    assert_eq!(
        (b["held"].as_str(), b["available"].as_str()),
        (Some("0"), Some("3.5"))
    );
    let r = server
        .post(
            "/v1/holds/h3/capture",
            &key,
            &json!({"capture_id": "c3", "amount": "1"}),
        )
        .await;
    assert_stored_rejection(&r, "hold_not_open");
    assert_eq!(
        server.get("/v1/holds/h3", &key).await.json()["status"],
        "released"
    );
    let (ok, out, _) = ledger.tally(&["verify"]).await;
    assert!(ok, "{out}");
}

async fn a_hold_past_its_expiry_cannot_be_captured(engine: Engine) {
    let ledger = Ledger::new(engine).await;
    let key = ledger.key("acme", ALL).await;
    // The sweeper is slowed down so the expired hold is still open.
    let server = ledger.server_with(&["--hold-sweep-ms", "3600000"]).await;
    server
        .post("/v1/holds", &key, &hold("h1", "cust", "4", 1))
        .await;
    // The hold's 1 s expiry passing is the behaviour under test.
    tokio::time::sleep(std::time::Duration::from_millis(1_300)).await;
    let r = server
        .post(
            "/v1/holds/h1/capture",
            &key,
            &json!({"capture_id": "c1", "amount": "4"}),
        )
        .await;
    assert_stored_rejection(&r, "hold_expired");
    assert_eq!(server.balance(&key, "cust").await["held"], "4");
    server.terminate().await;

    // A server that sweeps releases it on its own, and says so in the log.
    let server = ledger.server_with(&["--hold-sweep-ms", "50"]).await;
    let mut status = Value::Null;
    for _ in 0..100 {
        status = server.get("/v1/holds/h1", &key).await.json()["status"].clone();
        if status == "expired" {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert_eq!(status, "expired");
    assert_eq!(server.balance(&key, "cust").await["held"], "0");
    let releases: Vec<Value> = server
        .all_entries(&key)
        .await
        .into_iter()
        .filter(|e| e["kind"] == "hold_release")
        .collect();
    assert_eq!(releases.len(), 1);
    assert_eq!(releases[0]["upstream_id"], "@expired:h1");
    assert_eq!(releases[0]["reason"], "expired");
}

async fn refunds_never_exceed_their_payment(engine: Engine) {
    let (ledger, server, key) = setup(engine).await;
    server
        .post("/v1/payments", &key, &payment("p1", "cust", "10"))
        .await;
    let refund =
        |id: &str, amount: &str| json!({"refund_id": id, "payment_id": "p1", "amount": amount});

    let r = server.post("/v1/refunds", &key, &refund("r1", "6")).await;
    assert_eq!(r.status, 201, "{r:?}");
    let e = r.json();
    assert_eq!(
        (
            e["kind"].as_str(),
            e["debit_account"].as_str(),
            e["credit_account"].as_str(),
            e["account"].as_str()
        ),
        (
            Some("refund"),
            Some("cust"),
            Some("@payments"),
            Some("cust")
        )
    );
    assert_eq!(e["payment_id"], "p1");
    assert_eq!(e["balance_after"], "4");
    let replay = server.post("/v1/refunds", &key, &refund("r1", "6.0")).await;
    assert_eq!((replay.status, replay.body == r.body), (200, true));
    let r = server.post("/v1/refunds", &key, &refund("r1", "5")).await;
    assert_eq!(r.status, 409);
    let r = server
        .post("/v1/refunds", &key, &refund("r2", "4.01"))
        .await;
    assert_stored_rejection(&r, "refund_exceeds_payment");
    let r = server.post("/v1/refunds", &key, &refund("r3", "4")).await;
    assert_eq!(r.status, 201);
    assert_eq!(server.balance(&key, "cust").await["posted"], "0");

    let before = ledger.count("entries").await;
    let r = server
        .post(
            "/v1/refunds",
            &key,
            &json!({"refund_id": "r4", "payment_id": "nope", "amount": "1"}),
        )
        .await;
    assert_eq!(r.status, 404);
    let r = server
        .post(
            "/v1/refunds",
            &key,
            &json!({"refund_id": "r4", "payment_id": "p1"}),
        )
        .await;
    assert_eq!(r.code(), "invalid_request");
    assert_eq!(ledger.count("entries").await, before);
}

async fn reversals_compensate_once(engine: Engine) {
    let (ledger, server, key) = setup(engine).await;
    let d = server
        .post("/v1/usage-debits", &key, &debit("u1", "cust", "2.5"))
        .await
        .json();
    let reversal =
        json!({"reversal_id": "rv1", "entry_id": d["id"], "reason": "duplicate upstream record"});
    let r = server.post("/v1/reversals", &key, &reversal).await;
    assert_eq!(r.status, 201, "{r:?}");
    let rv = r.json();
    assert_eq!(
        (
            rv["kind"].as_str(),
            rv["debit_account"].as_str(),
            rv["credit_account"].as_str()
        ),
        (Some("reversal"), Some("@revenue"), Some("cust"))
    );
    assert_eq!(
        (rv["amount"].as_str(), rv["entry_id"].clone()),
        (Some("2.5"), d["id"].clone())
    );
    assert_eq!(server.balance(&key, "cust").await["posted"], "0");
    assert_eq!(server.balance(&key, "@revenue").await["posted"], "0");

    // The original is unchanged in the log; reads show it reversed.
    let got = server
        .get(&format!("/v1/entries/{}", d["id"].as_str().unwrap()), &key)
        .await
        .json();
    assert_eq!(got["hash"], d["hash"]);
    assert_eq!(got["reversed_by"], rv["id"]);
    let replay = server.post("/v1/reversals", &key, &reversal).await;
    assert_eq!((replay.status, replay.body == r.body), (200, true));
    let r = server
        .post(
            "/v1/reversals",
            &key,
            &json!({"reversal_id": "rv2", "entry_id": d["id"], "reason": "again"}),
        )
        .await;
    let body = assert_stored_rejection(&r, "already_reversed");
    assert!(body["detail"]
        .as_str()
        .unwrap()
        .contains(rv["id"].as_str().unwrap()));
    assert_eq!(server.balance(&key, "cust").await["posted"], "0");

    let before = ledger.count("entries").await;
    let r = server
        .post(
            "/v1/reversals",
            &key,
            &json!({"reversal_id": "rv3", "entry_id": "ent_nope", "reason": "x"}),
        )
        .await;
    assert_eq!(r.status, 404);
    let h = server
        .post("/v1/holds", &key, &hold("h1", "cust", "1", 600))
        .await
        .json();
    let r = server
        .post(
            "/v1/reversals",
            &key,
            &json!({"reversal_id": "rv3", "entry_id": h["id"], "reason": "x"}),
        )
        .await;
    assert_eq!(r.code(), "invalid_request");
    let r = server
        .post(
            "/v1/reversals",
            &key,
            &json!({"reversal_id": "rv3", "entry_id": d["id"]}),
        )
        .await;
    assert_eq!(r.json()["errors"][0]["field"], "reason");
    assert_eq!(ledger.count("entries").await, before + 1);
}

async fn adjustments_need_admin_and_skip_the_floor(engine: Engine) {
    let (ledger, server, key) = setup(engine).await;
    forbid(&server, &key, "cust").await;
    let adjustment = |id: &str, direction: &str, amount: &str| json!({"adjustment_id": id, "account": "cust", "amount": amount, "direction": direction, "reason": "support ticket 42"});
    let poster = ledger.key("acme", "post,read").await;
    let r = server
        .post("/v1/adjustments", &poster, &adjustment("a1", "credit", "5"))
        .await;
    assert_eq!(r.status, 403);

    let r = server
        .post("/v1/adjustments", &key, &adjustment("a1", "credit", "5"))
        .await;
    assert_eq!(r.status, 201, "{r:?}");
    let a = r.json();
    assert_eq!(
        (
            a["debit_account"].as_str(),
            a["credit_account"].as_str(),
            a["unit"].as_str()
        ),
        (Some("@adjustments"), Some("cust"), Some("USD"))
    );
    assert_eq!(a["direction"], "credit");
    // A correction is not a customer spend: it may go below the floor.
    let r = server
        .post("/v1/adjustments", &key, &adjustment("a2", "debit", "7"))
        .await;
    assert_eq!(r.status, 201, "{r:?}");
    assert_eq!(server.balance(&key, "cust").await["posted"], "-2");
    let replay = server
        .post("/v1/adjustments", &key, &adjustment("a2", "debit", "7"))
        .await;
    assert_eq!((replay.status, replay.replayed()), (200, true));
    let r = server
        .post("/v1/adjustments", &key, &adjustment("a2", "credit", "7"))
        .await;
    assert_eq!(r.json()["differing_fields"], json!(["direction"]));

    let r = server
        .post("/v1/adjustments", &key, &json!({"adjustment_id": "a3", "account": "new", "amount": "1", "direction": "credit", "reason": "x"}))
        .await;
    assert_eq!(r.json()["errors"][0]["field"], "unit", "{r:?}");
    let r = server
        .post("/v1/adjustments", &key, &json!({"adjustment_id": "a3", "account": "cust", "amount": "1", "unit": "EUR", "direction": "credit", "reason": "x"}))
        .await;
    assert_eq!(r.code(), "unit_mismatch");
    let r = server
        .post("/v1/adjustments", &key, &json!({"adjustment_id": "a3", "account": "cust", "amount": "1", "direction": "sideways", "reason": "x"}))
        .await;
    assert_eq!(r.json()["errors"][0]["field"], "direction");
}

async fn verify_and_rebuild_cover_holds_and_settings(engine: Engine) {
    let (ledger, server, key) = setup(engine).await;
    forbid(&server, &key, "cust").await;
    server
        .post("/v1/payments", &key, &payment("p1", "cust", "20"))
        .await;
    server
        .post("/v1/holds", &key, &hold("h1", "cust", "5", 600))
        .await;
    server
        .post("/v1/holds", &key, &hold("h2", "cust", "3", 600))
        .await;
    server
        .post(
            "/v1/holds/h2/capture",
            &key,
            &json!({"capture_id": "c2", "amount": "1"}),
        )
        .await;
    server
        .post("/v1/usage-debits", &key, &debit("u1", "cust", "100"))
        .await;
    let before = server.balance(&key, "cust").await;
    assert_eq!(
        (before["posted"].as_str(), before["held"].as_str()),
        (Some("19"), Some("5"))
    );
    let (ok, out, _) = ledger.tally(&["verify"]).await;
    assert!(ok, "{out}");

    // The rebuild folds holds and settings exactly as the writer kept them.
    ledger.sql(&["UPDATE balances SET held = '0'"]).await;
    let (ok, out, err) = ledger.tally(&["verify"]).await;
    assert!(
        !ok && out.contains("held"),
        "verify must see the wrong held: {out} {err}"
    );
    let (ok, out, err) = ledger.tally(&["projections", "rebuild"]).await;
    assert!(ok, "{out} {err}");
    assert_eq!(server.balance(&key, "cust").await, before);
    let (ok, out, _) = ledger.tally(&["verify"]).await;
    assert!(ok, "{out}");

    // An open hold the writer would trust but the log never closed it so.
    ledger
        .sql(&["DELETE FROM rule_state WHERE kind = 'hold' AND key = 'h1'"])
        .await;
    let (ok, out, err) = ledger.tally(&["verify"]).await;
    assert!(!ok, "{out} {err}");
    assert!(format!("{out}{err}").contains("h1"), "{out} {err}");
}

async fn a_batch_takes_holds_refunds_and_reversals_in_order(engine: Engine) {
    let (ledger, server, key) = setup(engine).await;
    let d = server
        .post("/v1/usage-debits", &key, &debit("u1", "cust", "1"))
        .await
        .json();
    let ops = json!({"operations": [
        {"type": "payment", "payment_id": "p1", "account": "cust", "amount": "10", "unit": "USD"},
        // The refund names the payment made just before it, in the same group.
        {"type": "refund", "refund_id": "r1", "payment_id": "p1", "amount": "4"},
        {"type": "refund", "refund_id": "r2", "payment_id": "p1", "amount": "7"},
        {"type": "hold", "hold_id": "h1", "account": "cust", "amount": "2", "unit": "USD", "ttl_seconds": 600},
        {"type": "reversal", "reversal_id": "rv1", "entry_id": d["id"], "reason": "test"},
        {"type": "adjustment", "adjustment_id": "a1", "account": "cust", "amount": "1", "direction": "credit", "reason": "x"},
    ]});
    let r = server.post("/v1/batch", &key, &ops).await;
    assert_eq!(r.status, 200, "{r:?}");
    let results = r.json()["results"].as_array().unwrap().clone();
    let statuses: Vec<i64> = results
        .iter()
        .map(|x| x["status"].as_i64().unwrap())
        .collect();
    assert_eq!(statuses, vec![201, 201, 422, 201, 201, 422]);
    assert_eq!(results[2]["problem"]["code"], "refund_exceeds_payment");
    assert_eq!(results[5]["problem"]["errors"][0]["field"], "type");
    let b = server.balance(&key, "cust").await;
    assert_eq!(
        (b["posted"].as_str(), b["held"].as_str()),
        (Some("6"), Some("2"))
    );
    let (ok, out, _) = ledger.tally(&["verify"]).await;
    assert!(ok, "{out}");
}
