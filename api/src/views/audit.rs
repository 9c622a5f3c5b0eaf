//! `GET /v1/audit/head`.

use serde::Serialize;
use tally_ledger::audit::sign;
use utoipa::ToSchema;

/// A signed checkpoint as it appears in `GET /v1/audit/head` and in the
/// trailer of an export. Keys and signatures are lowercase hex.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, ToSchema)]
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

impl From<sign::Signature> for Signature {
    fn from(s: sign::Signature) -> Self {
        let sign::Signature {
            algorithm,
            public_key,
            signed_at,
            message,
            value,
        } = s;
        Self {
            algorithm,
            public_key,
            signed_at,
            message,
            value,
        }
    }
}

/// The caller's chain head, signed when the server has a key.
#[derive(Serialize, ToSchema)]
#[schema(as = AuditHead)]
pub struct HeadView {
    pub tenant: String,
    pub seq: i64,
    pub hash: String,
    pub checked_at: String,
    /// `"on"` or `"off"`.
    #[schema(value_type = String)]
    pub signing: &'static str,
    /// The checkpoint over (tenant, seq, hash, checked_at); null when
    /// signing is off.
    #[schema(required = true)]
    pub signature: Option<Signature>,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<String>, nullable = false)]
    pub notice: Option<&'static str>,
}
