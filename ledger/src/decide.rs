//! Where an entry is decided.
//!
//! The storage engine loads, under the tenant's head lock, everything a group
//! of intents can depend on (the head, entries already holding their keys,
//! the balances and units of the accounts they touch) into a [`GroupState`];
//! [`decide_group`] then decides every intent in order, in memory, and says
//! what to write. No I/O happens here, so the rules are the same on every
//! engine and can be tested without a database.

use std::collections::{BTreeSet, HashMap};

use chrono::{DateTime, Utc};
use tally_projections::{AccountBalance, BalanceProjection, Posting};

use crate::chain::{entry_hash, Head};
use crate::entry::{EntryStatus, StoredEntry};
use crate::fingerprint::differing_fields;
use crate::intent::{EntryKind, Intent};
use crate::names::is_system_account;

/// What the engine loaded for one group, inside its transaction.
#[derive(Debug, Clone)]
pub struct GroupState {
    pub tenant_id: String,
    pub head: Head,
    /// Entries already holding one of the group's keys.
    pub existing: HashMap<(EntryKind, String), StoredEntry>,
    /// Stored balances of every account the group touches.
    pub balances: BalanceProjection,
    /// The fixed unit of each touched customer account that has one.
    pub account_units: HashMap<String, String>,
}

/// Why an intent was refused without being stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// `field` names an account whose unit is already `existing_unit`.
    UnitMismatch {
        field: &'static str,
        account: String,
        existing_unit: String,
    },
    /// A balance would exceed what an exact decimal can hold.
    BalanceOverflow { account: String },
}

/// The answer to one intent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// A new entry (posted, or rejected by a ledger rule) was appended.
    Created(StoredEntry),
    /// The key already held an entry with the same fingerprint.
    Replayed(StoredEntry),
    /// The key already held an entry with another fingerprint.
    Conflict {
        entry_id: String,
        differing_fields: Vec<String>,
    },
    /// Refused before reaching the log; nothing is stored.
    Refused(Refusal),
}

/// What the engine must write for a group.
#[derive(Debug, Default)]
pub struct GroupOutcome {
    pub decisions: Vec<Decision>,
    pub new_entries: Vec<StoredEntry>,
    /// (account, unit) of every balance that changed.
    pub touched: BTreeSet<(String, String)>,
}

impl GroupOutcome {
    /// The changed balances, ready to be written.
    pub fn changed_balances<'a>(
        &'a self,
        state: &'a GroupState,
    ) -> Vec<(&'a str, &'a str, AccountBalance)> {
        self.touched
            .iter()
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
}

/// The answer to an intent whose key already holds `existing`: a replay of
/// it when the fingerprints match, a conflict otherwise. Entries are
/// immutable and keys never expire, so this answer is final the moment the
/// entry is committed, whoever reads it.
pub fn decide_existing(existing: &StoredEntry, intent: &Intent) -> Decision {
    if existing.fingerprint == intent.fingerprint.to_string() {
        Decision::Replayed(existing.clone())
    } else {
        Decision::Conflict {
            entry_id: existing.id.clone(),
            differing_fields: differing_fields(&existing.params, &intent.params_map),
        }
    }
}

/// Decides `intents` in order against `state`, advancing `state` as it goes
/// (a later intent of the group sees the entries and balances of the earlier
/// ones, so the same key twice in one group is a replay, not a double post).
pub fn decide_group(
    state: &mut GroupState,
    intents: &[&Intent],
    now: DateTime<Utc>,
    mut new_entry_id: impl FnMut() -> String,
) -> GroupOutcome {
    let mut out = GroupOutcome::default();
    for intent in intents {
        let decision = decide_one(state, intent, now, &mut new_entry_id, &mut out);
        out.decisions.push(decision);
    }
    out
}

