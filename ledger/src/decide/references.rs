//! Requests that refer to what the ledger holds: account settings (the
//! rules of an account), refunds of a payment, reversals of an entry.

use rust_decimal::Decimal;

use crate::amount::canonical;
use crate::balance::WideDecimal;
use crate::entry::EntryStatus;
use crate::request::{EntryKind, EntryRequest, SettingsChange};
use crate::rule_state::{StateKey, StateValue};

use super::limits::wide;
use super::{GroupState, Plan, RecordChange, Refusal};

/// Account settings: unit, overdraft floor and metadata, versioned.
pub(super) fn settings(
    state: &GroupState,
    request: &EntryRequest,
    change: &SettingsChange,
) -> Plan {
    let current = state.settings(&change.account);
    let version = current.map_or(1, |c| c.version + 1);
    let mut p = Plan::new(
        request,
        &change.account,
        &change.account,
        &change.account,
        Decimal::ZERO,
        &change.unit,
    );
    p.upstream_id = format!("{}#{version}", change.account);
    p.moves_money = false;
    p.on_posted
        .push(RecordChange::Settings(change.clone(), version));
    p
}

/// A refund of a payment, up to what is left of it to refund.
pub(super) fn refund(
    state: &GroupState,
    request: &EntryRequest,
    payment_id: &str,
    amount: &Decimal,
) -> Result<Plan, Refusal> {
    let Some(payment) = state
        .existing
        .get(&(EntryKind::Payment, payment_id.to_owned()))
    else {
        return Err(Refusal::NotFound {
            field: "payment_id",
            id: payment_id.to_owned(),
        });
    };
    let mut p = Plan::new(
        request,
        &payment.account,
        &payment.credit_account,
        &payment.debit_account,
        *amount,
        &payment.unit,
    );
    p.checks_floor = true;
    let refunded = match state
        .records
        .get(&StateKey::Refunded(payment_id.to_owned()))
    {
        Some(StateValue::Refunded(d)) => d.clone(),
        _ => WideDecimal::ZERO,
    };
    let reversed = state
        .records
        .contains_key(&StateKey::Reversal(payment.id.clone()));
    let refundable = if payment.status == EntryStatus::Posted && !reversed {
        payment.amount
    } else {
        Decimal::ZERO
    };
    // Added exactly: `checked_add` rounds, and a rounded total
    // could let a refund exceed its payment by the rounding. The total has
    // no digit limit: `0.000000000000000001` refunded, then
    // `9999999999999999999999999998` of a payment of 28 nines, is within
    // the payment yet needs 46 digits.
    let exact_total = &refunded + &wide(*amount);
    if exact_total > wide(refundable) {
        p.reject(
                "refund_exceeds_payment",
                format!(
                    "payment {payment_id} can be refunded {} {} in total ({} already refunded{}); {} more is too much",
                    canonical(refundable),
                    payment.unit,
                    refunded,
                    if reversed { ", payment reversed" } else { "" },
                    canonical(*amount)
                ),
            );
    }
    p.on_posted.push(RecordChange::SetRefunded(
        payment_id.to_owned(),
        exact_total,
    ));
    Ok(p)
}

/// A reversal of a posted entry of a reversible kind, once.
pub(super) fn reversal(
    state: &GroupState,
    request: &EntryRequest,
    entry_id: &str,
) -> Result<Plan, Refusal> {
    let Some(target) = state.by_id.get(entry_id) else {
        return Err(Refusal::NotFound {
            field: "entry_id",
            id: entry_id.to_owned(),
        });
    };
    let reversible = matches!(
        target.kind,
        EntryKind::UsageDebit
            | EntryKind::Payment
            | EntryKind::Refund
            | EntryKind::Adjustment
            | EntryKind::HoldCapture
    );
    if !reversible || target.status != EntryStatus::Posted {
        let why = if target.status != EntryStatus::Posted {
            "is a rejected entry; it moved no money".to_owned()
        } else {
            format!(
                "names a {} entry, which cannot be reversed",
                target.kind.as_str()
            )
        };
        return Err(Refusal::Invalid {
            field: "entry_id",
            message: why,
        });
    }
    let mut p = Plan::new(
        request,
        &target.account,
        &target.credit_account,
        &target.debit_account,
        target.amount,
        &target.unit,
    );
    if let Some(StateValue::ReversedBy(by)) =
        state.records.get(&StateKey::Reversal(entry_id.to_owned()))
    {
        p.reject(
            "already_reversed",
            format!("entry {entry_id} was already reversed by {by}"),
        );
    }
    p.on_posted
        .push(RecordChange::Reversed(entry_id.to_owned()));
    Ok(p)
}
