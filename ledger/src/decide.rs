//! Where an entry is decided.
//!
//! The storage engine loads, under the tenant's head lock, everything a group
//! of intents can depend on (the head, entries already holding their keys or
//! referenced by them, the balances and units of the accounts they touch,
//! the rule state — settings, holds, refunded totals, reversals) into a
//! [`GroupState`]; [`decide_group`] then decides every intent in order, in
//! memory, and says what to write. No I/O happens here, so the rules are the
//! same on every engine and can be tested without a database.
//!
//! Each intent becomes a [`Plan`] (which accounts, which amount, which rule
//! rejects it), then the plan is appended to the chain: a posted entry
//! applies its effects, a rejected one is stored with its reason and moves
//! nothing.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use crate::balance::{total, AccountBalance, BalanceProjection};
use chrono::{DateTime, Duration, Utc};
use rust_decimal::Decimal;

use crate::amount::canonical;
use crate::chain::{entry_hash, Head};
use crate::entry::{EntryStatus, StoredEntry};
use crate::fingerprint::differing_fields;
use crate::intent::{Action, Direction, EntryKind, Intent};
use crate::names::{is_system_account, ADJUSTMENTS_ACCOUNT, HOLDS_ACCOUNT};
use crate::state::{AccountSettings, HoldRecord, HoldStatus, StateKey, StateValue};
use crate::wide::WideDecimal;

/// Farthest in the future a hold may expire.
pub const MAX_HOLD_HORIZON_DAYS: i64 = 366;

/// What the engine loaded for one group, inside its transaction.
#[derive(Debug, Clone)]
pub struct GroupState {
    pub tenant_id: String,
    pub head: Head,
    /// Entries already holding one of the group's keys, or one its intents
    /// refer to by key (the payment of a refund).
    pub existing: HashMap<(EntryKind, String), Arc<StoredEntry>>,
    /// Entries referred to by id (the target of a reversal).
    pub by_id: HashMap<String, Arc<StoredEntry>>,
    /// Stored balances of every account the group touches.
    pub balances: BalanceProjection,
    /// The fixed unit of each touched customer account that has one.
    pub account_units: HashMap<String, String>,
    /// Rule state the group's intents refer to.
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

    fn settings(&self, account: &str) -> Option<&AccountSettings> {
        match self.records.get(&StateKey::Account(account.to_owned())) {
            Some(StateValue::Account(a)) => Some(a),
            _ => None,
        }
    }

    fn hold(&self, hold_id: &str) -> Option<&HoldRecord> {
        match self.records.get(&StateKey::Hold(hold_id.to_owned())) {
            Some(StateValue::Hold(h)) => Some(h),
            _ => None,
        }
    }

    fn balance(&self, account: &str, unit: &str) -> AccountBalance {
        self.balances
            .get(account, unit)
            .cloned()
            .unwrap_or_default()
    }
}

/// Why an intent was refused without being stored. Each is final for the
/// request as sent (it depends on nothing that can change) or, for
/// `NotFound`, resolves itself once the referenced object exists.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// `field` names an account whose unit is already `existing_unit`.
    UnitMismatch {
        field: &'static str,
        account: String,
        existing_unit: String,
    },
    /// The hold, payment or entry `field` names does not exist.
    NotFound { field: &'static str, id: String },
    /// The request cannot apply to what it names.
    Invalid {
        field: &'static str,
        message: String,
    },
    /// The server's release of an expired hold found it already closed.
    HoldAlreadyClosed,
}

/// The answer to one intent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// A new entry (posted, or rejected by a ledger rule) was appended.
    Created(Arc<StoredEntry>),
    /// The key already held an entry with the same fingerprint.
    Replayed(Arc<StoredEntry>),
    /// The key already held an entry with another fingerprint.
    Conflict {
        entry_id: String,
        differing_fields: Vec<String>,
    },
    /// Refused before reaching the log; nothing is stored.
    Refused(Refusal),
    /// Account settings already as requested; nothing is stored.
    Unchanged(AccountSettings),
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

