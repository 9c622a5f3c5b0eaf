//! A fuzz harness for the request parser: arbitrary bytes, arbitrary JSON
//! and mangled valid requests thrown at every mutating route of the real
//! router (in process, on a real SQLite ledger). Whatever comes in, the
//! server must not panic and must answer a documented status — an error as
//! problem+json whose `status` is the HTTP status — and never a 500.
//!
//! Each property prints how many cases it ran (`-- --nocapture`);
//! `PROPTEST_CASES` raises the count for a longer run.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::cell::Cell;

use axum::body::Body;
use axum::http::{header, Method, Request};
use axum::Router;
use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};
use serde_json::{json, Map, Value};
use tally_api::{router, AppState};
use tally_ledger::keys::{generate_secret, hash_secret};
use tally_ledger::store::Storage;
use tally_ledger::writer::WriterConfig;
use tower::ServiceExt;

/// Every route that reads a request body, with the method.
const ROUTES: &[(&str, &str)] = &[
    ("POST", "/v1/usage-debits"),
    ("POST", "/v1/payments"),
    ("POST", "/v1/batch"),
    ("POST", "/v1/holds"),
    ("POST", "/v1/holds/h1/capture"),
    ("POST", "/v1/holds/h1/release"),
    ("POST", "/v1/refunds"),
    ("POST", "/v1/reversals"),
    ("POST", "/v1/adjustments"),
    ("PUT", "/v1/accounts/cust_1"),
];

/// The statuses the API documents for a mutation.
const DOCUMENTED: &[u16] = &[200, 201, 400, 404, 409, 413, 415, 422, 429];

/// Field names the parsers look for, so generated objects reach deep into them.
const FIELDS: &[&str] = &[
    "usage_record_id",
    "payment_id",
    "hold_id",
    "capture_id",
    "release_id",
    "refund_id",
    "reversal_id",
    "adjustment_id",
    "entry_id",
    "account",
    "amount",
    "unit",
    "meter",
    "quantity",
    "occurred_at",
    "counter_account",
    "metadata",
    "processor",
    "expires_at",
    "ttl_seconds",
    "direction",
    "reason",
    "overdraft",
    "limit",
    "operations",
    "type",
    // The key serde_json's arbitrary_precision uses for numbers: an object
    // spelling it is refused, never read as a number.
    "$serde_json::private::Number",
];

struct Harness {
    /// How often each status was answered, for the report.
    statuses: std::sync::Mutex<std::collections::BTreeMap<u16, u32>>,
    runtime: tokio::runtime::Runtime,
    app: Router,
    key: String,
    _database: tally_testdb::FreshDatabase,
}

impl Harness {
    fn new() -> Harness {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        let database = tally_testdb::FreshDatabase::sqlite();
        let url = database.url.clone();
        let (app, key) = runtime.block_on(async {
            let storage = Storage::connect(&url).await.unwrap();
            let key = generate_secret().unwrap();
            storage
                .insert_api_key("fuzz", &hash_secret(&key), "post,read,audit,admin")
                .await
                .unwrap();
            (router(AppState::new(storage, WriterConfig::default())), key)
        });
        Harness {
            statuses: Default::default(),
            runtime,
            app,
            key,
            _database: database,
        }
    }

