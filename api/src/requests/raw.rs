//! A field's value as the client wrote it, and reading a body through its
//! typed struct.

use serde::de::{self, DeserializeOwned, Deserializer, Visitor};
use serde::{Deserialize, Serialize, Serializer};
use serde_json::{Map, Value};
use tally_ledger::fields::ValidationErrors;

/// One field's JSON value, unvalidated: what it may be is the ledger's
/// business (`tally_ledger::fields`). An object stays an object and a
/// number keeps its exact text (see `crate::json_body`).
#[derive(Debug, Clone, PartialEq)]
pub struct Raw(pub Value);

impl<'de> Deserialize<'de> for Raw {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        crate::json_body::rebuild(d).map(Raw)
    }
}

impl Serialize for Raw {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.0.serialize(s)
    }
}

/// Reads `body` through its typed struct `T` and gives the fields it holds
/// to the ledger's parser as a map.
///
/// A body with a field `T` does not have goes to the ledger's parser as it
/// came: the parser names each unknown field ("is not a known field")
/// together with every other problem of the body, in one 422, as the API
/// always answered. `T`'s field list is the parser's (tests/openapi.rs and
/// this module's tests hold them equal), so both refuse the same fields.
pub fn read<T: DeserializeOwned + Serialize>(
    body: Map<String, Value>,
) -> Result<Map<String, Value>, ValidationErrors> {
    let known = field_names::<T>();
    if body.keys().any(|k| !known.contains(&k.as_str())) {
        return Ok(body);
    }
    let typed: T = serde_json::from_value(Value::Object(body))
        .map_err(|e| ValidationErrors::single("body", e.to_string()))?;
    match serde_json::to_value(&typed) {
        Ok(Value::Object(mut fields)) => {
            // An absent field serializes as null, and the parser reads
            // null as absent: only the fields the body holds go on.
            fields.retain(|_, v| !v.is_null());
            Ok(fields)
        }
        Ok(_) => Err(ValidationErrors::single("body", "must be a JSON object")),
        Err(e) => Err(ValidationErrors::single("body", e.to_string())),
    }
}

/// The field names serde's derive gives the struct `T`, read by asking it
/// to deserialize from a deserializer that only notes them (the derive
/// passes them to `deserialize_struct`). Empty for anything but a struct.
pub fn field_names<T: DeserializeOwned>() -> &'static [&'static str] {
    let mut names: &'static [&'static str] = &[];
    let _ = T::deserialize(FieldNames(&mut names));
    names
}

struct FieldNames<'a>(&'a mut &'static [&'static str]);

impl<'de> Deserializer<'de> for FieldNames<'_> {
    type Error = de::value::Error;

    fn deserialize_any<V: Visitor<'de>>(self, _: V) -> Result<V::Value, Self::Error> {
        Err(de::Error::custom("only a struct's field names are read"))
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        fields: &'static [&'static str],
        _visitor: V,
    ) -> Result<V::Value, Self::Error> {
        *self.0 = fields;
        Err(de::Error::custom("only a struct's field names are read"))
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string
        bytes byte_buf option unit unit_struct newtype_struct seq tuple
        tuple_struct map enum identifier ignored_any
    }
}