/// The answer to an intent whose key already holds `existing`: a replay of
/// it when the fingerprints match, a conflict otherwise. Entries are
/// immutable and keys never expire, so this answer is final the moment the
/// entry is committed, whoever reads it.
pub fn decide_existing(existing: &Arc<StoredEntry>, intent: &Intent) -> Decision {
    if intent.fingerprint.is_text_of(&existing.fingerprint) {
        Decision::Replayed(existing.clone())
    } else {
        Decision::Conflict {
            entry_id: existing.id.clone(),
            differing_fields: differing_fields(&existing.params, &intent.params_map),
        }
    }
}

/// Decides `intents` in order against `state`, advancing `state` as it goes
/// (a later intent of the group sees the entries, balances and records of
/// the earlier ones, so the same key twice in one group is a replay, not a
/// double post, and a capture sees the hold created just before it).
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

/// A stored rejection: the rule's code and a message for humans.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Rejection {
    code: &'static str,
    message: String,
}

/// A change of rule state, applied when the entry is appended.
#[derive(Debug, Clone)]
enum RecordChange {
    /// Settings of an account, with the version they become.
    Settings(crate::intent::SettingsChange, i64),
    OpenHold(HoldRecord),
    CloseHold(String, HoldStatus),
    /// The refunded total of a payment becomes this.
    SetRefunded(String, Decimal),
    Reversed(String),
}

/// What an intent would append.
#[derive(Debug, Clone)]
struct Plan {
    upstream_id: String,
    account: String,
    debit_account: String,
    credit_account: String,
    amount: Decimal,
    unit: String,
    /// Moves `amount` from debit to credit when posted.
    moves_money: bool,
    /// Change of `held` on `account` when posted.
    held_delta: Decimal,
    /// Whether the debited customer account must stay above its floor.
    checks_floor: bool,
    /// Decided by a rule before any balance is looked at.
    rejection: Option<Rejection>,
    /// Why a total other than a balance (a payment's refunded total) would
    /// leave the amount domain; it rejects the plan after the floor check.
    total_out_of_range: Option<String>,
    /// Applied when posted.
    on_posted: Vec<RecordChange>,
    /// Applied when rejected (a rejected hold is remembered as such).
    on_rejected: Vec<RecordChange>,
}

impl Plan {
    fn new(
        intent: &Intent,
        account: &str,
        debit: &str,
        credit: &str,
        amount: Decimal,
        unit: &str,
    ) -> Plan {
        Plan {
            upstream_id: intent.upstream_id.clone(),
            account: account.to_owned(),
            debit_account: debit.to_owned(),
            credit_account: credit.to_owned(),
            amount,
            unit: unit.to_owned(),
            moves_money: true,
            held_delta: Decimal::ZERO,
            checks_floor: false,
            rejection: None,
            total_out_of_range: None,
            on_posted: Vec::new(),
            on_rejected: Vec::new(),
        }
    }

    fn reject(&mut self, code: &'static str, message: String) {
        if self.rejection.is_none() {
            self.rejection = Some(Rejection { code, message });
        }
    }
}

fn decide_one(
    state: &mut GroupState,
    intent: &Intent,
    now: DateTime<Utc>,
    new_entry_id: &mut impl FnMut() -> String,
    out: &mut GroupOutcome,
) -> Decision {
    let key = (intent.kind, intent.upstream_id.clone());
    if intent.kind != EntryKind::AccountSettings {
        if let Some(existing) = state.existing.get(&key) {
            return decide_existing(existing, intent);
        }
    }
    if let Action::Settings(change) = &intent.action {
        if let Some(c) = state.settings(&change.account) {
            if c.unit == change.unit
                && c.overdraft == change.overdraft
                && c.metadata == change.metadata
            {
                return Decision::Unchanged(c.clone());
            }
        }
    }
    let mut plan = match plan(state, intent, now) {
        Ok(plan) => plan,
        Err(refusal) => return Decision::Refused(refusal),
    };
    for account in [&plan.debit_account, &plan.credit_account] {
        if let Err(refusal) = check_unit(state, intent, account, &plan.unit) {
            return Decision::Refused(refusal);
        }
    }
    if plan.rejection.is_none() && plan.checks_floor {
        check_floor(state, &mut plan);
    }
    let balances = if plan.rejection.is_none() {
        match new_balances(state, &plan) {
            Ok(balances) => balances,
            Err(message) => {
                plan.reject(TOTAL_OUT_OF_RANGE, message);
                Vec::new()
            }
        }
    } else {
        Vec::new()
    };
    append(state, intent, plan, balances, now, new_entry_id, out)
}

