//! Limits on every name a client chooses. Each limit is here, once.

use serde_json::{Map, Value};

/// Upstream IDs (usage-record IDs, payment IDs): 1–255 bytes.
pub const MAX_UPSTREAM_ID_BYTES: usize = 255;
/// Account IDs: 1–128 bytes.
pub const MAX_ACCOUNT_BYTES: usize = 128;
/// Units: 1–32 bytes of `A–Z a–z 0–9 _ - . :`.
pub const MAX_UNIT_BYTES: usize = 32;
/// Meter and processor names: 1–128 bytes.
pub const MAX_LABEL_BYTES: usize = 128;
/// Metadata: at most 50 keys of 1–40 bytes, values of at most 500 bytes (Stripe's limits).
pub const MAX_METADATA_KEYS: usize = 50;
pub const MAX_METADATA_KEY_BYTES: usize = 40;
pub const MAX_METADATA_VALUE_BYTES: usize = 500;
/// The key serde_json (with `arbitrary_precision`, which keeps a number's
/// exact text) reads an object as a number by: `{"$serde_json::private::Number": "2"}`
/// is read back from stored JSON as the number 2. An object a client wrote
/// with it is kept an object, and never stored (see [`check_metadata`]).
pub const NUMBER_TOKEN: &str = "$serde_json::private::Number";
/// Tenants: 1–64 bytes of `A–Z a–z 0–9 _ - .`.
pub const MAX_TENANT_BYTES: usize = 64;

/// System accounts (`@revenue`, `@payments`, …) start with this prefix.
pub const SYSTEM_PREFIX: char = '@';
pub const REVENUE_ACCOUNT: &str = "@revenue";
pub const PAYMENTS_ACCOUNT: &str = "@payments";
/// The other side of every adjustment.
pub const ADJUSTMENTS_ACCOUNT: &str = "@adjustments";
/// Named on the credit side of holds and releases, which move no posted
/// money: they change the customer's `held` only.
pub const HOLDS_ACCOUNT: &str = "@holds";
/// Prefix of the upstream IDs the server itself chooses (the release of an
/// expired hold); clients may not start a release ID with it.
pub const SERVER_KEY_PREFIX: char = '@';

pub fn is_system_account(account: &str) -> bool {
    account.starts_with(SYSTEM_PREFIX)
}

fn check_text(value: &str, max: usize) -> Result<(), String> {
    if value.is_empty() {
        return Err("must not be empty".to_owned());
    }
    if value.len() > max {
        return Err(format!("must be at most {max} bytes"));
    }
    if value.chars().any(char::is_control) {
        return Err("must not contain control characters".to_owned());
    }
    Ok(())
}

pub fn check_upstream_id(value: &str) -> Result<(), String> {
    check_text(value, MAX_UPSTREAM_ID_BYTES)
}

/// An upstream ID in a namespace the server also writes to.
pub fn check_client_release_id(value: &str) -> Result<(), String> {
    check_upstream_id(value)?;
    if value.starts_with(SERVER_KEY_PREFIX) {
        return Err(format!(
            "must not start with {SERVER_KEY_PREFIX} (reserved for the server's own releases)"
        ));
    }
    Ok(())
}

/// A customer account: any valid name except a system one.
pub fn check_customer_account(value: &str) -> Result<(), String> {
    check_text(value, MAX_ACCOUNT_BYTES)?;
    if is_system_account(value) {
        return Err(format!(
            "names a system account; names starting with {SYSTEM_PREFIX} may only be a counter_account"
        ));
    }
    Ok(())
}

/// Any account, system accounts included (an account a read names).
pub fn check_any_account(value: &str) -> Result<(), String> {
    check_text(value, MAX_ACCOUNT_BYTES)
}

/// The system accounts the server keeps for its own bookkeeping, with why
/// no request may name them as its `counter_account`.
pub const RESERVED_ACCOUNTS: [(&str, &str); 2] = [
    (
        HOLDS_ACCOUNT,
        "marks held money on holds and releases and has no balance",
    ),
    (
        ADJUSTMENTS_ACCOUNT,
        "is the other side of every adjustment, so its balance is the net of adjustments",
    ),
];

