//! Where an entry is decided.
//!
//! The storage engine loads, under the tenant's head lock, everything a group
//! of requests can depend on (the head, entries already holding their keys or
//! referenced by them, the balances and units of the accounts they touch,
//! the rule state — settings, holds, refunded totals, reversals) into a
//! [`GroupState`]; [`decide_group`] then decides every request in order, in
//! memory, and says what to write. No I/O happens here, so the rules are the
//! same on every engine and can be tested without a database.
//!
//! Each request becomes a [`Plan`] (which accounts, which amount, which rule
//! rejects it), then the plan is appended to the chain: a posted entry
//! applies its effects, a rejected one is stored with its reason and moves
//! nothing.
//!
//! Where each decision lives:
//! - [`decide_group`] and the order of every check (this file): a key
//!   already held, settings unchanged, the plan, the unit, the floor, the
//!   totals, then the append.
//! - `replay.rs`: replay or conflict of a key that holds an entry
//!   ([`decide_existing`]).
//! - `plan.rs`: what a request would append, dispatched by kind to:
//!   - `debits.rs`: usage debits, payments, transfers, adjustments;
//!   - `holds.rs`: holds, captures, releases and expiry;
//!   - `references.rs`: account settings, refunds, reversals.
//! - `limits.rs`: the new balances (exact, no ceiling), units, overdraft floors.
//! - `append.rs`: the entry, its effects and the chain's new head.
//! - `group_state.rs` and `decision.rs`: the state a group is decided on, what it
//!   writes, and the answer to each request.

mod append;
mod debits;
mod decision;
mod group_state;
mod holds;
#[cfg(test)]
mod intent_tests;
mod intents;
mod limits;
mod plan;
mod references;
mod replay;
#[cfg(test)]
mod tests;

use chrono::{DateTime, Utc};

use crate::request::{Action, EntryRequest};

use append::append;
use limits::{check_floor, check_unit, new_balances};
use plan::{plan, Plan, RecordChange};

pub use decision::{Decision, Refusal};
pub use group_state::{GroupOutcome, GroupState};
pub use holds::MAX_HOLD_HORIZON_DAYS;
pub use intents::IntentAnswer;
pub use replay::decide_existing;

/// Decides `requests` in order against `state`, advancing `state` as it goes
/// (a later request of the group sees the entries, balances and records of
/// the earlier ones, so the same key twice in one group is a replay, not a
/// double post, and a capture sees the hold created just before it).
pub fn decide_group(
    state: &mut GroupState,
    requests: &[&EntryRequest],
    now: DateTime<Utc>,
    mut new_entry_id: impl FnMut() -> String,
) -> GroupOutcome {
    let mut out = GroupOutcome::default();
    // The ledger entries an intent's completion carries follow it in the
    // group: decided only if the completion is (so both or neither).
    let mut withheld = 0usize;
    for request in requests {
        if withheld > 0 {
            withheld -= 1;
            out.decisions.push(Decision::Refused(Refusal::Withheld));
            continue;
        }
        let decision = decide_one(state, request, now, &mut new_entry_id, &mut out);
        if let (Action::Intent(op), Decision::Intent(answer)) = (&request.action, &decision) {
            if !answer.lets_entries_through() {
                withheld = op.gated_entries();
            }
        }
        out.decisions.push(decision);
    }
    // One decision per request, in order: the answers are matched to their
    // callers by position.
    assert_eq!(
        out.decisions.len(),
        requests.len(),
        "a decision per request"
    );
    out
}

/// Decides one request: the order of every check.
fn decide_one(
    state: &mut GroupState,
    request: &EntryRequest,
    now: DateTime<Utc>,
    new_entry_id: &mut impl FnMut() -> String,
    out: &mut GroupOutcome,
) -> Decision {
    let key = (request.kind, request.upstream_id.clone());
    if request.kind.keyed_by_request() {
        if let Some(existing) = state.existing.get(&key) {
            return decide_existing(existing, request);
        }
    }
    if let Action::Intent(op) = &request.action {
        return intents::decide_intent(state, op, now, new_entry_id, out);
    }
    if let Action::Settings(change) = &request.action {
        if let Some(c) = state.settings(&change.account) {
            if c.unit == change.unit
                && c.overdraft == change.overdraft
                && c.metadata == change.metadata
                && c.low_balance == change.low_balance
            {
                return Decision::Unchanged(c.clone());
            }
        }
    }
    let mut plan = match plan(state, request, now) {
        Ok(plan) => plan,
        Err(refusal) => return Decision::Refused(refusal),
    };
    for account in [&plan.debit_account, &plan.credit_account] {
        if let Err(refusal) = check_unit(state, request, account, &plan.unit) {
            return Decision::Refused(refusal);
        }
    }
    if plan.rejection.is_none() && plan.checks_floor {
        check_floor(state, &mut plan);
    }
    let balances = if plan.rejection.is_none() {
        match new_balances(state, &plan) {
            Ok(balances) => balances,
            Err(refusal) => return Decision::Refused(refusal),
        }
    } else {
        Vec::new()
    };
    append(state, request, plan, balances, now, new_entry_id, out)
}
