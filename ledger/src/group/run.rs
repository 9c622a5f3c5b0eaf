//! Runs one group: load its state, call the decision, build its write,
//! and teach the writer's memory what it leaves behind; or decide it ahead,
//! from that memory alone.

use std::collections::{HashMap, HashSet};
use std::time::Instant;

use crate::balance::AccountBalance;
use crate::chain::entry_hash;
use crate::decide::{Decision, GroupOutcome, GroupState};
use crate::entry::StoredEntry;
use crate::hex_text::lower_hex;
use crate::request::EntryKind;
use crate::rule_state::StateKey;
use crate::store::{new_entry_id, now_micros, Fence, GroupTransaction, GroupWrite};
use crate::LedgerError;

use super::load::{load, Loaded};
use super::memory::WriterMemory;
use super::{Decided, Group};

/// Decides a group on `tx` (its head locked first): the decisions, and
/// what is to be written. `memory` then already holds what the group
/// leaves behind; if the write fails, the caller must make it forget.
pub(crate) async fn decide<T: GroupTransaction>(
    tx: &mut T,
    group: Group<'_>,
    final_now: &mut (dyn FnMut(usize, &Decision) + Send),
    memory: &mut WriterMemory,
) -> Result<Decided, LedgerError> {
    let t0 = Instant::now();
    let Loaded {
        fence,
        mut state,
        accounts,
        read_records,
        locked,
        keys_read,
    } = load(tx, &group, memory, t0).await?;
    let requests = group.requests;

    let t_load = t0.elapsed();
    let committed_seq = state.head.seq;
    let mut outcome = crate::decide::decide_group(&mut state, requests, now_micros(), new_entry_id);
    let t_decide = t0.elapsed();
    // A replay of an entry that an earlier transaction committed is final
    // whatever becomes of this one (entries are immutable, keys forever):
    // it need not wait for this group's insert and fsync.
    for (i, decision) in outcome.decisions.iter().enumerate() {
        if matches!(decision, Decision::Replayed(e) if e.seq <= committed_seq) {
            final_now(i, decision);
        }
    }
    let (write, end) = build_write(group.tenant, fence, &state, &mut outcome);
    tracing::debug!(
        requests = requests.len(),
        lock_ms = locked.as_secs_f64() * 1e3,
        keys_ms = (keys_read - locked).as_secs_f64() * 1e3,
        load_ms = (t_load - locked).as_secs_f64() * 1e3,
        decide_ms = (t_decide - t_load).as_secs_f64() * 1e3,
        "group decided"
    );
    remember(memory, end, &state, &accounts, read_records, &outcome);
    Ok(Decided {
        decisions: outcome.decisions,
        write,
        start: fence,
        end,
    })
}

// Builds the write of a decided group: the rows the store inserts and
// upserts, and the head it moves.
/// The write of a group decided on `fence` (`None`: nothing to write), and
/// the head it leaves. Takes the new entries out of `outcome`.
pub(super) fn build_write(
    tenant: &str,
    fence: Fence,
    state: &GroupState,
    outcome: &mut GroupOutcome,
) -> (Option<GroupWrite>, Fence) {
    let mut end = fence;
    if outcome.new_entries.is_empty() {
        return (None, end);
    }
    end.head = state.head;
    let balances = outcome
        .changed_balances(state)
        .into_iter()
        .map(|(a, u, b)| (a.to_owned(), u.to_owned(), b))
        .collect();
    let write = GroupWrite {
        tenant: tenant.to_owned(),
        entries: std::mem::take(&mut outcome.new_entries),
        balances,
        records: outcome
            .changed_records(state)
            .into_iter()
            .map(|(k, v)| v.to_row(k))
            .collect(),
        start: fence,
        head: state.head,
    };
    assert_chained(&write.entries, fence, end);
    (Some(write), end)
}

/// The rows a write hands the engine continue the chain from the fence it
/// was decided on, with no gap, and end at the head it stores: each `seq`
/// one past the one before, each `prev_hash` the hash before it. A broken
/// link written would be found only by the next `tally verify`, after
/// entries had been chained onto it; so it stops the writer here. A string
/// comparison an entry, and one hash recomputed a write (the last entry's,
/// over the very struct the engine binds): cheap next to the write.
fn assert_chained(entries: &[StoredEntry], start: Fence, end: Fence) {
    let mut seq = start.head.seq;
    let mut hash = lower_hex(&start.head.hash);
    for entry in entries {
        assert_eq!(entry.seq, seq + 1, "the next seq is the head's + 1");
        assert_eq!(
            entry.prev_hash, hash,
            "an entry links to the hash before it"
        );
        seq = entry.seq;
        hash.clone_from(&entry.hash);
    }
    assert_eq!(seq, end.head.seq, "a write ends at the head it stores");
    assert_eq!(
        hash,
        lower_hex(&end.head.hash),
        "a write ends at the head it stores"
    );
    if let Some(last) = entries.last() {
        let prev = if entries.len() > 1 {
            entries[entries.len() - 2].hash.clone()
        } else {
            lower_hex(&start.head.hash)
        };
        let Some(prev) = crate::chain::decode_hash(&prev) else {
            panic!("a hash the chain computed is 64 hex digits");
        };
        assert_eq!(
            last.hash,
            lower_hex(&entry_hash(&prev, last)),
            "the chain hash covers the row that is written"
        );
    }
}

// Teaches the writer's memory what a group read and wrote.
/// After a group that ended at `end`: what it read and wrote is what the
/// database holds at `end`.
pub(super) fn remember(
    memory: &mut WriterMemory,
    end: Fence,
    state: &GroupState,
    accounts: &[String],
    read_records: Vec<StateKey>,
    outcome: &GroupOutcome,
) {
    let read: HashSet<&str> = accounts.iter().map(String::as_str).collect();
    // Only the balances of accounts it read are learned; one it changed
    // without reading would be stored and not remembered.
    if state
        .balances
        .iter()
        .any(|(account, _, _)| !read.contains(account))
    {
        memory.incomplete();
    }
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

// A group decided ahead: from the writer's memory alone, on top of the
// group still being written, so that its decision overlaps that write.
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
/// `Storage::write_ahead` finds the head where they were decided.
pub(crate) async fn ahead(group: Group<'_>, memory: &mut WriterMemory) -> Option<Decided> {
    let mut tx = FromMemory {
        fence: memory.fence()?,
    };
    decide(&mut tx, group, &mut |_, _| {}, memory).await.ok()
}
