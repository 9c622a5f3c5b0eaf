//! The check of the stored usage summaries against a fresh fold of the
//! log (`tally verify`).

use tally_ledger::store::Storage;
use tally_ledger::verify::Broken;
use tally_ledger::LedgerError;

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
    let (stored, checkpoint) = match super::engine::stored_usage(storage, tenant).await {
        Err(LedgerError::Corrupt(problem)) => {
            return broken(format!("stored usage summaries do not read: {problem}"))
        }
        other => other?,
    };
    let head = storage.head(tenant).await?;
    if checkpoint > head.seq {
        return broken(format!(
            "usage checkpoint is seq {checkpoint} but the log ends at seq {}",
            head.seq
        ));
    }
    let fold = match super::engine::fold_usage(storage, tenant, checkpoint).await {
        Err(LedgerError::Corrupt(problem)) => return broken(problem),
        other => other?,
    };
    let describe = |k: &super::fold::UsageKey| {
        format!(
            "usage of {} (meter {:?}, {}, {})",
            k.account,
            k.meter,
            k.day.format(tally_ledger::entry::DAY_FORMAT),
            k.unit
        )
    };
    let show = |t: &super::fold::UsageTotals| {
        format!(
            "quantity {}, amount {}, {} entries",
            t.quantity, t.amount, t.entries
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
