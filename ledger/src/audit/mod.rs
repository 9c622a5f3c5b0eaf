//! The finance audit trail (docs/audit.md): exports of a tenant's log that
//! anyone can verify offline, and signed checkpoints of its chain head.
//!
//! - [`record`]: the lines of an export (header, entries, trailer) and the
//!   CSV rows, written and read by the same code.
//! - [`export`]: the stream of those lines read from the database in pages;
//!   `GET /v1/audit/export` and `tally export` both send it.
//! - [`sign`]: the Ed25519 checkpoint over (tenant, seq, hash, time).
//! - [`check`]: the offline verifier of an export file (`tally verify --export`).

pub mod check;
pub mod export;
pub mod format;
pub mod sign;

/// The `format` named in the header line of every JSONL export.
pub const FORMAT: &str = "tally-export/1";

/// The columns of an entry, in export order: every stored column, enough to
/// recompute each fingerprint and the hash chain.
pub const COLUMNS: [&str; 19] = [
    "tenant_id",
    "seq",
    "id",
    "kind",
    "upstream_id",
    "status",
    "rejection_code",
    "rejection_message",
    "account",
    "debit_account",
    "credit_account",
    "amount",
    "unit",
    "params",
    "fingerprint",
    "recorded_at",
    "balance_after",
    "prev_hash",
    "hash",
];
