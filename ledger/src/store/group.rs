//! One group transaction, the same on every engine (SPEC §6).

use std::future::Future;

use crate::balance::AccountBalance;

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use crate::decide::{decide_group, Decision, GroupState};
use crate::entry::StoredEntry;
use crate::intent::{Action, EntryKind, Intent};
use crate::names::is_system_account;
use crate::state::{StateKey, StateRow, StateValue};
use crate::LedgerError;

use super::memory::{Fence, WriterMemory};
use super::{new_entry_id, now_micros};

/// The primitives an engine provides inside one write transaction. Dropping
/// the value without `commit` rolls everything back.
pub(crate) trait GroupTransaction: Send {
    /// Locks the tenant's head row (creating it at seq 0) and reads it. Held
    /// until commit: it serialises every group of the tenant, across processes.
    fn lock_head(
        &mut self,
        tenant: &str,
    ) -> impl Future<Output = Result<Fence, LedgerError>> + Send;

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

    /// Entries with these ids (the targets of reversals).
    fn entries_by_ids(
        &mut self,
        tenant: &str,
        ids: &[&str],
    ) -> impl Future<Output = Result<Vec<StoredEntry>, LedgerError>> + Send;

    /// Rule-state rows `(kind, key, value)` for these keys; absent ones are skipped.
    fn records_of(
        &mut self,
        tenant: &str,
        keys: &[StateKey],
    ) -> impl Future<Output = Result<Vec<(String, String, String)>, LedgerError>> + Send;

    /// Writes absolute balances (the head lock makes read-then-write safe).
    fn write_balances(
        &mut self,
        tenant: &str,
        rows: &[(&str, &str, AccountBalance)],
    ) -> impl Future<Output = Result<(), LedgerError>> + Send;

    /// Everything a group writes: its entries, the balances and records
    /// they changed, and the head moved from `write.start` to `write.head`.
    /// Writes nothing and fails if the head is not at `write.start` (another
    /// group or process appended, or a rebuild bumped the generation). An
    /// engine may send it as one statement.
    fn write_group(
        &mut self,
        write: &GroupWrite,
    ) -> impl Future<Output = Result<(), LedgerError>> + Send;

    fn commit(self) -> impl Future<Output = Result<(), LedgerError>> + Send;
}

/// The intents of one group (see [`super::Storage::commit_group_with`]).
pub(crate) struct Group<'a> {
    pub tenant: &'a str,
    pub intents: &'a [&'a Intent],
    /// Per intent (or empty): its key was found free just before.
    pub absent: &'a [bool],
}

/// What one group decided, owned, so that its write can run on its own
/// while the writer decides the next group.
pub(crate) struct Decided {
    pub decisions: Vec<Decision>,
    /// `None` when the group has nothing to write.
    pub write: Option<GroupWrite>,
    /// The head the group was decided on.
    pub start: Fence,
}

/// The rows one group writes (see [`GroupTransaction::write_group`]).
pub(crate) struct GroupWrite {
    pub(super) tenant: String,
    pub(super) entries: Vec<StoredEntry>,
    pub(super) balances: Vec<(String, String, AccountBalance)>,
    pub(super) records: Vec<StateRow>,
    /// The head the group was decided on: it writes only on top of it.
    pub(super) start: Fence,
    /// The head it leaves.
    pub(super) head: crate::chain::Head,
}

/// The head of a group's write was not the one it was decided on.
pub(crate) fn head_moved() -> LedgerError {
    LedgerError::Unavailable("the head moved under a group decided ahead".to_owned())
}

impl GroupWrite {
    /// Writes the group and commits it.
    pub(crate) async fn apply<T: GroupTransaction>(&self, mut tx: T) -> Result<(), LedgerError> {
        let started = std::time::Instant::now();
        tx.write_group(self).await?;
        let written = started.elapsed();
        tx.commit().await?;
        tracing::debug!(
            entries = self.entries.len(),
            write_ms = written.as_secs_f64() * 1e3,
            commit_ms = (started.elapsed() - written).as_secs_f64() * 1e3,
            "group written"
        );
        Ok(())
    }

