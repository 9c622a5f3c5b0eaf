//! The fold of one account's entries into a balance, whatever set of
//! entries it is given, and the figures of a statement.

use std::collections::{HashMap, HashSet};

use chrono::{DateTime, TimeDelta, Utc};
use rust_decimal::Decimal;
use serde::Serialize;
use tally_ledger::balance::AccountBalance;
use tally_ledger::balance::WideDecimal;
use tally_ledger::entry::{EntryStatus, StoredEntry};
use tally_ledger::fold::{moves_money, OpenHold};
use tally_ledger::request::EntryKind;
use tally_ledger::LedgerError;

/// Most entries one statement lists; a longer period is refused (422).
pub const MAX_STATEMENT_ENTRIES: usize = 100_000;

/// A balance without its account and unit: the opening and closing
/// balances of a statement.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct BalanceFigures {
    pub debits: String,
    pub credits: String,
    pub posted: String,
    pub held: String,
    pub available: String,
}

impl BalanceFigures {
    pub fn new(b: &WideBalance) -> Self {
        Self {
            debits: b.debits.to_string(),
            credits: b.credits.to_string(),
            posted: b.posted().to_string(),
            held: b.held.to_string(),
            available: b.available().to_string(),
        }
    }
}

/// The totals of one account folded from any set of its entries: the
/// ledger's own [`AccountBalance`], exact whatever their size.
pub type WideBalance = AccountBalance;

/// What the period's entries moved.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Movements {
    pub debits: String,
    pub credits: String,
    /// `credits − debits`: the change of `posted`.
    pub net: String,
    /// The change of `held` (negative when more was released than reserved).
    pub held: String,
    /// How many entries the statement lists, rejected ones included.
    pub entries: usize,
}

/// One account's statement in one unit over a period: the balances at
/// either end, what moved between, and the period's entries (the api
/// renders it as the body of `GET /v1/accounts/{account}/statement`).
#[derive(Debug, Clone, PartialEq)]
pub struct AccountStatement {
    pub account: String,
    pub unit: String,
    /// Inclusive, on `recorded_at`; UTC, six fractional digits.
    pub from: String,
    /// Exclusive.
    pub to: String,
    pub opening_balance: BalanceFigures,
    pub movements: Movements,
    pub closing_balance: BalanceFigures,
    /// The period's entries, in seq order.
    pub entries: Vec<StoredEntry>,
    /// The highest seq among the account's entries recorded before `to`
    /// (0 if none): the statement's closing balance is the balance as of it.
    pub as_of_seq: i64,
}

/// One account's balance in one unit folded from any set of its entries,
/// as [`tally_ledger::fold::LogFold`] folds the log. Pure: the amounts of holds
/// recorded outside the set are supplied by the caller
/// ([`AccountFold::holds_outside`] names them).
#[derive(Debug)]
pub struct AccountFold {
    account: String,
    unit: String,
    balance: WideBalance,
    /// Holds open in the set, by hold id.
    open_holds: HashMap<String, OpenHold>,
    /// Holds whose hold entry this fold has folded.
    seen_holds: HashSet<String>,
    /// The highest seq folded (0 if none), rejected entries included.
    pub last_seq: i64,
    /// Entries folded, rejected ones included.
    pub entries: usize,
}

fn hold_id(e: &StoredEntry) -> Result<String, LedgerError> {
    serde_json::from_str::<serde_json::Value>(&e.params)
        .ok()
        .and_then(|p| p.get("hold_id").and_then(|v| v.as_str()).map(str::to_owned))
        .ok_or_else(|| {
            LedgerError::Corrupt(format!(
                "{} {} names no hold_id",
                e.kind.as_str(),
                e.upstream_id
            ))
        })
}

fn closes_a_hold(e: &StoredEntry) -> bool {
    e.status == EntryStatus::Posted
        && matches!(e.kind, EntryKind::HoldCapture | EntryKind::HoldRelease)
}

impl AccountFold {
    pub fn new(account: &str, unit: &str) -> Self {
        Self {
            account: account.to_owned(),
            unit: unit.to_owned(),
            balance: WideBalance::default(),
            open_holds: HashMap::new(),
            seen_holds: HashSet::new(),
            last_seq: 0,
            entries: 0,
        }
    }

    fn concerns(&self, e: &StoredEntry) -> bool {
        e.unit == self.unit && (e.debit_account == self.account || e.credit_account == self.account)
    }

    /// The holds of this account that entries of `page` close although
    /// neither this fold nor `page` holds their hold entry: their amounts
    /// must be given to [`AccountFold::apply`].
    pub fn holds_outside(&self, page: &[StoredEntry]) -> Result<Vec<String>, LedgerError> {
        let mut in_page = HashSet::new();
        let mut out = Vec::new();
        for e in page.iter().filter(|e| self.concerns(e)) {
            if e.status == EntryStatus::Posted && e.kind == EntryKind::Hold {
                in_page.insert(e.upstream_id.clone());
            } else if closes_a_hold(e) && e.account == self.account {
                let id = hold_id(e)?;
                if !self.open_holds.contains_key(&id)
                    && !self.seen_holds.contains(&id)
                    && !in_page.contains(&id)
                {
                    out.push(id);
                }
            }
        }
        Ok(out)
    }