    /// Sends one request and checks the answer's shape; returns the status.
    fn check(
        &self,
        method: &str,
        path: &str,
        content_type: &str,
        body: Vec<u8>,
    ) -> Result<u16, TestCaseError> {
        let request = Request::builder()
            .method(Method::from_bytes(method.as_bytes()).unwrap())
            .uri(path)
            .header(header::AUTHORIZATION, format!("Bearer {}", self.key))
            .header(header::CONTENT_TYPE, content_type)
            .body(Body::from(body))
            .unwrap();
        let app = self.app.clone();
        let (status, ctype, bytes) = self.runtime.block_on(async move {
            let response = app.oneshot(request).await.unwrap();
            let status = response.status().as_u16();
            let ctype = response
                .headers()
                .get(header::CONTENT_TYPE)
                .and_then(|v| v.to_str().ok())
                .unwrap_or("")
                .to_owned();
            let bytes = axum::body::to_bytes(response.into_body(), usize::MAX)
                .await
                .unwrap();
            (status, ctype, bytes)
        });
        *self.statuses.lock().unwrap().entry(status).or_default() += 1;
        prop_assert!(
            DOCUMENTED.contains(&status),
            "{method} {path}: status {status}: {}",
            String::from_utf8_lossy(&bytes)
        );
        let body: Value = serde_json::from_slice(&bytes)
            .map_err(|e| TestCaseError::fail(format!("{method} {path}: body is not JSON ({e})")))?;
        if status >= 400 {
            prop_assert_eq!(ctype.as_str(), "application/problem+json");
            prop_assert_eq!(body["status"].as_u64(), Some(u64::from(status)));
            prop_assert!(body["code"].as_str().is_some_and(|c| !c.is_empty()));
            prop_assert!(body["type"].as_str().is_some() && body["title"].as_str().is_some());
        } else {
            prop_assert_eq!(ctype.as_str(), "application/json");
        }
        Ok(status)
    }
}

fn runner() -> TestRunner {
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|c| c.parse().ok())
        .unwrap_or(1_500);
    TestRunner::new(Config {
        cases,
        failure_persistence: None,
        ..Config::default()
    })
}

fn route() -> impl Strategy<Value = (&'static str, &'static str)> {
    (0..ROUTES.len()).prop_map(|i| ROUTES[i])
}

fn scalar() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(|i| json!(i)),
        any::<f64>()
            .prop_filter("finite", |f| f.is_finite())
            .prop_map(|f| json!(f)),
        // Decimal-looking text, valid or not, and arbitrary text (control
        // characters, non-ASCII, very long).
        "-?[0-9]{0,30}(\\.[0-9]{0,25})?(e-?[0-9]{1,3})?".prop_map(Value::String),
        "\\PC{0,40}".prop_map(Value::String),
        "[\\x00-\\x1f\"\\\\@]{0,5}".prop_map(Value::String),
        "[a-z@_]{0,300}".prop_map(Value::String),
    ]
}

fn json_value() -> impl Strategy<Value = Value> {
    scalar().prop_recursive(4, 64, 8, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..8).prop_map(Value::Array),
            proptest::collection::vec(
                (
                    prop_oneof![
                        (0..FIELDS.len()).prop_map(|i| FIELDS[i].to_owned()),
                        "\\PC{0,10}"
                    ],
                    inner
                ),
                0..8
            )
            .prop_map(|kv| Value::Object(kv.into_iter().collect::<Map<String, Value>>())),
        ]
    })
}

/// A valid request for a route, to mangle one field of.
fn valid_body(path: &str) -> Value {
    match path {
        "/v1/usage-debits" => {
            json!({"usage_record_id": "u1", "account": "c", "amount": "1.5", "unit": "USD"})
        }
        "/v1/payments" => {
            json!({"payment_id": "p1", "account": "c", "amount": "10", "unit": "USD"})
        }
        "/v1/batch" => {
            json!({"operations": [{"type": "usage_debit", "usage_record_id": "u2", "account": "c", "amount": "1", "unit": "USD"}]})
        }
        "/v1/holds" => {
            json!({"hold_id": "h1", "account": "c", "amount": "1", "unit": "USD", "ttl_seconds": 60})
        }
        "/v1/holds/h1/capture" => json!({"capture_id": "k1", "amount": "1"}),
        "/v1/holds/h1/release" => json!({"release_id": "r1"}),
        "/v1/refunds" => json!({"refund_id": "rf1", "payment_id": "p1", "amount": "1"}),
        "/v1/reversals" => json!({"reversal_id": "rv1", "entry_id": "ent_x", "reason": "r"}),
        "/v1/adjustments" => {
            json!({"adjustment_id": "a1", "account": "c", "amount": "1", "direction": "credit", "reason": "r"})
        }
        _ => json!({"unit": "USD", "overdraft": "forbid"}),
    }
}

