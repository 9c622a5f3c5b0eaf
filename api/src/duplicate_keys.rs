//! Refuses JSON objects that name a key twice.
//!
//! RFC 8259 leaves duplicate names to the parser, and serde_json keeps the
//! last one. For a ledger `{"amount": "1", "amount": "100"}` is ambiguous, so
//! it is refused (422) rather than silently read as 100.

use std::collections::HashSet;
use std::fmt;

use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};

/// Walks a JSON document and fails on the first object with a repeated key,
/// naming the key (dotted from the root, e.g. `metadata.model`).
pub fn find_duplicate_key(bytes: &[u8]) -> Option<String> {
    let mut de = serde_json::Deserializer::from_slice(bytes);
    let root = Check {
        path: String::new(),
    };
    match root.deserialize(&mut de) {
        Ok(()) => None,
        Err(e) => e.to_string().strip_prefix(PREFIX).map(|rest| {
            // serde_json appends " at line L column C"; keep only the path.
            rest.rsplit_once(" at line ")
                .map_or(rest, |(p, _)| p)
                .to_owned()
        }),
    }
}

const PREFIX: &str = "duplicate key: ";

struct Check {
    path: String,
}

impl<'de> DeserializeSeed<'de> for Check {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Check {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let mut seen = HashSet::new();
        while let Some(key) = map.next_key::<String>()? {
            let path = if self.path.is_empty() {
                key.clone()
            } else {
                format!("{}.{key}", self.path)
            };
            if !seen.insert(key) {
                return Err(de::Error::custom(format!("{PREFIX}{path}")));
            }
            map.next_value_seed(Check { path })?;
        }
        Ok(())
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        let mut i = 0;
        while seq
            .next_element_seed(Check {
                path: format!("{}[{i}]", self.path),
            })?
            .is_some()
        {
            i += 1;
        }
        Ok(())
    }

    fn visit_bool<E>(self, _: bool) -> Result<(), E> {
        Ok(())
    }
    fn visit_i64<E>(self, _: i64) -> Result<(), E> {
        Ok(())
    }
    fn visit_u64<E>(self, _: u64) -> Result<(), E> {
        Ok(())
    }
    fn visit_f64<E>(self, _: f64) -> Result<(), E> {
        Ok(())
    }
    fn visit_str<E>(self, _: &str) -> Result<(), E> {
        Ok(())
    }
    fn visit_unit<E>(self) -> Result<(), E> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_repeated_keys_at_any_depth() {
        assert_eq!(
            find_duplicate_key(br#"{"a":1,"b":{"c":1},"d":[{"e":1}]}"#),
            None
        );
        assert_eq!(
            find_duplicate_key(br#"{"amount":"1","amount":"100"}"#).as_deref(),
            Some("amount")
        );
        assert_eq!(
            find_duplicate_key(br#"{"metadata":{"k":"1","k":"2"}}"#).as_deref(),
            Some("metadata.k")
        );
        assert_eq!(
            find_duplicate_key(br#"{"operations":[{"x":1},{"y":1,"y":2}]}"#).as_deref(),
            Some("operations[1].y")
        );
        // Numbers keep working under serde_json's arbitrary_precision.
        assert_eq!(
            find_duplicate_key(br#"{"amount":0.1,"q":12345678901234567890123}"#),
            None
        );
        // Malformed JSON is not this check's business.
        assert_eq!(find_duplicate_key(b"{not json"), None);
    }
}
