//! Signed checkpoints: the server's Ed25519 signature over a tenant's chain
//! head at a time. The signed message is a fixed byte string (docs/audit.md):
//!
//! ```text
//! tally-checkpoint/1\n{tenant}\n{seq}\n{hash}\n{signed_at}
//! ```
//!
//! UTF-8, lines separated by a single `\n`, no trailing newline; `seq` in
//! decimal, `hash` as 64 lowercase hex digits, `signed_at` as
//! `YYYY-MM-DDTHH:MM:SS.ffffffZ`.

use chrono::{DateTime, Utc};
use ed25519_dalek::{Signer as _, SigningKey, VerifyingKey};
use serde::{Deserialize, Serialize};

use crate::entry::format_recorded_at;
use crate::LedgerError;

/// The first line of every checkpoint message; names its layout.
pub const CHECKPOINT_VERSION: &str = "tally-checkpoint/1";
/// The `algorithm` of every signature.
pub const ALGORITHM: &str = "ed25519";

/// The exact bytes that are signed.
pub fn checkpoint_message(tenant: &str, seq: i64, hash: &str, signed_at: &str) -> String {
    format!("{CHECKPOINT_VERSION}\n{tenant}\n{seq}\n{hash}\n{signed_at}")
}

/// A signed checkpoint as it appears in `GET /v1/audit/head` and in the
/// trailer of an export. Keys and signatures are lowercase hex.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Signature {
    pub algorithm: String,
    /// The 32-byte Ed25519 public key, hex.
    pub public_key: String,
    pub signed_at: String,
    /// [`checkpoint_message`], for readers; a verifier rebuilds it from
    /// the tenant, seq and hash it checked and compares.
    pub message: String,
    /// The 64-byte Ed25519 signature of `message`, hex.
    pub value: String,
}

/// The server's signing key: a 32-byte Ed25519 seed. Its `Debug` shows the
/// public key only; the seed is printed by `tally signing-key generate`
/// and nowhere else.
pub struct Signer {
    key: SigningKey,
}

impl std::fmt::Debug for Signer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Signer")
            .field("public_key", &self.public_key_hex())
            .finish_non_exhaustive()
    }
}

impl Signer {
    /// Reads a seed of 64 hex digits (surrounding whitespace ignored).
    /// The error never repeats the text, which may be a real secret.
    pub fn from_seed_hex(text: &str) -> Result<Signer, String> {
        let text = text.trim();
        let mut seed = [0u8; 32];
        if text.len() != 64 || hex::decode_to_slice(text, &mut seed).is_err() {
            return Err(format!(
                "must be a 32-byte Ed25519 seed written as 64 hex digits (got {} characters{})",
                text.len(),
                if text.bytes().all(|b| b.is_ascii_hexdigit()) {
                    ""
                } else {
                    ", not all hex digits"
                }
            ));
        }
        Ok(Signer {
            key: SigningKey::from_bytes(&seed),
        })
    }

    /// A new random key.
    pub fn generate() -> Result<Signer, LedgerError> {
        let mut seed = [0u8; 32];
        getrandom::fill(&mut seed)
            .map_err(|e| LedgerError::Unavailable(format!("no randomness: {e}")))?;
        Ok(Signer {
            key: SigningKey::from_bytes(&seed),
        })
    }

    /// The secret seed, hex. Only for showing a freshly generated key once.
    pub fn seed_hex(&self) -> String {
        hex::encode(self.key.to_bytes())
    }

    pub fn public_key_hex(&self) -> String {
        hex::encode(self.key.verifying_key().to_bytes())
    }

    /// Signs (tenant, seq, hash) at `at` (kept to microseconds).
    pub fn sign(&self, tenant: &str, seq: i64, hash: &str, at: DateTime<Utc>) -> Signature {
        let signed_at = format_recorded_at(&at);
        let message = checkpoint_message(tenant, seq, hash, &signed_at);
        let value = self.key.sign(message.as_bytes());
        Signature {
            algorithm: ALGORITHM.to_owned(),
            public_key: self.public_key_hex(),
            signed_at,
            message,
            value: hex::encode(value.to_bytes()),
        }
    }
}

/// Parses a public key of 64 hex digits.
pub fn parse_public_key(text: &str) -> Result<[u8; 32], String> {
    let mut key = [0u8; 32];
    hex::decode_to_slice(text.trim(), &mut key)
        .map_err(|_| "must be an Ed25519 public key written as 64 hex digits".to_owned())?;
    VerifyingKey::from_bytes(&key).map_err(|_| "is not a valid Ed25519 public key".to_owned())?;
    Ok(key)
}

/// Why a checkpoint does not verify, in words for a finance reader.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SignatureProblem {
    /// The checkpoint names another seq or hash than the chain that was
    /// checked: the chain (or the trailer) was changed after signing.
    OtherHead {
        signed_seq: String,
        signed_hash: String,
    },
    /// The signature value is not valid for the message and key.
    Invalid,
    /// Not a signature this verifier knows how to read.
    Malformed(String),
}

