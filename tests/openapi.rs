//! The OpenAPI document (`GET /openapi.json`) against the real server, on
//! both engines:
//!
//! - the router serves exactly the documented operations: the route table
//!   the router is built from equals the document; every documented
//!   (method, path), its parameters filled, reaches a handler (not the
//!   router's fallback); every other method on a documented path, and
//!   every path the docs and the SPEC mention, is documented or hits the
//!   fallback;
//! - each request schema has exactly the fields its parser knows, requires
//!   exactly the fields the parser requires, and its example is accepted;
//! - query parameters are exactly the documented ones;
//! - each operation needs exactly the scope it documents;
//! - responses match their documented schemas; every problem code of the
//!   SPEC and of docs/ledger-rules.md is documented;
//! - `/docs` is a page whose assets are all served locally;
//! - every test docs/security.md names exists and runs (on both engines
//!   when it takes one).

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use common::{Engine, Ledger, Resp, Server};
use serde_json::{json, Map, Value};
use tally_ledger::intents::fields as intent_fields;
use tally_ledger::request::request_fields;

engine_tests!(
    the_router_serves_exactly_the_documented_operations,
    request_schemas_match_their_parsers_and_their_examples_are_accepted,
    query_parameters_are_exactly_the_documented_ones,
    every_operation_needs_exactly_its_documented_scope,
    every_problem_code_and_the_spec_examples_are_documented,
    the_reference_page_works_offline,
);

const ALL_SCOPES: &str = "post,read,audit,admin";
const METHODS: [&str; 6] = ["GET", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"];
const UNKNOWN_FIELD: &str = "zz_not_a_field";

/// The operations the task and the SPEC name: none may go missing.
const REQUIRED_OPERATIONS: &[(&str, &str)] = &[
    ("POST", "/v1/usage-debits"),
    ("POST", "/v1/payments"),
    ("POST", "/v1/batch"),
    ("GET", "/v1/entries"),
    ("GET", "/v1/entries/{id}"),
    ("GET", "/v1/accounts/{account}/balance"),
    ("PUT", "/v1/accounts/{account}"),
    ("GET", "/v1/accounts/{account}"),
    ("GET", "/v1/accounts/{account}/usage"),
    ("GET", "/v1/accounts/{account}/statement"),
    ("POST", "/v1/holds"),
    ("GET", "/v1/holds/{hold_id}"),
    ("POST", "/v1/holds/{hold_id}/capture"),
    ("POST", "/v1/holds/{hold_id}/release"),
    ("POST", "/v1/refunds"),
    ("POST", "/v1/reversals"),
    ("POST", "/v1/adjustments"),
    ("GET", "/v1/audit/export"),
    ("GET", "/v1/audit/head"),
    ("GET", "/v1/accounts"),
    ("POST", "/v1/audit/verify"),
    ("POST", "/v1/webhook-endpoints"),
    ("GET", "/v1/webhook-endpoints"),
    ("GET", "/v1/webhook-endpoints/{id}"),
    ("PATCH", "/v1/webhook-endpoints/{id}"),
    ("DELETE", "/v1/webhook-endpoints/{id}"),
    ("POST", "/v1/webhook-endpoints/{id}/rotate-secret"),
    ("GET", "/v1/webhook-endpoints/{id}/deliveries"),
    ("POST", "/v1/webhook-deliveries/{id}/retry"),
    ("POST", "/v1/webhook-endpoints/{id}/replay"),
    ("GET", "/healthz"),
    ("GET", "/readyz"),
    ("GET", "/metrics"),
    ("GET", "/openapi.json"),
    ("GET", "/docs"),
];

/// The parser's field list of each documented request body.
fn parser_fields(method: &str, path: &str) -> Option<&'static [&'static str]> {
    Some(match (method, path) {
        ("POST", "/v1/usage-debits") => request_fields::USAGE_DEBIT,
        ("POST", "/v1/payments") => request_fields::PAYMENT,
        ("POST", "/v1/holds") => request_fields::HOLD,
        ("POST", "/v1/holds/{hold_id}/capture") => request_fields::CAPTURE,
        ("POST", "/v1/holds/{hold_id}/release") => request_fields::RELEASE,
        ("POST", "/v1/refunds") => request_fields::REFUND,
        ("POST", "/v1/reversals") => request_fields::REVERSAL,
        ("POST", "/v1/adjustments") => request_fields::ADJUSTMENT,
        ("PUT", "/v1/accounts/{account}") => request_fields::SETTINGS,
        ("POST", "/v1/batch") => &["operations"],
        ("POST", "/v1/intents") => intent_fields::CLAIM,
        ("POST", "/v1/intents/{intent_id}/complete") => intent_fields::COMPLETE,
        ("POST", "/v1/intents/{intent_id}/fail") => intent_fields::FAIL,
        ("POST", "/v1/intents/{intent_id}/heartbeat") => intent_fields::HEARTBEAT,
        ("POST", "/v1/webhook-endpoints") => tally_api::requests::ENDPOINT_FIELDS,
        ("PATCH", "/v1/webhook-endpoints/{id}") => tally_api::requests::ENDPOINT_CHANGE_FIELDS,
        ("POST", "/v1/webhook-endpoints/{id}/replay") => tally_api::requests::REPLAY_FIELDS,
        ("PUT", "/v1/integrations/stripe") => tally_api::requests::STRIPE_FIELDS,
        _ => return None,
    })
}

