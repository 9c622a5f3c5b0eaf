//! Exact input at the edge, over HTTP, on both engines: JSON numbers whose
//! exponents reach the ends of i64 and beyond, objects posing as numbers,
//! counter accounts the server keeps for itself, invalid names in paths and
//! query strings, the auth scheme's case and the body's charset. Each is
//! refused (or accepted) exactly, and a refusal writes nothing.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::{Engine, Ledger, Resp, Server};
use serde_json::{json, Value};

engine_tests!(
    numbers_with_extreme_exponents_are_exact_or_refused,
    objects_are_never_numbers,
    reserved_counter_accounts_are_refused_and_verify_passes,
    invalid_names_in_paths_and_queries_are_refused_before_the_database,
    the_auth_scheme_is_case_insensitive,
    a_json_body_in_another_charset_is_415,
);

/// Every entry of the tenant, as raw JSON (for "nothing was written").
async fn entries(server: &Server, key: &str) -> Vec<Value> {
    server.all_entries(key).await
}

/// The answer's status and body, readable.
fn show(r: &Resp) -> String {
    format!("{} {}", r.status, String::from_utf8_lossy(&r.body))
}

fn assert_invalid(r: &Resp, field: &str, what: &str) {
    assert_eq!(r.status, 422, "{what}: {}", show(r));
    assert_eq!(r.code(), "invalid_request", "{what}: {}", show(r));
    let fields: Vec<String> = r.json()["errors"]
        .as_array()
        .unwrap_or_else(|| panic!("{what}: no errors in {}", show(r)))
        .iter()
        .map(|e| e["field"].as_str().unwrap().to_owned())
        .collect();
    assert!(
        fields.iter().any(|f| f == field),
        "{what}: expected an error on {field}, got {fields:?}"
    );
}

/// JSON number literals that no amount may be read as: each must be refused
/// (never booked as some other amount, never a panic).
const REFUSED_NUMBERS: &[&str] = &[
    "1e-9223372036854775808",
    "123e-9223372036854775808",
    "-1e-9223372036854775808",
    "1e-9223372036854775807",
    "1e-9223372036854775809",
    "1e9223372036854775807",
    "1E+9223372036854775807",
    "1e9223372036854775808",
    "1e-9223372036854775806",
    "1e99999999999999999999",
    "1e-99999999999999999999",
    "0.5e-9223372036854775808",
    "10e-9223372036854775808",
    "5e-19",
    "1e28",
];

