//! Refuses JSON objects that name a key twice, or that pose as numbers.
//!
//! RFC 8259 leaves duplicate names to the parser, and serde_json keeps the
//! last one. For a ledger `{"amount": "1", "amount": "100"}` is ambiguous, so
//! it is refused (422) rather than silently read as 100.
//!
//! With serde_json's `arbitrary_precision` (which keeps a number's exact
//! text) a number travels through serde as a one-key map whose key is
//! [`NUMBER_TOKEN`], so `{"amount": {"$serde_json::private::Number": "2"}}`
//! parses as the number 2. An object is never a number: a body that spells
//! that key itself is refused (422 naming the object).

use std::borrow::Cow;
use std::collections::HashSet;
use std::fmt::{self, Write as _};

use serde::de::{self, Deserialize, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};

/// The key serde_json's `arbitrary_precision` gives the map a number
/// travels as (serde_json's private `number::TOKEN`).
pub const NUMBER_TOKEN: &str = "$serde_json::private::Number";

/// What is wrong with a body's keys.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeyProblem {
    /// A key given twice: the key's path (dotted from the root, e.g.
    /// `metadata.model`).
    Repeated(String),
    /// An object spelling [`NUMBER_TOKEN`]: the object's path (`""` for the
    /// body itself).
    PosesAsNumber(String),
}

/// Walks a JSON document and stops at the first object with a repeated key
/// or with the key [`NUMBER_TOKEN`].
///
/// Every mutation body passes here, so the walk allocates as little as it
/// can: keys are borrowed from the body unless escaped, and a path is
/// spelled out only once a problem is found.
pub fn find_key_problem(bytes: &[u8]) -> Option<KeyProblem> {
    let mut de = serde_json::Deserializer::from_slice(bytes);
    let mut found = None;
    // An error is either the problem (then `found` names it) or malformed
    // JSON, which is not this check's business.
    let start = bytes.as_ptr() as usize;
    let _ = Check {
        at: &At::Root,
        found: &mut found,
        body: start..start + bytes.len(),
    }
    .deserialize(&mut de);
    found
}

/// The repeated key of [`find_key_problem`], if that is its problem.
#[cfg(test)]
fn find_duplicate_key(bytes: &[u8]) -> Option<String> {
    match find_key_problem(bytes)? {
        KeyProblem::Repeated(path) => Some(path),
        KeyProblem::PosesAsNumber(_) => None,
    }
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

/// Objects up to this many keys are checked by comparing keys; larger ones
/// through a hash set (a body of 1 MiB may hold ~100,000 keys).
const COMPARED_KEYS: usize = 32;

struct Check<'a, 'p> {
    at: &'p At<'p>,
    found: &'a mut Option<KeyProblem>,
    /// The addresses of the body's bytes.
    body: std::ops::Range<usize>,
}

impl<'de> DeserializeSeed<'de> for Check<'_, '_> {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Check<'_, '_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let Check { at, found, body } = self;
        let mut seen: Vec<Cow<'de, str>> = Vec::new();
        let mut many: Option<HashSet<Cow<'de, str>>> = None;
        while let Some(key) = map.next_key::<Key<'de>>()? {
            if key.0 == NUMBER_TOKEN && key.is_in(&body) {
                let mut path = String::new();
                at.spell(&mut path);
                *found = Some(KeyProblem::PosesAsNumber(path));
                return Err(de::Error::custom("an object posing as a number"));
            }
            let Key(key) = key;
            let repeated = match &mut many {
                Some(set) => set.contains(&key),
                None => seen.contains(&key),
            };
            if repeated {
                let mut path = String::new();
                At::Key(at, &key).spell(&mut path);
                *found = Some(KeyProblem::Repeated(path));
                return Err(de::Error::custom("duplicate key"));
            }
            map.next_value_seed(Check {
                at: &At::Key(at, &key),
                found: &mut *found,
                body: body.clone(),
            })?;
            match &mut many {
                Some(set) => {
                    set.insert(key);
                }
                None if seen.len() < COMPARED_KEYS => seen.push(key),
                None => {
                    let mut set: HashSet<Cow<'de, str>> = seen.drain(..).collect();
                    set.insert(key);
                    many = Some(set);
                }
            }
        }
        Ok(())
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        let Check { at, found, body } = self;
        let mut i = 0;
        while seq
            .next_element_seed(Check {
                at: &At::Index(at, i),
                found: &mut *found,
                body: body.clone(),
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
    fn objects_posing_as_numbers_are_found_numbers_are_not() {
        let posing = |body: &str| match find_key_problem(body.as_bytes()) {
            Some(KeyProblem::PosesAsNumber(path)) => Some(path),
            _ => None,
        };
        assert_eq!(
            posing(r#"{"amount":{"$serde_json::private::Number":"2"}}"#).as_deref(),
            Some("amount")
        );
        assert_eq!(
            posing(r#"{"a":[1,{"b":{"$serde_json::private::Numbe\u0072":"2"}}]}"#).as_deref(),
            Some("a[1].b")
        );
        assert_eq!(
            posing(r#"{"$serde_json::private::Number":"2"}"#).as_deref(),
            Some("")
        );
        // Still found when what follows does not parse.
        assert_eq!(
            posing(r#"{"q":{"$serde_json::private::Number":"two"}}"#).as_deref(),
            Some("q")
        );
        // Real numbers of every form, and the token as a value, pass.
        assert_eq!(
            find_key_problem(
                br#"{"a":1,"b":-0.5e-9223372036854775808,"c":[1E+400,0],"d":"$serde_json::private::Number"}"#
            ),
            None
        );
    }

    #[test]
    fn large_objects_are_checked_through_a_set() {
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
