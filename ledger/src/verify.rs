//! `tally verify`: recompute every chain and fold, trust nothing stored.

use tally_projections::BalanceProjection;

use crate::amount::canonical;
use crate::chain::{entry_hash, Head, GENESIS_HASH};
use crate::fingerprint::Fingerprint;
use crate::store::{fold_into, EntryFilter, Storage, LOG_PAGE};
use crate::LedgerError;

/// What was checked for one tenant.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TenantReport {
    pub tenant: String,
    pub entries: i64,
    pub balances: usize,
    pub head: Head,
}

/// The first thing found wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Broken {
    pub tenant: String,
    /// The first entry found broken, when the problem is in the log.
    pub seq: Option<i64>,
    pub problem: String,
}

impl std::fmt::Display for Broken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.seq {
            Some(seq) => write!(f, "tenant {}: seq {}: {}", self.tenant, seq, self.problem),
            None => write!(f, "tenant {}: {}", self.tenant, self.problem),
        }
    }
}

/// Verifies one tenant: gap-free seq, every fingerprint and hash, every
/// `balance_after`, the head, and the stored balances against a fresh fold.
/// `progress` is told how many entries have been checked so far.
pub async fn verify_tenant(
    storage: &Storage,
    tenant: &str,
    mut progress: impl FnMut(i64),
) -> Result<Result<TenantReport, Broken>, LedgerError> {
    let broken = |seq: Option<i64>, problem: String| {
        Ok(Err(Broken {
            tenant: tenant.to_owned(),
            seq,
            problem,
        }))
    };
    let head = storage.head(tenant).await?;
    let mut fold = BalanceProjection::new();
    let mut prev = Head {
        seq: 0,
        hash: GENESIS_HASH,
    };
    loop {
        let page = storage
            .list_entries(
                tenant,
                &EntryFilter {
                    after_seq: prev.seq,
                    limit: LOG_PAGE,
                    ..EntryFilter::default()
                },
            )
            .await?;
        for e in &page {
            let at = Some(e.seq);
            if e.seq != prev.seq + 1 {
                return broken(
                    Some(prev.seq + 1),
                    format!("missing; next stored seq is {}", e.seq),
                );
            }
            if e.prev_hash != hex::encode(prev.hash) {
                return broken(
                    at,
                    "prev_hash does not match the previous entry's hash".into(),
                );
            }
            if Fingerprint::of_canonical(&e.params).to_string() != e.fingerprint {
                return broken(
                    at,
                    "fingerprint does not match the stored parameters".into(),
                );
            }
            let hash = entry_hash(&prev.hash, e);
            if hex::encode(hash) != e.hash {
                return broken(at, "hash does not match the entry's contents".into());
            }
            if let Err(LedgerError::Corrupt(problem)) = fold_into(&mut fold, e) {
                return broken(at, problem);
            }
            let posted = fold
                .get(&e.account, &e.unit)
                .map(|b| b.posted())
                .unwrap_or_default();
            if posted != e.balance_after {
                return broken(
                    at,
                    format!(
                        "balance_after is {} but the log folds to {}",
                        canonical(e.balance_after),
                        canonical(posted)
                    ),
                );
            }
            prev = Head { seq: e.seq, hash };
        }
        progress(prev.seq);
        if (page.len() as i64) < LOG_PAGE {
            break;
        }
    }
    if prev != head {
        return broken(
            None,
            format!(
                "head says seq {} but the log ends at seq {}",
                head.seq, prev.seq
            ),
        );
    }
    let stored = storage.stored_balances(tenant).await?;
    for (account, unit, folded) in fold.iter() {
        match stored.get(account, unit) {
            Some(s) if s == folded => {}
            Some(s) => {
                return broken(
                    None,
                    format!(
                        "stored balance of {account} ({unit}) is posted {} but the log folds to {}",
                        canonical(s.posted()),
                        canonical(folded.posted())
                    ),
                )
            }
            None => return broken(None, format!("no stored balance for {account} ({unit})")),
        }
    }
    if let Some((account, unit, _)) = stored.iter().find(|(a, u, _)| fold.get(a, u).is_none()) {
        return broken(
            None,
            format!("stored balance of {account} ({unit}) has no entries in the log"),
        );
    }
    Ok(Ok(TenantReport {
        tenant: tenant.to_owned(),
        entries: prev.seq,
        balances: fold.len(),
        head,
    }))
}
