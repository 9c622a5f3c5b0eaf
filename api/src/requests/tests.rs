#![allow(clippy::unwrap_used)]

use serde::Deserialize;
use serde_json::{json, Map, Value};
use tally_ledger::request::request_fields;

use super::*;

fn object(v: Value) -> Map<String, Value> {
    match v {
        Value::Object(m) => m,
        other => panic!("not an object: {other}"),
    }
}

#[test]
fn each_struct_has_exactly_its_parsers_fields() {
    let pairs: [(&[&str], &[&str]); 9] = [
        (
            field_names::<UsageDebitRequest>(),
            request_fields::USAGE_DEBIT,
        ),
        (field_names::<PaymentRequest>(), request_fields::PAYMENT),
        (field_names::<HoldRequest>(), request_fields::HOLD),
        (field_names::<CaptureRequest>(), request_fields::CAPTURE),
        (field_names::<ReleaseRequest>(), request_fields::RELEASE),
        (field_names::<RefundRequest>(), request_fields::REFUND),
        (field_names::<ReversalRequest>(), request_fields::REVERSAL),
        (
            field_names::<AdjustmentRequest>(),
            request_fields::ADJUSTMENT,
        ),
        (
            field_names::<AccountSettingsRequest>(),
            request_fields::SETTINGS,
        ),
    ];
    for (typed, parser) in pairs {
        assert_eq!(typed, parser);
    }
    assert_eq!(field_names::<BatchRequest>(), ["operations"]);
}

#[test]
fn structs_refuse_unknown_fields() {
    let body = Value::Object(object(json!({"release_id": "r", "bogus": 1})));
    assert!(ReleaseRequest::deserialize(&body).is_err());
    let body = Value::Object(object(json!({"release_id": "r", "metadata": {"k": "v"}})));
    assert!(ReleaseRequest::deserialize(&body).is_ok());
}

#[test]
fn unknown_fields_reach_the_parser_with_every_other_problem() {
    let body = object(json!({"release_id": 1, "bogus": true, "other": null}));
    let errors = tally_ledger::request::EntryRequest::release("h", body).unwrap_err();
    let fields: Vec<&str> = errors.errors.iter().map(|e| e.field.as_str()).collect();
    assert_eq!(fields, ["bogus", "other", "release_id"]);
}
