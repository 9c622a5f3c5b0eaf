//! What a request would append ([`Plan`]), and the dispatch of each kind
//! of request to the file of its family.

use chrono::{DateTime, Utc};
use rust_decimal::Decimal;

use crate::balance::WideDecimal;

use crate::request::{Action, EntryRequest};
use crate::rule_state::{HoldRecord, HoldStatus};

use super::{debits, holds, references, GroupState, Refusal};

#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Rejection {
    pub(super) code: &'static str,
    pub(super) message: String,
}

/// A change of rule state, applied when the entry is appended.
#[derive(Debug, Clone)]
pub(super) enum RecordChange {
    /// Settings of an account, with the version they become.
    Settings(crate::request::SettingsChange, i64),
    OpenHold(HoldRecord),
    CloseHold(String, HoldStatus),
    /// The refunded total of a payment becomes this.
    SetRefunded(String, WideDecimal),
    Reversed(String),
}

/// What a request would append.
#[derive(Debug, Clone)]
pub(super) struct Plan {
    pub(super) upstream_id: String,
    pub(super) account: String,
    pub(super) debit_account: String,
    pub(super) credit_account: String,
    pub(super) amount: Decimal,
    pub(super) unit: String,
    /// Moves `amount` from debit to credit when posted.
    pub(super) moves_money: bool,
    /// Change of `held` on `account` when posted.
    pub(super) held_delta: Decimal,
    /// Whether the debited customer account must stay above its floor.
    pub(super) checks_floor: bool,
    /// Decided by a rule before any balance is looked at.
    pub(super) rejection: Option<Rejection>,
    /// Applied when posted.
    pub(super) on_posted: Vec<RecordChange>,
    /// Applied when rejected (a rejected hold is remembered as such).
    pub(super) on_rejected: Vec<RecordChange>,
}

impl Plan {
    pub(super) fn new(
        request: &EntryRequest,
        account: &str,
        debit: &str,
        credit: &str,
        amount: Decimal,
        unit: &str,
    ) -> Plan {
        Plan {
            upstream_id: request.upstream_id.clone(),
            account: account.to_owned(),
            debit_account: debit.to_owned(),
            credit_account: credit.to_owned(),
            amount,
            unit: unit.to_owned(),
            moves_money: true,
            held_delta: Decimal::ZERO,
            checks_floor: false,
            rejection: None,
            on_posted: Vec::new(),
            on_rejected: Vec::new(),
        }
    }

    pub(super) fn reject(&mut self, code: &'static str, message: String) {
        if self.rejection.is_none() {
            self.rejection = Some(Rejection { code, message });
        }
    }
}

/// Turns a request into what it would append, or the decision that it
/// appends nothing.
pub(super) fn plan(
    state: &GroupState,
    request: &EntryRequest,
    now: DateTime<Utc>,
) -> Result<Plan, Refusal> {
    match &request.action {
        Action::Transfer(t) => Ok(debits::transfer(request, t)),
        Action::Adjustment(a) => debits::adjustment(state, request, a),
        Action::Hold(h) => holds::hold(request, h, now),
        Action::Capture { hold_id, amount } => holds::capture(state, request, hold_id, amount, now),
        Action::Release { hold_id, expiry } => holds::release(state, request, hold_id, expiry),
        Action::Settings(change) => Ok(references::settings(state, request, change)),
        Action::Refund { payment_id, amount } => {
            references::refund(state, request, payment_id, amount)
        }
        Action::Reversal { entry_id } => references::reversal(state, request, entry_id),
        Action::Intent(_) => Err(Refusal::Invalid {
            field: "intent_id",
            message: "an intent's operation is decided by decide/intents.rs".to_owned(),
        }),
    }
}
