//! One entry in its place: tenant, link to the one before, fingerprint,
//! hash, balance and the head the reader noted.

use serde_json::{Map, Value};

use super::{problem, ExportChecker, Problem};
use crate::amount::{canonical, parse_exact};
use crate::chain::{decode_hash, entry_hash};
use crate::entry::StoredEntry;
use crate::fingerprint::Fingerprint;
use crate::LedgerError;

impl ExportChecker {
    /// The checks of an entry in its place: tenant, link, fingerprint,
    /// hash, balance, noted head.
    pub(super) fn check(&mut self, line: u64, e: StoredEntry) -> Result<(), Problem> {
        let at = Some(line);
        let seq = Some(e.seq);
        let tenant = self.tenant.as_deref().unwrap_or_default();
        if e.tenant_id != tenant {
            return problem(
                at,
                seq,
                format!(
                    "an entry of tenant {:?} in an export of tenant {tenant:?}",
                    e.tenant_id
                ),
            );
        }
        let Some(prev_hash) = decode_hash(&e.prev_hash) else {
            return problem(at, seq, "prev_hash is not 64 hex digits");
        };
        let prev = match self.prev {
            Some((_, hash)) => hash,
            None => {
                // A partial export: the chain starts at the first prev_hash.
                self.anchor = Some(prev_hash);
                if let Some(head) = self.options.head {
                    if head.seq == e.seq - 1 {
                        if head.hash != prev_hash {
                            return problem(
                                at,
                                seq,
                                format!(
                                    "prev_hash differs from the head you noted ({}:{}): the log before this export was rewritten after you noted it",
                                    head.seq,
                                    hex::encode(head.hash)
                                ),
                            );
                        }
                        self.head_seen = true;
                    }
                }
                prev_hash
            }
        };
        if prev_hash != prev {
            return problem(
                at,
                seq,
                if e.seq == 1 {
                    "prev_hash of seq 1 is not the genesis hash (64 zeros)".to_owned()
                } else {
                    format!(
                        "prev_hash does not match the hash of seq {} (line {}): an entry before it was changed and re-hashed, or removed",
                        e.seq - 1,
                        self.prev_line
                    )
                },
            );
        }
        if !Fingerprint::of_canonical(&e.params).is_text_of(&e.fingerprint) {
            return problem(
                at,
                seq,
                "params changed? the request parameters no longer match their fingerprint",
            );
        }
        let hash = entry_hash(&prev, &e);
        if !crate::hex_text::is_lower_hex_of(&e.hash, &hash) {
            return problem(at, seq, hash_mismatch(&e));
        }
        if let Some(fold) = &mut self.fold {
            match fold.apply(&e) {
                Ok(()) => {}
                Err(LedgerError::Corrupt(m)) => {
                    return problem(at, seq, format!("does not fold: {m}"))
                }
                Err(other) => return problem(at, seq, format!("does not fold: {other}")),
            }
            let posted = fold
                .balances
                .get(&e.account, &e.unit)
                .map(|b| b.posted())
                .unwrap_or_default();
            if posted != e.balance_after {
                return problem(
                    at,
                    seq,
                    format!(
                        "balance_after is {} but the entries before it add up to {} for {} ({})",
                        e.balance_after, posted, e.account, e.unit
                    ),
                );
            }
        }
        if let Some(head) = self.options.head {
            if head.seq == e.seq {
                if head.hash != hash {
                    return problem(
                        at,
                        seq,
                        format!(
                            "the hash differs from the head you noted ({}:{}): the log was rewritten after you noted it",
                            head.seq,
                            hex::encode(head.hash)
                        ),
                    );
                }
                self.head_seen = true;
            }
        }
        self.prev = Some((e.seq, hash));
        self.prev_line = line;
        self.count += 1;
        Ok(())
    }
}

/// Why an entry's hash does not match, with a guess at the field when its
/// own request parameters (which the fingerprint still vouches for)
/// disagree with it.
fn hash_mismatch(e: &StoredEntry) -> String {
    let params: Map<String, Value> = serde_json::from_str(&e.params).unwrap_or_default();
    let said = |k: &str| params.get(k).and_then(Value::as_str);
    let generic = "the entry hash does not match its contents";
    if let Some(amount) = said("amount") {
        if parse_exact(amount, false).ok() != Some(e.amount) {
            return format!(
                "amount changed? {generic} (the amount is {} but its request said {amount})",
                canonical(e.amount)
            );
        }
    }
    for field in ["account", "unit"] {
        let value = if field == "account" {
            &e.account
        } else {
            &e.unit
        };
        if let Some(v) = said(field) {
            if v != value {
                return format!(
                    "{field} changed? {generic} (the {field} is {value:?} but its request said {v:?})"
                );
            }
        }
    }
    format!("{generic}: one of its fields was changed after it was written")
}
