//! API keys: random secrets of which only the sha256 is stored.

use sha2::{Digest, Sha256};

use crate::LedgerError;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Scope {
    /// Mutations: debits, payments.
    Post,
    /// Balances and entries.
    Read,
    /// Exports and verification.
    Audit,
    /// Account settings.
    Admin,
}

impl Scope {
    pub fn as_str(self) -> &'static str {
        match self {
            Scope::Post => "post",
            Scope::Read => "read",
            Scope::Audit => "audit",
            Scope::Admin => "admin",
        }
    }

    pub fn parse(text: &str) -> Option<Scope> {
        [Scope::Post, Scope::Read, Scope::Audit, Scope::Admin]
            .into_iter()
            .find(|s| s.as_str() == text)
    }
}

/// Parses `post,read,...`; refuses unknown or no scopes.
pub fn parse_scopes(text: &str) -> Result<Vec<Scope>, String> {
    let mut scopes = Vec::new();
    for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let scope = Scope::parse(part).ok_or_else(|| {
            format!("unknown scope {part:?}; expected post, read, audit or admin")
        })?;
        if !scopes.contains(&scope) {
            scopes.push(scope);
        }
    }
    if scopes.is_empty() {
        return Err("at least one scope is required".to_owned());
    }
    scopes.sort();
    Ok(scopes)
}

pub fn format_scopes(scopes: &[Scope]) -> String {
    scopes
        .iter()
        .map(|s| s.as_str())
        .collect::<Vec<_>>()
        .join(",")
}

/// A key as the server knows it after authentication.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiKey {
    pub tenant_id: String,
    pub scopes: Vec<Scope>,
}

impl ApiKey {
    pub fn allows(&self, scope: Scope) -> bool {
        self.scopes.contains(&scope)
    }
}

/// The stored form of a key: hex sha256 of the secret.
pub fn hash_secret(secret: &str) -> String {
    crate::hex_text::lower_hex(&Sha256::digest(secret.as_bytes()))
}

/// A key as `api_keys` holds it, for `tally keys list` and `revoke`: the
/// hash of the secret, never the secret.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredApiKey {
    pub tenant_id: String,
    /// Hex sha256 of the secret.
    pub key_hash: String,
    pub scopes: String,
    /// RFC 3339, UTC.
    pub created_at: String,
}

/// Fewest hex digits of a key's sha256 that `tally keys revoke` takes:
/// `keys list` prints 16, and fewer would too easily name the wrong key.
pub const MIN_HASH_PREFIX: usize = 8;

/// Why hex digits did not name one key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeyPrefixError {
    /// Not 8–64 hex digits.
    Malformed(String),
    /// No key's hash starts with them.
    NoMatch(String),
    /// Several keys' hashes do.
    Several(String),
}

impl std::fmt::Display for KeyPrefixError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            KeyPrefixError::Malformed(p) => write!(
                f,
                "{p:?} is not {MIN_HASH_PREFIX} to 64 hex digits of a key's sha256 (tally keys list prints 16)"
            ),
            KeyPrefixError::NoMatch(p) => write!(f, "no key has a sha256 starting with {p}"),
            KeyPrefixError::Several(p) => write!(
                f,
                "more than one key has a sha256 starting with {p}; give more digits"
            ),
        }
    }
}

/// `prefix` as the lower-case hex digits [`key_by_hash_prefix`] takes:
/// [`MIN_HASH_PREFIX`] to 64 of them, any case, surrounding blanks ignored.
pub fn hash_prefix(prefix: &str) -> Result<String, KeyPrefixError> {
    let prefix = prefix.trim().to_ascii_lowercase();
    if !(MIN_HASH_PREFIX..=64).contains(&prefix.len())
        || !prefix.bytes().all(|b| b.is_ascii_hexdigit())
    {
        return Err(KeyPrefixError::Malformed(prefix));
    }
    Ok(prefix)
}

/// The one key among `keys` whose sha256 starts with `prefix` (see
/// [`hash_prefix`]). None or several is an error, so that a revocation
/// never deletes a key by guess.
pub fn key_by_hash_prefix<'a>(
    keys: &'a [StoredApiKey],
    prefix: &str,
) -> Result<&'a StoredApiKey, KeyPrefixError> {
    let prefix = hash_prefix(prefix)?;
    let mut found = keys.iter().filter(|k| k.key_hash.starts_with(&prefix));
    match (found.next(), found.next()) {
        (Some(key), None) => Ok(key),
        (None, _) => Err(KeyPrefixError::NoMatch(prefix)),
        (Some(_), Some(_)) => Err(KeyPrefixError::Several(prefix)),
    }
}

/// A new secret: `tally_` and 256 random bits in hex.
pub fn generate_secret() -> Result<String, LedgerError> {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes)
        .map_err(|e| LedgerError::Unavailable(format!("no randomness: {e}")))?;
    Ok(format!("tally_{}", hex::encode(bytes)))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn scopes_parse_and_refuse() {
        assert_eq!(
            parse_scopes("read, post,read").unwrap(),
            vec![Scope::Post, Scope::Read]
        );
        assert!(parse_scopes("post,write").is_err());
        assert!(parse_scopes("").is_err());
    }

    fn stored(hash: &str) -> StoredApiKey {
        StoredApiKey {
            tenant_id: "acme".into(),
            key_hash: hash.into(),
            scopes: "read".into(),
            created_at: "2026-11-30T00:00:00.000000Z".into(),
        }
    }

    #[test]
    fn a_key_is_named_by_one_unambiguous_hash_prefix() {
        let keys = [
            stored("0123456789abcdef00"),
            stored("0123456789abcdef11"),
            stored("fedcba9876543210"),
        ];
        assert_eq!(key_by_hash_prefix(&keys, "FEDCBA98").unwrap(), &keys[2]);
        assert_eq!(
            key_by_hash_prefix(&keys, "0123456789abcdef1").unwrap(),
            &keys[1]
        );
        let err = |p: &str| key_by_hash_prefix(&keys, p).unwrap_err();
        assert_eq!(
            err("0123456789abcdef"),
            KeyPrefixError::Several("0123456789abcdef".into())
        );
        assert_eq!(err("aaaaaaaa"), KeyPrefixError::NoMatch("aaaaaaaa".into()));
        assert!(matches!(err("fedcba9"), KeyPrefixError::Malformed(_)));
        assert!(matches!(err("fedcba98z"), KeyPrefixError::Malformed(_)));
        assert!(matches!(err(&"f".repeat(65)), KeyPrefixError::Malformed(_)));
    }

    #[test]
    fn secrets_are_random_and_only_hashed() {
        let a = generate_secret().unwrap();
        let b = generate_secret().unwrap();
        assert_ne!(a, b);
        assert_eq!(hash_secret(&a).len(), 64);
        assert!(!hash_secret(&a).contains(&a[6..]));
    }

    #[test]
    fn a_secret_is_256_bits_in_hex_and_its_stored_form_is_its_sha256() {
        let secret = generate_secret().unwrap();
        let digits = secret.strip_prefix("tally_").unwrap();
        assert_eq!(digits.len(), 64, "{secret}");
        assert!(digits.bytes().all(|b| b.is_ascii_hexdigit()), "{secret}");
        // FIPS 180-2, appendix B.1: sha256("abc").
        assert_eq!(
            hash_secret("abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }
}