// ---------------------------------------------------------------- helpers

#[derive(Debug, Clone)]
struct Op {
    method: String,
    path: String,
    op: Value,
}

async fn document(server: &Server) -> Value {
    let r = server
        .send(server.client.get(format!("{}/openapi.json", server.base)))
        .await;
    assert_eq!(r.status, 200, "{r:?}");
    assert!(
        r.content_type().starts_with("application/json"),
        "{}",
        r.content_type()
    );
    r.json()
}

fn operations(doc: &Value) -> Vec<Op> {
    let mut out = Vec::new();
    for (path, item) in doc["paths"].as_object().expect("paths") {
        for (method, op) in item.as_object().expect("path item") {
            if [
                "get", "put", "post", "delete", "options", "head", "patch", "trace",
            ]
            .contains(&method.as_str())
            {
                out.push(Op {
                    method: method.to_uppercase(),
                    path: path.clone(),
                    op: op.clone(),
                });
            }
        }
    }
    out
}

/// Follows `$ref`s to the schema they name.
fn resolve<'a>(doc: &'a Value, schema: &'a Value) -> &'a Value {
    match schema.get("$ref").and_then(Value::as_str) {
        Some(r) => {
            let name = r
                .strip_prefix("#/components/schemas/")
                .unwrap_or_else(|| panic!("unexpected $ref {r}"));
            let target = &doc["components"]["schemas"][name];
            assert!(!target.is_null(), "dangling $ref {r}");
            resolve(doc, target)
        }
        None => schema,
    }
}

/// The operation's path with each path parameter replaced by its example.
fn concrete_path(op: &Op) -> String {
    let mut path = op.path.clone();
    for p in op.op["parameters"].as_array().into_iter().flatten() {
        if p["in"] == "path" {
            let name = p["name"].as_str().unwrap();
            let example = p["example"].as_str().unwrap_or_else(|| {
                panic!(
                    "{} {}: path parameter {name} has no example",
                    op.method, op.path
                )
            });
            path = path.replace(&format!("{{{name}}}"), example);
        }
    }
    assert!(
        !path.contains('{'),
        "{}: a path parameter is not documented",
        op.path
    );
    path
}

fn request_schema<'a>(doc: &'a Value, op: &'a Op) -> Option<&'a Value> {
    let body = op.op.get("requestBody")?;
    let schema = &body["content"]["application/json"]["schema"];
    assert!(
        !schema.is_null(),
        "{} {}: the body is not JSON",
        op.method,
        op.path
    );
    Some(resolve(doc, schema))
}

fn example_of(doc: &Value, op: &Op) -> Option<Value> {
    let schema = request_schema(doc, op)?;
    Some(
        schema
            .get("example")
            .or_else(|| schema["examples"].get(0))
            .cloned()
            .unwrap_or_else(|| {
                panic!(
                    "{} {}: the request schema has no example",
                    op.method, op.path
                )
            }),
    )
}

fn scopes(op: &Op) -> Vec<String> {
    op.op["security"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|r| r["bearer"].as_array())
        .flatten()
        .map(|s| s.as_str().unwrap().to_owned())
        .collect()
}

async fn call(
    server: &Server,
    method: &str,
    path: &str,
    key: Option<&str>,
    body: Option<&Value>,
) -> Resp {
    let method = reqwest::Method::from_bytes(method.as_bytes()).unwrap();
    let mut req = server
        .client
        .request(method, format!("{}{path}", server.base));
    if let Some(key) = key {
        req = req.bearer_auth(key);
    }
    if let Some(body) = body {
        req = req
            .header("content-type", "application/json")
            .body(body.to_string());
    }
    server.send(req).await
}

/// Whether the answer came from the router's fallbacks (no such route, or
/// no such method on the path) rather than a handler.
fn is_fallback(r: &Resp) -> bool {
    let body: Value = serde_json::from_slice(&r.body).unwrap_or(Value::Null);
    (r.status == 404 && body["detail"] == "no such route")
        || (r.status == 405 && body["code"] == "method_not_allowed")
}

/// The fields of a 422's `errors` that have this message.
fn fields_with(r: &Resp, message: &str) -> BTreeSet<String> {
    r.json()["errors"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|e| e["message"] == message)
        .map(|e| e["field"].as_str().unwrap().to_owned())
        .collect()
}

/// Whether a concrete path matches a path template.
fn matches(template: &str, path: &str) -> bool {
    let t: Vec<&str> = template.split('/').collect();
    let p: Vec<&str> = path.split('/').collect();
    t.len() == p.len()
        && t.iter()
            .zip(&p)
            .all(|(t, p)| (t.starts_with('{') && t.ends_with('}') && !p.is_empty()) || t == p)
}