fn decide_one(
    state: &mut GroupState,
    intent: &Intent,
    now: DateTime<Utc>,
    new_entry_id: &mut impl FnMut() -> String,
    out: &mut GroupOutcome,
) -> Decision {
    let key = (intent.kind, intent.upstream_id.clone());
    if let Some(existing) = state.existing.get(&key) {
        return decide_existing(existing, intent);
    }

    for account in [&intent.debit_account, &intent.credit_account] {
        if is_system_account(account) {
            continue;
        }
        if let Some(unit) = state.account_units.get(account.as_str()) {
            if unit != &intent.unit {
                // The side that is not the customer is the request's counter_account.
                let field = if account == &intent.account {
                    "account"
                } else {
                    "counter_account"
                };
                return Decision::Refused(Refusal::UnitMismatch {
                    field,
                    account: account.clone(),
                    existing_unit: unit.clone(),
                });
            }
        }
    }

    // Ledger rules that store a rejection (overdraft limits, holds) plug in
    // here; debits and payments have none until accounts carry settings.
    let status = EntryStatus::Posted;

    if status == EntryStatus::Posted {
        let posting = Posting {
            debit_account: &intent.debit_account,
            credit_account: &intent.credit_account,
            amount: intent.amount,
            unit: &intent.unit,
        };
        if let Err(overflow) = state.balances.apply(&posting) {
            return Decision::Refused(Refusal::BalanceOverflow {
                account: overflow.account,
            });
        }
        for account in [&intent.debit_account, &intent.credit_account] {
            out.touched.insert((account.clone(), intent.unit.clone()));
            if !is_system_account(account) {
                state
                    .account_units
                    .entry(account.clone())
                    .or_insert_with(|| intent.unit.clone());
            }
        }
    }

    let balance_after = state
        .balances
        .get(&intent.account, &intent.unit)
        .map(AccountBalance::posted)
        .unwrap_or_default();
    let mut entry = StoredEntry {
        tenant_id: state.tenant_id.clone(),
        seq: state.head.seq + 1,
        id: new_entry_id(),
        kind: intent.kind,
        upstream_id: intent.upstream_id.clone(),
        status,
        rejection_code: None,
        rejection_message: None,
        account: intent.account.clone(),
        debit_account: intent.debit_account.clone(),
        credit_account: intent.credit_account.clone(),
        amount: intent.amount,
        unit: intent.unit.clone(),
        params: intent.params.clone(),
        fingerprint: intent.fingerprint.to_string(),
        recorded_at: now,
        balance_after,
        prev_hash: hex::encode(state.head.hash),
        hash: String::new(),
    };
    let hash = entry_hash(&state.head.hash, &entry);
    entry.hash = hex::encode(hash);
    state.head = Head {
        seq: entry.seq,
        hash,
    };
    // Later intents of the group must see this key: keep it as existing.
    out.new_entries.push(entry.clone());
    state.existing.insert(key, entry.clone());
    Decision::Created(entry)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use serde_json::json;

    fn debit(id: &str, account: &str, amount: &str, unit: &str) -> Intent {
        Intent::usage_debit(
            json!({"usage_record_id": id, "account": account, "amount": amount, "unit": unit})
                .as_object()
                .unwrap()
                .clone(),
        )
        .unwrap()
    }

    fn empty_state() -> GroupState {
        GroupState {
            tenant_id: "t".into(),
            head: Head::EMPTY,
            existing: HashMap::new(),
            balances: BalanceProjection::new(),
            account_units: HashMap::new(),
        }
    }

    fn ids() -> impl FnMut() -> String {
        let mut n = 0;
        move || {
            n += 1;
            format!("ent_{n}")
        }
    }

    #[test]
    fn a_group_chains_and_collapses_duplicate_keys() {
        let mut state = empty_state();
        let a = debit("u1", "c", "1.5", "USD");
        let a_again = debit("u1", "c", "1.50", "USD");
        let a_other = debit("u1", "c", "2", "USD");
        let b = debit("u2", "c", "1", "USD");
        let out = decide_group(&mut state, &[&a, &a_again, &a_other, &b], Utc::now(), ids());
        assert_eq!(out.new_entries.len(), 2);
        let Decision::Created(first) = &out.decisions[0] else {
            panic!("first is created")
        };
        assert_eq!(out.decisions[1], Decision::Replayed(first.clone()));
        assert_eq!(
            out.decisions[2],
            Decision::Conflict {
                entry_id: first.id.clone(),
                differing_fields: vec!["amount".into()]
            }
        );
        let second = &out.new_entries[1];
        assert_eq!((first.seq, second.seq), (1, 2));
        assert_eq!(first.prev_hash, hex::encode([0u8; 32]));
        assert_eq!(second.prev_hash, first.hash);
        assert_eq!(second.balance_after.to_string(), "-2.5");
        assert_eq!(state.head.seq, 2);
        assert_eq!(
            state.balances.unit_total("USD"),
            rust_decimal::Decimal::ZERO
        );
    }

    #[test]
    fn a_unit_mismatch_is_refused_and_changes_nothing() {
        let mut state = empty_state();
        state.account_units.insert("c".into(), "credits".into());
        let out = decide_group(
            &mut state,
            &[&debit("u1", "c", "1", "USD")],
            Utc::now(),
            ids(),
        );
        assert!(out.new_entries.is_empty());
        assert!(out.touched.is_empty());
        assert!(matches!(
            out.decisions[0],
            Decision::Refused(Refusal::UnitMismatch {
                field: "account",
                ..
            })
        ));
        assert_eq!(state.head, Head::EMPTY);
    }
}
