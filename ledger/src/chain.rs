//! The per-tenant hash chain: `hash = sha256(prev_hash ‖ canonical entry)`.

use serde_json::{json, Value};
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
/// two hashes, as JSON with keys in byte order and no whitespace. `params` is
/// embedded as a string, so its bytes are hashed exactly as stored.
pub fn canonical_entry(e: &StoredEntry) -> String {
    let v: Value = json!({
        "account": e.account,
        "amount": canonical(e.amount),
        "balance_after": canonical(e.balance_after),
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