/// Checks `value` against a schema of the document (the subset of JSON
/// Schema the document uses); returns what does not match.
fn check(doc: &Value, schema: &Value, value: &Value, at: &str, errors: &mut Vec<String>) {
    let schema = resolve(doc, schema);
    if let Some(all) = schema["allOf"].as_array() {
        for s in all {
            check_shape(doc, s, value, at, errors);
        }
        // Unknown members: against the union of the parts' properties.
        if let Some(obj) = value.as_object() {
            let mut known = BTreeSet::new();
            for s in all {
                known.extend(properties(doc, s).keys().cloned());
            }
            for k in obj.keys() {
                if !known.contains(k) {
                    errors.push(format!("{at}.{k}: not in the schema"));
                }
            }
        }
        return;
    }
    check_shape(doc, schema, value, at, errors);
    if let (Some(obj), Some(props)) = (value.as_object(), schema["properties"].as_object()) {
        if schema.get("additionalProperties").is_none() {
            for k in obj.keys() {
                if !props.contains_key(k) {
                    errors.push(format!("{at}.{k}: not in the schema"));
                }
            }
        }
    }
}

fn properties(doc: &Value, schema: &Value) -> Map<String, Value> {
    let schema = resolve(doc, schema);
    let mut out = schema["properties"]
        .as_object()
        .cloned()
        .unwrap_or_default();
    for s in schema["allOf"].as_array().into_iter().flatten() {
        out.extend(properties(doc, s));
    }
    out
}

/// Types, enums, required members and nested schemas; not unknown members
/// (see [`check`]).
fn check_shape(doc: &Value, schema: &Value, value: &Value, at: &str, errors: &mut Vec<String>) {
    let schema = resolve(doc, schema);
    if let Some(all) = schema["allOf"].as_array() {
        for s in all {
            check_shape(doc, s, value, at, errors);
        }
    }
    if let Some(one) = schema["oneOf"].as_array().or(schema["anyOf"].as_array()) {
        let ok = one.iter().any(|s| {
            let mut e = Vec::new();
            check(doc, s, value, at, &mut e);
            e.is_empty()
        });
        if !ok {
            errors.push(format!("{at}: matches none of oneOf: {value}"));
        }
        return;
    }
    if let Some(types) = schema.get("type") {
        let types: Vec<&str> = match types {
            Value::String(t) => vec![t.as_str()],
            Value::Array(ts) => ts.iter().filter_map(Value::as_str).collect(),
            _ => vec![],
        };
        let ok = types.iter().any(|t| match *t {
            "string" => value.is_string(),
            "integer" => value.is_i64() || value.is_u64(),
            "number" => value.is_number(),
            "boolean" => value.is_boolean(),
            "null" => value.is_null(),
            "object" => value.is_object(),
            "array" => value.is_array(),
            _ => false,
        });
        if !ok {
            errors.push(format!("{at}: {value} is not of type {types:?}"));
            return;
        }
    }
    if let Some(values) = schema["enum"].as_array() {
        if !values.contains(value) {
            errors.push(format!("{at}: {value} is not one of {values:?}"));
        }
    }
    if let Some(obj) = value.as_object() {
        for r in schema["required"].as_array().into_iter().flatten() {
            let r = r.as_str().unwrap();
            if !obj.contains_key(r) {
                errors.push(format!("{at}: required member {r} is missing"));
            }
        }
        let props = schema["properties"].as_object();
        for (k, v) in obj {
            match props.and_then(|p| p.get(k)) {
                Some(s) => check(doc, s, v, &format!("{at}.{k}"), errors),
                None => {
                    if let Some(extra) =
                        schema.get("additionalProperties").filter(|a| a.is_object())
                    {
                        check(doc, extra, v, &format!("{at}.{k}"), errors);
                    }
                }
            }
        }
    }
    if let (Some(items), Some(array)) = (schema.get("items"), value.as_array()) {
        for (i, v) in array.iter().enumerate() {
            check(doc, items, v, &format!("{at}[{i}]"), errors);
        }
    }
}

/// Asserts that an answer matches the schema its operation documents for
/// its status and content type.
fn assert_documented(doc: &Value, op: &Op, r: &Resp) {
    let response = &op.op["responses"][r.status.to_string()];
    assert!(
        !response.is_null(),
        "{} {} answered {} which it does not document: {}",
        op.method,
        op.path,
        r.status,
        String::from_utf8_lossy(&r.body)
    );
    let content_type = r.content_type();
    let mime = content_type.split(';').next().unwrap().trim();
    let content = response["content"]
        .as_object()
        .and_then(|c| {
            c.iter()
                .find(|(k, _)| k.split(';').next().unwrap().trim() == mime)
        })
        .map(|(_, v)| v.clone())
        .unwrap_or(Value::Null);
    assert!(
        !content.is_null(),
        "{} {} answered {} as {mime}, documented as {:?}",
        op.method,
        op.path,
        r.status,
        response["content"]
            .as_object()
            .map(|c| c.keys().collect::<Vec<_>>())
    );
    if mime == "application/json" || mime.ends_with("+json") {
        let mut errors = Vec::new();
        check(doc, &content["schema"], &r.json(), "body", &mut errors);
        assert!(
            errors.is_empty(),
            "{} {} answer {} does not match its schema: {errors:#?}\n{}",
            op.method,
            op.path,
            r.status,
            String::from_utf8_lossy(&r.body)
        );
    }
}

