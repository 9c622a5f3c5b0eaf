//! The idempotency contract and input validation, over HTTP, on both engines.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::{debit, Engine, Ledger, Resp, Server};
use serde_json::{json, Value};

engine_tests!(
    a_replay_returns_the_same_bytes_with_200_and_the_header,
    each_business_field_changed_alone_conflicts_and_writes_nothing,
    every_bad_input_gets_its_code_and_writes_nothing,
    a_unit_mismatch_is_refused_and_writes_nothing,
    keys_scopes_and_tenants_are_enforced,
    a_failed_group_commits_nothing_and_its_retries_go_through,
    another_tenants_objects_answer_404_and_change_nothing,
    server_owned_and_repeated_fields_are_refused_and_write_nothing,
    bodies_past_their_limit_answer_413_and_write_nothing,
    names_ids_and_metadata_are_bounded_in_bytes,
    hostile_text_is_data_not_sql,
    an_internal_error_answers_500_without_its_cause,
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
    // offset: the same request.
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
    // The same upstream ID under another kind is another request.
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
    // Not stored: the same ID in the right unit is a new request, not a replay.
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
    // Another tenant sees nothing, and the same upstream ID is its own request.
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

/// A group whose balance write fails commits nothing, and the clients'
/// retries go through once the cause is gone. What the failure answers
/// depends on whether it can pass (docs/api-decisions.md, "Database
/// errors"): on PostgreSQL the fault is a serialization failure (40001,
/// transient: 503 + Retry-After); SQLite's trigger can only abort, a
/// constraint failure a retry cannot cure (500 `internal`, no Retry-After).
async fn a_failed_group_commits_nothing_and_its_retries_go_through(engine: Engine) {
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
                "CREATE FUNCTION fail_balances() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'injected fault' USING ERRCODE = '40001'; END $$",
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
        if engine.is_postgres() {
            assert_eq!((r.status, r.code().as_str()), (503, "unavailable"), "{r:?}");
            assert_eq!(r.headers.get("retry-after").unwrap(), "1");
        } else {
            assert_eq!((r.status, r.code().as_str()), (500, "internal"), "{r:?}");
            assert!(r.headers.get("retry-after").is_none(), "{r:?}");
        }
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

/// Every object another tenant names (an entry by its ID; an account, its
/// balance and its statement; a hold; a payment to refund; an entry to
/// reverse) answers exactly as an object that exists nowhere does, lists
/// come back empty, and nothing of the owner changes.
async fn another_tenants_objects_answer_404_and_change_nothing(engine: Engine) {
    let ledger = Ledger::new(engine).await;
    let scopes = "post,read,admin,audit";
    let acme = ledger.key("acme", scopes).await;
    let globex = ledger.key("globex", scopes).await;
    let server = ledger.server().await;
    let created = |r: Resp| {
        assert_eq!(r.status, 201, "{r:?}");
        r.json()
    };
    let payment = json!({"payment_id": "p1", "account": "cust", "amount": "10", "unit": "USD"});
    created(server.post("/v1/payments", &acme, &payment).await);
    let d = created(
        server
            .post("/v1/usage-debits", &acme, &debit("u1", "cust", "1"))
            .await,
    );
    let hold = json!({"hold_id": "h1", "account": "cust", "amount": "2", "unit": "USD", "ttl_seconds": 600});
    created(server.post("/v1/holds", &acme, &hold).await);
    let id = d["id"].as_str().unwrap();
    let entries = server.all_entries(&acme).await;
    let balance = server.balance(&acme, "cust").await;
    let to = chrono::Utc::now()
        .format("%Y-%m-%dT%H%%3A%M%%3A%SZ")
        .to_string();
    let window = format!("from=2000-01-01T00%3A00%3A00Z&to={to}");

    // What globex asks about acme's object, and what acme asks about an
    // object that exists nowhere: the answers differ only by the ID they
    // repeat.
    let same_answer = |theirs: &Resp, nowhere: &Resp, (their_id, other_id): (&str, &str)| {
        assert_eq!(
            (theirs.status, theirs.code().as_str()),
            (404, "not_found"),
            "{theirs:?}"
        );
        let nowhere = String::from_utf8_lossy(&nowhere.body).replace(other_id, their_id);
        assert_eq!(String::from_utf8_lossy(&theirs.body), nowhere);
    };
    let reads = [
        (
            format!("/v1/entries/{id}"),
            "/v1/entries/ent_nope".to_owned(),
            (id, "ent_nope"),
        ),
        (
            "/v1/accounts/cust".into(),
            "/v1/accounts/nobody".into(),
            ("cust", "nobody"),
        ),
        (
            "/v1/accounts/cust/balance".into(),
            "/v1/accounts/nobody/balance".into(),
            ("cust", "nobody"),
        ),
        (
            format!("/v1/accounts/cust/statement?{window}"),
            format!("/v1/accounts/nobody/statement?{window}"),
            ("cust", "nobody"),
        ),
        (
            "/v1/holds/h1".into(),
            "/v1/holds/nope".into(),
            ("h1", "nope"),
        ),
    ];
    for (theirs, nowhere, ids) in &reads {
        let r = server.get(theirs, &globex).await;
        same_answer(&r, &server.get(nowhere, &acme).await, *ids);
    }
    let writes = [
        (
            "/v1/holds/h1/capture",
            json!({"capture_id": "c1", "amount": "1"}),
            "/v1/holds/nope/capture",
            ("h1", "nope"),
        ),
        (
            "/v1/holds/h1/release",
            json!({"release_id": "r1"}),
            "/v1/holds/nope/release",
            ("h1", "nope"),
        ),
        (
            "/v1/refunds",
            json!({"refund_id": "rf1", "payment_id": "p1", "amount": "1"}),
            "/v1/refunds",
            ("p1", "nope"),
        ),
        (
            "/v1/reversals",
            json!({"reversal_id": "rv1", "entry_id": id, "reason": "x"}),
            "/v1/reversals",
            (id, "ent_nope"),
        ),
    ];
    for (path, body, nowhere, (their_id, other_id)) in &writes {
        let r = server.post(path, &globex, body).await;
        let nowhere_body: Value =
            serde_json::from_str(&body.to_string().replace(their_id, other_id)).unwrap();
        let other = server.post(nowhere, &acme, &nowhere_body).await;
        same_answer(&r, &other, (their_id, other_id));
    }
    let listed = server.get("/v1/entries?account=cust", &globex).await;
    assert_eq!(listed.status, 200, "{listed:?}");
    assert_eq!(listed.json()["entries"], json!([]));
    let usage = server.get("/v1/accounts/cust/usage", &globex).await;
    assert_eq!(usage.status, 200, "{usage:?}");
    assert_eq!(usage.json()["usage"], json!([]));

    assert!(server.all_entries(&globex).await.is_empty());
    assert_eq!(server.all_entries(&acme).await, entries);
    assert_eq!(ledger.count("entries").await, entries.len() as i64);
    assert_eq!(server.balance(&acme, "cust").await, balance);
    assert_eq!(
        server.get("/v1/holds/h1", &acme).await.json()["status"],
        "open"
    );
}

/// A valid body of every mutation; `refs` are what the bodies name (a
/// payment, a hold, an entry), so that only the field a test adds is wrong.
fn mutations(entry_id: &str) -> Vec<(&'static str, &'static str, Value)> {
    vec![
        ("POST", "/v1/usage-debits", debit("u2", "cust", "1")),
        (
            "POST",
            "/v1/payments",
            json!({"payment_id": "p2", "account": "cust", "amount": "1", "unit": "USD"}),
        ),
        (
            "POST",
            "/v1/holds",
            json!({"hold_id": "h2", "account": "cust", "amount": "1", "unit": "USD", "ttl_seconds": 60}),
        ),
        (
            "POST",
            "/v1/holds/h1/capture",
            json!({"capture_id": "c1", "amount": "1"}),
        ),
        ("POST", "/v1/holds/h1/release", json!({"release_id": "r1"})),
        (
            "POST",
            "/v1/refunds",
            json!({"refund_id": "rf1", "payment_id": "p1", "amount": "1"}),
        ),
        (
            "POST",
            "/v1/reversals",
            json!({"reversal_id": "rv1", "entry_id": entry_id, "reason": "r"}),
        ),
        (
            "POST",
            "/v1/adjustments",
            json!({"adjustment_id": "a1", "account": "cust", "amount": "1", "direction": "credit", "reason": "r"}),
        ),
        (
            "PUT",
            "/v1/accounts/cust",
            json!({"unit": "USD", "overdraft": "allow"}),
        ),
    ]
}

/// The fields the server owns cannot be set by a request on any mutation
/// (or batch item): each is a 422 naming it. A key given twice in one
/// object (at the top, inside metadata, inside a batch item) is a 422
/// too, never "the last one wins". None of it writes anything.
async fn server_owned_and_repeated_fields_are_refused_and_write_nothing(engine: Engine) {
    let ledger = Ledger::new(engine).await;
    let key = ledger.key("acme", "post,read,admin").await;
    let server = ledger.server().await;
    let setup = [
        (
            "/v1/payments",
            json!({"payment_id": "p1", "account": "cust", "amount": "10", "unit": "USD"}),
        ),
        (
            "/v1/holds",
            json!({"hold_id": "h1", "account": "cust", "amount": "2", "unit": "USD", "ttl_seconds": 600}),
        ),
        ("/v1/usage-debits", debit("u1", "cust", "1")),
    ];
    let mut entry_id = String::new();
    for (path, body) in &setup {
        let r = server.post(path, &key, body).await;
        assert_eq!(r.status, 201, "{r:?}");
        entry_id = r.json()["id"].as_str().unwrap().to_owned();
    }
    let before = ledger.count("entries").await;
    let owned = [
        "tenant_id",
        "id",
        "seq",
        "kind",
        "status",
        "balance_after",
        "debit_account",
        "credit_account",
        "recorded_at",
        "fingerprint",
        "prev_hash",
        "hash",
    ];
    let field_of = |r: &Value| -> Vec<String> {
        r["errors"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["field"].as_str().unwrap().to_owned())
            .collect()
    };
    for (method, path, valid) in mutations(&entry_id) {
        for field in owned {
            let mut body = valid.clone();
            body[field] = json!("smuggled");
            let url = format!("{}{path}", server.base);
            let request = match method {
                "PUT" => server.client.put(url),
                _ => server.client.post(url),
            };
            let r = server
                .send(
                    request
                        .bearer_auth(&key)
                        .header("content-type", "application/json")
                        .body(body.to_string()),
                )
                .await;
            assert_eq!(
                (r.status, r.code().as_str()),
                (422, "invalid_request"),
                "{method} {path} with {field}: {r:?}"
            );
            assert!(
                field_of(&r.json()).contains(&field.to_owned()),
                "{path} {field}: {r:?}"
            );
        }
    }
    let mut item = debit("u3", "cust", "1");
    item["type"] = json!("usage_debit");
    item["tenant_id"] = json!("globex");
    let r = server
        .post("/v1/batch", &key, &json!({"operations": [item]}))
        .await;
    assert_eq!(r.status, 200, "{r:?}");
    let result = &r.json()["results"][0];
    assert_eq!(result["status"], 422, "{result}");
    assert_eq!(field_of(&result["problem"]), ["tenant_id"]);

    let repeated: [(&str, &str, &str); 3] = [
        (
            "/v1/usage-debits",
            r#"{"usage_record_id":"u4","account":"cust","amount":"1","amount":"100","unit":"USD"}"#,
            "amount",
        ),
        (
            "/v1/usage-debits",
            r#"{"usage_record_id":"u4","account":"cust","amount":"1","unit":"USD","metadata":{"k":"a","k":"b"}}"#,
            "metadata.k",
        ),
        (
            "/v1/batch",
            r#"{"operations":[{"type":"usage_debit","usage_record_id":"u4","account":"cust","account":"other","amount":"1","unit":"USD"}]}"#,
            "operations[0].account",
        ),
    ];
    for (path, body, field) in repeated {
        let r = server
            .post_raw(path, &key, "application/json", body.as_bytes().to_vec())
            .await;
        assert_eq!(
            (r.status, r.code().as_str()),
            (422, "invalid_request"),
            "{body}: {r:?}"
        );
        assert_eq!(field_of(&r.json()), [field], "{body}");
    }
    assert_eq!(
        ledger.count("entries").await,
        before,
        "refused fields write nothing"
    );
}

/// POSTs `body` as JSON on a connection of its own and returns the
/// answer's status and body. The answer is read while the body is still
/// being sent: a server that refuses a body answers without reading the
/// rest of it and closes the connection, which fails the rest of the
/// upload (an HTTP client library then reports the broken upload, not the
/// answer that came before it).
async fn post_while_sending(server: &Server, path: &str, key: &str, body: Vec<u8>) -> (u16, Value) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let stream = tokio::net::TcpStream::connect(server.addr()).await.unwrap();
    let (mut read, mut write) = stream.into_split();
    let head = format!(
        "POST {path} HTTP/1.1\r\nhost: {}\r\nauthorization: Bearer {key}\r\n\
         content-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
        server.addr(),
        body.len()
    );
    let sending = tokio::spawn(async move {
        // A refused upload fails here; the answer is what matters.
        let _ = write.write_all(head.as_bytes()).await;
        let _ = write.write_all(&body).await;
        write
    });
    let mut answer = Vec::new();
    let read_all = read.read_to_end(&mut answer);
    let _ = tokio::time::timeout(std::time::Duration::from_secs(30), read_all)
        .await
        .expect("the server answers within 30 s");
    drop(sending.await);
    let text = String::from_utf8_lossy(&answer).into_owned();
    let (head, body) = text
        .split_once("\r\n\r\n")
        .unwrap_or_else(|| panic!("no answer: {text:?}"));
    let status = head.split(' ').nth(1).unwrap().parse().unwrap();
    assert!(
        head.to_ascii_lowercase()
            .contains("content-type: application/problem+json")
            || status < 400,
        "{head}"
    );
    (status, serde_json::from_str(body).unwrap_or(Value::Null))
}

/// A body may be 1 MiB (8 MiB for a batch), not one byte more: past its
/// limit a request answers 413 `payload_too_large` and writes nothing, and
/// the batch's larger limit is the batch's alone.
async fn bodies_past_their_limit_answer_413_and_write_nothing(engine: Engine) {
    const MIB: usize = 1024 * 1024;
    let ledger = Ledger::new(engine).await;
    let key = ledger.key("acme", "post,read").await;
    let server = ledger.server().await;
    // JSON allows any whitespace after the value: a valid body of any size.
    let padded = |body: Value, len: usize| {
        let mut bytes = body.to_string().into_bytes();
        assert!(bytes.len() < len);
        bytes.resize(len, b' ');
        bytes
    };
    let single = |id: &str, len: usize| padded(debit(id, "cust", "1"), len);
    let batch = |id: &str, len: usize| {
        let mut item = debit(id, "cust", "1");
        item["type"] = json!("usage_debit");
        padded(json!({"operations": [item]}), len)
    };
    for (path, body) in [
        ("/v1/usage-debits", single("u1", MIB + 1)),
        ("/v1/usage-debits", single("u2", 2 * MIB)),
        ("/v1/batch", batch("b1", 8 * MIB + 1)),
    ] {
        let len = body.len();
        let (status, problem) = post_while_sending(&server, path, &key, body).await;
        assert_eq!(
            (status, problem["code"].as_str()),
            (413, Some("payload_too_large")),
            "{path}, {len} bytes: {problem}"
        );
    }
    assert_eq!(ledger.count("entries").await, 0, "a 413 writes nothing");

    let json_ct = "application/json";
    let r = server
        .post_raw("/v1/usage-debits", &key, json_ct, single("u1", MIB))
        .await;
    assert_eq!(r.status, 201, "exactly 1 MiB is taken: {r:?}");
    let r = server
        .post_raw("/v1/batch", &key, json_ct, batch("b1", 8 * MIB))
        .await;
    assert_eq!(r.status, 200, "exactly 8 MiB is taken: {r:?}");
    assert_eq!(r.json()["results"][0]["status"], 201);
    assert_eq!(ledger.count("entries").await, 2);
}

/// Names, IDs, units, labels, reasons and metadata are bounded in bytes:
/// a value at its bound is taken, one byte more is a 422 naming the field.
async fn names_ids_and_metadata_are_bounded_in_bytes(engine: Engine) {
    let ledger = Ledger::new(engine).await;
    let key = ledger.key("acme", "post,read,admin").await;
    let server = ledger.server().await;
    let metadata = |pairs: Vec<(String, &str)>| {
        Value::Object(
            pairs
                .into_iter()
                .map(|(k, v)| (k, json!(v)))
                .collect::<serde_json::Map<_, _>>(),
        )
    };
    let keys = |n: usize| metadata((0..n).map(|i| (format!("k{i}"), "v")).collect());
    let long_value = "v".repeat(500);
    let longer_value = "v".repeat(501);
    // 64 two-byte characters: 128 bytes. The bound is in bytes, not characters.
    let wide = "é".repeat(64);
    // (field, at its bound, one byte past it)
    let cases: Vec<(&str, Value, Value)> = vec![
        (
            "usage_record_id",
            json!("i".repeat(255)),
            json!("i".repeat(256)),
        ),
        ("account", json!(wide), json!(format!("{wide}a"))),
        ("unit", json!("U".repeat(32)), json!("U".repeat(33))),
        ("meter", json!("m".repeat(128)), json!("m".repeat(129))),
        ("metadata", keys(50), keys(51)),
        (
            "metadata",
            metadata(vec![("k".repeat(40), "v")]),
            metadata(vec![("k".repeat(41), "v")]),
        ),
        (
            "metadata",
            metadata(vec![("k".into(), &long_value)]),
            metadata(vec![("k".into(), &longer_value)]),
        ),
    ];
    let refused = |r: &Resp, field: &str, what: &str| {
        assert_eq!(
            (r.status, r.code().as_str()),
            (422, "invalid_request"),
            "{what}: {r:?}"
        );
        assert_eq!(r.json()["errors"][0]["field"], field, "{what}");
    };
    let mut taken = 0;
    for (i, (field, at, past)) in cases.into_iter().enumerate() {
        let mut body = debit(&format!("u{i}"), &format!("c{i}"), "1");
        body[field] = past;
        let r = server.post("/v1/usage-debits", &key, &body).await;
        refused(&r, field, &format!("{field} past its bound"));
        body[field] = at;
        let r = server.post("/v1/usage-debits", &key, &body).await;
        assert_eq!(r.status, 201, "{field} at its bound: {r:?}");
        taken += 1;
    }
    let payment =
        |id: String| json!({"payment_id": id, "account": "c", "amount": "1", "unit": "USD"});
    let r = server
        .post("/v1/payments", &key, &payment("p".repeat(256)))
        .await;
    refused(&r, "payment_id", "payment_id past its bound");
    let r = server
        .post("/v1/payments", &key, &payment("p".repeat(255)))
        .await;
    assert_eq!(r.status, 201, "{r:?}");
    taken += 1;
    let adjustment = |id: &str, reason: &str| json!({"adjustment_id": id, "account": "c", "amount": "1", "direction": "credit", "reason": reason});
    let r = server
        .post("/v1/adjustments", &key, &adjustment("a1", &longer_value))
        .await;
    refused(&r, "reason", "reason past its bound");
    let r = server
        .post("/v1/adjustments", &key, &adjustment("a1", &long_value))
        .await;
    assert_eq!(r.status, 201, "{r:?}");
    taken += 1;
    assert_eq!(
        ledger.count("entries").await,
        taken,
        "refusals write nothing"
    );
}

/// `url` with `segment` appended as one path segment, percent-encoded.
fn with_segments(base: &str, segments: &[&str]) -> reqwest::Url {
    let mut url = reqwest::Url::parse(base).unwrap();
    url.path_segments_mut().unwrap().extend(segments);
    url
}

/// Text that would change a query if it were spliced into SQL (quotes,
/// comments, statement separators, LIKE wildcards, placeholders) is stored
/// and answered byte for byte, found by exact match only, replayed, and
/// the ledger verifies.
async fn hostile_text_is_data_not_sql(engine: Engine) {
    let ledger = Ledger::new(engine).await;
    let key = ledger.key("acme", "post,read").await;
    let server = ledger.server().await;
    let accounts = ["x'; DROP TABLE entries; --", "%", "_", "a\"b`c$1?:2"];
    let mut posted = Vec::new();
    for (i, account) in accounts.iter().enumerate() {
        let body = json!({
            "usage_record_id": format!("' OR '1'='1 {i}"), "account": account,
            "amount": "1", "unit": "USD", "meter": "m'); DELETE FROM balances; --\\",
            "metadata": {"k'\"\\": "v%_'--;", "$1": "?"}
        });
        let r = server.post("/v1/usage-debits", &key, &body).await;
        assert_eq!(r.status, 201, "{account}: {r:?}");
        let e = r.json();
        assert_eq!(
            (
                &e["account"],
                &e["upstream_id"],
                &e["meter"],
                &e["metadata"]
            ),
            (
                &body["account"],
                &body["usage_record_id"],
                &body["meter"],
                &body["metadata"]
            )
        );
        let again = server.post("/v1/usage-debits", &key, &body).await;
        assert!(again.status == 200 && again.replayed(), "{again:?}");
        assert_eq!(again.body, r.body);
        posted.push(r);
    }
    for (account, r) in accounts.iter().zip(&posted) {
        let id = r.json()["id"].as_str().unwrap().to_owned();
        let by_id = server.get(&format!("/v1/entries/{id}"), &key).await;
        assert_eq!(by_id.body, r.body, "{account}");
        let mut url = with_segments(&server.base, &["v1", "entries"]);
        url.query_pairs_mut().append_pair("account", account);
        let listed = server.send(server.client.get(url).bearer_auth(&key)).await;
        assert_eq!(listed.status, 200, "{account}: {listed:?}");
        let listed = listed.json()["entries"].as_array().unwrap().clone();
        assert_eq!(listed, vec![r.json()], "{account}: exact match only");
        let url = with_segments(&server.base, &["v1", "accounts", account, "balance"]);
        let balance = server.send(server.client.get(url).bearer_auth(&key)).await;
        assert_eq!(balance.status, 200, "{account}: {balance:?}");
        assert_eq!(balance.json()["posted"], "-1", "{account}");
    }
    assert_eq!(ledger.count("entries").await, accounts.len() as i64);
    let (ok, out, _) = ledger.tally(&["verify"]).await;
    assert!(ok, "{out}");
}

/// A 500 says only that an internal error occurred: not what failed, not
/// the stored data, not the code; the cause goes to the server's log.
async fn an_internal_error_answers_500_without_its_cause(engine: Engine) {
    let ledger = Ledger::new(engine.clone()).await;
    let key = ledger.key("acme", "post,read").await;
    let (server, log) = Server::start_capturing_log(&ledger.database_url, &[], &[]).await;
    let r = server
        .post("/v1/usage-debits", &key, &debit("u1", "cust", "1"))
        .await;
    assert_eq!(r.status, 201, "{r:?}");
    let id = r.json()["id"].as_str().unwrap().to_owned();
    // Stored data the ledger cannot have written: an entry kind it does not know.
    let drop_trigger = match engine {
        Engine::Sqlite => "DROP TRIGGER entries_append_only_update",
        Engine::Postgres { .. } => "DROP TRIGGER entries_append_only ON entries",
    };
    let marker = "kind_7f3a9c";
    ledger
        .sql(&[
            drop_trigger,
            &format!("UPDATE entries SET kind = '{marker}' WHERE seq = 1"),
        ])
        .await;
    let r = server.get(&format!("/v1/entries/{id}"), &key).await;
    assert_eq!((r.status, r.code().as_str()), (500, "internal"), "{r:?}");
    let p = r.json();
    assert_eq!(p["title"], "Internal error");
    assert!(
        p["detail"]
            .as_str()
            .unwrap()
            .starts_with("an internal error occurred"),
        "{p}"
    );
    let text = String::from_utf8_lossy(&r.body).to_ascii_lowercase();
    for leak in [marker, "corrupt", "kind", "entries", "sql", "panick", ".rs"] {
        assert!(!text.contains(leak), "{leak:?} in the answer: {text}");
    }
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while !log.lines().iter().any(|l| l.contains(marker)) {
        assert!(
            std::time::Instant::now() < deadline,
            "the cause is not in the log: {:?}",
            log.lines()
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}
