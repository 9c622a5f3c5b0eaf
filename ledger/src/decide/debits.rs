//! Debits, payments and transfers (every kind that names both of its
//! accounts), and adjustments.

use crate::names::ADJUSTMENTS_ACCOUNT;
use crate::request::{AdjustmentRequest, Direction, EntryRequest, Transfer};

use super::{GroupState, Plan, Refusal};

/// A usage debit, a payment or a transfer: money moved between the
/// accounts the request names, the debited one held to its floor.
pub(super) fn transfer(request: &EntryRequest, t: &Transfer) -> Plan {
    let mut p = Plan::new(
        request,
        &t.account,
        &t.debit_account,
        &t.credit_account,
        t.amount,
        &t.unit,
    );
    p.checks_floor = true;
    p
}

/// An adjustment: money moved between an account and the adjustments
/// account, in the account's unit unless the request names one.
pub(super) fn adjustment(
    state: &GroupState,
    request: &EntryRequest,
    a: &AdjustmentRequest,
) -> Result<Plan, Refusal> {
    let unit = match (&a.unit, state.account_units.get(&a.account)) {
        (Some(u), _) => u.clone(),
        (None, Some(u)) => u.clone(),
        (None, None) => {
            return Err(Refusal::Invalid {
                field: "unit",
                message: format!("is required: account {} has no unit yet", a.account),
            })
        }
    };
    let (debit, credit) = match a.direction {
        Direction::Credit => (ADJUSTMENTS_ACCOUNT, a.account.as_str()),
        Direction::Debit => (a.account.as_str(), ADJUSTMENTS_ACCOUNT),
    };
    Ok(Plan::new(
        request, &a.account, debit, credit, a.amount, &unit,
    ))
}
