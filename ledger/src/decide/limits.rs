//! Limits: an account's unit fixed, a debited account held to its
//! overdraft floor. Totals have no limit (docs/ledger-rules.md, "Limits").

use crate::balance::AccountBalance;
use rust_decimal::Decimal;

use crate::amount::canonical;
use crate::balance::WideDecimal;
use crate::names::is_system_account;
use crate::request::{Action, EntryRequest};

use super::{GroupState, Plan, Refusal};

/// The exact value of `d` (every amount has at most 18 fractional digits;
/// a decimal with more, which no parsed amount is, reads as zero in a
/// message or comparison; [`new_balances`] refuses it before it can move
/// a total).
pub(super) fn wide(d: Decimal) -> WideDecimal {
    WideDecimal::from_decimal(d).unwrap_or_default()
}

/// The balances a posted `plan` leaves on the accounts it touches, every
/// total added exactly and without a ceiling. An amount with more than 18
/// fractional digits (which the amount parser never yields, but an
/// `EntryRequest` built by hand could carry) is refused rather than rounded.
pub(super) fn new_balances(
    state: &GroupState,
    plan: &Plan,
) -> Result<Vec<(String, AccountBalance)>, Refusal> {
    let exact = |d: Decimal| {
        WideDecimal::from_decimal(d).ok_or_else(|| Refusal::Invalid {
            field: "amount",
            message: "has more than 18 fractional digits".to_owned(),
        })
    };
    let mut changed: Vec<(String, AccountBalance)> = Vec::new();
    let mut change =
        |account: &str, pick: fn(&mut AccountBalance) -> &mut WideDecimal, delta: &WideDecimal| {
            let at = match changed.iter().position(|(a, _)| a == account) {
                Some(i) => i,
                None => {
                    changed.push((account.to_owned(), state.balance(account, &plan.unit)));
                    changed.len() - 1
                }
            };
            *pick(&mut changed[at].1) += delta;
        };
    if plan.moves_money {
        let amount = exact(plan.amount)?;
        change(&plan.debit_account, |b| &mut b.debits, &amount);
        change(&plan.credit_account, |b| &mut b.credits, &amount);
    }
    if !plan.held_delta.is_zero() {
        change(&plan.account, |b| &mut b.held, &exact(plan.held_delta)?);
    }
    Ok(changed)
}

/// An account's unit is fixed by its first entry (or its settings).
pub(super) fn check_unit(
    state: &GroupState,
    request: &EntryRequest,
    account: &str,
    unit: &str,
) -> Result<(), Refusal> {
    if is_system_account(account) {
        return Ok(());
    }
    match state.account_units.get(account) {
        Some(existing) if existing != unit => {
            // Name the request field that carries the account.
            let field = match &request.action {
                Action::Transfer(t) if account != t.account => "counter_account",
                Action::Hold(h) if account != h.account => "counter_account",
                Action::Settings(_) => "unit",
                Action::Capture { .. } | Action::Release { .. } => "hold_id",
                Action::Refund { .. } => "payment_id",
                Action::Reversal { .. } => "entry_id",
                _ => "account",
            };
            Err(Refusal::UnitMismatch {
                field,
                account: account.to_owned(),
                existing_unit: existing.clone(),
            })
        }
        _ => Ok(()),
    }
}

/// Rejects the plan when the debited customer account would fall below its
/// overdraft floor. Balances are read from `state`, which already holds
/// every earlier entry of the group: two racing debits are decided one after
/// the other, never both against the same balance.
pub(super) fn check_floor(state: &GroupState, plan: &mut Plan) {
    let account = if plan.held_delta > Decimal::ZERO {
        &plan.account
    } else {
        &plan.debit_account
    };
    if is_system_account(account) {
        return;
    }
    let Some(floor) = state.settings(account).and_then(|s| s.overdraft.floor()) else {
        return;
    };
    let balance = state.balance(account, &plan.unit);
    let taken = if plan.held_delta > Decimal::ZERO {
        plan.held_delta
    } else {
        plan.amount
    };
    let available = balance.available();
    // Compared exactly: a rounding subtraction could let an amount through
    // that takes the account below its floor by less than the rounding.
    let after = &available - &wide(taken);
    if after < wide(floor) {
        let message = format!(
            "available balance of {account} is {available} {}; taking {} would leave {after}, below the floor of {}",
            plan.unit,
            canonical(taken),
            canonical(floor)
        );
        plan.reject("insufficient_funds", message);
    }
}
