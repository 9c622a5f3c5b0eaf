//! What a group is decided on ([`GroupState`]) and what it leaves to be
//! written ([`GroupOutcome`]).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use crate::balance::{AccountBalance, BalanceProjection};

use crate::chain::Head;
use crate::entry::StoredEntry;
use crate::request::EntryKind;
use crate::rule_state::{AccountSettings, HoldRecord, StateKey, StateValue};

use super::Decision;

/// What the engine loaded for one group, inside its transaction.
#[derive(Debug, Clone)]
pub struct GroupState {
    pub tenant_id: String,
    pub head: Head,
    /// Entries already holding one of the group's keys, or one its requests
    /// refer to by key (the payment of a refund).
    pub existing: HashMap<(EntryKind, String), Arc<StoredEntry>>,
    /// Entries referred to by id (the target of a reversal).
    pub by_id: HashMap<String, Arc<StoredEntry>>,
    /// Stored balances of every account the group touches.
    pub balances: BalanceProjection,
    /// The fixed unit of each touched customer account that has one.
    pub account_units: HashMap<String, String>,
    /// Rule state the group's requests refer to.
    pub records: HashMap<StateKey, StateValue>,
}

impl GroupState {
    pub fn new(tenant_id: &str, head: Head) -> Self {
        Self {
            tenant_id: tenant_id.to_owned(),
            head,
            existing: HashMap::new(),
            by_id: HashMap::new(),
            balances: BalanceProjection::new(),
            account_units: HashMap::new(),
            records: HashMap::new(),
        }
    }

    pub(super) fn settings(&self, account: &str) -> Option<&AccountSettings> {
        match self.records.get(&StateKey::Account(account.to_owned())) {
            Some(StateValue::Account(a)) => Some(a),
            _ => None,
        }
    }

    pub(super) fn hold(&self, hold_id: &str) -> Option<&HoldRecord> {
        match self.records.get(&StateKey::Hold(hold_id.to_owned())) {
            Some(StateValue::Hold(h)) => Some(h),
            _ => None,
        }
    }

    pub(super) fn balance(&self, account: &str, unit: &str) -> AccountBalance {
        self.balances
            .get(account, unit)
            .cloned()
            .unwrap_or_default()
    }
}

/// What the engine must write for a group.
#[derive(Debug, Default)]
pub struct GroupOutcome {
    pub decisions: Vec<Decision>,
    pub new_entries: Vec<StoredEntry>,
    /// Every balance that changed, as unit → accounts (keyed this way so
    /// that an account already touched is found without building a key).
    pub touched: BTreeMap<String, BTreeSet<String>>,
    /// Every rule-state record that changed.
    pub touched_records: BTreeSet<StateKey>,
}

impl GroupOutcome {
    /// The changed balances, ready to be written.
    pub fn changed_balances<'a>(
        &'a self,
        state: &'a GroupState,
    ) -> Vec<(&'a str, &'a str, AccountBalance)> {
        self.touched
            .iter()
            .flat_map(|(unit, accounts)| accounts.iter().map(move |account| (account, unit)))
            .map(|(account, unit)| {
                let balance = state
                    .balances
                    .get(account, unit)
                    .cloned()
                    .unwrap_or_default();
                (account.as_str(), unit.as_str(), balance)
            })
            .collect()
    }

    /// The changed rule-state records, ready to be written.
    pub fn changed_records<'a>(
        &'a self,
        state: &'a GroupState,
    ) -> Vec<(&'a StateKey, &'a StateValue)> {
        self.touched_records
            .iter()
            .filter_map(|k| state.records.get(k).map(|v| (k, v)))
            .collect()
    }
}
