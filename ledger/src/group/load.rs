//! Loads what a group can depend on, under the tenant's head lock: the
//! head, entries already holding its keys or named by it, the rule state
//! and balances of the accounts it reaches (from the writer's memory where
//! it can, else read on the transaction).

use std::collections::HashSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::balance::AccountBalance;

use crate::decide::GroupState;
use crate::names::is_system_account;
use crate::request::{Action, EntryKind, EntryRequest};
use crate::rule_state::{StateKey, StateValue};
use crate::store::{Fence, GroupTransaction};
use crate::LedgerError;

use super::memory::WriterMemory;
use super::Group;

/// What a group was decided on.
pub(super) struct Loaded {
    /// The head as locked.
    pub fence: Fence,
    pub state: GroupState,
    /// Every account the group reads the balances of, sorted.
    pub accounts: Vec<String>,
    /// Every rule-state key the group read.
    pub read_records: Vec<StateKey>,
    /// Since `t0`: the head locked, and the keys read.
    pub locked: Duration,
    pub keys_read: Duration,
}

/// Locks the head on `tx` and loads the state `group` is decided on.
pub(super) async fn load<T: GroupTransaction>(
    tx: &mut T,
    group: &Group<'_>,
    memory: &mut WriterMemory,
    t0: Instant,
) -> Result<Loaded, LedgerError> {
    let &Group {
        tenant,
        requests,
        absent,
    } = group;
    let fence = tx.lock_head(tenant).await?;
    memory.locked_at(fence);
    let head = fence.head;
    let locked = t0.elapsed();

    // Keys of the requests themselves (unless just found free), and of the
    // payments refunds name.
    let mut keys: Vec<(EntryKind, &str)> = requests
        .iter()
        .enumerate()
        .filter(|(n, i)| i.kind.keyed_by_request() && !absent.get(*n).copied().unwrap_or(false))
        .map(|(_, i)| (i.kind, i.upstream_id.as_str()))
        .chain(requests.iter().filter_map(|i| match &i.action {
            Action::Refund { payment_id, .. } => Some((EntryKind::Payment, payment_id.as_str())),
            _ => None,
        }))
        .collect();
    keys.sort_unstable();
    keys.dedup();
    // Usually every key was looked up just before the group: no query then.
    let existing = if keys.is_empty() {
        Vec::new()
    } else {
        tx.entries_with_keys(tenant, &keys).await?
    };
    let keys_read = t0.elapsed();

    let mut state = GroupState::new(tenant, head);
    for e in existing {
        state
            .existing
            .insert((e.kind, e.upstream_id.clone()), Arc::new(e));
    }
    // Replays and conflicts move no money: only requests whose key is still
    // free need balances and rule state.
    let live: Vec<&EntryRequest> = requests
        .iter()
        .copied()
        .filter(|i| {
            !i.kind.keyed_by_request()
                || !state
                    .existing
                    .contains_key(&(i.kind, i.upstream_id.clone()))
        })
        .collect();

    let target_ids: Vec<&str> = live
        .iter()
        .filter_map(|i| match &i.action {
            Action::Reversal { entry_id } => Some(entry_id.as_str()),
            _ => None,
        })
        .collect();
    if !target_ids.is_empty() {
        for e in tx.entries_by_ids(tenant, &target_ids).await? {
            state.by_id.insert(e.id.clone(), Arc::new(e));
        }
    }

    // Rule state, in two rounds: what the requests name, then the settings
    // of accounts reached only through what was loaded (a hold's account, a
    // payment's payer).
    let mut record_keys: Vec<StateKey> = Vec::new();
    for i in &live {
        for account in i.named_accounts() {
            if !is_system_account(account) {
                record_keys.push(StateKey::Account(account.to_owned()));
            }
        }
        match &i.action {
            Action::Capture { hold_id, .. } | Action::Release { hold_id, .. } => {
                record_keys.push(StateKey::Hold(hold_id.clone()));
            }
            Action::Refund { payment_id, .. } => {
                record_keys.push(StateKey::Refunded(payment_id.clone()));
                if let Some(p) = state
                    .existing
                    .get(&(EntryKind::Payment, payment_id.clone()))
                {
                    record_keys.push(StateKey::Reversal(p.id.clone()));
                    record_keys.push(StateKey::Account(p.account.clone()));
                }
            }
            Action::Reversal { entry_id } => {
                record_keys.push(StateKey::Reversal(entry_id.clone()));
            }
            Action::Intent(op) => {
                record_keys.push(StateKey::Intent(op.intent_id().to_owned()));
            }
            _ => {}
        }
    }
    let requested: HashSet<StateKey> = record_keys.iter().cloned().collect();
    load_records(tx, tenant, &mut state, record_keys, memory).await?;
    let mut accounts: Vec<String> = Vec::new();
    for i in &live {
        accounts.extend(i.named_accounts().into_iter().map(str::to_owned));
        match &i.action {
            Action::Capture { hold_id, .. } | Action::Release { hold_id, .. } => {
                if let Some(StateValue::Hold(h)) =
                    state.records.get(&StateKey::Hold(hold_id.clone()))
                {
                    accounts.push(h.account.clone());
                    accounts.push(h.counter_account.clone());
                }
            }
            Action::Refund { payment_id, .. } => {
                if let Some(p) = state
                    .existing
                    .get(&(EntryKind::Payment, payment_id.clone()))
                {
                    accounts.push(p.debit_account.clone());
                    accounts.push(p.credit_account.clone());
                }
            }
            Action::Reversal { entry_id } => {
                if let Some(e) = state.by_id.get(entry_id) {
                    accounts.push(e.debit_account.clone());
                    accounts.push(e.credit_account.clone());
                }
            }
            _ => {}
        }
    }
    accounts.sort_unstable();
    accounts.dedup();
    let more_settings: Vec<StateKey> = accounts
        .iter()
        .filter(|a| !is_system_account(a))
        .map(|a| StateKey::Account(a.clone()))
        .filter(|k| !requested.contains(k))
        .collect();
    let mut read_records: Vec<StateKey> = requested.into_iter().collect();
    read_records.extend(more_settings.iter().cloned());
    load_records(tx, tenant, &mut state, more_settings, memory).await?;

    // Balances: what the writer remembers, and one read for the rest.
    let mut rows: Vec<(String, String, AccountBalance)> = Vec::new();
    let mut unknown: Vec<&str> = Vec::new();
    for account in &accounts {
        match memory.balances_of(account) {
            Some(units) => rows.extend(
                units
                    .iter()
                    .map(|(unit, b)| (account.clone(), unit.clone(), b.clone())),
            ),
            None => unknown.push(account),
        }
    }
    if !unknown.is_empty() {
        rows.extend(tx.balances_of(tenant, &unknown).await?);
    }
    for (account, unit, balance) in rows {
        state.balances.insert(&account, &unit, balance);
        if !is_system_account(&account) {
            state.account_units.insert(account, unit);
        }
    }
    for (key, value) in &state.records {
        if let (StateKey::Account(account), StateValue::Account(settings)) = (key, value) {
            state
                .account_units
                .entry(account.clone())
                .or_insert_with(|| settings.unit.clone());
        }
    }

    Ok(Loaded {
        fence,
        state,
        accounts,
        read_records,
        locked,
        keys_read,
    })
}

async fn load_records<T: GroupTransaction>(
    tx: &mut T,
    tenant: &str,
    state: &mut GroupState,
    mut keys: Vec<StateKey>,
    memory: &WriterMemory,
) -> Result<(), LedgerError> {
    keys.sort_unstable();
    keys.dedup();
    keys.retain(|k| match memory.record(k) {
        Some(known) => {
            if let Some(value) = known {
                state.records.insert(k.clone(), value.clone());
            }
            false
        }
        None => true,
    });
    if keys.is_empty() {
        return Ok(());
    }
    for (kind, key, value) in tx.records_of(tenant, &keys).await? {
        let Some(state_key) = StateKey::from_parts(&kind, key) else {
            return Err(LedgerError::Corrupt(format!(
                "rule state of unknown kind {kind:?}"
            )));
        };
        let record = StateValue::from_json(&state_key, &value).ok_or_else(|| {
            LedgerError::Corrupt(format!(
                "rule state {kind} {:?}: {value:?}",
                state_key.key()
            ))
        })?;
        state.records.insert(state_key, record);
    }
    Ok(())
}