fn find<'a>(ops: &'a [Op], method: &str, path: &str) -> &'a Op {
    ops.iter()
        .find(|o| o.method == method && o.path == path)
        .unwrap_or_else(|| panic!("{method} {path} is not documented"))
}

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The SPEC, beside the repository (`../shared/SPEC.md`), if it is there.
/// The codes of SPEC §3's error table.
const SPEC_ERROR_CODES: [&str; 10] = [
    "malformed_json",
    "unauthenticated",
    "forbidden",
    "not_found",
    "idempotency_conflict",
    "payload_too_large",
    "invalid_request",
    "unit_mismatch",
    "rate_limited",
    "unavailable",
];

fn spec() -> Option<String> {
    let path = repo_root().join("../shared/SPEC.md");
    match std::fs::read_to_string(&path) {
        Ok(text) => Some(text),
        Err(_) => {
            eprintln!("note: {} not found; its checks are skipped", path.display());
            None
        }
    }
}

/// The project's own prose: README and docs/*.md, plus the SPEC.
fn prose() -> Vec<String> {
    let mut texts = vec![std::fs::read_to_string(repo_root().join("README.md")).unwrap()];
    for entry in std::fs::read_dir(repo_root().join("docs")).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "md") {
            texts.push(std::fs::read_to_string(path).unwrap());
        }
    }
    texts.extend(spec());
    texts
}

/// Every path a text names in code spans: `GET /v1/…`, `/healthz`, …
fn mentioned_paths(text: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for (i, span) in text.split('`').enumerate() {
        if i % 2 == 0 {
            continue;
        }
        for word in span.split_whitespace() {
            let Some(path) = word.strip_prefix('/').map(|p| format!("/{p}")) else {
                continue;
            };
            let path = path.split(['?', '[']).next().unwrap().to_owned();
            let path = path.trim_end_matches([',', '.', ')', ';', ':']).to_owned();
            if path.contains('…') || path.contains('*') || path.starts_with("//") {
                continue;
            }
            // Only URL paths: a first segment without a file-system look.
            if path.starts_with("/v1") || !path[1..].contains('/') {
                out.insert(path);
            }
        }
    }
    out
}

// ------------------------------------------------------------------ tests

async fn the_router_serves_exactly_the_documented_operations(engine: Engine) {
    let ledger = Ledger::new(engine).await;
    let key = ledger.key("acme", ALL_SCOPES).await;
    let server = ledger.server().await;
    let doc = document(&server).await;
    let version = doc["openapi"].as_str().unwrap();
    assert!(version.starts_with("3.1."), "openapi {version}");
    let ops = operations(&doc);
    let documented: BTreeSet<(String, String)> = ops
        .iter()
        .map(|o| (o.method.clone(), o.path.clone()))
        .collect();

    // The route table the router is built from is the document.
    let (_, table) = tally_api::server::routes().split_for_parts();
    let table = serde_json::to_value(&table).unwrap();
    let served: BTreeSet<(String, String)> = operations(&table)
        .into_iter()
        .map(|o| (o.method, o.path))
        .collect();
    assert_eq!(served, documented, "router table vs /openapi.json");
    for (method, path) in REQUIRED_OPERATIONS {
        assert!(
            documented.contains(&(method.to_string(), path.to_string())),
            "{method} {path} is not documented"
        );
    }

    // Every documented operation reaches its handler; every other method
    // of a documented path is the router's 405.
    let mut probed = 0;
    for path in documented.iter().map(|(_, p)| p).collect::<BTreeSet<_>>() {
        let any = ops.iter().find(|o| &o.path == path).unwrap();
        let concrete = concrete_path(any);
        for method in METHODS {
            let body = (["POST", "PUT", "PATCH"].contains(&method)).then(|| json!({}));
            let r = call(&server, method, &concrete, Some(&key), body.as_ref()).await;
            probed += 1;
            if documented.contains(&(method.to_owned(), path.clone())) {
                assert!(
                    !is_fallback(&r),
                    "{method} {concrete} is documented but not served: {r:?}"
                );
                assert_documented(&doc, find(&ops, method, path), &r);
            } else {
                assert_eq!(
                    r.status, 405,
                    "{method} {concrete} is served but not documented: {r:?}"
                );
                assert_eq!(r.code(), "method_not_allowed");
            }
        }
    }

    // Every path the README, docs/ and the SPEC name, and a few near
    // misses: served only if documented.
    let mut candidates: BTreeSet<String> =
        prose().iter().flat_map(|t| mentioned_paths(t)).collect();
    candidates.extend(
        [
            "/",
            "/v1",
            "/v1/entries/x/y",
            "/v2/entries",
            "/openapi.yaml",
            "/swagger-ui",
            "/api-docs",
        ]
        .map(str::to_owned),
    );
    for candidate in &candidates {
        // Fill templates (`{account}`, `<code>`) the way the docs write them.
        let concrete: String = candidate
            .split('/')
            .map(|seg| {
                if (seg.starts_with('{') && seg.ends_with('}'))
                    || (seg.starts_with('<') && seg.ends_with('>'))
                {
                    "x"
                } else {
                    seg
                }
            })
            .collect::<Vec<_>>()
            .join("/");
        for method in METHODS {
            let body = (["POST", "PUT", "PATCH"].contains(&method)).then(|| json!({}));
            let r = call(&server, method, &concrete, Some(&key), body.as_ref()).await;
            probed += 1;
            if is_fallback(&r) {
                continue;
            }
            let op = ops
                .iter()
                .find(|o| o.method == method && matches(&o.path, &concrete));
            assert!(
                op.is_some(),
                "{method} {concrete} (named in the docs as {candidate}) is served but not documented: {r:?}"
            );
        }
    }
    assert!(probed > 200, "only {probed} probes");
}

