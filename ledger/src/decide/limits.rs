//! Limits: every total inside the amount domain, an account's unit fixed,
//! a debited account held to its overdraft floor.

use crate::balance::{total, AccountBalance};
use rust_decimal::Decimal;

use crate::amount::canonical;
use crate::intent::{Action, Intent};
use crate::names::is_system_account;
use crate::wide::WideDecimal;

use super::{GroupState, Plan, Refusal};

/// The code of the stored rejection of an intent whose effect would take a
/// total outside the amount domain (docs/ledger-rules.md, "Limits").
pub const TOTAL_OUT_OF_RANGE: &str = "total_out_of_range";

/// The exact value of `d` (every amount and stored total has at most 18
/// fractional digits; a decimal with more, which nothing stores, reads as
/// zero in a message or comparison rather than failing the decision).
pub(super) fn wide(d: Decimal) -> WideDecimal {
    WideDecimal::from_decimal(d).unwrap_or_default()
}

/// Why the total `what` of `account` cannot become `value`.
pub(super) fn out_of_range(what: &str, account: &str, value: &WideDecimal, unit: &str) -> String {
    format!(
        "{what} of {account} would be {value} {unit}: a total may have at most {} significant \
         digits, {} of them fractional",
        total::MAX_SIGNIFICANT_DIGITS,
        total::MAX_FRACTIONAL_DIGITS
    )
}

/// The balances a posted `plan` leaves on the accounts it touches, every
/// total added exactly ([`total::add`], the addition the folds use). An
/// error names the first total (`debits`, `credits`, `held`, `posted` or
/// `available`) that would leave the amount domain, or the plan's pending
/// refunded total.
pub(super) fn new_balances(
    state: &GroupState,
    plan: &Plan,
) -> Result<Vec<(String, AccountBalance)>, String> {
    if let Some(message) = &plan.total_out_of_range {
        return Err(message.clone());
    }
    let mut changed: Vec<(String, AccountBalance)> = Vec::new();
    let mut change = |account: &str,
                      what: &str,
                      pick: fn(&mut AccountBalance) -> &mut Decimal,
                      delta: Decimal|
     -> Result<(), String> {
        let at = match changed.iter().position(|(a, _)| a == account) {
            Some(i) => i,
            None => {
                changed.push((account.to_owned(), state.balance(account, &plan.unit)));
                changed.len() - 1
            }
        };
        let slot = pick(&mut changed[at].1);
        *slot = total::add(*slot, delta).ok_or_else(|| {
            out_of_range(what, account, &(&wide(*slot) + &wide(delta)), &plan.unit)
        })?;
        Ok(())
    };
    if plan.moves_money {
        change(
            &plan.debit_account,
            "debits",
            |b| &mut b.debits,
            plan.amount,
        )?;
        change(
            &plan.credit_account,
            "credits",
            |b| &mut b.credits,
            plan.amount,
        )?;
    }
    if !plan.held_delta.is_zero() {
        change(&plan.account, "held", |b| &mut b.held, plan.held_delta)?;
    }
    for (account, b) in &changed {
        let posted = &wide(b.credits) - &wide(b.debits);
        if let Some(what) = b.total_out_of_domain() {
            let value = match what {
                "debits" => wide(b.debits),
                "credits" => wide(b.credits),
                "held" => wide(b.held),
                "posted" => posted,
                _ => &posted - &wide(b.held),
            };
            return Err(out_of_range(what, account, &value, &plan.unit));
        }
    }
    Ok(changed)
}

/// An account's unit is fixed by its first entry (or its settings).
pub(super) fn check_unit(
    state: &GroupState,
    intent: &Intent,
    account: &str,
    unit: &str,
) -> Result<(), Refusal> {
    if is_system_account(account) {
        return Ok(());
    }
    match state.account_units.get(account) {
        Some(existing) if existing != unit => {
            // Name the request field that carries the account.
            let field = match &intent.action {
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
    let after = &wide(available) - &wide(taken);
    if after < wide(floor) {
        let message = format!(
            "available balance of {account} is {} {}; taking {} would leave {after}, below the floor of {}",
            canonical(available),
            plan.unit,
            canonical(taken),
            canonical(floor)
        );
        plan.reject("insufficient_funds", message);
    }
}
