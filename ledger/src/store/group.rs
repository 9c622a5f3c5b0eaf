//! One group transaction, the same on every engine (SPEC §6).

use std::collections::HashMap;
use std::future::Future;

use tally_projections::{AccountBalance, BalanceProjection};

use crate::chain::Head;
use crate::decide::{decide_group, Decision, GroupState};
use crate::entry::StoredEntry;
use crate::intent::{EntryKind, Intent};
use crate::names::is_system_account;
use crate::LedgerError;

use super::{new_entry_id, now_micros};

/// The primitives an engine provides inside one write transaction. Dropping
/// the value without `commit` rolls everything back.
pub(crate) trait GroupTransaction: Send {
    /// Locks the tenant's head row (creating it at seq 0) and reads it. Held
    /// until commit: it serialises every group of the tenant, across processes.
    fn lock_head(&mut self, tenant: &str)
        -> impl Future<Output = Result<Head, LedgerError>> + Send;

    /// Entries already holding one of `keys`.
    fn entries_with_keys(
        &mut self,
        tenant: &str,
        keys: &[(EntryKind, &str)],
    ) -> impl Future<Output = Result<Vec<StoredEntry>, LedgerError>> + Send;

    /// Stored balances of `accounts`: (account, unit, balance).
    fn balances_of(
        &mut self,
        tenant: &str,
        accounts: &[&str],
    ) -> impl Future<Output = Result<Vec<(String, String, AccountBalance)>, LedgerError>> + Send;

    fn insert_entries(
        &mut self,
        entries: &[StoredEntry],
    ) -> impl Future<Output = Result<(), LedgerError>> + Send;

    /// Writes absolute balances (the head lock makes read-then-write safe).
    fn write_balances(
        &mut self,
        tenant: &str,
        rows: &[(&str, &str, AccountBalance)],
    ) -> impl Future<Output = Result<(), LedgerError>> + Send;

    fn write_head(
        &mut self,
        tenant: &str,
        head: &Head,
    ) -> impl Future<Output = Result<(), LedgerError>> + Send;

    fn commit(self) -> impl Future<Output = Result<(), LedgerError>> + Send;
}

pub(crate) async fn run<T: GroupTransaction>(
    mut tx: T,
    tenant: &str,
    intents: &[&Intent],
) -> Result<Vec<Decision>, LedgerError> {
    let t0 = std::time::Instant::now();
    let head = tx.lock_head(tenant).await?;
    let t_lock = t0.elapsed();

    let mut keys: Vec<(EntryKind, &str)> = intents
        .iter()
        .map(|i| (i.kind, i.upstream_id.as_str()))
        .collect();
    keys.sort_unstable();
    keys.dedup();
    let existing = tx.entries_with_keys(tenant, &keys).await?;
    // The broken demo build forgets every existing key (docs/reliability.md).
    #[cfg(feature = "fault-demo-skip-key-check")]
    let existing: Vec<StoredEntry> = {
        drop(existing);
        Vec::new()
    };
    let t_keys = t0.elapsed();

    // Replays and conflicts move no money: only the accounts of intents
    // whose key is still free need their balances.
    let taken: std::collections::HashSet<(EntryKind, &str)> = existing
        .iter()
        .map(|e| (e.kind, e.upstream_id.as_str()))
        .collect();
    let mut accounts: Vec<&str> = intents
        .iter()
        .filter(|i| !taken.contains(&(i.kind, i.upstream_id.as_str())))
        .flat_map(|i| [i.debit_account.as_str(), i.credit_account.as_str()])
        .collect();
    accounts.sort_unstable();
    accounts.dedup();
    let rows = if accounts.is_empty() {
        Vec::new()
    } else {
        tx.balances_of(tenant, &accounts).await?
    };

    let mut balances = BalanceProjection::new();
    let mut account_units = HashMap::new();
    for (account, unit, balance) in rows {
        balances.insert(&account, &unit, balance);
        if !is_system_account(&account) {
            account_units.insert(account, unit);
        }
    }
    let mut state = GroupState {
        tenant_id: tenant.to_owned(),
        head,
        existing: existing
            .into_iter()
            .map(|e| ((e.kind, e.upstream_id.clone()), e))
            .collect(),
        balances,
        account_units,
    };

    let t_load = t0.elapsed();
    let outcome = decide_group(&mut state, intents, now_micros(), new_entry_id);
    let t_decide = t0.elapsed();
    if !outcome.new_entries.is_empty() {
        tx.insert_entries(&outcome.new_entries).await?;
        let t_insert = t0.elapsed();
        tx.write_balances(tenant, &outcome.changed_balances(&state))
            .await?;
        tx.write_head(tenant, &state.head).await?;
        let t_write = t0.elapsed();
        tx.commit().await?;
        tracing::debug!(
            intents = intents.len(),
            lock_ms = t_lock.as_secs_f64() * 1e3,
            keys_ms = (t_keys - t_lock).as_secs_f64() * 1e3,
            load_ms = (t_load - t_lock).as_secs_f64() * 1e3,
            decide_ms = (t_decide - t_load).as_secs_f64() * 1e3,
            insert_ms = (t_insert - t_decide).as_secs_f64() * 1e3,
            balances_head_ms = (t_write - t_insert).as_secs_f64() * 1e3,
            commit_ms = (t0.elapsed() - t_write).as_secs_f64() * 1e3,
            "group phases"
        );
    }
    Ok(outcome.decisions)
}