async fn request_schemas_match_their_parsers_and_their_examples_are_accepted(engine: Engine) {
    let ledger = Ledger::new(engine).await;
    let key = ledger.key("acme", ALL_SCOPES).await;
    let server = ledger.server().await;
    let doc = document(&server).await;
    let ops = operations(&doc);

    // Properties = the parser's fields; required = what the parser
    // requires; an unknown field is the only one reported unknown.
    let mut bodies = 0;
    for op in &ops {
        let Some(schema) = request_schema(&doc, op) else {
            continue;
        };
        // Stripe's event object is Stripe's to describe; tests/stripe.rs
        // sends the documented shapes.
        if op.path == "/v1/ingest/stripe/{endpoint_id}" {
            continue;
        }
        bodies += 1;
        let fields = parser_fields(&op.method, &op.path).unwrap_or_else(|| {
            panic!(
                "{} {}: add its parser's field list to this test",
                op.method, op.path
            )
        });
        let documented: BTreeSet<&str> = schema["properties"]
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        let parsed: BTreeSet<&str> = fields.iter().copied().collect();
        assert_eq!(
            documented, parsed,
            "{} {}: schema vs parser",
            op.method, op.path
        );

        let path = concrete_path(op);
        let r = call(&server, &op.method, &path, Some(&key), Some(&json!({}))).await;
        assert_eq!(r.status, 422, "{r:?}");
        assert_documented(&doc, op, &r);
        let required: BTreeSet<String> = schema["required"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|v| v.as_str().unwrap().to_owned())
            .collect();
        assert_eq!(
            fields_with(&r, "is required"),
            required,
            "{} {}: required",
            op.method,
            op.path
        );

        let mut body = example_of(&doc, op).unwrap();
        let obj = body.as_object_mut().unwrap();
        for (name, property) in schema["properties"].as_object().unwrap() {
            if !obj.contains_key(name) {
                let property = resolve(&doc, property);
                let value = property.get("example").cloned().unwrap_or_else(|| {
                    match property["type"].as_str().or(property["type"][0].as_str()) {
                        Some("integer") => json!(1),
                        Some("object") => json!({}),
                        Some("array") => json!([]),
                        _ => json!("x"),
                    }
                });
                obj.insert(name.clone(), value);
            }
        }
        obj.insert(UNKNOWN_FIELD.into(), json!("x"));
        let r = call(&server, &op.method, &path, Some(&key), Some(&body)).await;
        assert_eq!(r.status, 422, "{r:?}");
        assert_documented(&doc, op, &r);
        assert_eq!(
            fields_with(&r, "is not a known field"),
            BTreeSet::from([UNKNOWN_FIELD.to_owned()]),
            "{} {}: {body}",
            op.method,
            op.path
        );
    }
    assert_eq!(bodies, 18, "request bodies documented");

    // Each example, as documented, is accepted; a retry is a replay.
    let example = |method: &str, path: &str| example_of(&doc, find(&ops, method, path)).unwrap();
    let post = |method: &'static str, template: &'static str, path: String, body: Value| {
        let (server, key, doc, ops) = (&server, &key, &doc, &ops);
        async move {
            let op = find(ops, method, template);
            let r = call(server, method, &path, Some(key), Some(&body)).await;
            assert!(
                r.status == 201 || r.status == 200,
                "{method} {path} {body}: {r:?}"
            );
            assert_documented(doc, op, &r);
            let again = call(server, method, &path, Some(key), Some(&body)).await;
            assert_eq!(again.status, 200, "{method} {path} replay: {again:?}");
            if method == "POST" && template != "/v1/batch" {
                assert_eq!(r.status, 201, "{r:?}");
                assert!(again.replayed(), "{again:?}");
                assert_eq!(again.body, r.body, "a replay answers the same body");
            }
            r.json()
        }
    };
    let settings = example("PUT", "/v1/accounts/{account}");
    let account_op = find(&ops, "PUT", "/v1/accounts/{account}");
    post(
        "PUT",
        "/v1/accounts/{account}",
        concrete_path(account_op),
        settings,
    )
    .await;
    post(
        "POST",
        "/v1/payments",
        "/v1/payments".into(),
        example("POST", "/v1/payments"),
    )
    .await;
    let debit = example("POST", "/v1/usage-debits");
    let entry = post(
        "POST",
        "/v1/usage-debits",
        "/v1/usage-debits".into(),
        debit.clone(),
    )
    .await;
    for field in ["usage_record_id", "account", "amount", "unit"] {
        let name = if field == "usage_record_id" {
            "upstream_id"
        } else {
            field
        };
        assert_eq!(entry[name], debit[field], "{field}");
    }
    let hold = example("POST", "/v1/holds");
    post("POST", "/v1/holds", "/v1/holds".into(), hold.clone()).await;
    let capture_op = find(&ops, "POST", "/v1/holds/{hold_id}/capture");
    let capture_path = concrete_path(capture_op);
    assert!(
        capture_path.contains(hold["hold_id"].as_str().unwrap()),
        "the examples name one hold"
    );
    post(
        "POST",
        "/v1/holds/{hold_id}/capture",
        capture_path,
        example("POST", "/v1/holds/{hold_id}/capture"),
    )
    .await;
    // A released hold must still be open: a second hold like the example.
    let mut second = hold.clone();
    second["hold_id"] = json!("hold_released");
    post("POST", "/v1/holds", "/v1/holds".into(), second).await;
    post(
        "POST",
        "/v1/holds/{hold_id}/release",
        "/v1/holds/hold_released/release".into(),
        example("POST", "/v1/holds/{hold_id}/release"),
    )
    .await;
    post(
        "POST",
        "/v1/refunds",
        "/v1/refunds".into(),
        example("POST", "/v1/refunds"),
    )
    .await;
    // Entry ids are the server's: reverse the debit posted above.
    let mut reversal = example("POST", "/v1/reversals");
    reversal["entry_id"] = entry["id"].clone();
    post("POST", "/v1/reversals", "/v1/reversals".into(), reversal).await;
    post(
        "POST",
        "/v1/adjustments",
        "/v1/adjustments".into(),
        example("POST", "/v1/adjustments"),
    )
    .await;
    let batch = post(
        "POST",
        "/v1/batch",
        "/v1/batch".into(),
        example("POST", "/v1/batch"),
    )
    .await;
    for result in batch["results"].as_array().unwrap() {
        assert_eq!(result["status"], 201, "{batch}");
    }

    // Reads of what was written match their schemas too.
    let ops_ref = &ops;
    for (method, template) in [
        ("GET", "/v1/entries"),
        ("GET", "/v1/accounts/{account}"),
        ("GET", "/v1/accounts/{account}/balance"),
        ("GET", "/v1/holds/{hold_id}"),
        ("GET", "/v1/audit/head"),
        ("GET", "/healthz"),
        ("GET", "/readyz"),
    ] {
        let op = find(ops_ref, method, template);
        let r = call(&server, method, &concrete_path(op), Some(&key), None).await;
        assert_eq!(r.status, 200, "{method} {template}: {r:?}");
        assert_documented(&doc, op, &r);
    }
    let op = find(ops_ref, "GET", "/v1/entries/{id}");
    let r = call(
        &server,
        "GET",
        &format!("/v1/entries/{}", entry["id"].as_str().unwrap()),
        Some(&key),
        None,
    )
    .await;
    assert_eq!(r.status, 200, "{r:?}");
    assert_documented(&doc, op, &r);
    assert!(r.json()["reversed_by"].is_string(), "{r:?}");
}

