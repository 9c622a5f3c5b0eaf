//! The idempotency contract and input validation, over HTTP, on both engines.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::{debit, Engine, Ledger};
use serde_json::{json, Value};

engine_tests!(
    a_replay_returns_the_same_bytes_with_200_and_the_header,
    each_business_field_changed_alone_conflicts_and_writes_nothing,
    every_bad_input_gets_its_code_and_writes_nothing,
    a_unit_mismatch_is_refused_and_writes_nothing,
    keys_scopes_and_tenants_are_enforced,
    a_database_error_answers_503_and_commits_nothing,
);

async fn a_replay_returns_the_same_bytes_with_200_and_the_header(engine: Engine) {
    let ledger = Ledger::new(engine).await;
    let key = ledger.key("acme", "post,read").await;
    let server = ledger.server().await;

    let first_body = json!({
        "usage_record_id": "ur_1", "account": "cust_42", "amount": "1.50", "unit": "USD",
        "meter": "llm-tokens", "quantity": "1250", "occurred_at": "2026-11-29T10:00:00Z",
        "metadata": {"model": "m1"}
    });
    let first = server.post("/v1/usage-debits", &key, &first_body).await;
    assert_eq!(first.status, 201, "{first:?}");
    assert!(!first.replayed());
    let entry = first.json();
    assert_eq!(entry["amount"], "1.5");
    assert_eq!(entry["status"], "posted");
    assert_eq!(entry["seq"], 1);
    assert_eq!(entry["debit_account"], "cust_42");
    assert_eq!(entry["credit_account"], "@revenue");
    assert_eq!(entry["balance_after"], "-1.5");
    assert!(entry["fingerprint"]
        .as_str()
        .unwrap()
        .starts_with("sha256:"));

    // "1.5" instead of "1.50", keys reordered, the same instant in another
    // offset: the same intent.
    let same = json!({
        "metadata": {"model": "m1"}, "occurred_at": "2026-11-29T11:00:00+01:00",
        "quantity": 1250, "meter": "llm-tokens", "unit": "USD", "amount": "1.5",
        "account": "cust_42", "usage_record_id": "ur_1"
    });
    for _ in 0..3 {
        let replay = server.post("/v1/usage-debits", &key, &same).await;
        assert_eq!(replay.status, 200, "{replay:?}");
        assert!(replay.replayed());
        assert_eq!(replay.body, first.body, "a replay returns the same bytes");
    }
    let payment = json!({"payment_id": "pay_1", "account": "cust_42", "amount": "10", "unit": "USD", "processor": "stripe"});
    let p1 = server.post("/v1/payments", &key, &payment).await;
    assert_eq!(p1.status, 201, "{p1:?}");
    assert_eq!(p1.json()["debit_account"], "@payments");
    assert_eq!(p1.json()["balance_after"], "8.5");
    let p2 = server.post("/v1/payments", &key, &payment).await;
    assert_eq!((p2.status, p2.replayed()), (200, true));
    assert_eq!(p2.body, p1.body);
    // The same upstream ID under another kind is another intent.
    let other_kind = server
        .post("/v1/usage-debits", &key, &debit("pay_1", "cust_42", "1"))
        .await;
    assert_eq!(other_kind.status, 201);

    assert_eq!(server.all_entries(&key).await.len(), 3);
    let by_id = server
        .get(
            &format!("/v1/entries/{}", entry["id"].as_str().unwrap()),
            &key,
        )
        .await;
    assert_eq!(by_id.body, first.body);
    let (ok, out, _) = ledger.tally(&["verify"]).await;
    assert!(ok, "{out}");
}

