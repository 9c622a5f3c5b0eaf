//! The field type of the body structs, and their field lists.

use serde::de::{self, DeserializeOwned, Deserializer, IgnoredAny, Visitor};
use serde::Deserialize;

/// A field a body struct describes, whatever its value (each field's
/// schema says what it holds): the ledger's parser reads values from the
/// body itself. Values never pass through serde's data model, which would
/// turn `-0` into `0` or a 29-digit integer into an error: numbers keep
/// their exact text and objects stay objects (see `crate::json_body`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Raw;

impl<'de> Deserialize<'de> for Raw {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        IgnoredAny::deserialize(d).map(|_| Raw)
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
