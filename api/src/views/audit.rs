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

/// A log position and its chain hash.
#[derive(Debug, Serialize, ToSchema)]
pub struct HeadSummary {
    pub seq: i64,
    /// Hex.
    pub hash: String,
}

/// One thing `POST /v1/audit/verify` found wrong.
#[derive(Debug, Serialize, ToSchema)]
pub struct VerificationProblem {
    /// The first entry found broken, when the problem is in the log.
    #[schema(required = true)]
    pub seq: Option<i64>,
    pub problem: String,
}

impl From<&tally_ledger::verify::Broken> for VerificationProblem {
    fn from(b: &tally_ledger::verify::Broken) -> Self {
        Self {
            seq: b.seq,
            problem: b.problem.clone(),
        }
    }
}

/// `POST /v1/audit/verify`: what was checked and what was found.
#[derive(Debug, Serialize, ToSchema)]
#[schema(example = json!({
    "tenant": "acme", "status": "verified", "checked_entries": 17,
    "head": {"seq": 17, "hash": "9f2c…"}, "balances": 4, "records": 2, "usage_rows": 3,
    "problems": [], "elapsed_ms": 12, "budget_ms": 25000
}))]
pub struct AuditVerification {
    pub tenant: String,
    /// `verified`: every check held. `broken`: `problems` lists what was
    /// found (a problem in the log is reported alone). `incomplete`: the
    /// time budget ran out after `checked_entries`; run `tally verify`.
    pub status: String,
    /// Entries whose chain, fingerprint and `balance_after` were checked.
    pub checked_entries: i64,
    /// The verified head (null unless the log held together).
    #[schema(required = true)]
    pub head: Option<HeadSummary>,
    /// Stored balances equal to the fold of the log.
    pub balances: usize,
    /// Rule-state records equal to the fold of the log.
    pub records: usize,
    /// Usage summary rows equal to the fold of the log.
    pub usage_rows: usize,
    pub problems: Vec<VerificationProblem>,
    pub elapsed_ms: u64,
    pub budget_ms: u64,
}