    /// The absolute balances it writes, borrowed.
    pub(super) fn balance_rows(&self) -> Vec<(&str, &str, AccountBalance)> {
        self.balances
            .iter()
            .map(|(a, u, b)| (a.as_str(), u.as_str(), b.clone()))
            .collect()
    }
}

/// Writes a group decided ahead from the writer's memory ([`ahead`]) on
/// `tx`: only if the head is still the one it was decided on — the group
/// before it committed and nobody else appended or rebuilt since — else
/// nothing is written and the writer decides the group again.
pub(crate) async fn write_ahead<T: GroupTransaction>(
    mut tx: T,
    tenant: &str,
    start: Fence,
    write: Option<&GroupWrite>,
) -> Result<(), LedgerError> {
    match write {
        // Its write refuses a head that is not `start`.
        Some(write) => write.apply(tx).await,
        None => {
            // Its refusals were decided on the state it checks now.
            if tx.lock_head(tenant).await? != start {
                return Err(head_moved());
            }
            tx.commit().await
        }
    }
}

/// A read the writer's memory cannot answer, while deciding ahead.
const NOT_REMEMBERED: &str = "not remembered";

/// The transaction of a group decided ahead: the head is the one the
/// writer's memory was left at (the end of the group still being written),
/// and every read fails, so that only a group whose every key was found
/// free and whose every balance and record is remembered is decided ahead.
struct FromMemory {
    fence: Fence,
}

impl GroupTransaction for FromMemory {
    async fn lock_head(&mut self, _tenant: &str) -> Result<Fence, LedgerError> {
        Ok(self.fence)
    }

    async fn entries_with_keys(
        &mut self,
        _tenant: &str,
        _keys: &[(EntryKind, &str)],
    ) -> Result<Vec<StoredEntry>, LedgerError> {
        Err(LedgerError::Unavailable(NOT_REMEMBERED.to_owned()))
    }

    async fn balances_of(
        &mut self,
        _tenant: &str,
        _accounts: &[&str],
    ) -> Result<Vec<(String, String, AccountBalance)>, LedgerError> {
        Err(LedgerError::Unavailable(NOT_REMEMBERED.to_owned()))
    }

    async fn entries_by_ids(
        &mut self,
        _tenant: &str,
        _ids: &[&str],
    ) -> Result<Vec<StoredEntry>, LedgerError> {
        Err(LedgerError::Unavailable(NOT_REMEMBERED.to_owned()))
    }

    async fn records_of(
        &mut self,
        _tenant: &str,
        _keys: &[StateKey],
    ) -> Result<Vec<(String, String, String)>, LedgerError> {
        Err(LedgerError::Unavailable(NOT_REMEMBERED.to_owned()))
    }

    async fn write_balances(
        &mut self,
        _tenant: &str,
        _rows: &[(&str, &str, AccountBalance)],
    ) -> Result<(), LedgerError> {
        Err(LedgerError::Unavailable(NOT_REMEMBERED.to_owned()))
    }

    async fn write_group(&mut self, _write: &GroupWrite) -> Result<(), LedgerError> {
        Err(LedgerError::Unavailable(NOT_REMEMBERED.to_owned()))
    }

    async fn commit(self) -> Result<(), LedgerError> {
        Err(LedgerError::Unavailable(NOT_REMEMBERED.to_owned()))
    }
}

/// Decides `group` on top of the group still being written, from the
/// writer's memory alone, which already holds what that group leaves
/// behind. `None` when the memory cannot answer every read (the group is
/// then decided the usual way, under the head lock, once the write before
/// it is done); the memory is then unchanged. The decisions hold only if
/// [`write_ahead`] finds the head where they were decided.
pub(crate) async fn ahead(group: Group<'_>, memory: &mut WriterMemory) -> Option<Decided> {
    let mut tx = FromMemory {
        fence: memory.fence()?,
    };
    decide(&mut tx, group, &mut |_, _| {}, memory).await.ok()
}

