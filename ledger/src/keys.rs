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
    hex::encode(Sha256::digest(secret.as_bytes()))
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

    #[test]
    fn secrets_are_random_and_only_hashed() {
        let a = generate_secret().unwrap();
        let b = generate_secret().unwrap();
        assert_ne!(a, b);
        assert_eq!(hash_secret(&a).len(), 64);
        assert!(!hash_secret(&a).contains(&a[6..]));
    }
}
