//! The members an account's settings and every entry share with the
//! requests that set them: `metadata` and the overdraft floor.

use std::collections::BTreeMap;

use serde::Serialize;
use tally_ledger::names::{MAX_METADATA_KEYS, MAX_METADATA_KEY_BYTES, MAX_METADATA_VALUE_BYTES};
use utoipa::openapi::schema::{ObjectBuilder, Schema, Type};
use utoipa::openapi::RefOr;
use utoipa::ToSchema;

/// `metadata`: string keys (1–40 bytes, no control characters) to string
/// values (at most 500 bytes); at most 50 keys. Written by hand for
/// `maxProperties`, which the derive cannot say of a map.
#[derive(Serialize)]
pub struct Metadata(BTreeMap<String, String>);

impl utoipa::PartialSchema for Metadata {
    fn schema() -> RefOr<Schema> {
        ObjectBuilder::new()
            .schema_type(Type::Object)
            .description(Some(
                "String keys (1–40 bytes, no control characters) to string values (at most \
                 500 bytes); at most 50 keys.",
            ))
            .property_names(Some(
                ObjectBuilder::new()
                    .schema_type(Type::String)
                    .min_length(Some(1))
                    .max_length(Some(MAX_METADATA_KEY_BYTES)),
            ))
            .additional_properties(Some(
                ObjectBuilder::new()
                    .schema_type(Type::String)
                    .max_length(Some(MAX_METADATA_VALUE_BYTES)),
            ))
            .max_properties(Some(MAX_METADATA_KEYS))
            .examples([serde_json::json!({"model": "m1"})])
            .into()
    }
}

impl ToSchema for Metadata {}

/// `"allow"` or `"forbid"`.
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum OverdraftMode {
    /// No floor (the default).
    Allow,
    /// `available` may not go below 0.
    Forbid,
}

/// `available` may not go below `−limit`.
#[derive(Serialize, ToSchema)]
pub struct OverdraftLimit {
    /// A decimal string ≥ 0.
    #[schema(
        format = "decimal",
        pattern = r"^[0-9]+(\.[0-9]+)?$",
        example = "50.00"
    )]
    limit: String,
}

/// An account's alerts. `balance.low` (docs/events.md) fires once when the
/// account's `available` balance crosses below `low_balance`, and re-arms
/// when it rises back to or above it. `{}` (or a null `low_balance`): no alert.
#[derive(Serialize, ToSchema)]
pub struct Alerts {
    /// A decimal string of any sign.
    #[schema(
        format = "decimal",
        pattern = r"^-?[0-9]+(\.[0-9]+)?$",
        example = "10.00",
        nullable = true
    )]
    low_balance: Option<String>,
}

/// An account's overdraft floor: `"allow"` (default), `"forbid"` or
/// `{"limit": "<amount ≥ 0>"}`. Usage debits, holds, refunds and payments
/// from a customer `counter_account` that would take `available` below it
/// are stored as rejections (`insufficient_funds`).
#[derive(Serialize, ToSchema)]
#[serde(untagged)]
pub enum Overdraft {
    Mode(OverdraftMode),
    Limit(OverdraftLimit),
}
