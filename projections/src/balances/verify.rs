//! The check of the stored balances against the fold of the log
//! (`tally verify`).

use tally_ledger::balance::BalanceProjection;
use tally_ledger::store::Storage;
use tally_ledger::verify::Broken;
use tally_ledger::LedgerError;

/// Every difference between `tenant`'s stored balances (held included) and
/// `fold`, the balances its log folds to. A stored row that does not read
/// is a difference too.
pub async fn verify_balances(
    storage: &Storage,
    tenant: &str,
    fold: &BalanceProjection,
) -> Result<Vec<Broken>, LedgerError> {
    let broken = |seq: Option<i64>, problem: String| Broken {
        tenant: tenant.to_owned(),
        seq,
        problem,
    };
    let mut problems = Vec::new();
    // A stored row that does not read is a difference too; the other
    // checks go on.
    match storage.stored_balances(tenant).await {
        Err(LedgerError::Corrupt(problem)) => problems.push(broken(
            None,
            format!("stored balances do not read: {problem}"),
        )),
        Err(e) => return Err(e),
        Ok(stored) => {
            for (account, unit, folded) in fold.iter() {
                match stored.get(account, unit) {
                    Some(s) if s == folded => {}
                    Some(s) => problems.push(broken(
                        None,
                        format!(
                            "stored balance of {account} ({unit}) is posted {} held {} but the log folds to posted {} held {}",
                            s.posted(),
                            s.held,
                            folded.posted(),
                            folded.held
                        ),
                    )),
                    None => problems.push(broken(
                        None,
                        format!(
                            "no stored balance for {account} ({unit}); the log folds to posted {} held {}",
                            folded.posted(),
                            folded.held
                        ),
                    )),
                }
            }
            for (account, unit, _) in stored.iter().filter(|(a, u, _)| fold.get(a, u).is_none()) {
                problems.push(broken(
                    None,
                    format!("stored balance of {account} ({unit}) has no entries in the log"),
                ));
            }
        }
    }
    Ok(problems)
}