/// The `counter_account` of a request: a customer account or a system
/// account, except those in [`RESERVED_ACCOUNTS`].
pub fn check_counter_account(value: &str) -> Result<(), String> {
    check_any_account(value)?;
    match RESERVED_ACCOUNTS.iter().find(|(name, _)| *name == value) {
        Some((name, why)) => Err(format!(
            "must not be {name}: the server keeps it for its own bookkeeping ({name} {why}); \
             name a customer account or another system account such as @revenue or @payments"
        )),
        None => Ok(()),
    }
}

pub fn check_unit(value: &str) -> Result<(), String> {
    if value.is_empty() {
        return Err("must not be empty".to_owned());
    }
    if value.len() > MAX_UNIT_BYTES {
        return Err(format!("must be at most {MAX_UNIT_BYTES} bytes"));
    }
    if !value
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.' | b':'))
    {
        return Err("may contain only letters, digits and _ - . :".to_owned());
    }
    Ok(())
}

pub fn check_label(value: &str) -> Result<(), String> {
    check_text(value, MAX_LABEL_BYTES)
}

/// Reasons of reversals, adjustments and refunds: 1–500 bytes.
pub fn check_reason(value: &str) -> Result<(), String> {
    check_text(value, MAX_METADATA_VALUE_BYTES)
}

pub fn check_tenant(value: &str) -> Result<(), String> {
    if value.is_empty() || value.len() > MAX_TENANT_BYTES {
        return Err(format!("must be 1 to {MAX_TENANT_BYTES} bytes"));
    }
    if !value
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'))
    {
        return Err("may contain only letters, digits and _ - .".to_owned());
    }
    Ok(())
}

pub fn check_metadata(map: &Map<String, Value>) -> Result<(), String> {
    if map.len() > MAX_METADATA_KEYS {
        return Err(format!("must have at most {MAX_METADATA_KEYS} keys"));
    }
    for (key, value) in map {
        check_text(key, MAX_METADATA_KEY_BYTES).map_err(|m| format!("key {key:?} {m}"))?;
        if key == NUMBER_TOKEN {
            // Stored, it would be read back as a number, not as metadata.
            return Err(format!("key {key:?} is reserved"));
        }
        match value {
            Value::String(s) if s.len() <= MAX_METADATA_VALUE_BYTES => {}
            Value::String(_) => {
                return Err(format!(
                    "value of {key:?} must be at most {MAX_METADATA_VALUE_BYTES} bytes"
                ))
            }
            _ => return Err(format!("value of {key:?} must be a string")),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accounts() {
        assert!(check_customer_account("cust_42").is_ok());
        assert!(check_customer_account("").is_err());
        assert!(check_customer_account("@revenue").is_err());
        assert!(check_any_account("@revenue").is_ok());
        assert!(check_counter_account("@revenue").is_ok());
        assert!(check_counter_account("@fees").is_ok());
        assert!(check_counter_account("cust_7").is_ok());
        assert!(check_counter_account("@holds").is_err());
        assert!(check_counter_account("@adjustments").is_err());
        assert!(check_counter_account("@holdsx").is_ok());
        assert!(check_counter_account("a\0b").is_err());
        assert!(check_customer_account("a\u{7}b").is_err());
        assert!(check_customer_account(&"x".repeat(128)).is_ok());
        assert!(check_customer_account(&"x".repeat(129)).is_err());
    }

    #[test]
    fn metadata_refuses_the_number_key() {
        let mut m = Map::new();
        m.insert(NUMBER_TOKEN.to_owned(), Value::String("2".into()));
        assert!(matches!(check_metadata(&m), Err(e) if e.contains("reserved")));
    }

    #[test]
    fn units_and_tenants() {
        assert!(check_unit("USD").is_ok());
        assert!(check_unit("llm-tokens").is_ok());
        assert!(check_unit("U S D").is_err());
        assert!(check_tenant("acme").is_ok());
        assert!(check_tenant("acme corp").is_err());
    }
}