async fn query_parameters_are_exactly_the_documented_ones(engine: Engine) {
    let ledger = Ledger::new(engine).await;
    let key = ledger.key("acme", ALL_SCOPES).await;
    let server = ledger.server().await;
    let doc = document(&server).await;
    let mut checked = 0;
    for op in operations(&doc) {
        let params: Vec<&Value> = op.op["parameters"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|p| p["in"] == "query")
            .collect();
        if params.is_empty() {
            continue;
        }
        checked += 1;
        let mut query: Vec<(String, String)> = params
            .iter()
            .map(|p| {
                let schema = resolve(&doc, &p["schema"]);
                let value = p
                    .get("example")
                    .or_else(|| schema["enum"].get(0))
                    .unwrap_or_else(|| {
                        panic!(
                            "{} {}: parameter {} has no example",
                            op.method, op.path, p["name"]
                        )
                    });
                let value = match value {
                    Value::String(s) => s.clone(),
                    other => other.to_string(),
                };
                (p["name"].as_str().unwrap().to_owned(), value)
            })
            .collect();
        query.push(("zz_not_a_param".into(), "1".into()));
        let path = format!(
            "{}?{}",
            concrete_path(&op),
            serde_urlencoded::to_string(&query).unwrap()
        );
        let r = call(&server, &op.method, &path, Some(&key), None).await;
        assert_eq!(r.status, 422, "{path}: {r:?}");
        assert_documented(&doc, &op, &r);
        assert_eq!(
            fields_with(&r, "is not a known parameter"),
            BTreeSet::from(["zz_not_a_param".to_owned()]),
            "{path}"
        );
    }
    assert_eq!(checked, 9, "endpoints with query parameters");
}

