//! Teaches the writer's memory what a group read and wrote.

use std::collections::{HashMap, HashSet};

use crate::balance::AccountBalance;

use crate::decide::{GroupOutcome, GroupState};
use crate::rule_state::StateKey;
use crate::store::Fence;

use super::memory::WriterMemory;

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
