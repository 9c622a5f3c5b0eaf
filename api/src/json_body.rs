//! A request body parsed into a `serde_json::Value`, in one pass that also
//! finds repeated keys and keeps objects objects.
//!
//! RFC 8259 leaves duplicate names to the parser, and serde_json keeps the
//! last one. For a ledger `{"amount": "1", "amount": "100"}` is ambiguous, so
//! the first repeated key is reported (422 naming it) rather than silently
//! read as 100.
//!
//! With serde_json's `arbitrary_precision` (which keeps a number's exact
//! text) a number travels through serde as a one-key map whose key is
//! [`NUMBER_TOKEN`], and serde_json's own `Value` reads
//! `{"amount": {"$serde_json::private::Number": "2"}}` as the number 2. Here
//! an object the client wrote stays that object, so every field refuses it
//! as it refuses any object where a number goes (422 naming the field, and in
//! a batch only that operation), and metadata refuses the key itself
//! (`names::check_metadata`), so such an object is never stored.

use std::borrow::Cow;
use std::fmt::{self, Write as _};
use std::str::FromStr;

use serde::de::{self, Deserialize, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Number, Value};

pub use tally_ledger::names::NUMBER_TOKEN;

/// A parsed body, and the first key it repeats inside one object (dotted
/// from the root, e.g. `metadata.model`), if any.
pub struct Parsed {
    pub value: Value,
    pub repeated: Option<String>,
}

/// Parses a JSON document. Malformed JSON is serde_json's error, as
/// `serde_json::from_slice` would give it.
pub fn parse(bytes: &[u8]) -> Result<Parsed, serde_json::Error> {
    let mut de = serde_json::Deserializer::from_slice(bytes);
    let mut repeated = None;
    let start = bytes.as_ptr() as usize;
    let value = Build {
        at: &At::Root,
        repeated: &mut repeated,
        body: start..start + bytes.len(),
    }
    .deserialize(&mut de)?;
    de.end()?;
    Ok(Parsed { value, repeated })
}

/// The repeated key of a well-formed document, if any.
#[cfg(test)]
fn find_duplicate_key(bytes: &[u8]) -> Option<String> {
    parse(bytes).ok()?.repeated
}

/// Where a value sits, as a chain to the root (spelled out on demand).
enum At<'p> {
    Root,
    Key(&'p At<'p>, &'p str),
    Index(&'p At<'p>, usize),
}

impl At<'_> {
    fn spell(&self, out: &mut String) {
        match self {
            At::Root => {}
            At::Key(parent, key) => {
                parent.spell(out);
                if !out.is_empty() {
                    out.push('.');
                }
                out.push_str(key);
            }
            At::Index(parent, i) => {
                parent.spell(out);
                // Writing to a String cannot fail.
                let _ = write!(out, "[{i}]");
            }
        }
    }
}

/// A key, borrowed from the body when it holds no escape.
struct Key<'de>(Cow<'de, str>);

impl Key<'_> {
    /// Whether the client wrote this key: an escaped key was unescaped into
    /// a string of its own, an unescaped one is borrowed from the body. The
    /// key serde_json hands over for a number is neither: it points at
    /// serde_json's own constant.
    fn is_in(&self, body: &std::ops::Range<usize>) -> bool {
        match &self.0 {
            Cow::Owned(_) => true,
            Cow::Borrowed(k) => body.contains(&(k.as_ptr() as usize)),
        }
    }
}

impl<'de> Deserialize<'de> for Key<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct KeyVisitor;
        impl<'de> Visitor<'de> for KeyVisitor {
            type Value = Key<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an object key")
            }
            fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Key<'de>, E> {
                Ok(Key(Cow::Borrowed(v)))
            }
            fn visit_str<E>(self, v: &str) -> Result<Key<'de>, E> {
                Ok(Key(Cow::Owned(v.to_owned())))
            }
            fn visit_string<E>(self, v: String) -> Result<Key<'de>, E> {
                Ok(Key(Cow::Owned(v)))
            }
        }
        d.deserialize_str(KeyVisitor)
    }
}

/// Builds the value at `at`, noting the first repeated key in `repeated`
/// (and reading on, so a malformed rest is still malformed JSON).
struct Build<'a, 'p> {
    at: &'p At<'p>,
    repeated: &'a mut Option<String>,
    /// The addresses of the body's bytes.
    body: std::ops::Range<usize>,
}

