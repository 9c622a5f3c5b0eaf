//! `POST /v1/batch`.

use serde::Deserialize;
use utoipa::openapi::schema::{ObjectBuilder, OneOfBuilder, Schema, Type};
use utoipa::openapi::RefOr;
use utoipa::{PartialSchema, ToSchema};

use super::{HoldRequest, PaymentRequest, Raw, RefundRequest, ReversalRequest, UsageDebitRequest};
use crate::views::Metadata;

/// One operation of a batch: the body of its single endpoint plus `type`.
/// Only a schema: the handler reads each operation's `type` itself, so an
/// operation with a bad one is answered alone (`crate::routes::batch`),
/// and the rest through the operation's own request struct.
pub struct BatchOperation;

/// `type` and the request struct of each kind a batch takes.
fn operation_kinds() -> [(&'static str, RefOr<Schema>); 5] {
    [
        ("usage_debit", UsageDebitRequest::schema()),
        ("payment", PaymentRequest::schema()),
        ("hold", HoldRequest::schema()),
        ("refund", RefundRequest::schema()),
        ("reversal", ReversalRequest::schema()),
    ]
}

/// The request's own schema with `type` added: each request schema is
/// closed (`additionalProperties: false`), so an `allOf` of it and a
/// schema with `type` would refuse every operation.
fn with_type(kind: &str, schema: RefOr<Schema>) -> RefOr<Schema> {
    let RefOr::T(Schema::Object(mut object)) = schema else {
        return schema;
    };
    let tag = ObjectBuilder::new()
        .schema_type(Type::String)
        .enum_values(Some([kind]))
        .build();
    let fields = std::mem::take(&mut object.properties);
    object
        .properties
        .insert("type".to_owned(), RefOr::T(Schema::Object(tag)));
    object.properties.extend(fields);
    object.required.insert(0, "type".to_owned());
    // The single endpoint's example, as an operation.
    #[allow(deprecated)] // `example` is what the derive fills
    let examples = object.example.iter_mut().chain(object.examples.iter_mut());
    for example in examples {
        if let serde_json::Value::Object(fields) = example {
            fields.insert("type".to_owned(), kind.into());
        }
    }
    RefOr::T(Schema::Object(object))
}

impl PartialSchema for BatchOperation {
    fn schema() -> RefOr<Schema> {
        let mut one_of = OneOfBuilder::new().description(Some(
            "One operation of a batch: the body of its single endpoint plus `type`.",
        ));
        for (kind, schema) in operation_kinds() {
            one_of = one_of.item(with_type(kind, schema));
        }
        one_of.into()
    }
}

impl ToSchema for BatchOperation {
    fn schemas(schemas: &mut Vec<(String, RefOr<Schema>)>) {
        schemas.push((Metadata::name().into(), Metadata::schema()));
    }
}

/// `POST /v1/batch`: 1 to 1,000 operations, decided in order in one group.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"operations": [
    {"type": "payment", "payment_id": "pay_b1", "account": "cust_7", "amount": "20", "unit": "USD"},
    {"type": "usage_debit", "usage_record_id": "ur_b1", "account": "cust_7", "amount": "0.50",
     "unit": "USD", "meter": "api-calls", "quantity": "50"}
]}))]
pub struct BatchRequest {
    #[schema(value_type = Vec<BatchOperation>, required = true, min_items = 1, max_items = 1000)]
    pub operations: Option<Raw>,
}