async fn each_business_field_changed_alone_conflicts_and_writes_nothing(engine: Engine) {
    let ledger = Ledger::new(engine).await;
    let key = ledger.key("acme", "post,read").await;
    let server = ledger.server().await;

    let original = json!({
        "usage_record_id": "ur_1", "account": "cust_1", "amount": "2.5", "unit": "USD",
        "meter": "api-calls", "quantity": "10", "occurred_at": "2026-11-29T10:00:00Z",
        "counter_account": "@revenue", "metadata": {"region": "eu"}
    });
    let first = server.post("/v1/usage-debits", &key, &original).await;
    assert_eq!(first.status, 201, "{first:?}");
    let entry_id = first.json()["id"].clone();
    let balance_before = server.balance(&key, "cust_1").await;

    let changes: Vec<(&str, Value)> = vec![
        ("account", json!("cust_2")),
        ("amount", json!("2.51")),
        ("unit", json!("EUR")),
        ("meter", json!("other")),
        ("quantity", json!("11")),
        ("occurred_at", json!("2026-11-29T10:00:01Z")),
        ("counter_account", json!("@other-revenue")),
        ("metadata", json!({"region": "us"})),
    ];
    for (field, value) in changes {
        let mut body = original.clone();
        body[field] = value;
        let r = server.post("/v1/usage-debits", &key, &body).await;
        assert_eq!(r.status, 409, "{field}: {r:?}");
        assert_eq!(r.code(), "idempotency_conflict");
        let p = r.json();
        assert_eq!(p["entry_id"], entry_id);
        assert_eq!(p["differing_fields"], json!([field]), "{field}");
        assert_eq!(p["status"], 409);
    }
    // Dropping an optional field is a change too.
    let mut without_meter = original.clone();
    without_meter.as_object_mut().unwrap().remove("meter");
    let r = server.post("/v1/usage-debits", &key, &without_meter).await;
    assert_eq!(r.status, 409);
    assert_eq!(r.json()["differing_fields"], json!(["meter"]));

    assert_eq!(server.balance(&key, "cust_1").await, balance_before);
    assert_eq!(ledger.count("entries").await, 1, "conflicts write nothing");

    // Payments: processor.
    let pay = json!({"payment_id": "p", "account": "cust_1", "amount": "5", "unit": "USD", "processor": "stripe"});
    assert_eq!(server.post("/v1/payments", &key, &pay).await.status, 201);
    let mut other = pay.clone();
    other["processor"] = json!("adyen");
    let r = server.post("/v1/payments", &key, &other).await;
    assert_eq!(r.status, 409);
    assert_eq!(r.json()["differing_fields"], json!(["processor"]));

    assert_eq!(ledger.count("entries").await, 2, "conflicts write nothing");
}

async fn every_bad_input_gets_its_code_and_writes_nothing(engine: Engine) {
    let ledger = Ledger::new(engine).await;
    let key = ledger.key("acme", "post,read").await;
    let server = ledger.server().await;
    let ok = debit("ur_ok", "cust", "1");

    let with = |field: &str, value: Value| {
        let mut b = ok.clone();
        b[field] = value;
        b
    };
    let without = |field: &str| {
        let mut b = ok.clone();
        b.as_object_mut().unwrap().remove(field);
        b
    };
    let many_keys: serde_json::Map<String, Value> =
        (0..51).map(|i| (format!("k{i}"), json!("v"))).collect();
    let cases: Vec<(&str, Value, &str)> = vec![
        ("zero amount", with("amount", json!("0")), "amount"),
        ("negative amount", with("amount", json!("-1")), "amount"),
        (
            "29 significant digits",
            with("amount", json!("12345678901234567890123456789")),
            "amount",
        ),
        (
            "19 fractional digits",
            with("amount", json!("0.0000000000000000001")),
            "amount",
        ),
        (
            "amount not a number",
            with("amount", json!("ten")),
            "amount",
        ),
        (
            "amount exponent in a string",
            with("amount", json!("1e3")),
            "amount",
        ),
        ("amount a boolean", with("amount", json!(true)), "amount"),
        (
            "missing usage_record_id",
            without("usage_record_id"),
            "usage_record_id",
        ),
        (
            "empty usage_record_id",
            with("usage_record_id", json!("")),
            "usage_record_id",
        ),
        (
            "oversized usage_record_id",
            with("usage_record_id", json!("x".repeat(256))),
            "usage_record_id",
        ),
        ("missing account", without("account"), "account"),
        ("missing unit", without("unit"), "unit"),
        ("unknown field", with("colour", json!("red")), "colour"),
        (
            "system account as account",
            with("account", json!("@revenue")),
            "account",
        ),
        (
            "control character in account",
            with("account", json!("cu\u{0}st")),
            "account",
        ),
        (
            "oversized account",
            with("account", json!("a".repeat(129))),
            "account",
        ),
        (
            "control character in id",
            with("usage_record_id", json!("ur\n1")),
            "usage_record_id",
        ),
        ("bad unit", with("unit", json!("U S D")), "unit"),
        (
            "counter_account equal to account",
            with("counter_account", json!("cust")),
            "counter_account",
        ),
        (
            "51 metadata keys",
            with("metadata", Value::Object(many_keys)),
            "metadata",
        ),
        (
            "metadata value not a string",
            with("metadata", json!({"n": 1})),
            "metadata",
        ),
        (
            "metadata not an object",
            with("metadata", json!(["a"])),
            "metadata",
        ),
        (
            "bad occurred_at",
            with("occurred_at", json!("yesterday")),
            "occurred_at",
        ),
        (
            "negative quantity",
            with("quantity", json!("-1")),
            "quantity",
        ),
    ];
    for (what, body, field) in cases {
        let r = server.post("/v1/usage-debits", &key, &body).await;
        assert_eq!(r.status, 422, "{what}: {r:?}");
        assert_eq!(r.code(), "invalid_request", "{what}");
        let p = r.json();
        let fields: Vec<&str> = p["errors"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["field"].as_str().unwrap())
            .collect();
        assert!(fields.contains(&field), "{what}: {fields:?}");
        for k in ["type", "title", "status", "detail"] {
            assert!(p.get(k).is_some(), "{what}: problem lacks {k}");
        }
    }
    // Payments validate their own key field.
    let r = server
        .post(
            "/v1/payments",
            &key,
            &json!({"account": "c", "amount": "1", "unit": "USD"}),
        )
        .await;
    assert_eq!((r.status, r.code().as_str()), (422, "invalid_request"));

    let path = "/v1/usage-debits";
    let json_ct = "application/json";
    let r = server
        .post_raw(path, &key, json_ct, b"{not json".to_vec())
        .await;
    assert_eq!((r.status, r.code().as_str()), (400, "malformed_json"));
    let r = server
        .post_raw(path, &key, "text/plain", ok.to_string().into_bytes())
        .await;
    assert_eq!((r.status, r.code().as_str()), (400, "malformed_json"));
    let r = server
        .post_raw(path, &key, json_ct, b"[1,2]".to_vec())
        .await;
    assert_eq!((r.status, r.code().as_str()), (422, "invalid_request"));
    let mut huge = ok.clone();
    huge["metadata"] = json!({"pad": "x".repeat(1024 * 1024)});
    let r = server
        .post_raw(path, &key, json_ct, huge.to_string().into_bytes())
        .await;
    assert_eq!((r.status, r.code().as_str()), (413, "payload_too_large"));

    assert_eq!(ledger.count("entries").await, 0, "bad input writes nothing");
    assert_eq!(ledger.count("balances").await, 0);
    assert_eq!(server.all_entries(&key).await.len(), 0);
    // And a JSON number that converts exactly is fine.
    let r = server
        .post("/v1/usage-debits", &key, &with("amount", json!(0.1)))
        .await;
    assert_eq!(r.status, 201, "{r:?}");
    assert_eq!(r.json()["amount"], "0.1");
}