async fn every_operation_needs_exactly_its_documented_scope(engine: Engine) {
    let ledger = Ledger::new(engine).await;
    let all = ["post", "read", "audit", "admin"];
    let mut keys = BTreeMap::new();
    for scope in all {
        let others: Vec<&str> = all.iter().copied().filter(|s| *s != scope).collect();
        keys.insert(
            scope,
            (
                ledger.key("acme", scope).await,
                ledger.key("acme", &others.join(",")).await,
            ),
        );
    }
    let server = ledger.server().await;
    let doc = document(&server).await;
    for op in operations(&doc) {
        let path = concrete_path(&op);
        let body = example_of(&doc, &op);
        let scopes = scopes(&op);
        if !op.path.starts_with("/v1/") {
            assert!(scopes.is_empty(), "{} {} needs no key", op.method, op.path);
            let r = call(&server, &op.method, &path, None, body.as_ref()).await;
            assert_eq!(r.status, 200, "{} {path}: {r:?}", op.method);
            assert_documented(&doc, &op, &r);
            continue;
        }
        if op.path.starts_with("/v1/ingest/") {
            // Called by Stripe without a key: its signature authenticates.
            assert!(scopes.is_empty(), "{} {}: {scopes:?}", op.method, op.path);
            let r = call(&server, &op.method, &path, None, body.as_ref()).await;
            assert_ne!(r.status, 401, "{} {path}: {r:?}", op.method);
            assert_documented(&doc, &op, &r);
            continue;
        }
        assert_eq!(scopes.len(), 1, "{} {}: {scopes:?}", op.method, op.path);
        let scope = scopes[0].as_str();
        let description = op.op["description"].as_str().unwrap_or("");
        assert!(description.contains(&format!("`{scope}`")), "{description}");
        let (only, without) = &keys[scope];
        let r = call(&server, &op.method, &path, None, body.as_ref()).await;
        assert_eq!(
            (r.status, r.code()),
            (401, "unauthenticated".into()),
            "{} {path}",
            op.method
        );
        assert_documented(&doc, &op, &r);
        let r = call(&server, &op.method, &path, Some(without), body.as_ref()).await;
        assert_eq!(
            (r.status, r.code()),
            (403, "forbidden".into()),
            "{} {path} without {scope}",
            op.method
        );
        assert_documented(&doc, &op, &r);
        let r = call(&server, &op.method, &path, Some(only), body.as_ref()).await;
        assert!(
            r.status != 401 && r.status != 403,
            "{} {path} with only {scope}: {r:?}",
            op.method
        );
        assert_documented(&doc, &op, &r);
    }
}

async fn every_problem_code_and_the_spec_examples_are_documented(engine: Engine) {
    let ledger = Ledger::new(engine).await;
    let server = ledger.server().await;
    let doc = document(&server).await;
    let schemas = &doc["components"]["schemas"];
    let codes: BTreeSet<String> = schemas["ProblemCode"]["enum"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c.as_str().unwrap().to_owned())
        .collect();

    // The codes of the error tables (`| 422 | `code` | …`).
    let mut tables =
        vec![std::fs::read_to_string(repo_root().join("docs/ledger-rules.md")).unwrap()];
    tables.extend(spec());
    // SPEC §3's error table, held here too: the SPEC lives outside this
    // repository (../shared) and a clean checkout may not have it.
    let mut named: BTreeSet<String> = SPEC_ERROR_CODES.iter().map(|c| c.to_string()).collect();
    for text in &tables {
        for line in text.lines() {
            let cells: Vec<&str> = line.split('|').map(str::trim).collect();
            if cells.len() > 3
                && cells[1].len() == 3
                && cells[1].parse::<u16>().is_ok_and(|s| s >= 400)
            {
                named.insert(cells[2].trim_matches('`').to_owned());
            }
        }
    }
    assert!(named.len() >= 15, "{named:?}");
    let missing: Vec<&String> = named.difference(&codes).collect();
    assert!(missing.is_empty(), "codes not in ProblemCode: {missing:?}");

    // Each code is named by some response of some operation.
    let descriptions: String = operations(&doc)
        .iter()
        .flat_map(|o| o.op["responses"].as_object().unwrap().values())
        .map(|r| r["description"].as_str().unwrap_or("").to_owned())
        .collect::<Vec<_>>()
        .join("\n");
    // (405 is the router's, for every path: the API's description says it.)
    let descriptions = format!(
        "{descriptions}\n{}",
        doc["info"]["description"].as_str().unwrap()
    );
    for code in &codes {
        assert!(
            descriptions.contains(&format!("`{code}`")),
            "no response names `{code}`"
        );
    }
    // The problem members of SPEC §3 and docs/ledger-rules.md.
    let problem = schemas["Problem"]["properties"].as_object().unwrap();
    for member in [
        "type",
        "title",
        "status",
        "detail",
        "code",
        "errors",
        "entry_id",
        "differing_fields",
        "entry",
    ] {
        assert!(problem.contains_key(member), "Problem lacks {member}");
    }
    assert!(doc["components"]["securitySchemes"]["bearer"]["scheme"] == "bearer");

    // The request fields later kinds show on their entries.
    let details: BTreeSet<&str> = schemas["EntryDetails"]["properties"]
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(details, BTreeSet::from(tally_ledger::entry::DETAIL_FIELDS));

    // The entry object of SPEC §3 is the Entry schema's example, and
    // matches the schema.
    let entry_example = &schemas["Entry"]["example"];
    let mut errors = Vec::new();
    check(
        &doc,
        &schemas["Entry"],
        entry_example,
        "Entry.example",
        &mut errors,
    );
    assert!(errors.is_empty(), "{errors:#?}");
    if let Some(spec) = spec() {
        let block = spec
            .split("The entry object:")
            .nth(1)
            .and_then(|rest| rest.split("```json").nth(1))
            .and_then(|rest| rest.split("```").next())
            .expect("SPEC §3 has the entry object");
        let spec_entry: Value = serde_json::from_str(block).unwrap();
        for (k, v) in spec_entry.as_object().unwrap() {
            assert!(
                entry_example.get(k).is_some(),
                "the Entry example lacks {k}"
            );
            if !v.as_str().is_some_and(|s| s.contains('…')) {
                assert_eq!(&entry_example[k], v, "Entry example {k}");
            }
        }
        // The usage-debit request example gives that entry.
        let debit = &schemas["UsageDebitRequest"]["example"];
        for k in [
            "account",
            "amount",
            "unit",
            "meter",
            "quantity",
            "occurred_at",
            "metadata",
        ] {
            assert_eq!(debit[k], spec_entry[k], "UsageDebitRequest example {k}");
        }
        assert_eq!(debit["usage_record_id"], spec_entry["upstream_id"]);
    }
}

