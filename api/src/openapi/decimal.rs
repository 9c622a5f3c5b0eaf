//! Decimals in requests. JSON carries money as strings, and the server
//! also takes a JSON number when it converts exactly (`1.5`, not `1e400`):
//! the document says both, so a client generated from it, or a fuzzer
//! reading it, knows what is accepted. JSON Schema applies `pattern` to
//! strings only, so adding `number` to a decimal's types is the whole
//! change. Responses keep `string` alone (the server always answers
//! strings), but for the overdraft limit and the alerts, whose one schema
//! serves both.

use utoipa::openapi::schema::{Object, Schema, SchemaFormat, SchemaType, Type};
use utoipa::openapi::{OpenApi, RefOr};

/// Schemas that are (part of) a request body: every `…Request`, the
/// overdraft limit and the alerts that `AccountSettingsRequest` takes, and
/// a batch's operations (a `oneOf` of the requests, inline).
fn is_request(name: &str) -> bool {
    name.ends_with("Request")
        || name == "OverdraftLimit"
        || name == "Alerts"
        || name == "BatchOperation"
}

/// Adds `number` to every decimal property of every request schema.
pub fn accept_numbers(doc: &mut OpenApi) {
    let Some(components) = doc.components.as_mut() else {
        return;
    };
    for (name, schema) in components.schemas.iter_mut() {
        if !is_request(name) {
            continue;
        }
        let objects: Vec<&mut Object> = match schema {
            RefOr::T(Schema::Object(object)) => vec![object],
            RefOr::T(Schema::OneOf(one_of)) => one_of
                .items
                .iter_mut()
                .filter_map(|item| match item {
                    RefOr::T(Schema::Object(object)) => Some(object),
                    _ => None,
                })
                .collect(),
            _ => Vec::new(),
        };
        for object in objects {
            for property in object.properties.values_mut() {
                if let RefOr::T(Schema::Object(field)) = property {
                    add_number(field);
                }
            }
        }
    }
}

fn add_number(field: &mut Object) {
    if !matches!(&field.format, Some(SchemaFormat::Custom(f)) if f == "decimal") {
        return;
    }
    let mut types = match &field.schema_type {
        SchemaType::Type(t) => vec![t.clone()],
        SchemaType::Array(ts) => ts.clone(),
        SchemaType::AnyValue => return,
    };
    if !types.contains(&Type::Number) {
        let at = types
            .iter()
            .position(|t| *t == Type::Null)
            .unwrap_or(types.len());
        types.insert(at, Type::Number);
    }
    field.schema_type = SchemaType::Array(types);
}
