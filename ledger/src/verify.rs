//! `tally verify`: recompute every chain and fold, trust nothing stored.

use crate::amount::canonical;
use crate::chain::{entry_hash, Head, GENESIS_HASH};
use crate::fingerprint::Fingerprint;
use crate::fold::LogFold;
use crate::state::{HoldStatus, StateKey, StateValue};
use crate::store::{EntryFilter, Storage, LOG_PAGE};
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
    let mut log = LogFold::new();
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
            if let Err(LedgerError::Corrupt(problem)) = log.apply(e) {
                return broken(at, problem);
            }
            let posted = log
                .balances
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
    let fold = &log.balances;
    let stored = storage.stored_balances(tenant).await?;
    for (account, unit, folded) in fold.iter() {
        match stored.get(account, unit) {
            Some(s) if s == folded => {}
            Some(s) => {
                return broken(
                    None,
                    format!(
                        "stored balance of {account} ({unit}) is posted {} held {} but the log folds to posted {} held {}",
                        canonical(s.posted()),
                        canonical(s.held),
                        canonical(folded.posted()),
                        canonical(folded.held)
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
    // The open holds the writer relies on must be exactly those of the log.
    let mut stored_open = Vec::new();
    for (key, value) in storage.records_of_kind(tenant, "hold").await? {
        let state_key = StateKey::Hold(key.clone());
        match StateValue::from_json(&state_key, &value) {
            Some(StateValue::Hold(h)) if h.status == HoldStatus::Open => stored_open.push(h),
            Some(_) => {}
            None => return broken(None, format!("stored hold {key} is unreadable")),
        }
    }
    for h in &stored_open {
        match log.open_holds.get(&h.hold_id) {
            Some(o) if o.account == h.account && o.unit == h.unit && o.amount == h.amount => {}
            Some(_) => {
                return broken(
                    None,
                    format!("stored hold {} differs from the hold in the log", h.hold_id),
                )
            }
            None => {
                return broken(
                    None,
                    format!(
                        "stored hold {} is open but the log closed it or never made it",
                        h.hold_id
                    ),
                )
            }
        }
    }
    if stored_open.len() != log.open_holds.len() {
        let missing = log
            .open_holds
            .keys()
            .find(|id| !stored_open.iter().any(|h| &h.hold_id == *id))
            .cloned()
            .unwrap_or_default();
        return broken(
            None,
            format!("hold {missing} is open in the log but not in the stored holds"),
        );
    }
    Ok(Ok(TenantReport {
        tenant: tenant.to_owned(),
        entries: prev.seq,
        balances: fold.len(),
        head,
    }))
}

/// What the usage check found for one tenant.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UsageReport {
    /// The projector's checkpoint: the rows hold the log up to this seq.
    pub checkpoint: i64,
    pub rows: usize,
}

/// Compares the stored usage summaries of `tenant` with a fresh fold of its
/// log up to the stored checkpoint (rows and checkpoint read from one
/// snapshot, so a projector running meanwhile does not disturb the check).
pub async fn verify_usage(
    storage: &Storage,
    tenant: &str,
) -> Result<Result<UsageReport, Broken>, LedgerError> {
    let broken = |problem: String| {
        Ok(Err(Broken {
            tenant: tenant.to_owned(),
            seq: None,
            problem,
        }))
    };
    let (stored, checkpoint) = storage.stored_usage(tenant).await?;
    let head = storage.head(tenant).await?;
    if checkpoint > head.seq {
        return broken(format!(
            "usage checkpoint is seq {checkpoint} but the log ends at seq {}",
            head.seq
        ));
    }
    let fold = match storage.fold_usage(tenant, checkpoint, |_| {}).await {
        Err(LedgerError::Corrupt(problem)) => return broken(problem),
        other => other?,
    };
    let describe = |k: &crate::usage::UsageKey| {
        format!(
            "usage of {} (meter {:?}, {}, {})",
            k.account,
            k.meter,
            k.day.format(crate::usage::DAY_FORMAT),
            k.unit
        )
    };
    let show = |t: &crate::usage::UsageTotals| {
        format!(
            "quantity {}, amount {}, {} entries",
            canonical(t.quantity),
            canonical(t.amount),
            t.entries
        )
    };
    for (key, folded) in fold.iter() {
        match stored.get(key) {
            Some(s) if s == folded => {}
            Some(s) => {
                return broken(format!(
                    "stored {} is {} but the log up to seq {checkpoint} folds to {}",
                    describe(key),
                    show(s),
                    show(folded)
                ))
            }
            None => {
                return broken(format!(
                    "no stored {} though the log up to seq {checkpoint} folds to {}",
                    describe(key),
                    show(folded)
                ))
            }
        }
    }
    if let Some((key, s)) = stored.iter().find(|(k, _)| fold.get(k).is_none()) {
        return broken(format!(
            "stored {} ({}) has no entries in the log up to seq {checkpoint}",
            describe(key),
            show(s)
        ));
    }
    Ok(Ok(UsageReport {
        checkpoint,
        rows: stored.len(),
    }))
}