    /// Folds one entry; `outside` has the amounts of the holds named by
    /// [`AccountFold::holds_outside`]. Entries of other accounts or units
    /// are ignored.
    pub fn apply(
        &mut self,
        e: &StoredEntry,
        outside: &HashMap<String, Decimal>,
    ) -> Result<(), LedgerError> {
        if !self.concerns(e) {
            return Ok(());
        }
        self.last_seq = self.last_seq.max(e.seq);
        self.entries += 1;
        if e.status == EntryStatus::Posted && e.kind == EntryKind::Hold {
            self.seen_holds.insert(e.upstream_id.clone());
        } else if closes_a_hold(e) {
            let id = hold_id(e)?;
            if !self.open_holds.contains_key(&id) && !self.seen_holds.contains(&id) {
                // The hold entry is not in this set: recorded before it (a
                // period, or a time range that is not a seq prefix), or it
                // is another account's hold (this account is the capture's
                // counter account), whose `held` is not this account's.
                let amount = if e.account == self.account {
                    *outside.get(&id).ok_or_else(|| {
                        LedgerError::Corrupt(format!(
                            "{} {} closes hold {id}, whose amount is unknown",
                            e.kind.as_str(),
                            e.upstream_id
                        ))
                    })?
                } else {
                    Decimal::ZERO
                };
                self.open_holds.insert(
                    id,
                    OpenHold {
                        account: e.account.clone(),
                        unit: e.unit.clone(),
                        amount,
                    },
                );
            }
        }
        self.fold_effect(e)
    }

    /// The effect of a posted entry on this account, as
    /// [`tally_ledger::fold::LogFold::apply`] defines it.
    fn fold_effect(&mut self, e: &StoredEntry) -> Result<(), LedgerError> {
        if e.status != EntryStatus::Posted {
            return Ok(());
        }
        let amount = || {
            WideDecimal::from_decimal(e.amount).ok_or_else(|| {
                LedgerError::Corrupt(format!(
                    "amount {} of the entry at seq {} has more than 18 fractional digits",
                    e.amount, e.seq
                ))
            })
        };
        if moves_money(e.kind) {
            if e.debit_account == self.account {
                self.balance.debits += &amount()?;
            }
            if e.credit_account == self.account {
                self.balance.credits += &amount()?;
            }
        }
        match e.kind {
            EntryKind::Hold => {
                if e.account == self.account {
                    self.balance.held += &amount()?;
                }
                self.open_holds.insert(
                    e.upstream_id.clone(),
                    OpenHold {
                        account: e.account.clone(),
                        unit: e.unit.clone(),
                        amount: e.amount,
                    },
                );
            }
            EntryKind::HoldCapture | EntryKind::HoldRelease => {
                let id = hold_id(e)?;
                let hold = self.open_holds.remove(&id).ok_or_else(|| {
                    LedgerError::Corrupt(format!(
                        "{} {} closes hold {id}, which is not open",
                        e.kind.as_str(),
                        e.upstream_id
                    ))
                })?;
                if hold.account == self.account {
                    let held = WideDecimal::from_decimal(hold.amount).ok_or_else(|| {
                        LedgerError::Corrupt(format!(
                            "hold {id} has an amount with more than 18 fractional digits"
                        ))
                    })?;
                    self.balance.held -= &held;
                }
            }
            _ => {}
        }
        Ok(())
    }

    /// The balance folded so far (zero if nothing moved).
    pub fn balance(&self) -> WideBalance {
        self.balance.clone()
    }
}

/// Whether `opening + movements = closing` on debits, credits and held.
pub fn adds_up(opening: &WideBalance, movements: &WideBalance, closing: &WideBalance) -> bool {
    &opening.debits + &movements.debits == closing.debits
        && &opening.credits + &movements.credits == closing.credits
        && &opening.held + &movements.held == closing.held
}

/// The smallest whole microsecond at or after `t` (entries carry whole
/// microseconds, so `recorded_at >= t` ⇔ `recorded_at >= ceil(t)`).
pub fn ceil_micros(t: DateTime<Utc>) -> DateTime<Utc> {
    match DateTime::from_timestamp_micros(t.timestamp_micros()) {
        Some(floor) if floor < t => floor + TimeDelta::microseconds(1),
        Some(floor) => floor,
        None => t,
    }
}

/// The largest whole microsecond at or before `t`.
pub fn floor_micros(t: DateTime<Utc>) -> DateTime<Utc> {
    DateTime::from_timestamp_micros(t.timestamp_micros()).unwrap_or(t)
}