/// The code of the stored rejection of an intent whose effect would take a
/// total outside the amount domain (docs/ledger-rules.md, "Limits").
pub const TOTAL_OUT_OF_RANGE: &str = "total_out_of_range";

/// The exact value of `d` (every amount and stored total has at most 18
/// fractional digits; a decimal with more, which nothing stores, reads as
/// zero in a message or comparison rather than failing the decision).
fn wide(d: Decimal) -> WideDecimal {
    WideDecimal::from_decimal(d).unwrap_or_default()
}

/// Why the total `what` of `account` cannot become `value`.
fn out_of_range(what: &str, account: &str, value: &WideDecimal, unit: &str) -> String {
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
fn new_balances(state: &GroupState, plan: &Plan) -> Result<Vec<(String, AccountBalance)>, String> {
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
fn check_unit(
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
fn check_floor(state: &GroupState, plan: &mut Plan) {
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

/// Turns an intent into what it would append, or the decision that it
/// appends nothing.
fn plan(state: &GroupState, intent: &Intent, now: DateTime<Utc>) -> Result<Plan, Refusal> {
    let refuse = |r: Refusal| Err(r);
    match &intent.action {
        Action::Transfer(t) => {
            let mut p = Plan::new(
                intent,
                &t.account,
                &t.debit_account,
                &t.credit_account,
                t.amount,
                &t.unit,
            );
            p.checks_floor = true;
            Ok(p)
        }
        Action::Settings(change) => {
            let current = state.settings(&change.account);
            let version = current.map_or(1, |c| c.version + 1);
            let mut p = Plan::new(
                intent,
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
            Ok(p)
        }
        Action::Hold(h) => {
            let expires_at = h.expiry.resolve(now);
            if expires_at <= now {
                return refuse(Refusal::Invalid {
                    field: "expires_at",
                    message: "is not in the future".into(),
                });
            }
            if expires_at > now + Duration::days(MAX_HOLD_HORIZON_DAYS) {
                return refuse(Refusal::Invalid {
                    field: "expires_at",
                    message: format!("must be within {MAX_HOLD_HORIZON_DAYS} days"),
                });
            }
            let mut p = Plan::new(
                intent,
                &h.account,
                &h.account,
                HOLDS_ACCOUNT,
                h.amount,
                &h.unit,
            );
            p.moves_money = false;
            p.held_delta = h.amount;
            p.checks_floor = true;
            let record = HoldRecord {
                hold_id: intent.upstream_id.clone(),
                account: h.account.clone(),
                unit: h.unit.clone(),
                amount: h.amount,
                counter_account: h.counter_account.clone(),
                expires_at,
                status: HoldStatus::Open,
                entry_id: String::new(),
                closed_by: None,
            };
            p.on_rejected.push(RecordChange::OpenHold(HoldRecord {
                status: HoldStatus::Rejected,
                ..record.clone()
            }));
            p.on_posted.push(RecordChange::OpenHold(record));
            Ok(p)
        }
        Action::Capture { hold_id, amount } => {
            let Some(hold) = state.hold(hold_id) else {
                return refuse(Refusal::NotFound {
                    field: "hold_id",
                    id: hold_id.clone(),
                });
            };
            if *amount > hold.amount {
                return refuse(Refusal::Invalid {
                    field: "amount",
                    message: format!(
                        "exceeds the held amount {} {}",
                        canonical(hold.amount),
                        hold.unit
                    ),
                });
            }
            let mut p = Plan::new(
                intent,
                &hold.account,
                &hold.account,
                &hold.counter_account,
                *amount,
                &hold.unit,
            );
            reject_unless_open(&mut p, hold, now);
            p.held_delta = -hold.amount;
            p.on_posted.push(RecordChange::CloseHold(
                hold_id.clone(),
                HoldStatus::Captured,
            ));
            Ok(p)
        }
        Action::Release { hold_id, expiry } => {
            let Some(hold) = state.hold(hold_id) else {
                return refuse(Refusal::NotFound {
                    field: "hold_id",
                    id: hold_id.clone(),
                });
            };
            if *expiry && hold.status != HoldStatus::Open {
                return refuse(Refusal::HoldAlreadyClosed);
            }
            let mut p = Plan::new(
                intent,
                &hold.account,
                &hold.account,
                HOLDS_ACCOUNT,
                hold.amount,
                &hold.unit,
            );
            p.moves_money = false;
            if hold.status != HoldStatus::Open {
                p.reject(
                    "hold_not_open",
                    format!("hold {hold_id} is {}", hold.status.as_str()),
                );
            }
            p.held_delta = -hold.amount;
            let closed = if *expiry {
                HoldStatus::Expired
            } else {
                HoldStatus::Released
            };
            p.on_posted
                .push(RecordChange::CloseHold(hold_id.clone(), closed));
            Ok(p)
        }
        Action::Refund { payment_id, amount } => {
            let Some(payment) = state
                .existing
                .get(&(EntryKind::Payment, payment_id.clone()))
            else {
                return refuse(Refusal::NotFound {
                    field: "payment_id",
                    id: payment_id.clone(),
                });
            };
            let mut p = Plan::new(
                intent,
                &payment.account,
                &payment.credit_account,
                &payment.debit_account,
                *amount,
                &payment.unit,
            );
            p.checks_floor = true;
            let refunded = match state.records.get(&StateKey::Refunded(payment_id.clone())) {
                Some(StateValue::Refunded(d)) => *d,
                _ => Decimal::ZERO,
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
            // could let a refund exceed its payment by the rounding.
            let exact_total = &wide(refunded) + &wide(*amount);
            if exact_total > wide(refundable) {
                p.reject(
                    "refund_exceeds_payment",
                    format!(
                        "payment {payment_id} can be refunded {} {} in total ({} already refunded{}); {} more is too much",
                        canonical(refundable),
                        payment.unit,
                        canonical(refunded),
                        if reversed { ", payment reversed" } else { "" },
                        canonical(*amount)
                    ),
                );
            }
            match total::add(refunded, *amount) {
                Some(sum) => p
                    .on_posted
                    .push(RecordChange::SetRefunded(payment_id.clone(), sum)),
                None => {
                    p.total_out_of_range = Some(out_of_range(
                        "the refunded total",
                        &format!("payment {payment_id}"),
                        &exact_total,
                        &payment.unit,
                    ))
                }
            }
            Ok(p)
        }
        Action::Reversal { entry_id } => {
            let Some(target) = state.by_id.get(entry_id) else {
                return refuse(Refusal::NotFound {
                    field: "entry_id",
                    id: entry_id.clone(),
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
                return refuse(Refusal::Invalid {
                    field: "entry_id",
                    message: why,
                });
            }
            let mut p = Plan::new(
                intent,
                &target.account,
                &target.credit_account,
                &target.debit_account,
                target.amount,
                &target.unit,
            );
            if let Some(StateValue::ReversedBy(by)) =
                state.records.get(&StateKey::Reversal(entry_id.clone()))
            {
                p.reject(
                    "already_reversed",
                    format!("entry {entry_id} was already reversed by {by}"),
                );
            }
            p.on_posted.push(RecordChange::Reversed(entry_id.clone()));
            Ok(p)
        }
        Action::Adjustment(a) => {
            let unit = match (&a.unit, state.account_units.get(&a.account)) {
                (Some(u), _) => u.clone(),
                (None, Some(u)) => u.clone(),
                (None, None) => {
                    return refuse(Refusal::Invalid {
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
                intent, &a.account, debit, credit, a.amount, &unit,
            ))
        }
    }
}

/// A capture needs an open hold whose time has not run out.
fn reject_unless_open(p: &mut Plan, hold: &HoldRecord, now: DateTime<Utc>) {
    if hold.status != HoldStatus::Open {
        p.reject(
            "hold_not_open",
            format!("hold {} is {}", hold.hold_id, hold.status.as_str()),
        );
    } else if now >= hold.expires_at {
        p.reject(
            "hold_expired",
            format!(
                "hold {} expired at {}",
                hold.hold_id,
                crate::entry::format_recorded_at(&hold.expires_at)
            ),
        );
    }
}

/// Appends the plan to the chain: applies its effects if it is posted,
/// stores it with its reason if a rule rejected it.
fn append(
    state: &mut GroupState,
    intent: &Intent,
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
                StateValue::Refunded(*sum),
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
    let (rejection_code, rejection_message) = match plan.rejection {
        Some(r) => (Some(r.code.to_owned()), Some(r.message)),
        None => (None, None),
    };
    let mut entry = StoredEntry {
        tenant_id: state.tenant_id.clone(),
        seq: entry_seq,
        id,
        kind: intent.kind,
        upstream_id: plan.upstream_id,
        status,
        rejection_code,
        rejection_message,
        account: plan.account,
        debit_account: plan.debit_account,
        credit_account: plan.credit_account,
        amount: plan.amount,
        unit: plan.unit,
        params: intent.params.clone(),
        fingerprint: intent.fingerprint.text(),
        recorded_at: now,
        balance_after,
        prev_hash: crate::hex_text::lower_hex(&state.head.hash),
        hash: String::new(),
    };
    let hash = entry_hash(&state.head.hash, &entry);
    entry.hash = crate::hex_text::lower_hex(&hash);
    state.head = Head {
        seq: entry.seq,
        hash,
    };
    // Later intents of the group must see this key and this id. One copy
    // goes to the write; the group's maps and the answer share another
    // (three copies of every entry were a tenth of a batch's CPU).
    out.new_entries.push(entry.clone());
    let entry = Arc::new(entry);
    state
        .existing
        .insert((entry.kind, entry.upstream_id.clone()), entry.clone());
    state.by_id.insert(entry.id.clone(), entry.clone());
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
        GroupState::new("t", Head::EMPTY)
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

    fn settings(account: &str, overdraft: crate::state::Overdraft) -> Intent {
        let body = json!({"unit": "USD", "overdraft": overdraft.to_json()});
        Intent::settings(account, body.as_object().unwrap().clone()).unwrap()
    }

    fn payment(id: &str, account: &str, amount: &str) -> Intent {
        Intent::payment(
            json!({"payment_id": id, "account": account, "amount": amount, "unit": "USD"})
                .as_object()
                .unwrap()
                .clone(),
        )
        .unwrap()
    }

    #[test]
    fn debits_of_one_group_are_held_to_the_floor_one_after_another() {
        let mut state = empty_state();
        let mut intents = vec![
            settings("c", crate::state::Overdraft::Forbid),
            payment("p", "c", "3"),
        ];
        for i in 0..5 {
            intents.push(debit(&format!("u{i}"), "c", "1", "USD"));
        }
        let refs: Vec<&Intent> = intents.iter().collect();
        let out = decide_group(&mut state, &refs, Utc::now(), ids());
        let statuses: Vec<&str> = out
            .new_entries
            .iter()
            .map(|e| e.rejection_code.as_deref().unwrap_or("posted"))
            .collect();
        assert_eq!(
            statuses,
            vec![
                "posted",
                "posted",
                "posted",
                "posted",
                "posted",
                "insufficient_funds",
                "insufficient_funds"
            ]
        );
        assert_eq!(
            state.balance("c", "USD").available(),
            rust_decimal::Decimal::ZERO
        );
        // Rejections take a seq and chain like any entry.
        assert_eq!(state.head.seq, 7);
    }

    #[test]
    fn a_hold_made_earlier_in_the_group_is_captured_once() {
        let mut state = empty_state();
        let hold = Intent::hold(
            json!({"hold_id": "h", "account": "c", "amount": "5", "unit": "USD", "ttl_seconds": 60})
                .as_object()
                .unwrap()
                .clone(),
        )
        .unwrap();
        let capture = |id: &str| {
            Intent::capture(
                "h",
                json!({"capture_id": id, "amount": "2"})
                    .as_object()
                    .unwrap()
                    .clone(),
            )
            .unwrap()
        };
        let (c1, c2) = (capture("c1"), capture("c2"));
        let out = decide_group(&mut state, &[&hold, &c1, &c2], Utc::now(), ids());
        let codes: Vec<Option<&str>> = out
            .new_entries
            .iter()
            .map(|e| e.rejection_code.as_deref())
            .collect();
        assert_eq!(codes, vec![None, None, Some("hold_not_open")]);
        let b = state.balance("c", "USD");
        assert_eq!(
            (b.posted().to_string(), b.held.to_string()),
            ("-2".into(), "0".into())
        );
        assert!(out.touched_records.contains(&StateKey::Hold("h".into())));
    }

    #[test]
    fn a_total_leaving_the_amount_domain_is_a_stored_rejection() {
        let nines = "9999999999999999999999999999";
        let mut state = empty_state();
        let a = debit("u1", "c", nines, "USD");
        let b = debit("u2", "c", nines, "USD");
        let tiny = payment("p", "c", "0.000000000000000001");
        let out = decide_group(&mut state, &[&a, &b, &tiny], Utc::now(), ids());
        let codes: Vec<Option<&str>> = out
            .new_entries
            .iter()
            .map(|e| e.rejection_code.as_deref())
            .collect();
        assert_eq!(
            codes,
            vec![None, Some(TOTAL_OUT_OF_RANGE), Some(TOTAL_OUT_OF_RANGE)]
        );
        let second = &out.new_entries[1];
        let message = second.rejection_message.as_deref().unwrap();
        assert!(
            message.starts_with("debits of c would be 19999999999999999999999999998 USD"),
            "{message}"
        );
        let third = out.new_entries[2].rejection_message.as_deref().unwrap();
        assert!(
            third.starts_with(
                "posted of c would be -9999999999999999999999999998.999999999999999999 USD"
            ),
            "{third}"
        );
        // Nothing moved: the balance is the first debit's, exactly.
        let c = state.balance("c", "USD");
        assert_eq!(c.debits.to_string(), nines);
        assert!(c.credits.is_zero());
        assert_eq!(second.balance_after.to_string(), format!("-{nines}"));
        // @revenue is full too: another account's debit is rejected for it.
        let other = debit("u3", "d", "1", "USD");
        let out = decide_group(&mut state, &[&other], Utc::now(), ids());
        let message = out.new_entries[0].rejection_message.as_deref().unwrap();
        assert!(
            message.starts_with("credits of @revenue would be"),
            "{message}"
        );
    }

    #[test]
    fn refunded_totals_are_added_and_compared_exactly() {
        let nines = "9999999999999999999999999999";
        let refund = |id: &str, amount: &str| {
            Intent::refund(
                json!({"refund_id": id, "payment_id": "p", "amount": amount})
                    .as_object()
                    .unwrap()
                    .clone(),
            )
            .unwrap()
        };
        let mut state = empty_state();
        decide_group(&mut state, &[&payment("p", "c", nines)], Utc::now(), ids());
        // A refunded total with a digit at 10^-18: no customer balance can
        // reach this together with a 28-digit payment, so it is set here.
        let tiny = Decimal::new(1, 18);
        state
            .records
            .insert(StateKey::Refunded("p".into()), StateValue::Refunded(tiny));
        let over = refund("r1", nines);
        let within = refund("r2", "9999999999999999999999999998");
        let out = decide_group(&mut state, &[&over, &within], Utc::now(), ids());
        let rejections: Vec<(Option<&str>, &str)> = out
            .new_entries
            .iter()
            .map(|e| {
                (
                    e.rejection_code.as_deref(),
                    e.rejection_message.as_deref().unwrap_or(""),
                )
            })
            .collect();
        // 1e-18 + 28 nines exceeds the payment, by less than rust_decimal rounds.
        assert_eq!(rejections[0].0, Some("refund_exceeds_payment"));
        assert_eq!(rejections[1].0, Some(TOTAL_OUT_OF_RANGE));
        assert!(
            rejections[1].1.starts_with(
                "the refunded total of payment p would be 9999999999999999999999999998.000000000000000001 USD"
            ),
            "{}",
            rejections[1].1
        );
        assert_eq!(
            state.records.get(&StateKey::Refunded("p".into())),
            Some(&StateValue::Refunded(tiny))
        );
    }
}
