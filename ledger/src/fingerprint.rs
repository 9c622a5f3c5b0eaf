//! The fingerprint of a request: sha256 over the canonical JSON of the
//! business parameters the client supplied. `docs/idempotency.md` specifies
//! the canonical form so another implementation can reproduce it.

use std::fmt;

use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Fingerprint(pub [u8; 32]);

impl Fingerprint {
    /// Fingerprint of canonical parameter text (see [`canonical_params`]).
    pub fn of_canonical(text: &str) -> Self {
        Fingerprint(Sha256::digest(text.as_bytes()).into())
    }

    /// Parses the `sha256:<64 hex>` form.
    pub fn parse(text: &str) -> Option<Self> {
        let hex_part = text.strip_prefix("sha256:")?;
        let mut out = [0u8; 32];
        hex::decode_to_slice(hex_part, &mut out).ok()?;
        Some(Fingerprint(out))
    }

    /// The `sha256:<64 hex>` form (what `to_string` gives, sooner).
    pub fn text(&self) -> String {
        let mut out = String::with_capacity(7 + 64);
        out.push_str("sha256:");
        crate::hex_text::push_lower_hex(&mut out, &self.0);
        out
    }

    /// Whether `text` is exactly this fingerprint's `sha256:<64 hex>` form.
    pub fn is_text_of(&self, text: &str) -> bool {
        text.strip_prefix("sha256:")
            .is_some_and(|hex| crate::hex_text::is_lower_hex_of(hex, &self.0))
    }
}

impl fmt::Display for Fingerprint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text())
    }
}

impl fmt::Debug for Fingerprint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

/// The canonical text of normalised parameters: JSON with object keys in
/// byte order at every depth, no whitespace, strings escaped as serde_json
/// does (only `"`, `\` and control characters; other text as UTF-8).
pub fn canonical_params(params: &Map<String, Value>) -> String {
    // serde_json's Map is a BTreeMap (no `preserve_order` feature), so
    // serialisation is already key-ordered at every depth. Serialised as
    // it is: no copy of the map, no formatter in between.
    serde_json::to_string(params).unwrap_or_else(|_| Value::Object(params.clone()).to_string())
}

/// Names of the top-level parameters whose values differ, in byte order.
pub fn differing_fields(stored_canonical: &str, new: &Map<String, Value>) -> Vec<String> {
    let stored: Map<String, Value> = serde_json::from_str(stored_canonical).unwrap_or_default();
    let mut names: Vec<&String> = stored.keys().chain(new.keys()).collect();
    names.sort();
    names.dedup();
    names
        .into_iter()
        .filter(|k| stored.get(*k) != new.get(*k))
        .cloned()
        .collect()
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn canonical_text_is_key_ordered_and_compact() {
        let v = json!({"unit": "USD", "amount": "1.5", "metadata": {"z": "1", "a": "2"}});
        let text = canonical_params(v.as_object().unwrap());
        assert_eq!(
            text,
            r#"{"amount":"1.5","metadata":{"a":"2","z":"1"},"unit":"USD"}"#
        );
        let fp = Fingerprint::of_canonical(&text);
        assert_eq!(Fingerprint::parse(&fp.to_string()), Some(fp));
    }

    #[test]
    fn differing_fields_names_changed_added_and_removed() {
        let stored = r#"{"account":"a","amount":"1","meter":"m"}"#;
        let new = json!({"account": "a", "amount": "2", "unit": "USD"});
        assert_eq!(
            differing_fields(stored, new.as_object().unwrap()),
            vec!["amount", "meter", "unit"]
        );
    }
}