async fn a_unit_mismatch_is_refused_and_writes_nothing(engine: Engine) {
    let ledger = Ledger::new(engine).await;
    let key = ledger.key("acme", "post,read").await;
    let server = ledger.server().await;
    assert_eq!(
        server
            .post("/v1/usage-debits", &key, &debit("u1", "cust", "1"))
            .await
            .status,
        201
    );
    let mut credits = debit("u2", "cust", "1");
    credits["unit"] = json!("credits");
    let r = server.post("/v1/usage-debits", &key, &credits).await;
    assert_eq!(
        (r.status, r.code().as_str()),
        (422, "unit_mismatch"),
        "{r:?}"
    );
    assert_eq!(r.json()["unit"], "USD");
    // Not stored: the same ID in the right unit is a new intent, not a replay.
    let mut retry = credits.clone();
    retry["unit"] = json!("USD");
    assert_eq!(
        server.post("/v1/usage-debits", &key, &retry).await.status,
        201
    );
    // A customer account named as counter_account keeps its unit too.
    let mut counter = debit("u3", "other", "1");
    counter["unit"] = json!("credits");
    counter["counter_account"] = json!("cust");
    let r = server.post("/v1/usage-debits", &key, &counter).await;
    assert_eq!((r.status, r.code().as_str()), (422, "unit_mismatch"));
    // System accounts hold one balance per unit: credits to @revenue are fine.
    let mut tokens = debit("u4", "tok_user", "100");
    tokens["unit"] = json!("tokens");
    assert_eq!(
        server.post("/v1/usage-debits", &key, &tokens).await.status,
        201
    );
    assert_eq!(ledger.count("entries").await, 3);
    let revenue = server
        .get("/v1/accounts/@revenue/balance?unit=tokens", &key)
        .await;
    assert_eq!(revenue.json()["posted"], "100");
    let ambiguous = server.get("/v1/accounts/@revenue/balance", &key).await;
    assert_eq!(ambiguous.status, 422);
}

