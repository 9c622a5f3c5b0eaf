//! Appends a plan to the chain: the entry, its effects on balances and
//! rule state, the head it moves.

use std::sync::Arc;

use crate::balance::AccountBalance;
use crate::balance::WideDecimal;
use chrono::{DateTime, Utc};

use crate::chain::{entry_hash, Head};
use crate::entry::{EntryStatus, StoredEntry};
use crate::names::{is_system_account, HOLDS_ACCOUNT};
use crate::request::EntryRequest;
use crate::rule_state::{AccountSettings, HoldRecord, StateKey, StateValue};

use super::{Decision, GroupOutcome, GroupState, Plan, RecordChange};

/// Appends the plan to the chain: applies its effects if it is posted,
/// stores it with its reason if a rule rejected it.
pub(super) fn append(
    state: &mut GroupState,
    request: &EntryRequest,
    plan: Plan,
    balances: Vec<(String, AccountBalance)>,
    now: DateTime<Utc>,
    new_entry_id: &mut impl FnMut() -> String,
    out: &mut GroupOutcome,
) -> Decision {
    let id = new_entry_id();
    let status = if plan.rejection.is_some() {
        EntryStatus::Rejected
    } else {
        EntryStatus::Posted
    };
    // What `balance_after` must come to: the account's posted balance
    // before, plus what this entry moves on it.
    let expected_after = expected_balance_after(state, &plan, status);
    if status == EntryStatus::Posted {
        // Computed and checked by `new_balances`.
        for (account, balance) in balances {
            state.balances.insert(&account, &plan.unit, balance);
        }
        let touched = match out.touched.get_mut(plan.unit.as_str()) {
            Some(accounts) => accounts,
            None => out.touched.entry(plan.unit.clone()).or_default(),
        };
        for account in [&plan.debit_account, &plan.credit_account, &plan.account] {
            if account == HOLDS_ACCOUNT {
                continue;
            }
            state.balances.touch(account, &plan.unit);
            if !touched.contains(account.as_str()) {
                touched.insert(account.clone());
            }
            if !is_system_account(account) && !state.account_units.contains_key(account.as_str()) {
                state
                    .account_units
                    .insert(account.clone(), plan.unit.clone());
            }
        }
    }
    let entry_seq = state.head.seq + 1;
    let changes = if status == EntryStatus::Posted {
        &plan.on_posted
    } else {
        &plan.on_rejected
    };
    for change in changes {
        let (key, value) = match change {
            RecordChange::Settings(c, version) => (
                StateKey::Account(c.account.clone()),
                StateValue::Account(AccountSettings {
                    unit: c.unit.clone(),
                    overdraft: c.overdraft,
                    metadata: c.metadata.clone(),
                    low_balance: c.low_balance,
                    version: *version,
                    entry_id: id.clone(),
                    seq: entry_seq,
                }),
            ),
            RecordChange::OpenHold(h) => (
                StateKey::Hold(h.hold_id.clone()),
                StateValue::Hold(HoldRecord {
                    entry_id: id.clone(),
                    ..h.clone()
                }),
            ),
            RecordChange::CloseHold(hold_id, status) => {
                let Some(hold) = state.hold(hold_id) else {
                    continue;
                };
                (
                    StateKey::Hold(hold_id.clone()),
                    StateValue::Hold(HoldRecord {
                        status: *status,
                        closed_by: Some(id.clone()),
                        ..hold.clone()
                    }),
                )
            }
            RecordChange::SetRefunded(payment_id, sum) => (
                StateKey::Refunded(payment_id.clone()),
                StateValue::Refunded(sum.clone()),
            ),
            RecordChange::Reversed(entry_id) => (
                StateKey::Reversal(entry_id.clone()),
                StateValue::ReversedBy(id.clone()),
            ),
        };
        out.touched_records.insert(key.clone());
        state.records.insert(key, value);
    }

    let balance_after = state
        .balances
        .get(&plan.account, &plan.unit)
        .map(AccountBalance::posted)
        .unwrap_or_default();
    // A wrong `balance_after` is hashed into the chain for ever: stop here.
    assert_eq!(
        balance_after, expected_after,
        "balance_after is the balance before plus the movement"
    );
    let (rejection_code, rejection_message) = match plan.rejection {
        Some(r) => (Some(r.code.to_owned()), Some(r.message)),
        None => (None, None),
    };
    let entry = StoredEntry {
        tenant_id: state.tenant_id.clone(),
        seq: entry_seq,
        id,
        kind: request.kind,
        upstream_id: plan.upstream_id,
        status,
        rejection_code,
        rejection_message,
        account: plan.account,
        debit_account: plan.debit_account,
        credit_account: plan.credit_account,
        amount: plan.amount,
        unit: plan.unit,
        params: request.params.clone(),
        fingerprint: request.fingerprint.text(),
        recorded_at: now,
        balance_after,
        prev_hash: crate::hex_text::lower_hex(&state.head.hash),
        hash: String::new(),
    };
    chain(state, entry, out)
}

/// The posted balance of the plan's account once the entry is appended:
/// the balance before, plus the amount on the credit side, minus it on the
/// debit side (a hold moves `held`, not the posted balance).
fn expected_balance_after(state: &GroupState, plan: &Plan, status: EntryStatus) -> WideDecimal {
    let mut after = state.balance(&plan.account, &plan.unit).posted();
    if status == EntryStatus::Posted && plan.moves_money {
        let Some(amount) = WideDecimal::from_decimal(plan.amount) else {
            panic!("a posted amount was made exact by new_balances");
        };
        if plan.credit_account == plan.account {
            after += &amount;
        }
        if plan.debit_account == plan.account {
            after -= &amount;
        }
    }
    after
}

/// Puts `entry` (built on `state.head`) at the head of the chain: its hash,
/// the new head, the write, and the group's maps (later requests of the
/// group must see its key and its id).
pub(super) fn chain(
    state: &mut GroupState,
    entry: StoredEntry,
    out: &mut GroupOutcome,
) -> Decision {
    Decision::Created(chain_entry(state, entry, out))
}

pub(super) fn chain_entry(
    state: &mut GroupState,
    mut entry: StoredEntry,
    out: &mut GroupOutcome,
) -> Arc<StoredEntry> {
    // The next seq is the head's + 1: anything else is a broken chain on
    // disk, so it stops here.
    assert_eq!(
        entry.seq,
        state.head.seq + 1,
        "an entry must follow the head"
    );
    let hash = entry_hash(&state.head.hash, &entry);
    entry.hash = crate::hex_text::lower_hex(&hash);
    state.head = Head {
        seq: entry.seq,
        hash,
    };
    // One copy goes to the write; the group's maps and the answer share
    // another (three copies of every entry were a tenth of a batch's CPU).
    out.new_entries.push(entry.clone());
    let entry = Arc::new(entry);
    state
        .existing
        .insert((entry.kind, entry.upstream_id.clone()), entry.clone());
    state.by_id.insert(entry.id.clone(), entry.clone());
    entry
}