async fn the_reference_page_works_offline(engine: Engine) {
    let ledger = Ledger::new(engine).await;
    let server = ledger.server().await;
    let r = call(&server, "GET", "/docs", None, None).await;
    assert_eq!(r.status, 200, "{r:?}");
    assert!(
        r.content_type().starts_with("text/html"),
        "{}",
        r.content_type()
    );
    let page = String::from_utf8(r.body).unwrap();
    assert!(!page.contains("://"), "the page names another host: {page}");
    let mut assets = Vec::new();
    for attr in ["href=\"", "src=\""] {
        for part in page.split(attr).skip(1) {
            assets.push(part.split('"').next().unwrap().to_owned());
        }
    }
    assert!(assets.len() >= 4, "{assets:?}");
    for asset in &assets {
        assert!(
            asset.starts_with('/') && !asset.starts_with("//"),
            "{asset} is not local"
        );
        let r = call(&server, "GET", asset, None, None).await;
        assert_eq!(r.status, 200, "{asset}: {r:?}");
        assert!(!r.body.is_empty(), "{asset}");
    }
    let init = call(&server, "GET", "/docs/swagger-initializer.js", None, None).await;
    let init = String::from_utf8(init.body).unwrap();
    assert!(init.contains("\"url\": \"/openapi.json\""), "{init}");
    assert!(
        init.contains("\"validatorUrl\": \"none\""),
        "no online validator: {init}"
    );
    assert!(!init.contains("://"), "{init}");
    let r = call(&server, "GET", "/docs/no-such-file.js", None, None).await;
    assert_eq!((r.status, r.code()), (404, "not_found".into()));
    assert!(!is_fallback(&r));
}

/// The `file › `test`` references of a text: each file, with the names
/// listed after its `›` (separated by commas, each maybe followed by a
/// parenthesis).
fn named_tests(text: &str) -> Vec<(String, String)> {
    let text = text.split_whitespace().collect::<Vec<_>>().join(" ");
    let mut out = Vec::new();
    let mut rest = text.as_str();
    while let Some(at) = rest.find(".rs › ") {
        let start = rest[..at].rfind([' ', '(']).map_or(0, |i| i + 1);
        let file = rest[start..at + 3].to_owned();
        let mut tail = &rest[at + ".rs › ".len()..];
        while let Some(t) = tail.strip_prefix('`') {
            let Some(end) = t.find('`') else { break };
            out.push((file.clone(), t[..end].to_owned()));
            tail = &t[end + 1..];
            if let Some(t) = tail.strip_prefix(" (") {
                let mut depth = 1;
                let close = t.char_indices().find(|&(_, c)| {
                    depth += match c {
                        '(' => 1,
                        ')' => -1,
                        _ => 0,
                    };
                    depth == 0
                });
                tail = close.map_or("", |(i, _)| &t[i + 1..]);
            }
            match tail.strip_prefix(", ") {
                Some(t) => tail = t,
                None => break,
            }
        }
        rest = tail;
    }
    out
}

/// docs/security.md states only what a test shows, naming it as
/// file › test: every file it names exists, every test it names is a test
/// of that file, and an integration test that takes an engine is listed
/// in the file's `engine_tests!`, so it runs on SQLite and on PostgreSQL.
#[test]
fn every_test_named_by_the_security_review_exists_and_runs() {
    let doc = std::fs::read_to_string(repo_root().join("docs/security.md")).unwrap();
    for word in doc.split(|c: char| c.is_whitespace() || "(),;`".contains(c)) {
        let word = word.trim_end_matches(['.', ':']);
        if word.ends_with(".rs") && word.contains('/') {
            assert!(
                repo_root().join(word).is_file(),
                "docs/security.md names {word}, which does not exist"
            );
        }
    }
    let named = named_tests(&doc);
    assert!(
        named.len() > 50,
        "only {} tests found: {named:?}",
        named.len()
    );
    for (file, name) in &named {
        let source = std::fs::read_to_string(repo_root().join(file))
            .unwrap_or_else(|e| panic!("{file}: {e}"));
        let at = source
            .find(&format!("fn {name}("))
            .unwrap_or_else(|| panic!("docs/security.md names {file} › {name}: no such fn"));
        if source[at..].starts_with(&format!("fn {name}(engine: Engine)")) {
            let list = source
                .split_once("engine_tests!(")
                .and_then(|(_, l)| l.split_once(");"))
                .map_or("", |(l, _)| l);
            assert!(
                list.split([',', ' ', '\n']).any(|n| n == name),
                "{file} › {name} takes an engine but is not in its engine_tests!"
            );
        } else {
            let before: String = source[..at].lines().rev().take(3).collect();
            assert!(
                before.contains("#[test]") || before.contains("#[tokio::test"),
                "{file} › {name} is not a test"
            );
        }
    }
}
