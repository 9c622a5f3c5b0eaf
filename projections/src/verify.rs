//! `tally verify` of one tenant: the log and the rule state (the ledger's
//! checks), then the read models against the fold of the log.

use tally_ledger::store::Storage;
use tally_ledger::LedgerError;

pub use crate::usage::verify::{verify_usage, UsageReport};
pub use tally_ledger::verify::{Broken, TenantReport};

/// Verifies one tenant: gap-free seq, every fingerprint and hash, every
/// `balance_after`, the head; then every piece of derived state the writer
/// trusts against a fresh fold of the log: the stored balances (held
/// included) and the rule state (account settings, holds, refunded totals,
/// reversals). A problem in the log is reported alone (the fold stops
/// there); every difference of derived state is reported, the balances'
/// first. `progress` is told how many entries have been checked so far.
pub async fn verify_tenant(
    storage: &Storage,
    tenant: &str,
    progress: impl FnMut(i64),
) -> Result<Result<TenantReport, Vec<Broken>>, LedgerError> {
    let verified = match tally_ledger::verify::verify_log(storage, tenant, progress).await? {
        Ok(verified) => verified,
        Err(broken) => return Ok(Err(broken)),
    };
    let mut problems =
        crate::balances::verify::verify_balances(storage, tenant, &verified.balances).await?;
    problems.extend(verified.rule_problems);
    if !problems.is_empty() {
        return Ok(Err(problems));
    }
    Ok(Ok(verified.report))
}