async fn keys_scopes_and_tenants_are_enforced(engine: Engine) {
    let ledger = Ledger::new(engine).await;
    let acme = ledger.key("acme", "post,read").await;
    let reader = ledger.key("acme", "read").await;
    let poster = ledger.key("acme", "post").await;
    let globex = ledger.key("globex", "post,read").await;
    let server = ledger.server().await;
    let body = debit("u1", "cust", "1");

    let no_key = server
        .send(
            server
                .client
                .post(format!("{}/v1/usage-debits", server.base))
                .json(&body),
        )
        .await;
    assert_eq!(
        (no_key.status, no_key.code().as_str()),
        (401, "unauthenticated")
    );
    let bad = server.post("/v1/usage-debits", "tally_nope", &body).await;
    assert_eq!((bad.status, bad.code().as_str()), (401, "unauthenticated"));
    let r = server.post("/v1/usage-debits", &reader, &body).await;
    assert_eq!((r.status, r.code().as_str()), (403, "forbidden"));
    let r = server.get("/v1/entries", &poster).await;
    assert_eq!((r.status, r.code().as_str()), (403, "forbidden"));
    assert_eq!(ledger.count("entries").await, 0);

    let created = server.post("/v1/usage-debits", &acme, &body).await;
    assert_eq!(created.status, 201);
    let id = created.json()["id"].as_str().unwrap().to_owned();
    // Another tenant sees nothing, and the same upstream ID is its own intent.
    let r = server.get(&format!("/v1/entries/{id}"), &globex).await;
    assert_eq!((r.status, r.code().as_str()), (404, "not_found"));
    let r = server.get("/v1/accounts/cust/balance", &globex).await;
    assert_eq!(r.status, 404);
    assert_eq!(server.all_entries(&globex).await.len(), 0);
    let theirs = server
        .post("/v1/usage-debits", &globex, &debit("u1", "cust", "7"))
        .await;
    assert_eq!(theirs.status, 201, "tenants do not share keys");
    assert_eq!(theirs.json()["seq"], 1, "each tenant has its own seq");
    assert_eq!(
        server
            .get(&format!("/v1/entries/{id}"), &reader)
            .await
            .status,
        200
    );
    let r = server.get("/v1/nothing-here", &acme).await;
    assert_eq!((r.status, r.code().as_str()), (404, "not_found"));
    // Only the hash of a key is stored.
    assert_eq!(
        ledger
            .count(&format!(
                "api_keys WHERE key_hash = '{acme}' OR key_hash LIKE '%{}%'",
                &acme[6..30]
            ))
            .await,
        0
    );
    assert_eq!(ledger.count("api_keys").await, 4);
}

async fn a_database_error_answers_503_and_commits_nothing(engine: Engine) {
    let ledger = Ledger::new(engine.clone()).await;
    let key = ledger.key("acme", "post,read").await;
    let server = ledger.server().await;
    assert_eq!(
        server
            .post("/v1/usage-debits", &key, &debit("u0", "cust", "1"))
            .await
            .status,
        201
    );
    // Make the balance write fail after the entries of the group were inserted.
    let (inject, heal) = match engine {
        Engine::Sqlite => (
            vec!["CREATE TRIGGER fail_balances BEFORE UPDATE ON balances BEGIN SELECT RAISE(ABORT, 'injected fault'); END"],
            vec!["DROP TRIGGER fail_balances"],
        ),
        Engine::Postgres { .. } => (
            vec![
                "CREATE FUNCTION fail_balances() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'injected fault'; END $$",
                "CREATE TRIGGER fail_balances BEFORE UPDATE ON balances FOR EACH ROW EXECUTE FUNCTION fail_balances()",
            ],
            vec!["DROP TRIGGER fail_balances ON balances", "DROP FUNCTION fail_balances()"],
        ),
    };
    ledger.sql(&inject).await;
    let bodies: Vec<_> = (1..=5)
        .map(|i| debit(&format!("u{i}"), "cust", "1"))
        .collect();
    let attempts = futures::future::join_all(
        bodies
            .iter()
            .map(|b| server.post("/v1/usage-debits", &key, b)),
    )
    .await;
    for r in &attempts {
        assert_eq!((r.status, r.code().as_str()), (503, "unavailable"), "{r:?}");
        assert_eq!(r.headers.get("retry-after").unwrap(), "1");
    }
    assert_eq!(
        ledger.count("entries").await,
        1,
        "nothing of a failed group is committed"
    );
    ledger.sql(&heal).await;
    // The clients' retries now go through, without restarting the server.
    for i in 1..=5 {
        let r = server
            .post(
                "/v1/usage-debits",
                &key,
                &debit(&format!("u{i}"), "cust", "1"),
            )
            .await;
        assert_eq!(r.status, 201, "{r:?}");
        assert_eq!(r.json()["seq"], i + 1);
    }
    assert_eq!(server.balance(&key, "cust").await["posted"], "-6");
    let (ok, out, _) = ledger.tally(&["verify"]).await;
    assert!(ok, "{out}");
}