#[test]
fn arbitrary_bytes_never_crash_the_parser() {
    let h = Harness::new();
    let ran = Cell::new(0u32);
    let content_types = prop_oneof![
        Just("application/json"),
        Just("application/merge-patch+json"),
        Just("application/json; charset=utf-8"),
        Just("application/json; charset=latin1"),
        Just("text/plain"),
        Just(""),
    ];
    runner()
        .run(
            &(
                route(),
                content_types,
                proptest::collection::vec(any::<u8>(), 0..2048),
            ),
            |((method, path), ctype, bytes)| {
                ran.set(ran.get() + 1);
                h.check(method, path, ctype, bytes)?;
                Ok(())
            },
        )
        .unwrap();
    eprintln!(
        "arbitrary_bytes_never_crash_the_parser: {} cases, statuses {:?}",
        ran.get(),
        h.statuses.lock().unwrap()
    );
}

/// Valid JSON text of a route with a few bytes overwritten, inserted or cut:
/// bodies that get past the first byte of the JSON parser.
#[test]
fn corrupted_json_text_never_crashes_the_parser() {
    let h = Harness::new();
    let ran = Cell::new(0u32);
    let edits = proptest::collection::vec((any::<usize>(), any::<u8>(), 0u8..3), 1..6);
    runner()
        .run(&(route(), edits), |((method, path), edits)| {
            ran.set(ran.get() + 1);
            let mut bytes = valid_body(path).to_string().into_bytes();
            for (at, byte, op) in edits {
                let at = at % (bytes.len() + 1);
                match op {
                    0 if at < bytes.len() => bytes[at] = byte,
                    1 => bytes.insert(at, byte),
                    _ if at < bytes.len() => {
                        bytes.remove(at);
                    }
                    _ => bytes.push(byte),
                }
            }
            h.check(method, path, "application/json", bytes)?;
            Ok(())
        })
        .unwrap();
    eprintln!(
        "corrupted_json_text_never_crashes_the_parser: {} cases, statuses {:?}",
        ran.get(),
        h.statuses.lock().unwrap()
    );
}

#[test]
fn arbitrary_json_never_crashes_the_parser() {
    let h = Harness::new();
    let ran = Cell::new(0u32);
    runner()
        .run(&(route(), json_value()), |((method, path), value)| {
            ran.set(ran.get() + 1);
            h.check(
                method,
                path,
                "application/json",
                value.to_string().into_bytes(),
            )?;
            Ok(())
        })
        .unwrap();
    eprintln!(
        "arbitrary_json_never_crashes_the_parser: {} cases, statuses {:?}",
        ran.get(),
        h.statuses.lock().unwrap()
    );
}

#[test]
fn a_valid_request_with_one_field_mangled_is_answered_cleanly() {
    let h = Harness::new();
    let ran = Cell::new(0u32);
    runner()
        .run(
            &(route(), 0usize..8, json_value()),
            |((method, path), which, value)| {
                ran.set(ran.get() + 1);
                let mut body = valid_body(path);
                let object = body.as_object_mut().unwrap();
                let keys: Vec<String> = object.keys().cloned().collect();
                let field = keys[which % keys.len()].clone();
                object.insert(field, value);
                h.check(
                    method,
                    path,
                    "application/json",
                    body.to_string().into_bytes(),
                )?;
                Ok(())
            },
        )
        .unwrap();
    eprintln!(
        "a_valid_request_with_one_field_mangled_is_answered_cleanly: {} cases, statuses {:?}",
        ran.get(),
        h.statuses.lock().unwrap()
    );
}