impl<'de> DeserializeSeed<'de> for Build<'_, '_> {
    type Value = Value;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Build<'_, '_> {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let Build { at, repeated, body } = self;
        let mut out = Map::new();
        let mut first = true;
        while let Some(key) = map.next_key::<Key<'de>>()? {
            if first && key.0 == NUMBER_TOKEN && !key.is_in(&body) {
                // serde_json's own map for a number: its exact text.
                let text: String = map.next_value()?;
                return Number::from_str(&text)
                    .map(Value::Number)
                    .map_err(de::Error::custom);
            }
            first = false;
            let value = map.next_value_seed(Build {
                at: &At::Key(at, &key.0),
                repeated: &mut *repeated,
                body: body.clone(),
            })?;
            let key = key.0.into_owned();
            if out.contains_key(&key) && repeated.is_none() {
                let mut path = String::new();
                At::Key(at, &key).spell(&mut path);
                *repeated = Some(path);
            }
            out.insert(key, value);
        }
        Ok(Value::Object(out))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let Build { at, repeated, body } = self;
        let mut out = Vec::new();
        while let Some(value) = seq.next_element_seed(Build {
            at: &At::Index(at, out.len()),
            repeated: &mut *repeated,
            body: body.clone(),
        })? {
            out.push(value);
        }
        Ok(Value::Array(out))
    }

    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }
    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(Value::from(v))
    }
    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(Value::from(v))
    }
    fn visit_f64<E>(self, v: f64) -> Result<Value, E> {
        Ok(Number::from_f64(v).map_or(Value::Null, Value::Number))
    }
    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_owned()))
    }
    fn visit_string<E>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }
    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
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
        // Escaped keys compare by what they spell; paths name them so.
        assert_eq!(
            find_duplicate_key(br#"{"a\u0062":1,"ab":2}"#).as_deref(),
            Some("ab")
        );
        assert_eq!(
            find_duplicate_key(br#"[{"x":[0,{"y":1,"y":1}]}]"#).as_deref(),
            Some("[0].x[1].y")
        );
    }

    #[test]
    fn objects_stay_objects_and_numbers_keep_their_text() {
        let v = |body: &str| parse(body.as_bytes()).unwrap().value;
        let token = |text: &str| {
            let mut m = Map::new();
            m.insert(NUMBER_TOKEN.to_owned(), Value::String(text.to_owned()));
            Value::Object(m)
        };
        assert_eq!(
            v(r#"{"amount":{"$serde_json::private::Number":"2"}}"#)["amount"],
            token("2")
        );
        // Escaped, the key spells the same and is the same.
        assert_eq!(
            v(r#"{"a":[1,{"b":{"$serde_json::private::Numbe\u0072":"two"}}]}"#)["a"][1]["b"],
            token("two")
        );
        assert_eq!(v(r#"{"$serde_json::private::Number":"2"}"#), token("2"));
        // Real numbers keep their exact text, whatever their exponent.
        let doc = v(
            r#"{"a":1,"b":-0.5e-9223372036854775808,"c":[1E+400,0],"d":"$serde_json::private::Number"}"#,
        );
        assert_eq!(doc["b"].to_string(), "-0.5e-9223372036854775808");
        assert_eq!(
            doc["c"][0],
            serde_json::from_str::<Value>("1E+400").unwrap()
        );
        assert_eq!(doc["d"], Value::String(NUMBER_TOKEN.to_owned()));
        // The same value serde_json's own Value gives for bodies without the key.
        for body in [
            r#"{"a":[true,false,null,"x\u00e9",{"b":[]}],"c":{},"n":-12.50e3}"#,
            r#"[1,2,{"k":"v"}]"#,
            "\"s\"",
            "0.1",
        ] {
            assert_eq!(
                v(body),
                serde_json::from_str::<Value>(body).unwrap(),
                "{body}"
            );
        }
        // Malformed JSON and trailing text are errors, as with serde_json.
        assert!(parse(b"{not json").is_err());
        assert!(parse(br#"{"a":1} x"#).is_err());
        assert!(parse(br#"{"a":1,"a":2"#).is_err());
    }

    #[test]
    fn large_objects_are_checked_too() {
        for repeat in [0, 5, 31, 32, 33, 199] {
            let mut body = String::from("{");
            for i in 0..200 {
                body.push_str(&format!("\"k{i}\":{i},"));
            }
            body.push_str(&format!("\"k{repeat}\":0}}"));
            assert_eq!(
                find_duplicate_key(body.as_bytes()).as_deref(),
                Some(format!("k{repeat}").as_str()),
                "{repeat}"
            );
        }
        let distinct: String = (0..200).map(|i| format!("\"k{i}\":{i},")).collect();
        let distinct = format!("{{{}\"last\":0}}", distinct);
        assert_eq!(find_duplicate_key(distinct.as_bytes()), None);
    }
}
