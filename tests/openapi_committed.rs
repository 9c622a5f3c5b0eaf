//! The committed OpenAPI document (`api/openapi.json`) is the one the code
//! generates, `tally openapi` prints it, and its links lead somewhere.
//! Clients and SDKs are generated from or checked against the committed
//! file, so a change to a route or a schema must regenerate it:
//! `cargo run -q -- openapi > api/openapi.json`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::process::Command;

use serde_json::Value;

fn committed() -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("openapi.json");
    std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{} could not be read: {e}", path.display()))
}

#[test]
fn tally_openapi_prints_the_committed_document() {
    let out = Command::new(env!("CARGO_BIN_EXE_tally"))
        .arg("openapi")
        // No database is opened: a URL that cannot be reached changes nothing.
        .env("TALLY_DATABASE_URL", "postgres://nobody@127.0.0.1:1/none")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let printed = String::from_utf8(out.stdout).unwrap();
    let generated = tally_api::server::openapi_text().unwrap();
    assert_eq!(
        printed, generated,
        "`tally openapi` prints what the server serves"
    );
    let committed = committed();
    if committed != generated {
        let line = committed
            .lines()
            .zip(generated.lines())
            .position(|(a, b)| a != b)
            .map_or_else(|| "its length".to_owned(), |n| format!("line {}", n + 1));
        panic!(
            "api/openapi.json differs from the document the code generates (first at {line}): \
             run `cargo run -q -- openapi > api/openapi.json` and commit it"
        );
    }
}

/// Every link names an operation of the document, and each parameter it
/// fills is one of that operation's parameters.
#[test]
fn every_link_leads_to_a_documented_operation_and_its_parameters() {
    let doc: Value = serde_json::from_str(&tally_api::server::openapi_text().unwrap()).unwrap();
    let mut operations = std::collections::BTreeMap::new();
    for item in doc["paths"].as_object().unwrap().values() {
        for op in item.as_object().unwrap().values() {
            if let Some(id) = op.get("operationId").and_then(Value::as_str) {
                operations.insert(id.to_owned(), op.clone());
            }
        }
    }
    let mut links = Vec::new();
    for (id, op) in &operations {
        for response in op["responses"].as_object().unwrap().values() {
            for (name, link) in response
                .get("links")
                .and_then(Value::as_object)
                .into_iter()
                .flatten()
            {
                links.push((id.clone(), name.clone(), link.clone()));
            }
        }
    }
    for (from, to) in [
        ("postHold", "postCapture"),
        ("postHold", "postRelease"),
        ("postHold", "getHold"),
        ("postPayment", "postRefund"),
        ("postUsageDebit", "postReversal"),
        ("postPayment", "postReversal"),
        ("postUsageDebit", "getEntry"),
    ] {
        assert!(
            links
                .iter()
                .any(|(f, _, l)| f == from && l["operationId"] == to),
            "no link from {from} to {to}"
        );
    }
    for (from, name, link) in &links {
        let to = link["operationId"].as_str().unwrap();
        let target = operations
            .get(to)
            .unwrap_or_else(|| panic!("{from}'s link {name} names {to}, not an operation"));
        let params: Vec<&str> = target["parameters"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|p| p["name"].as_str())
            .collect();
        for param in link["parameters"]
            .as_object()
            .into_iter()
            .flatten()
            .map(|(k, _)| k)
        {
            assert!(
                params.contains(&param.as_str()),
                "{from}'s link {name} fills {param}, which {to} does not take"
            );
        }
        if let Some(body) = link.get("requestBody").and_then(Value::as_object) {
            let schema = &target["requestBody"]["content"]["application/json"]["schema"]["$ref"];
            let schema_name = schema.as_str().unwrap().rsplit('/').next().unwrap();
            let fields = &doc["components"]["schemas"][schema_name]["properties"];
            for field in body.keys() {
                assert!(
                    fields.get(field).is_some(),
                    "{from}'s link {name} sets {field}, not a field of {schema_name}"
                );
            }
        }
    }
}