impl std::fmt::Display for SignatureProblem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SignatureProblem::OtherHead {
                signed_seq,
                signed_hash,
            } => write!(
                f,
                "signature does not match: the signed checkpoint is for seq {signed_seq} with hash \
                 {signed_hash}, not for the chain in this file; the chain was re-hashed (or the \
                 trailer edited) by someone without the signing key"
            ),
            SignatureProblem::Invalid => f.write_str(
                "signature does not match: the signature is not valid for its checkpoint and \
                 public key; the trailer was edited by someone without the signing key",
            ),
            SignatureProblem::Malformed(m) => write!(f, "signature unreadable: {m}"),
        }
    }
}

/// Checks that `sig` is a valid signature, by its own public key, of the
/// checkpoint (tenant, seq, hash) at its `signed_at`. Whether that public
/// key is the one the reader trusts is the caller's question.
pub fn verify_checkpoint(
    sig: &Signature,
    tenant: &str,
    seq: i64,
    hash: &str,
) -> Result<(), SignatureProblem> {
    if sig.algorithm != ALGORITHM {
        return Err(SignatureProblem::Malformed(format!(
            "algorithm {:?} is not {ALGORITHM}",
            sig.algorithm
        )));
    }
    let expected = checkpoint_message(tenant, seq, hash, &sig.signed_at);
    if sig.message != expected {
        let mut lines = sig.message.split('\n');
        let _version = lines.next();
        let _tenant = lines.next();
        return Err(SignatureProblem::OtherHead {
            signed_seq: lines.next().unwrap_or("?").to_owned(),
            signed_hash: lines.next().unwrap_or("?").to_owned(),
        });
    }
    let key = parse_public_key(&sig.public_key)
        .map_err(|m| SignatureProblem::Malformed(format!("public_key {m}")))?;
    let key = VerifyingKey::from_bytes(&key)
        .map_err(|_| SignatureProblem::Malformed("public_key is not a valid key".into()))?;
    let mut value = [0u8; 64];
    hex::decode_to_slice(&sig.value, &mut value)
        .map_err(|_| SignatureProblem::Malformed("value must be 128 hex digits".into()))?;
    let value = ed25519_dalek::Signature::from_bytes(&value);
    key.verify_strict(expected.as_bytes(), &value)
        .map_err(|_| SignatureProblem::Invalid)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    const SEED: &str = "9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60";

    #[test]
    fn the_signed_message_is_the_documented_byte_string() {
        assert_eq!(
            checkpoint_message("acme", 12, "ab", "2026-12-01T10:00:00.000000Z"),
            "tally-checkpoint/1\nacme\n12\nab\n2026-12-01T10:00:00.000000Z"
        );
    }

    #[test]
    fn a_checkpoint_verifies_and_any_change_is_caught() {
        let signer = Signer::from_seed_hex(&format!("  {SEED}\n")).unwrap();
        // RFC 8032 test vector 1: this seed's public key.
        assert_eq!(
            signer.public_key_hex(),
            "d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a"
        );
        let hash = "ab".repeat(32);
        let sig = signer.sign("acme", 12, &hash, Utc::now());
        verify_checkpoint(&sig, "acme", 12, &hash).unwrap();
        assert!(matches!(
            verify_checkpoint(&sig, "acme", 12, &"cd".repeat(32)),
            Err(SignatureProblem::OtherHead { .. })
        ));
        let mut forged = sig.clone();
        forged.message = checkpoint_message("acme", 12, &"cd".repeat(32), &sig.signed_at);
        assert_eq!(
            verify_checkpoint(&forged, "acme", 12, &"cd".repeat(32)),
            Err(SignatureProblem::Invalid)
        );
        let mut other_time = sig.clone();
        other_time.signed_at = "2020-01-01T00:00:00.000000Z".into();
        other_time.message = checkpoint_message("acme", 12, &hash, &other_time.signed_at);
        assert_eq!(
            verify_checkpoint(&other_time, "acme", 12, &hash),
            Err(SignatureProblem::Invalid)
        );
    }

    #[test]
    fn bad_seeds_are_refused_without_echoing_them() {
        let e = Signer::from_seed_hex("secret-but-wrong").unwrap_err();
        assert!(!e.contains("secret"), "{e}");
        assert!(Signer::from_seed_hex(&SEED[..62]).is_err());
        assert!(!format!("{:?}", Signer::from_seed_hex(SEED).unwrap()).contains(SEED));
        let g = Signer::generate().unwrap();
        assert_eq!(
            Signer::from_seed_hex(&g.seed_hex())
                .unwrap()
                .public_key_hex(),
            g.public_key_hex()
        );
    }
}