async fn numbers_with_extreme_exponents_are_exact_or_refused(engine: Engine) {
    let ledger = Ledger::new(engine).await;
    let key = ledger.key("acme", "post,read,admin").await;
    let server = ledger.server().await;

    for (i, n) in REFUSED_NUMBERS.iter().enumerate() {
        let bodies = [
            (
                "/v1/usage-debits",
                "amount",
                format!(r#"{{"usage_record_id":"u{i}","account":"c1","amount":{n},"unit":"USD"}}"#),
            ),
            (
                "/v1/usage-debits",
                "quantity",
                format!(
                    r#"{{"usage_record_id":"q{i}","account":"c1","amount":"1","unit":"USD","quantity":{n}}}"#
                ),
            ),
            (
                "/v1/payments",
                "amount",
                format!(r#"{{"payment_id":"p{i}","account":"c1","amount":{n},"unit":"USD"}}"#),
            ),
            (
                "/v1/holds",
                "amount",
                format!(
                    r#"{{"hold_id":"h{i}","account":"c1","amount":{n},"unit":"USD","ttl_seconds":60}}"#
                ),
            ),
            (
                "/v1/adjustments",
                "amount",
                format!(
                    r#"{{"adjustment_id":"a{i}","account":"c1","amount":{n},"unit":"USD","direction":"credit","reason":"r"}}"#
                ),
            ),
        ];
        for (path, field, body) in bodies {
            let r = server
                .post_raw(path, &key, "application/json", body.clone().into_bytes())
                .await;
            assert_invalid(&r, field, &body);
        }
        let r = server
            .post_raw(
                "/v1/batch",
                &key,
                "application/json",
                format!(
                    r#"{{"operations":[{{"type":"usage_debit","usage_record_id":"b{i}","account":"c1","amount":{n},"unit":"USD"}}]}}"#
                )
                .into_bytes(),
            )
            .await;
        assert_eq!(r.status, 200, "{}", show(&r));
        let item = &r.json()["results"][0];
        assert_eq!(item["status"], 422, "batch {n}: {item}");
        assert_eq!(item["problem"]["errors"][0]["field"], "amount", "{item}");
        let body = format!(r#"{{"unit":"USD","overdraft":{{"limit":{n}}}}}"#);
        let r = server
            .send(
                server
                    .client
                    .put(format!("{}/v1/accounts/c1", server.base))
                    .bearer_auth(&key)
                    .header("content-type", "application/json")
                    .body(body.clone()),
            )
            .await;
        assert_invalid(&r, "overdraft", &body);
    }
    assert!(entries(&server, &key).await.is_empty(), "a refusal wrote");

    // Zero with an extreme exponent is zero: not an amount, but a quantity.
    for zero in [
        "0e-9223372036854775808",
        "0e9223372036854775807",
        "0e99999999999999999999",
    ] {
        let body =
            format!(r#"{{"usage_record_id":"z","account":"c1","amount":{zero},"unit":"USD"}}"#);
        let r = server
            .post_raw(
                "/v1/usage-debits",
                &key,
                "application/json",
                body.clone().into_bytes(),
            )
            .await;
        assert_invalid(&r, "amount", &body);
        assert!(
            r.json()["detail"]
                .as_str()
                .unwrap()
                .contains("greater than zero"),
            "{}",
            show(&r)
        );
    }
    assert!(entries(&server, &key).await.is_empty(), "a refusal wrote");

    // Inputs that are legal once normalised are booked exactly, each on its
    // own system account so that every `balance_after` is the input alone.
    for (i, (n, want)) in [
        ("1000e-3", "1"),
        ("0.001e3", "1"),
        ("1.5E+1", "15"),
        ("\"000000000000000000000000000000000000000001.000\"", "1"),
        ("0.000000000000000000000000000000000000000001e42", "1"),
        ("1.0000000000000000000000000000000000000000", "1"),
        ("0.000000000000000001", "0.000000000000000001"),
        ("1000000000000000000000000000e-18", "1000000000"),
        (
            "9999999999999999999999999999",
            "9999999999999999999999999999",
        ),
    ]
    .into_iter()
    .enumerate()
    {
        let body = format!(
            r#"{{"usage_record_id":"ok{i}","account":"c{i}","amount":{n},"unit":"USD","quantity":{n},"counter_account":"@revenue{i}"}}"#
        );
        let r = server
            .post_raw(
                "/v1/usage-debits",
                &key,
                "application/json",
                body.into_bytes(),
            )
            .await;
        assert_eq!(r.status, 201, "{n}: {}", show(&r));
        assert_eq!(r.json()["amount"], want, "{n}");
        assert_eq!(r.json()["quantity"], want, "{n}");
    }
    let r = server
        .post_raw(
            "/v1/usage-debits",
            &key,
            "application/json",
            br#"{"usage_record_id":"zq","account":"c1","amount":"1","unit":"USD","quantity":0e-9223372036854775808}"#.to_vec(),
        )
        .await;
    assert_eq!(r.status, 201, "{}", show(&r));
    assert_eq!(r.json()["quantity"], "0");
}

async fn objects_are_never_numbers(engine: Engine) {
    let ledger = Ledger::new(engine).await;
    let key = ledger.key("acme", "post,read,admin").await;
    let server = ledger.server().await;

    let number = r#"{"$serde_json::private::Number":"2"}"#;
    // The same key spelled with an escape reads as the same key.
    let escaped = r#"{"$serde_json::private::Numbe\u0072":"2"}"#;
    let unparsable = r#"{"$serde_json::private::Number":"two"}"#;
    for n in [number, escaped, unparsable] {
        let cases = [
            (
                "/v1/usage-debits",
                "amount",
                format!(r#"{{"usage_record_id":"u","account":"c1","amount":{n},"unit":"USD"}}"#),
            ),
            (
                "/v1/usage-debits",
                "quantity",
                format!(
                    r#"{{"usage_record_id":"u","account":"c1","amount":"1","unit":"USD","quantity":{n}}}"#
                ),
            ),
            (
                "/v1/payments",
                "amount",
                format!(r#"{{"payment_id":"p","account":"c1","amount":{n},"unit":"USD"}}"#),
            ),
            (
                "/v1/holds",
                "ttl_seconds",
                format!(
                    r#"{{"hold_id":"h","account":"c1","amount":"1","unit":"USD","ttl_seconds":{n}}}"#
                ),
            ),
            (
                "/v1/usage-debits",
                "metadata",
                format!(
                    r#"{{"usage_record_id":"u","account":"c1","amount":"1","unit":"USD","metadata":{n}}}"#
                ),
            ),
            // The whole body: an object with an unknown field.
            (
                "/v1/usage-debits",
                "$serde_json::private::Number",
                n.to_owned(),
            ),
        ];
        for (path, field, body) in cases {
            let r = server
                .post_raw(path, &key, "application/json", body.clone().into_bytes())
                .await;
            assert_invalid(&r, field, &body);
        }
        let body = format!(r#"{{"unit":"USD","overdraft":{{"limit":{n}}}}}"#);
        let r = server
            .send(
                server
                    .client
                    .put(format!("{}/v1/accounts/c1", server.base))
                    .bearer_auth(&key)
                    .header("content-type", "application/json")
                    .body(body.clone()),
            )
            .await;
        assert_invalid(&r, "overdraft", &body);
        // In a batch only that operation is refused, as its endpoint would.
        let body = format!(
            r#"{{"operations":[{{"type":"payment","payment_id":"p","account":"c1","amount":{n},"unit":"USD"}},{{"type":"payment","payment_id":"p2","account":"c1","amount":"1","unit":"USD","metadata":{n}}}]}}"#
        );
        let r = server
            .post_raw("/v1/batch", &key, "application/json", body.into_bytes())
            .await;
        assert_eq!(r.status, 200, "{}", show(&r));
        let results = r.json()["results"].clone();
        for (i, field) in ["amount", "metadata"].into_iter().enumerate() {
            assert_eq!(results[i]["status"], 422, "{results}");
            assert_eq!(
                results[i]["problem"]["errors"][0]["field"], field,
                "{results}"
            );
        }
    }
    assert!(entries(&server, &key).await.is_empty(), "a refusal wrote");
    // A real number still works, and so does the same text as a string value.
    let r = server
        .post_raw(
            "/v1/usage-debits",
            &key,
            "application/json",
            br#"{"usage_record_id":"ok","account":"c1","amount":2,"unit":"USD","metadata":{"note":"$serde_json::private::Number"}}"#.to_vec(),
        )
        .await;
    assert_eq!(r.status, 201, "{}", show(&r));
    assert_eq!(r.json()["amount"], "2");
}

async fn reserved_counter_accounts_are_refused_and_verify_passes(engine: Engine) {
    let ledger = Ledger::new(engine).await;
    let key = ledger.key("acme", "post,read").await;
    let server = ledger.server().await;

    for counter in ["@holds", "@adjustments"] {
        let bodies = [
            (
                "/v1/usage-debits",
                json!({"usage_record_id": "u1", "account": "c1", "amount": "1", "unit": "USD",
                       "counter_account": counter}),
            ),
            (
                "/v1/payments",
                json!({"payment_id": "p1", "account": "c1", "amount": "1", "unit": "USD",
                       "counter_account": counter}),
            ),
            (
                "/v1/holds",
                json!({"hold_id": "h1", "account": "c1", "amount": "1", "unit": "USD",
                       "ttl_seconds": 60, "counter_account": counter}),
            ),
        ];
        for (path, body) in &bodies {
            let r = server.post(path, &key, body).await;
            assert_invalid(&r, "counter_account", &format!("{path} {counter}"));
            let detail = r.json()["detail"].as_str().unwrap().to_owned();
            assert!(detail.contains(counter), "{detail}");
        }
        let mut ops = Vec::new();
        for (path, body) in &bodies {
            let mut op = body.clone();
            op["type"] = json!(match *path {
                "/v1/usage-debits" => "usage_debit",
                "/v1/payments" => "payment",
                _ => "hold",
            });
            ops.push(op);
        }
        let r = server
            .post("/v1/batch", &key, &json!({ "operations": ops }))
            .await;
        assert_eq!(r.status, 200, "{}", show(&r));
        for item in r.json()["results"].as_array().unwrap() {
            assert_eq!(item["status"], 422, "{item}");
            assert_eq!(item["problem"]["errors"][0]["field"], "counter_account");
        }
    }
    assert!(entries(&server, &key).await.is_empty(), "a refusal wrote");

    // Other system accounts (and customer accounts) remain counter accounts.
    for (i, counter) in ["@payments", "@fees", "@revenue", "c2"].iter().enumerate() {
        let r = server
            .post(
                "/v1/usage-debits",
                &key,
                &json!({"usage_record_id": format!("ok{i}"), "account": "c1", "amount": "1",
                        "unit": "USD", "counter_account": counter}),
            )
            .await;
        assert_eq!(r.status, 201, "{counter}: {}", show(&r));
        let r = server
            .post(
                "/v1/payments",
                &key,
                &json!({"payment_id": format!("ok{i}"), "account": "c1", "amount": "1",
                        "unit": "USD", "counter_account": counter}),
            )
            .await;
        assert_eq!(r.status, 201, "{counter}: {}", show(&r));
        let r = server
            .post(
                "/v1/holds",
                &key,
                &json!({"hold_id": format!("ok{i}"), "account": "c1", "amount": "1",
                        "unit": "USD", "ttl_seconds": 60, "counter_account": counter}),
            )
            .await;
        assert_eq!(r.status, 201, "{counter}: {}", show(&r));
        let r = server
            .post(
                &format!("/v1/holds/ok{i}/capture"),
                &key,
                &json!({"capture_id": format!("cap{i}"), "amount": "1"}),
            )
            .await;
        assert_eq!(r.status, 201, "{counter}: {}", show(&r));
    }
    let (ok, out, err) = ledger.tally(&["verify"]).await;
    assert!(ok, "verify failed: {out}\n{err}");
}

async fn invalid_names_in_paths_and_queries_are_refused_before_the_database(engine: Engine) {
    let ledger = Ledger::new(engine).await;
    let key = ledger.key("acme", "post,read,admin").await;
    let server = ledger.server().await;
    let r = server
        .post("/v1/usage-debits", &key, &common::debit("u1", "c1", "1"))
        .await;
    assert_eq!(r.status, 201, "{}", show(&r));

    let long_account = "a".repeat(129);
    let long_id = "i".repeat(256);
    // (bad text as it goes in a URL, the parameter it is given as)
    let bad_names = ["a%00b", "%00", "a%07b", "a%1Fb", "%FF", "a%C3", "%ED%A0%80"];
    let mut cases: Vec<(String, &str)> = Vec::new();
    for bad in bad_names {
        cases.extend([
            (format!("/v1/accounts/{bad}/balance"), "account"),
            (format!("/v1/accounts/{bad}"), "account"),
            (format!("/v1/accounts/{bad}/statement?from=2026-01-01T00:00:00Z&to=2026-01-02T00:00:00Z"), "account"),
            (format!("/v1/accounts/{bad}/usage"), "account"),
            (format!("/v1/entries/{bad}"), "id"),
            (format!("/v1/entries/ent_{bad}"), "id"),
            (format!("/v1/holds/{bad}"), "hold_id"),
            (format!("/v1/entries?account={bad}"), "account"),
            (format!("/v1/entries?kind={bad}"), "kind"),
            (format!("/v1/accounts/c1/balance?unit={bad}"), "unit"),
            (format!("/v1/accounts/c1/statement?from=2026-01-01T00:00:00Z&to=2026-01-02T00:00:00Z&unit={bad}"), "unit"),
            (format!("/v1/accounts/c1/usage?meter={bad}"), "meter"),
        ]);
    }
    cases.extend([
        (format!("/v1/accounts/{long_account}/balance"), "account"),
        (format!("/v1/accounts/{long_account}"), "account"),
        (format!("/v1/entries/{long_id}"), "id"),
        (format!("/v1/holds/{long_id}"), "hold_id"),
        (format!("/v1/entries?account={long_account}"), "account"),
        (
            format!("/v1/accounts/c1/balance?unit={}", "U".repeat(33)),
            "unit",
        ),
    ]);
    for (path, field) in &cases {
        let r = server.get(path, &key).await;
        assert_invalid(&r, field, path);
    }
    // Mutations naming a hold or an account in the path too.
    for bad in bad_names {
        let r = server
            .post(
                &format!("/v1/holds/{bad}/capture"),
                &key,
                &json!({"capture_id": "c", "amount": "1"}),
            )
            .await;
        assert_invalid(&r, "hold_id", bad);
        let r = server
            .post(
                &format!("/v1/holds/{bad}/release"),
                &key,
                &json!({"release_id": "r"}),
            )
            .await;
        assert_invalid(&r, "hold_id", bad);
        let r = server
            .put(
                &format!("/v1/accounts/{bad}"),
                &key,
                &json!({"unit": "USD"}),
            )
            .await;
        assert_invalid(&r, "account", bad);
    }
    // The ledger still answers, and nothing was written.
    assert_eq!(entries(&server, &key).await.len(), 1);
    let r = server.get("/v1/accounts/c1/balance", &key).await;
    assert_eq!(r.status, 200, "{}", show(&r));
}

async fn the_auth_scheme_is_case_insensitive(engine: Engine) {
    let ledger = Ledger::new(engine).await;
    let key = ledger.key("acme", "read").await;
    let server = ledger.server().await;
    for scheme in ["Bearer", "bearer", "BEARER", "bEaReR"] {
        let r = server
            .send(
                server
                    .client
                    .get(format!("{}/v1/entries", server.base))
                    .header("authorization", format!("{scheme} {key}")),
            )
            .await;
        assert_eq!(r.status, 200, "{scheme}: {}", show(&r));
    }
    for bad in [format!("Basic {key}"), format!("Bearer{key}"), key.clone()] {
        let r = server
            .send(
                server
                    .client
                    .get(format!("{}/v1/entries", server.base))
                    .header("authorization", bad.clone()),
            )
            .await;
        assert_eq!(r.status, 401, "{bad}: {}", show(&r));
        assert_eq!(r.code(), "unauthenticated");
    }
}

async fn a_json_body_in_another_charset_is_415(engine: Engine) {
    let ledger = Ledger::new(engine).await;
    let key = ledger.key("acme", "post,read").await;
    let server = ledger.server().await;
    let body = |id: &str| common::debit(id, "c1", "1").to_string().into_bytes();

    for ct in [
        "application/json; charset=latin1",
        "application/json; charset=ISO-8859-1",
        "application/json;charset=utf-16",
        "application/json; charset=\"us-ascii\"",
        "application/problem+json; charset=windows-1252",
    ] {
        let r = server
            .post_raw("/v1/usage-debits", &key, ct, body("x"))
            .await;
        assert_eq!(r.status, 415, "{ct}: {}", show(&r));
        assert_eq!(r.code(), "unsupported_media_type", "{ct}");
        let r = server
            .post_raw("/v1/batch", &key, ct, br#"{"operations":[]}"#.to_vec())
            .await;
        assert_eq!(r.status, 415, "{ct}: {}", show(&r));
    }
    // Not JSON at all stays 400 malformed_json.
    for ct in ["text/plain", "text/plain; charset=latin1", ""] {
        let r = server
            .post_raw("/v1/usage-debits", &key, ct, body("x"))
            .await;
        assert_eq!(r.status, 400, "{ct}: {}", show(&r));
        assert_eq!(r.code(), "malformed_json", "{ct}");
    }
    assert!(entries(&server, &key).await.is_empty(), "a refusal wrote");

    for (i, ct) in [
        "application/json",
        "application/json; charset=utf-8",
        "application/json; charset=UTF-8",
        "application/json;charset=\"utf-8\"",
        "Application/JSON ; Charset=Utf-8",
        "application/json; charset=utf-8; foo=bar",
    ]
    .iter()
    .enumerate()
    {
        let r = server
            .post_raw("/v1/usage-debits", &key, ct, body(&format!("ok{i}")))
            .await;
        assert_eq!(r.status, 201, "{ct}: {}", show(&r));
    }
}
