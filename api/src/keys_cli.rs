//! `tally keys`: create, list and revoke API keys (docs/operations.md,
//! "API keys"). Only a key's sha256 is stored, so `list` shows the first
//! [`LISTED_HASH_DIGITS`] hex digits of it and `revoke` takes those digits,
//! or the key itself on standard input, and deletes the row: every running
//! server then refuses the key within `--key-recheck-ms`. Arguments are
//! checked before the database is opened, so a bad one changes nothing.

use tally_ledger::keys::{
    format_scopes, generate_secret, hash_prefix, hash_secret, key_by_hash_prefix, parse_scopes,
    KeyPrefixError, Scope, StoredApiKey,
};
use tally_ledger::names::check_tenant;
use tally_ledger::store::Storage;

/// Hex digits of a key's sha256 that `tally keys list` prints: enough to
/// name one key among millions, too few to stand for the hash.
pub const LISTED_HASH_DIGITS: usize = 16;

/// Why a `keys` command did nothing.
#[derive(Debug)]
pub enum KeysFailure {
    /// No key of the tenant matched, or the digits named several: exit 1.
    NoSuchKey(String),
    /// Bad arguments or a database error: exit 2.
    Usage(String),
}

impl std::fmt::Display for KeysFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            KeysFailure::NoSuchKey(m) | KeysFailure::Usage(m) => f.write_str(m),
        }
    }
}

fn database(e: tally_ledger::LedgerError) -> KeysFailure {
    KeysFailure::Usage(e.to_string())
}

/// `--tenant`, checked.
pub fn tenant_arg(tenant: &str) -> Result<(), KeysFailure> {
    check_tenant(tenant).map_err(|m| KeysFailure::Usage(format!("--tenant {m}")))
}

/// `--scopes`, parsed.
pub fn scopes_arg(scopes: &str) -> Result<Vec<Scope>, KeysFailure> {
    parse_scopes(scopes).map_err(|m| KeysFailure::Usage(format!("--scopes: {m}")))
}

/// How `tally keys revoke` names the key.
pub enum RevokeTarget {
    /// Hex digits of its sha256, as `keys list` prints them (checked).
    HashPrefix(String),
    /// The key itself (read from standard input).
    Secret(String),
}

impl RevokeTarget {
    /// `--sha256` digits, checked.
    pub fn digits(digits: &str) -> Result<Self, KeysFailure> {
        hash_prefix(digits)
            .map(RevokeTarget::HashPrefix)
            .map_err(|e| KeysFailure::Usage(format!("--sha256: {e}")))
    }
}

/// Creates a key for `tenant` with `scopes`; returns the key, which is
/// shown once and never stored.
pub async fn create(
    storage: &Storage,
    tenant: &str,
    scopes: &[Scope],
) -> Result<String, KeysFailure> {
    let secret = generate_secret().map_err(database)?;
    storage
        .insert_api_key(tenant, &hash_secret(&secret), &format_scopes(scopes))
        .await
        .map_err(database)?;
    Ok(secret)
}

/// One line of `tally keys list`.
pub fn listed(key: &StoredApiKey) -> String {
    let digits = key
        .key_hash
        .get(..LISTED_HASH_DIGITS)
        .unwrap_or(&key.key_hash);
    format!(
        "{}\t{digits}\t{}\t{}",
        key.tenant_id, key.scopes, key.created_at
    )
}

/// The lines of `tally keys list`, by tenant and creation.
pub async fn list(storage: &Storage, tenant: Option<&str>) -> Result<Vec<String>, KeysFailure> {
    let keys = storage.list_api_keys(tenant).await.map_err(database)?;
    Ok(keys.iter().map(listed).collect())
}

/// Deletes the one key of `tenant` that `target` names and returns it.
/// Another tenant's key is never touched, whatever the digits.
pub async fn revoke(
    storage: &Storage,
    tenant: &str,
    target: &RevokeTarget,
) -> Result<StoredApiKey, KeysFailure> {
    let keys = storage
        .list_api_keys(Some(tenant))
        .await
        .map_err(database)?;
    let key = match target {
        RevokeTarget::HashPrefix(digits) => {
            key_by_hash_prefix(&keys, digits).map_err(|e| match e {
                KeyPrefixError::Malformed(_) => KeysFailure::Usage(format!("--sha256: {e}")),
                _ => KeysFailure::NoSuchKey(format!("tenant {tenant}: {e}")),
            })?
        }
        RevokeTarget::Secret(secret) => {
            let hash = hash_secret(secret.trim());
            keys.iter()
                .find(|k| k.key_hash == hash)
                .ok_or_else(|| KeysFailure::NoSuchKey(format!("tenant {tenant} has no such key")))?
        }
    };
    // Deleted meanwhile by someone else is revoked all the same.
    storage
        .delete_api_key(tenant, &key.key_hash)
        .await
        .map_err(database)?;
    Ok(key.clone())
}
