//! The per-tenant hash chain: `hash = sha256(prev_hash ‖ canonical entry)`.

use sha2::{Digest, Sha256};

use crate::amount::canonical;
use crate::entry::{format_recorded_at, StoredEntry};

/// `prev_hash` of seq 1.
pub const GENESIS_HASH: [u8; 32] = [0u8; 32];

/// The chain head of a tenant: its last `seq` and that entry's hash.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Head {
    pub seq: i64,
    pub hash: [u8; 32],
}

impl Head {
    pub const EMPTY: Head = Head {
        seq: 0,
        hash: GENESIS_HASH,
    };
}

/// The canonical text of an entry for hashing: every stored field except the
/// two hashes, as JSON with keys in byte order and no whitespace, strings
/// escaped exactly as serde_json escapes them. `params` is embedded as a
/// string, so its bytes are hashed exactly as stored.
///
/// Written by hand rather than through `serde_json::Value` because it runs
/// once per entry on the write path and in every verification; the unit test
/// below holds it byte-identical to the `json!` form.
pub fn canonical_entry(e: &StoredEntry) -> String {
    let mut out = String::with_capacity(640 + e.params.len());
    out.push('{');
    push_field(&mut out, "account", &e.account, false);
    push_field(&mut out, "amount", &canonical(e.amount), true);
    push_field(
        &mut out,
        "balance_after",
        &e.balance_after.to_string(),
        true,
    );
    push_field(&mut out, "credit_account", &e.credit_account, true);
    push_field(&mut out, "debit_account", &e.debit_account, true);
    push_field(&mut out, "fingerprint", &e.fingerprint, true);
    push_field(&mut out, "id", &e.id, true);
    push_field(&mut out, "kind", e.kind.as_str(), true);
    push_field(&mut out, "params", &e.params, true);
    push_field(
        &mut out,
        "recorded_at",
        &format_recorded_at(&e.recorded_at),
        true,
    );
    push_optional(&mut out, "rejection_code", e.rejection_code.as_deref());
    push_optional(
        &mut out,
        "rejection_message",
        e.rejection_message.as_deref(),
    );
    out.push_str(",\"seq\":");
    out.push_str(&e.seq.to_string());
    push_field(&mut out, "status", e.status.as_str(), true);
    push_field(&mut out, "tenant_id", &e.tenant_id, true);
    push_field(&mut out, "unit", &e.unit, true);
    push_field(&mut out, "upstream_id", &e.upstream_id, true);
    out.push('}');
    out
}

fn push_field(out: &mut String, key: &str, value: &str, comma: bool) {
    if comma {
        out.push(',');
    }
    push_json_str(out, key);
    out.push(':');
    push_json_str(out, value);
}

fn push_optional(out: &mut String, key: &str, value: Option<&str>) {
    match value {
        Some(v) => push_field(out, key, v, true),
        None => {
            out.push(',');
            push_json_str(out, key);
            out.push_str(":null");
        }
    }
}

/// A JSON string as serde_json writes it: `"` and `\` escaped, control
/// characters below U+0020 as `\b \f \n \r \t` or `\u00xx`, all else raw.
fn push_json_str(out: &mut String, s: &str) {
    out.push('"');
    if !s.bytes().any(|b| b < 0x20 || b == b'"' || b == b'\\') {
        out.push_str(s);
    } else {
        for c in s.chars() {
            match c {
                '"' => out.push_str("\\\""),
                '\\' => out.push_str("\\\\"),
                '\u{08}' => out.push_str("\\b"),
                '\u{0c}' => out.push_str("\\f"),
                '\n' => out.push_str("\\n"),
                '\r' => out.push_str("\\r"),
                '\t' => out.push_str("\\t"),
                c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
                c => out.push(c),
            }
        }
    }
    out.push('"');
}

pub fn entry_hash(prev: &[u8; 32], e: &StoredEntry) -> [u8; 32] {
    let mut h = Sha256::new();
    h.update(prev);
    h.update(canonical_entry(e).as_bytes());
    h.finalize().into()
}

pub fn decode_hash(text: &str) -> Option<[u8; 32]> {
    let mut out = [0u8; 32];
    hex::decode_to_slice(text, &mut out).ok()?;
    Some(out)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use std::str::FromStr;

    use chrono::{TimeZone, Utc};
    use rust_decimal::Decimal;
    use serde_json::{json, Value};

    use super::*;
    use crate::entry::EntryStatus;
    use crate::request::EntryKind;

    /// The definition: the json! object, serialised by serde_json.
    fn oracle(e: &StoredEntry) -> String {
        let v: Value = json!({
            "account": e.account,
            "amount": canonical(e.amount),
            "balance_after": e.balance_after.to_string(),
            "credit_account": e.credit_account,
            "debit_account": e.debit_account,
            "fingerprint": e.fingerprint,
            "id": e.id,
            "kind": e.kind.as_str(),
            "params": e.params,
            "recorded_at": format_recorded_at(&e.recorded_at),
            "rejection_code": e.rejection_code,
            "rejection_message": e.rejection_message,
            "seq": e.seq,
            "status": e.status.as_str(),
            "tenant_id": e.tenant_id,
            "unit": e.unit,
            "upstream_id": e.upstream_id,
        });
        v.to_string()
    }

    #[test]
    fn hand_written_canonical_entry_equals_the_serde_json_definition() {
        let mut e = StoredEntry {
            tenant_id: "acme".into(),
            seq: 42,
            id: "ent_1".into(),
            kind: EntryKind::UsageDebit,
            upstream_id: "ur \"quoted\" \\ back\u{1}\u{8}\u{c}\n\r\t\u{1f} é 日本 /".into(),
            status: EntryStatus::Posted,
            rejection_code: None,
            rejection_message: None,
            account: "cust".into(),
            debit_account: "cust".into(),
            credit_account: "@revenue".into(),
            amount: Decimal::from_str("1.50").unwrap(),
            unit: "USD".into(),
            params: r#"{"account":"cust","metadata":{"q":"a\"b"}}"#.into(),
            fingerprint: "sha256:00".into(),
            recorded_at: Utc.timestamp_opt(1_764_410_400, 123_456_000).unwrap(),
            balance_after: crate::balance::WideDecimal::parse("-1.5").unwrap(),
            prev_hash: String::new(),
            hash: String::new(),
        };
        assert_eq!(canonical_entry(&e), oracle(&e));
        e.status = EntryStatus::Rejected;
        e.rejection_code = Some("insufficient_funds".into());
        e.rejection_message = Some("available 0 < 1.5\u{7f}".into());
        assert_eq!(canonical_entry(&e), oracle(&e));
    }
}