/// Decides a group on `tx` (its head locked first): the decisions, and
/// what is to be written. `memory` then already holds what the group
/// leaves behind; if the write fails, the caller must make it forget.
pub(crate) async fn decide<T: GroupTransaction>(
    tx: &mut T,
    group: Group<'_>,
    final_now: &mut (dyn FnMut(usize, &Decision) + Send),
    memory: &mut WriterMemory,
) -> Result<Decided, LedgerError> {
    let Group {
        tenant,
        intents,
        absent,
    } = group;
    let t0 = std::time::Instant::now();
    let fence = tx.lock_head(tenant).await?;
    memory.check(fence);
    let head = fence.head;
    let t_lock = t0.elapsed();

    // Keys of the intents themselves (unless just found free), and of the
    // payments refunds name.
    let mut keys: Vec<(EntryKind, &str)> = intents
        .iter()
        .enumerate()
        .filter(|(n, i)| {
            i.kind != EntryKind::AccountSettings && !absent.get(*n).copied().unwrap_or(false)
        })
        .map(|(_, i)| (i.kind, i.upstream_id.as_str()))
        .chain(intents.iter().filter_map(|i| match &i.action {
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
    let t_keys = t0.elapsed();

    let mut state = GroupState::new(tenant, head);
    for e in existing {
        state
            .existing
            .insert((e.kind, e.upstream_id.clone()), Arc::new(e));
    }
    // Replays and conflicts move no money: only intents whose key is still
    // free need balances and rule state.
    let live: Vec<&Intent> = intents
        .iter()
        .copied()
        .filter(|i| {
            i.kind == EntryKind::AccountSettings
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

    // Rule state, in two rounds: what the intents name, then the settings
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

    let t_load = t0.elapsed();
    let committed_seq = state.head.seq;
    let mut outcome = decide_group(&mut state, intents, now_micros(), new_entry_id);
    let t_decide = t0.elapsed();
    // A replay of an entry that an earlier transaction committed is final
    // whatever becomes of this one (entries are immutable, keys forever):
    // it need not wait for this group's insert and fsync.
    for (i, decision) in outcome.decisions.iter().enumerate() {
        if matches!(decision, Decision::Replayed(e) if e.seq <= committed_seq) {
            final_now(i, decision);
        }
    }
    let mut end = fence;
    let write = if outcome.new_entries.is_empty() {
        None
    } else {
        end.head = state.head;
        let balances = outcome
            .changed_balances(&state)
            .into_iter()
            .map(|(a, u, b)| (a.to_owned(), u.to_owned(), b))
            .collect();
        Some(GroupWrite {
            tenant: tenant.to_owned(),
            entries: std::mem::take(&mut outcome.new_entries),
            balances,
            records: outcome
                .changed_records(&state)
                .into_iter()
                .map(|(k, v)| v.to_row(k))
                .collect(),
            start: fence,
            head: state.head,
        })
    };
    tracing::debug!(
        intents = intents.len(),
        lock_ms = t_lock.as_secs_f64() * 1e3,
        keys_ms = (t_keys - t_lock).as_secs_f64() * 1e3,
        load_ms = (t_load - t_lock).as_secs_f64() * 1e3,
        decide_ms = (t_decide - t_load).as_secs_f64() * 1e3,
        "group decided"
    );
    remember(memory, end, &state, &accounts, read_records, &outcome);
    Ok(Decided {
        decisions: outcome.decisions,
        write,
        start: fence,
    })
}

/// After a group that ended at `end`: what it read and wrote is what the
/// database holds at `end`.
fn remember(
    memory: &mut WriterMemory,
    end: Fence,
    state: &GroupState,
    accounts: &[String],
    read_records: Vec<StateKey>,
    outcome: &crate::decide::GroupOutcome,
) {
    let read: HashSet<&str> = accounts.iter().map(String::as_str).collect();
    let mut balances: HashMap<String, Vec<(String, AccountBalance)>> =
        accounts.iter().map(|a| (a.clone(), Vec::new())).collect();
    for (account, unit, balance) in state.balances.iter() {
        if read.contains(account) {
            if let Some(units) = balances.get_mut(account) {
                units.push((unit.to_owned(), balance.clone()));
            }
        }
    }
    let records = read_records
        .into_iter()
        .chain(
            outcome
                .changed_records(state)
                .into_iter()
                .map(|(k, _)| k.clone()),
        )
        .map(|k| {
            let value = state.records.get(&k).cloned();
            (k, value)
        });
    memory.learn(end, balances, records);
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
